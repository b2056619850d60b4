/**
 * The REST /v1 request pipeline: match the route (404 for unknown /v1 paths is left to the next
 * handler; a known path with another method is 405), authenticate, refuse control characters and
 * lone surrogates in every path and query parameter and body string (400 BAD_USER_INPUT naming the
 * field), check the key's scope against the route's declaration (`checkScope`, the one place REST
 * does, before the body is read), read and parse the JSON body exactly (415 / 413 / 400
 * INVALID_JSON), derive the idempotency request of a POST, run the handler, and answer problem
 * JSON for every error.
 */
import type pg from "pg";
import type { Logger } from "pino";
import { authenticate, authenticateWithSession, type Caller } from "../auth.js";
import type { SecretBox } from "../secret-box.js";
import {
  type IdempotencyRequest,
  type IdempotencyStore,
  parseIdempotencyKey,
  requestFingerprint,
  type RouteResponse,
} from "./idempotency.js";
import { canonicalJson, type JsonValue, MAX_BODY_BYTES, parseJson, writeJson } from "./json.js";
import { ServiceError, toServiceError } from "../errors.js";
import { httpError, PROBLEM_CONTENT_TYPE, problemResponse } from "./problem.js";
import { refuseUnstorableJson, refuseUnstorableText } from "../text.js";
import type { ApiKeyCache } from "../key-cache.js";
import { ADMIN_SCOPE, boundAgent, forbiddenScope, kindAllows, type Requirement } from "../scopes.js";

/** What every REST route needs: the database, a log, the clock and the box that seals stored secrets. */
export interface RouteDeps {
  readonly pool: pg.Pool;
  /**
   * The primary when `pool` is a streaming replica (the query service's read views with
   * `DATABASE_READ_URL`): credentials and idempotency records are read and written there, so a
   * key issued a moment ago works at once. `pool` when absent.
   */
  readonly primary?: pg.Pool | undefined;
  readonly logger?: Logger | undefined;
  /** The clock (tests pin it). */
  readonly now?: (() => Date) | undefined;
  /** Encrypts sealed idempotent responses (and, in the gateway, signing secrets). */
  readonly secretBox?: SecretBox | undefined;
  /** Live keys held in memory (api/shared/key-cache.ts); every request reads its key without it. */
  readonly keys?: ApiKeyCache | undefined;
}

export type Method = "GET" | "POST" | "PUT" | "DELETE";

export interface RouteContext<D extends RouteDeps = RouteDeps> {
  readonly deps: D;
  readonly caller: Caller;
  readonly params: Readonly<Record<string, string>>;
  readonly query: URLSearchParams;
  /** The parsed body; undefined when the request has none. */
  readonly body: JsonValue | undefined;
  /** The POST's idempotency request, or null without an Idempotency-Key. */
  readonly idempotency: IdempotencyRequest | null;
  readonly store: IdempotencyStore;
  readonly now: Date;
}

export interface Route<D extends RouteDeps = RouteDeps> {
  readonly method: Method;
  /** `/v1/policies/:agentId` */
  readonly path: string;
  /** What the caller's key must allow (api/shared/scopes.ts); checked before the handler runs. */
  readonly scope: Requirement;
  /**
   * For `read` and `agent` routes without an `:agentId` path parameter: the public id of the agent
   * the addressed object belongs to, or null when the account has no such object. An agent key
   * asking for another agent's object is answered 404 NOT_FOUND, as for an object that does not exist.
   */
  readonly agentOf?: (context: RouteContext<D>) => Promise<string | null>;
  /** For `read` list routes: the handler itself narrows the list to an agent key's agent (`boundAgent`). */
  readonly filtersByAgent?: true;
  /**
   * The dashboard's session cookie counts too (under the CSRF rule of api/shared/session-cookie.ts)
   * when no Authorization header is sent: a person deciding in the dashboard. Every other route
   * takes API keys only.
   */
  readonly session?: true;
  readonly handler: (context: RouteContext<D>) => Promise<RouteResponse>;
}

