/**
 * Requests to the paid API itself (not the gateway): one attempt per call to `fetch` with the
 * client's timeout, retried on transient failures. What counts as transient depends on the step:
 *
 * - the original, unpaid request is retried only when no answer came (connection failure,
 *   timeout); any answer, a 5xx included, is the API's answer and is passed through;
 * - a paid request (carrying a signed x402 payment or an MPP session) is also retried on 5xx, with
 *   the SAME payment headers: the facilitator claims each payment's nonce once, so a retry can
 *   never pay twice.
 */
import { backoffDelayMs, isNetworkFailure, parseRetryAfter, type RetryOptions, sleep, withTimeout } from "./retry.js";
import type { FetchFunction } from "./transport.js";

/** Largest paid-API answer body read into memory. */
export const MAX_ANSWER_BYTES = 10 * 1024 * 1024;

export interface ApiRequest {
  url: string;
  method: string;
  headers: Record<string, string>;
  body?: string;
}

export interface ApiAnswer {
  status: number;
  headers: Headers;
  /** Parsed JSON when the body is JSON, else the text; null when empty. */
  data: unknown;
}

/** No answer came after every attempt. */
export class ApiUnreachableError extends Error {
  override readonly name = "ApiUnreachableError";
  constructor(
    readonly url: string,
    readonly attempts: number,
    options: { cause: unknown },
  ) {
    super(
      `${url}: no answer after ${attempts} attempt(s): ${options.cause instanceof Error ? options.cause.message : String(options.cause)}`,
      options,
    );
  }
}

export interface CallOptions {
  fetch: FetchFunction;
  timeoutMs: number;
  retry: RetryOptions;
  retryServerErrors: boolean;
  signal?: AbortSignal | undefined;
}

export async function callApi(request: ApiRequest, options: CallOptions): Promise<ApiAnswer> {
  let lastError: unknown;
  let lastAnswer: ApiAnswer | undefined;
  let retryAfterMs: number | undefined;
  for (let attempt = 0; attempt <= options.retry.maxRetries; attempt += 1) {
    if (attempt > 0) await sleep(backoffDelayMs(attempt - 1, options.retry, retryAfterMs), options.signal);
    try {
      const answer = await withTimeout(options.timeoutMs, options.signal, async (signal) => {
        const response = await options.fetch(request.url, {
          method: request.method,
          headers: request.headers,
          ...(request.body === undefined ? {} : { body: request.body }),
          signal,
          redirect: "manual",
        });
        return { status: response.status, headers: response.headers, data: await readBody(response) };
      });
      if (!(options.retryServerErrors && answer.status >= 500)) return answer;
      lastAnswer = answer;
      retryAfterMs = parseRetryAfter(answer.headers.get("retry-after"));
    } catch (error) {
      if (options.signal?.aborted || !isNetworkFailure(error)) throw error;
      lastError = error;
      lastAnswer = undefined;
      retryAfterMs = undefined;
    }
  }
  if (lastAnswer !== undefined) return lastAnswer;
  throw new ApiUnreachableError(request.url, options.retry.maxRetries + 1, { cause: lastError });
}

async function readBody(response: Response): Promise<unknown> {
  const declared = Number(response.headers.get("content-length") ?? "0");
  if (declared > MAX_ANSWER_BYTES) throw new RangeError(`answer of ${declared} bytes exceeds ${MAX_ANSWER_BYTES}`);
  const text = await response.text();
  if (text.length > MAX_ANSWER_BYTES) throw new RangeError(`answer exceeds ${MAX_ANSWER_BYTES} characters`);
  if (text === "") return null;
  const type = response.headers.get("content-type") ?? "";
  if (/[/+]json\b/i.test(type) || /^\s*[[{]/.test(text)) {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      return text;
    }
  }
  return text;
}

export function headersObject(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  headers.forEach((value, name) => {
    out[name] = value;
  });
  return out;
}
