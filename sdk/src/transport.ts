/**
 * HTTP to the gateway: Bearer auth, JSON, problem+json → typed errors, and retries of transient
 * failures only (stripe-node's discipline):
 *
 * - every POST carries an `Idempotency-Key` (the caller's, else a generated UUID) that is reused
 *   across that request's retries, so a retried payment authorization or funding happens once;
 * - retried: connection failures and timeouts, 5xx answers, 409 answers marked `retryable`
 *   (`IDEMPOTENCY_IN_PROGRESS`); never any other 4xx, and never an answer saying `retryable: false`;
 * - the wait is exponential backoff with full jitter, or the server's `Retry-After`;
 * - after `maxRetries` retries the last failure is thrown as `PaymentError` with it as `cause`.
 *
 * Zero dependencies: global fetch and node builtins only.
 */
import { randomUUID } from "node:crypto";
import { AuthenticationError, errorFromProblem, PaymentError, ServiceError } from "./errors.js";
import { backoffDelayMs, DEFAULT_RETRY, isNetworkFailure, parseRetryAfter, type RetryOptions, sleep, withTimeout } from "./retry.js";
import { checkText, checkTexts, InvalidInputError } from "./text-input.js";

/** The longest request URL sent: the gateway's HTTP server refuses a longer request head (16 KiB). */
const MAX_URL_LENGTH = 16_384;

export type FetchFunction = (input: string | URL, init?: RequestInit) => Promise<Response>;

export interface TransportOptions {
  baseUrl: string;
  apiKey: string;
  /** Milliseconds per attempt (spec 4.6: 30000). */
  timeout?: number;
  /** Retries of a transient failure before `PaymentError` (spec 4.6: 3). */
  maxRetries?: number;
  /** First backoff ceiling in ms (doubles per retry; full jitter below it). */
  retryBaseDelayMs?: number;
  /** Longest single wait between attempts, Retry-After included. */
  retryMaxDelayMs?: number;
  fetch?: FetchFunction;
}

export type QueryValue = string | number | boolean | undefined | null;

export interface RequestOptions {
  query?: Record<string, QueryValue>;
  body?: unknown;
  /** POST only; generated when absent so retries cannot repeat the effect. */
  idempotencyKey?: string;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

/** A failure that may succeed when sent again with the same key. */
class TransientFailure extends Error {
  constructor(
    readonly error: unknown,
    readonly retryAfterMs: number | undefined,
  ) {
    super(error instanceof Error ? error.message : String(error));
  }
}

export class Transport {
  readonly baseUrl: string;
  readonly timeout: number;
  readonly maxRetries: number;
  readonly #apiKey: string;
  readonly #fetch: FetchFunction;
  readonly #retry: RetryOptions;

  constructor(options: TransportOptions) {
    if (typeof options.apiKey !== "string" || options.apiKey.length === 0) {
      throw new AuthenticationError("an API key is required (spec 5)");
    }
    this.baseUrl = parseBaseUrl(options.baseUrl);
    this.timeout = positiveInteger(options.timeout ?? 30_000, "timeout");
    this.maxRetries = nonNegativeInteger(options.maxRetries ?? DEFAULT_RETRY.maxRetries, "maxRetries");
    this.#apiKey = options.apiKey;
    this.#fetch = options.fetch ?? ((input, init) => fetch(input, init));
    this.#retry = {
      maxRetries: this.maxRetries,
      baseDelayMs: nonNegativeInteger(options.retryBaseDelayMs ?? DEFAULT_RETRY.baseDelayMs, "retryBaseDelayMs"),
      maxDelayMs: nonNegativeInteger(options.retryMaxDelayMs ?? DEFAULT_RETRY.maxDelayMs, "retryMaxDelayMs"),
    };
  }

  /** Never print the key (a logged client object must not leak it). */
  toJSON(): Record<string, unknown> {
    return { baseUrl: this.baseUrl, timeout: this.timeout, maxRetries: this.maxRetries };
  }