/**
 * A route's declaration is complete: a `read` or `agent` route says how an agent key is held to its
 * own agent (the `:agentId` parameter, `agentOf`, or a list the handler narrows). Thrown when a
 * router is built, so a route declared without it never serves.
 */
export function checkRouteDeclaration(route: Route<never>): void {
  const agentBound = route.scope === "read" || route.scope === "agent";
  const ways = [route.path.includes("/:agentId"), route.agentOf !== undefined, route.filtersByAgent === true].filter(Boolean).length;
  if (agentBound && ways !== 1) {
    throw new Error(`${route.method} ${route.path}: a ${route.scope} route needs exactly one of :agentId, agentOf, filtersByAgent`);
  }
  if (!agentBound && (route.agentOf !== undefined || route.filtersByAgent === true)) {
    throw new Error(`${route.method} ${route.path}: agentOf / filtersByAgent only apply to read and agent routes`);
  }
}

/**
 * The one scope check of REST: the key's kind must allow the route's requirement, and an agent
 * key may touch only its own agent: another agent in the path is 403 FORBIDDEN_SCOPE, another
 * agent's object (by `agentOf`) is 404 NOT_FOUND. Nothing has run when it throws.
 */
async function checkScope<D extends RouteDeps>(route: Route<D>, context: RouteContext<D>): Promise<void> {
  const scope = context.caller.scope ?? ADMIN_SCOPE;
  const what = `${route.method} ${route.path}`;
  if (!kindAllows(scope, route.scope)) throw forbiddenScope(scope, route.scope, what);
  const own = boundAgent(scope);
  if (own === null || (route.scope !== "read" && route.scope !== "agent")) return;
  const pathAgent = context.params.agentId;
  if (pathAgent !== undefined) {
    if (pathAgent !== own) throw forbiddenScope(scope, route.scope, `${what} for agent ${pathAgent}`, pathAgent);
    return;
  }
  if (route.agentOf !== undefined) {
    const owner = await route.agentOf(context);
    if (owner !== own) throw httpError("NOT_FOUND", "no such object of this agent in this account");
  }
}

interface CompiledRoute<D extends RouteDeps> extends Route<D> {
  readonly pattern: RegExp;
  readonly names: readonly string[];
}

/**
 * A JSON answer. `sealed`: the body is stored encrypted in the idempotency record. `replay`: what a
 * replay under the same Idempotency-Key answers instead (a secret shown once is left out of it);
 * only that is stored.
 */
export function json(status: number, value: unknown, options: { sealed?: boolean; replay?: unknown } = {}): RouteResponse {
  return {
    status,
    body: writeJson(value),
    ...(options.sealed === true ? { sealed: true } : {}),
    ...(options.replay === undefined ? {} : { replayBody: writeJson(options.replay) }),
  };
}

export const NO_CONTENT: RouteResponse = { status: 204, body: null };

export class Router<D extends RouteDeps> {
  readonly #routes: CompiledRoute<D>[];

