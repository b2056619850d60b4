/**
 * One REST /v1 call the way the tests make them: over real HTTP to a server's base URL, or straight
 * into an in-process fetch handler (api/gateway/http `createGatewayHandler`), with the answer kept
 * as text (exact number tokens) and as parsed JSON. Every test's `call`/`rest`/`post` helper is a
 * one-line binding of this (its server and default key). Test files only.
 */

/** A handler answering a `Request` in process; null when no route matches. */
export type RestHandler = (request: Request) => Promise<Response | null>;

/** `http://host:port` of a running server, or a handler called in process. */
export type RestTarget = string | RestHandler;

export interface RestOptions {
  /** Sent as `Authorization: Bearer <key>`; null or absent: none. */
  readonly key?: string | null;
  /** The whole Authorization header, for other schemes and spellings; when given, `key` is not used. */
  readonly authorization?: string | null;
  /** Sent as JSON (`JSON.stringify`). */
  readonly body?: unknown;
  /** Sent exactly as written; when given, `body` is not used. */
  readonly raw?: string;
  /** The Idempotency-Key header. */
  readonly idem?: string;
  /** The content type of a body; default application/json. */
  readonly contentType?: string;
  /**
   * An answer that is not JSON gets `body` null. Otherwise the call fails on it: the REST surface
   * answers JSON (or nothing), and a test should not read on past an answer that is not.
   */
  readonly lenientJson?: boolean;
}

export interface RestAnswer {
  readonly status: number;
  readonly headers: Headers;
  /** The body as sent (its number tokens exactly as written). */
  readonly text: string;
  /** The body parsed (any: tests read the answers of every route through it); null when empty. */
  readonly body: any;
}

/** The origin requests to an in-process handler are addressed to. */
const IN_PROCESS_ORIGIN = "http://gateway.test";

export async function restCall(target: RestTarget, method: string, path: string, options: RestOptions = {}): Promise<RestAnswer> {
  const headers: Record<string, string> = {};
  const authorization = options.authorization !== undefined ? options.authorization : options.key == null ? null : `Bearer ${options.key}`;
  if (authorization !== null) headers.authorization = authorization;
  if (options.idem !== undefined) headers["idempotency-key"] = options.idem;
  const sent = options.raw ?? (options.body === undefined ? undefined : JSON.stringify(options.body));
  if (sent !== undefined) headers["content-type"] = options.contentType ?? "application/json";
  const init: RequestInit = { method, headers, ...(sent === undefined ? {} : { body: sent }) };
  let response: Response;
  if (typeof target === "string") {
    response = await fetch(`${target}${path}`, init);
  } else {
    const answered = await target(new Request(`${IN_PROCESS_ORIGIN}${path}`, init));
    if (answered === null) throw new Error(`no route for ${method} ${path}`);
    response = answered;
  }
  const text = await response.text();
  return { status: response.status, headers: response.headers, text, body: parseBody(text, options.lenientJson === true, method, path) };
}

function parseBody(text: string, lenient: boolean, method: string, path: string): unknown {
  if (text === "") return null;
  try {
    return JSON.parse(text);
  } catch (error) {
    if (lenient) return null;
    throw new Error(`${method} ${path} answered a body that is not JSON: ${text.slice(0, 200)}`, { cause: error });
  }
}
