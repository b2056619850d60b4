/**
 * One webhook POST. Success is any 2xx within the timeout; redirects are not followed (a 3xx is a
 * failure, as Standard Webhooks advises); the response body is drained and ignored.
 */
import { retryAfterMs } from "./backoff.js";

export interface HttpOutcome {
  readonly ok: boolean;
  /** null when no response arrived (connection error, timeout). */
  readonly status: number | null;
  readonly error: string | null;
  /** From `Retry-After` on 429/503. */
  readonly retryAfterMs: number | null;
}

const USER_AGENT = "agent-payment-gateway-webhooks/1";

export async function postWebhook(url: string, body: string, headers: Record<string, string>, timeoutMs: number): Promise<HttpOutcome> {
  try {
    const response = await fetch(url, {
      method: "POST",
      body,
      headers: { "content-type": "application/json", "user-agent": USER_AGENT, ...headers },
      redirect: "manual",
      signal: AbortSignal.timeout(timeoutMs),
    });
    await response.body?.cancel().catch(() => undefined);
    const ok = response.status >= 200 && response.status < 300;
    const throttled = response.status === 429 || response.status === 503;
    return {
      ok,
      status: response.status,
      error: ok ? null : `HTTP ${response.status}`,
      retryAfterMs: throttled ? retryAfterMs(response.headers.get("retry-after"), new Date()) : null,
    };
  } catch (error) {
    const reason = error instanceof Error && error.name === "TimeoutError" ? `no response within ${timeoutMs} ms` : describe(error);
    return { ok: false, status: null, error: reason, retryAfterMs: null };
  }
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = (error as Error & { cause?: unknown }).cause;
  const code = cause instanceof Error ? ((cause as Error & { code?: string }).code ?? cause.message) : null;
  return code === null ? error.message : `${error.message} (${code})`;
}
