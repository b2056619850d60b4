/**
 * Retry discipline shared by the gateway transport and the paid-API calls of `pay`: which failures
 * are transient, how long to wait (exponential backoff with full jitter, or the server's
 * `Retry-After`), and a timeout per attempt through an AbortSignal.
 */

export interface RetryOptions {
  /** Retries after the first attempt (spec 4.6: default 3). */
  maxRetries: number;
  /** First backoff ceiling; doubles per retry. */
  baseDelayMs: number;
  /** No single wait is longer, whatever the server's Retry-After says. */
  maxDelayMs: number;
}

export const DEFAULT_RETRY: RetryOptions = { maxRetries: 3, baseDelayMs: 500, maxDelayMs: 20_000 };

/**
 * Full jitter (a uniform wait in [0, min(max, base · 2^retry)]) unless the server named a wait,
 * which is honoured up to `maxDelayMs`.
 */
export function backoffDelayMs(retry: number, options: RetryOptions, retryAfterMs?: number, random: () => number = Math.random): number {
  if (retryAfterMs !== undefined) return Math.min(Math.max(0, retryAfterMs), options.maxDelayMs);
  const ceiling = Math.min(options.maxDelayMs, options.baseDelayMs * 2 ** Math.min(retry, 30));
  return Math.floor(random() * ceiling);
}

/** `Retry-After: 2` or an HTTP date → milliseconds from now; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | undefined {
  if (value === null) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const date = Date.parse(trimmed);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - now);
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Thrown by `withTimeout` when an attempt runs longer than its budget. */
export class TimeoutError extends Error {
  override readonly name = "TimeoutError";
  constructor(readonly timeoutMs: number) {
    super(`the request took longer than ${timeoutMs} ms`);
  }
}

/**
 * Runs `attempt` with a signal that aborts after `timeoutMs` or when `outer` aborts (Node 18 has
 * no AbortSignal.any, so the two are joined by hand). The timer covers reading the body too,
 * because `attempt` reads it before resolving.
 */
export async function withTimeout<T>(
  timeoutMs: number,
  outer: AbortSignal | undefined,
  attempt: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const controller = new AbortController();
  const timeout = new TimeoutError(timeoutMs);
  const timer = setTimeout(() => controller.abort(timeout), timeoutMs);
  const onAbort = () => controller.abort(outer?.reason);
  if (outer?.aborted) controller.abort(outer.reason);
  else outer?.addEventListener("abort", onAbort, { once: true });
  try {
    return await attempt(controller.signal);
  } catch (error) {
    // fetch rejects with a generic AbortError; report the timeout as what happened.
    if (controller.signal.aborted && controller.signal.reason === timeout) throw timeout;
    throw error;
  } finally {
    clearTimeout(timer);
    outer?.removeEventListener("abort", onAbort);
  }
}

/** A connection-level failure (refused, reset, DNS, timeout) as opposed to an HTTP answer. */
export function isNetworkFailure(error: unknown): boolean {
  if (error instanceof TimeoutError) return true;
  // undici's fetch rejects with TypeError("fetch failed") for every connection-level failure.
  return error instanceof TypeError;
}