  /** The retry settings, for callers that retry their own requests the same way (`pay`). */
  get retryOptions(): RetryOptions {
    return { ...this.#retry };
  }

  async request<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    // Nothing leaves with a character the gateway cannot store (text-input.ts).
    checkText("path", path);
    checkTexts("", options.query ?? {});
    checkTexts("", options.body);
    const upper = method.toUpperCase();
    const url = this.url(path, options.query);
    const headers: Record<string, string> = { accept: "application/json, application/problem+json", ...options.headers };
    headers.authorization = `Bearer ${this.#apiKey}`;
    let body: string | undefined;
    if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers["content-type"] = "application/json";
    }
    if (upper === "POST") {
      const key = options.idempotencyKey ?? randomUUID();
      if (!IDEMPOTENCY_KEY.test(key))
        throw new ServiceError("idempotencyKey must be 1-255 visible ASCII characters", { code: "INVALID_IDEMPOTENCY_KEY" });
      headers["idempotency-key"] = key;
    }
    return this.withRetries(options.signal, async (signal) => {
      const response = await this.#fetch(url, { method: upper, headers, ...(body === undefined ? {} : { body }), signal });
      return readAnswer<T>(response);
    });
  }

  /** POST /graphql; a GraphQL error with `extensions.code` becomes the typed error. */
  async graphql<T>(query: string, variables: Record<string, unknown> = {}, signal?: AbortSignal): Promise<T> {
    checkTexts("", variables);
    const url = this.url("/graphql");
    const headers = {
      accept: "application/graphql-response+json, application/json",
      "content-type": "application/json",
      authorization: `Bearer ${this.#apiKey}`,
    };
    const body = JSON.stringify({ query, variables });
    return this.withRetries(signal, async (attemptSignal) => {
      const response = await this.#fetch(url, { method: "POST", headers, body, signal: attemptSignal });
      const text = await response.text();
      const parsed = parseJson(text);
      const requestId = response.headers.get("x-request-id") ?? undefined;
      const errors = isRecord(parsed) && Array.isArray(parsed.errors) ? parsed.errors : [];
      const first: unknown = errors[0];
      if (isRecord(first)) {
        const extensions = isRecord(first.extensions) ? first.extensions : {};
        const problem = { ...extensions, detail: typeof first.message === "string" ? first.message : undefined };
        const status = response.status !== 200 ? response.status : statusOfCode(extensions.code);
        const error = errorFromProblem(status, problem, requestId);
        if (response.status >= 500) throw new TransientFailure(error, parseRetryAfter(response.headers.get("retry-after")));
        throw error;
      }
      if (!response.ok) throw classify(response, parsed, requestId);
      if (!isRecord(parsed) || !("data" in parsed)) {
        throw new ServiceError(`GraphQL answered ${response.status} without data`, { status: response.status, detail: parsed });
      }
      return parsed.data as T;
    });
  }

  url(path: string, query?: Record<string, QueryValue>): string {
    if (!path.startsWith("/")) throw new TypeError(`path must start with /: ${path}`);
    const url = new URL(this.baseUrl + path);
    for (const [key, value] of Object.entries(query ?? {})) {
      if (value === undefined || value === null) continue;
      url.searchParams.set(key, String(value));
    }
    const text = url.toString();
    if (text.length > MAX_URL_LENGTH) {
      const longest = Object.entries(query ?? {}).sort((a, b) => String(b[1] ?? "").length - String(a[1] ?? "").length)[0]?.[0] ?? "path";
      throw new InvalidInputError(longest, `too long: the request URL would exceed ${MAX_URL_LENGTH} characters`);
    }
    return text;
  }

  /**
   * Runs `attempt` up to 1 + maxRetries times. `attempt` throws `TransientFailure` for what may be
   * retried; anything else ends the request at once.
   */
  private async withRetries<T>(outer: AbortSignal | undefined, attempt: (signal: AbortSignal) => Promise<T>): Promise<T> {
    let last: TransientFailure | undefined;
    for (let retry = 0; retry <= this.#retry.maxRetries; retry += 1) {
      if (last !== undefined) await sleep(backoffDelayMs(retry - 1, this.#retry, last.retryAfterMs), outer);
      try {
        return await withTimeout(this.timeout, outer, attempt);
      } catch (error) {
        if (outer?.aborted) throw error;
        if (error instanceof TransientFailure) last = error;
        else if (isNetworkFailure(error)) last = new TransientFailure(error, undefined);
        else throw error;
      }
    }
    const cause = last!.error;
    const status = cause instanceof ServiceError ? cause.status : undefined;
    throw new PaymentError(`request failed after ${this.#retry.maxRetries + 1} attempts: ${describe(cause)}`, {
      cause,
      ...(status === undefined ? {} : { status }),
      ...(cause instanceof ServiceError && cause.code !== undefined ? { code: cause.code } : {}),
    });
  }
}

async function readAnswer<T>(response: Response): Promise<T> {
  const text = await response.text();
  const parsed = parseJson(text);
  if (response.ok) return (text === "" ? undefined : parsed) as T;
  throw classify(response, parsed, response.headers.get("x-request-id") ?? undefined);
}

/** A non-2xx answer → the typed error, wrapped as transient when a retry may succeed. */
function classify(response: Response, problem: unknown, requestId: string | undefined): Error {
  const error = errorFromProblem(response.status, problem, requestId);
  const retryable = isRecord(problem) ? problem.retryable : undefined;
  if (retryable === false) return error;
  const retryAfter = parseRetryAfter(response.headers.get("retry-after"));
  if (response.status === 409 && (retryable === true || error.code === "IDEMPOTENCY_IN_PROGRESS"))
    return new TransientFailure(error, retryAfter);
  // PAYMENT_FAILED (502) is the gateway's definite answer, stored with the key: a retry replays it.
  if (response.status >= 500 && error.code !== "PAYMENT_FAILED") return new TransientFailure(error, retryAfter);
  return error;
}

function parseJson(text: string): unknown {
  if (text === "") return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return { detail: text.slice(0, 500) };
  }
}

function statusOfCode(code: unknown): number {
  switch (code) {
    case "AUTHENTICATION_ERROR":
      return 401;
    case "NOT_FOUND":
      return 404;
    default:
      return 400;
  }
}

function describe(error: unknown): string {
  if (error instanceof Error) {
    const cause = (error as { cause?: unknown }).cause;
    return cause instanceof Error && cause.message !== error.message ? `${error.message} (${cause.message})` : error.message;
  }
  return String(error);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function parseBaseUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new TypeError(`baseUrl is not a URL: ${value}`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new TypeError(`baseUrl must be http(s): ${value}`);
  return url.toString().replace(/\/+$/, "");
}

function positiveInteger(value: number, name: string): number {
  if (!Number.isSafeInteger(value) || value <= 0) throw new TypeError(`${name} must be a positive integer`);
  return value;
}

function nonNegativeInteger(value: number, name: string): number {
  if (!Number.isSafeInteger(value) || value < 0) throw new TypeError(`${name} must be a non-negative integer`);
  return value;
}
