/**
 * The seller's calls to the gateway (facilitator and MPP service routes), with global fetch and
 * the seller account's API key. A transport failure, a 5xx or a 429 is `GatewayUnavailableError`
 * (the middleware answers 503 and never runs the handler); any other answer is returned as is,
 * with its JSON body parsed, for the protocol code to read.
 */

export type FetchLike = (input: string, init?: RequestInit) => Promise<Response>;

export interface GatewayConfig {
  /** Base URL of the gateway, e.g. `https://gateway.example.com` (the `/v1/...` paths are appended). */
  readonly facilitatorUrl: string;
  /** An API key of the seller's account (`Authorization: Bearer`). */
  readonly apiKey: string;
  readonly fetch?: FetchLike;
  /** Per call; 10 s by default. */
  readonly timeoutMs?: number;
}

export interface GatewayAnswer {
  readonly status: number;
  readonly headers: Headers;
  /** The parsed JSON body; undefined when the body is empty or not JSON. */
  readonly body: unknown;
}

export class GatewayUnavailableError extends Error {
  constructor(detail: string) {
    super(detail);
    this.name = "GatewayUnavailableError";
  }
}

const DEFAULT_TIMEOUT_MS = 10_000;

export function checkGatewayConfig(config: GatewayConfig, where: string): void {
  let url: URL;
  try {
    url = new URL(config.facilitatorUrl);
  } catch {
    throw new TypeError(`${where}: facilitatorUrl must be an absolute URL`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new TypeError(`${where}: facilitatorUrl must be http(s)`);
  if (typeof config.apiKey !== "string" || config.apiKey.length === 0) throw new TypeError(`${where}: apiKey is required`);
}

export async function callGateway(
  config: GatewayConfig,
  method: "GET" | "POST",
  path: string,
  body?: unknown,
  idempotencyKey?: string,
): Promise<GatewayAnswer> {
  const fetchFn = config.fetch ?? (globalThis.fetch as FetchLike);
  const headers: Record<string, string> = { authorization: `Bearer ${config.apiKey}`, accept: "application/json" };
  if (body !== undefined) headers["content-type"] = "application/json";
  if (idempotencyKey !== undefined) headers["idempotency-key"] = idempotencyKey;
  const url = `${config.facilitatorUrl.replace(/\/+$/, "")}${path}`;
  let response: Response;
  let text: string;
  try {
    response = await fetchFn(url, {
      method,
      headers,
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(config.timeoutMs ?? DEFAULT_TIMEOUT_MS),
    });
    text = await response.text();
  } catch (error) {
    throw new GatewayUnavailableError(`${method} ${path}: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (response.status >= 500 || response.status === 429) {
    throw new GatewayUnavailableError(`${method} ${path}: HTTP ${response.status}`);
  }
  let parsed: unknown;
  try {
    parsed = text === "" ? undefined : JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: response.status, headers: response.headers, body: parsed };
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
