/**
 * The policy's rate limit as the gateway knows it (spec 2.1): `{ calls, window }` over one of five
 * windows. What the client's resources validate and the CLI parses into.
 */
export type RateWindow = "1m" | "5m" | "15m" | "1h" | "24h";
export const MAX_RATE_LIMIT_CALLS = 1_000_000;

export interface RateLimit {
  readonly calls: number;
  readonly window: RateWindow;
}