  constructor(routes: readonly Route<D>[]) {
    this.#routes = routes.map((route) => {
      checkRouteDeclaration(route as Route<never>);
      const names: string[] = [];
      const source = route.path
        .split("/")
        .map((part) => {
          if (!part.startsWith(":")) return part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
          names.push(part.slice(1));
          return "([^/]+)";
        })
        .join("/");
      return { ...route, names, pattern: new RegExp(`^${source}/?$`) };
    });
  }

  /** The answer to a /v1 request, or null when no route has this path (the next handler's turn). */
  async handle(deps: D, request: Request): Promise<Response | null> {
    const url = new URL(request.url);
    if (!url.pathname.startsWith("/v1/")) return null;
    const candidates = this.#routes
      .map((route) => ({ route, match: route.pattern.exec(url.pathname) }))
      .filter((c): c is { route: CompiledRoute<D>; match: RegExpExecArray } => c.match !== null);
    if (candidates.length === 0) return null;
    const chosen = candidates.find((c) => c.route.method === request.method);
    if (chosen === undefined) {
      const allow = [...new Set(candidates.map((c) => c.route.method))].join(", ");
      return toResponse(problemResponse(new ServiceError("METHOD_NOT_ALLOWED", `use ${allow}`, { headers: { allow } })));
    }
    try {
      return toResponse(await this.#run(deps, request, url, chosen.route, chosen.match));
    } catch (error) {
      const known = toServiceError(error);
      if (known !== null) return toResponse(problemResponse(known));
      deps.logger?.error({ err: error, method: request.method, path: url.pathname }, "REST route failed");
      return toResponse(problemResponse(httpError("INTERNAL_SERVER_ERROR", "unexpected error")));
    }
  }

  async #run(deps: D, request: Request, url: URL, route: CompiledRoute<D>, match: RegExpExecArray): Promise<RouteResponse> {
    const params: Record<string, string> = {};
    for (const [i, name] of route.names.entries()) {
      try {
        params[name] = decodeURIComponent(match[i + 1]!);
      } catch {
        throw httpError("BAD_USER_INPUT", `${name}: not a valid path segment`, { field: name });
      }
    }
    const caller =
      route.session === true
        ? await authenticateWithSession(deps.primary ?? deps.pool, request.headers, deps.keys)
        : await authenticate(deps.primary ?? deps.pool, request.headers.get("authorization"), deps.keys);
    // One check of every text input for every route (api/shared/text.ts): path, query, body.
    for (const [name, value] of Object.entries(params)) refuseUnstorableText(name, value);
    for (const [key, value] of url.searchParams) {
      refuseUnstorableText("query", key);
      refuseUnstorableText(key, value);
    }
    const now = deps.now?.() ?? new Date();
    const store: IdempotencyStore = { pool: deps.primary ?? deps.pool, box: deps.secretBox, now: () => deps.now?.() ?? new Date() };
    // The scope is checked before the body is read: a refused key is told so whatever it sent.
    await checkScope(route, { deps, caller, params, query: url.searchParams, body: undefined, idempotency: null, store, now });
    const body = await readBody(request);
    refuseUnstorableJson(body);
    let idempotency: IdempotencyRequest | null = null;
    if (request.method === "POST") {
      const key = parseIdempotencyKey(request.headers.get("idempotency-key"));
      if (key !== null) {
        idempotency = {
          accountId: caller.accountId,
          key,
          method: request.method,
          path: url.pathname.replace(/\/$/, ""),
          fingerprint: requestFingerprint(request.method, url.pathname.replace(/\/$/, ""), canonicalJson(body)),
        };
      }
    }
    return route.handler({ deps, caller, params, query: url.searchParams, body, idempotency, store, now });
  }
}

async function readBody(request: Request): Promise<JsonValue | undefined> {
  if (request.method === "GET" || request.method === "DELETE") return undefined;
  const length = Number(request.headers.get("content-length") ?? "0");
  if (length > MAX_BODY_BYTES) throw httpError("PAYLOAD_TOO_LARGE", `request bodies are at most ${MAX_BODY_BYTES} bytes`);
  const bytes = new Uint8Array(await request.arrayBuffer());
  if (bytes.length > MAX_BODY_BYTES) throw httpError("PAYLOAD_TOO_LARGE", `request bodies are at most ${MAX_BODY_BYTES} bytes`);
  if (bytes.length === 0) return undefined;
  const type = (request.headers.get("content-type") ?? "").split(";")[0]!.trim().toLowerCase();
  if (type !== "application/json" && !/^application\/[a-z0-9.+-]*\+json$/.test(type)) {
    throw httpError("UNSUPPORTED_MEDIA_TYPE", "send the body as application/json");
  }
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw httpError("INVALID_JSON", "request body is not UTF-8");
  }
  return parseJson(text.replace(/^\uFEFF/, ""));
}

function toResponse(response: RouteResponse): Response {
  // A stored error answer (replayed) has no headers of its own: errors are always problem JSON.
  const type = response.status >= 400 ? PROBLEM_CONTENT_TYPE : "application/json";
  const headers: Record<string, string> = { ...(response.body === null ? {} : { "content-type": type }), ...response.headers };
  if (response.status === 204 || response.body === null || response.body === "") {
    return new Response(null, { status: response.status, headers });
  }
  return new Response(response.body, { status: response.status, headers });
}
