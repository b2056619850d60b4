/**
 * Retry timing: exponential backoff with jitter. The n-th failure (1-based) waits
 * base * factor^(n-1), capped at max, then shortened by up to `jitter` of itself, so retries of many
 * deliveries that failed together spread out, yet every wait stays longer than the previous
 * one's lower bound whenever factor * (1 - jitter) > 1 (defaults: 4 * 0.8).
 *
 * Defaults (5 s, ×4, cap 10 h, 12 attempts) span about 2 days (11 waits) before a delivery is dead-lettered,
 * close to the Standard Webhooks example schedule.
 */

export interface BackoffPolicy {
  readonly baseMs: number;
  readonly factor: number;
  readonly maxMs: number;
  /** 0..1: the share of each delay that is randomized away. */
  readonly jitter: number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = { baseMs: 5_000, factor: 4, maxMs: 10 * 3_600_000, jitter: 0.2 };
export const DEFAULT_MAX_ATTEMPTS = 12;
/** Retry-After is honored up to this much. */
const MAX_RETRY_AFTER_MS = 3_600_000;

export function retryDelayMs(failures: number, policy: BackoffPolicy = DEFAULT_BACKOFF, random: () => number = Math.random): number {
  const exponent = Math.max(0, failures - 1);
  const full = Math.min(policy.maxMs, policy.baseMs * policy.factor ** exponent);
  return Math.max(0, Math.round(full - full * policy.jitter * random()));
}

/** `Retry-After` as seconds or an HTTP date; null when absent or unreadable. */
export function retryAfterMs(header: string | null, now: Date): number | null {
  if (header === null || header.trim() === "") return null;
  const seconds = Number(header);
  const ms = Number.isFinite(seconds) ? seconds * 1000 : Date.parse(header) - now.getTime();
  if (!Number.isFinite(ms) || ms < 0) return null;
  return Math.min(ms, MAX_RETRY_AFTER_MS);
}
