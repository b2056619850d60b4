/**
 * What a route answers before it becomes a fetch `Response`: status, JSON text and headers. Its own
 * file because three modules share it without depending on each other for anything else: the
 * router turns it into a `Response`, idempotency.ts stores and replays it, problem.ts builds one
 * for an error.
 */
export interface RouteResponse {
  readonly status: number;
  /** JSON text; null for 204. */
  readonly body: string | null;
  /** The body carries a secret shown once (a new API key, a signing secret): stored sealed. */
  readonly sealed?: boolean;
  /**
   * What a replay of this response answers (same status) instead of `body`, for a body whose
   * secret must be shown once only: stored in place of `body`, so the idempotency record never
   * holds the secret, sealed or not. Takes precedence over `sealed`.
   */
  readonly replayBody?: string;
  readonly headers?: Readonly<Record<string, string>>;
  /**
   * Not the request's final answer (a held payment's 202): not stored under the Idempotency-Key,
   * which is left unclaimed so a repeat runs the effect again (and resumes what it started).
   */
  readonly provisional?: boolean;
}
