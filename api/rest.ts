/**
 * REST routes where the spec gives paths: `GET /v1/agents/{agentId}/metrics` (spec 4.2), the same
 * data as the GraphQL `metrics` field. Errors are RFC 9457 problem JSON carrying the same `code`
 * as GraphQL's `extensions.code`.
 */
import { GraphQLError } from "graphql";
import type { Plugin } from "graphql-yoga";
import type { Logger } from "pino";
import { authenticate } from "./auth.js";
import { type ApiDependencies, createContext } from "./context.js";
import { ERROR_CODES, type ErrorCode } from "./errors.js";
import { agentMetrics } from "./metrics.js";

const METRICS_PATH = /^\/v1\/agents\/([^/]+)\/metrics\/?$/;

function problem(status: number, code: string, detail: string): Response {
  return new Response(JSON.stringify({ type: `about:blank`, title: code, status, code, detail }), {
    status,
    headers: { "content-type": "application/problem+json" },
  });
}

export async function handleMetricsRequest(deps: ApiDependencies, request: Request, agentId: string, logger?: Logger): Promise<Response> {
  if (request.method !== "GET") return problem(405, "METHOD_NOT_ALLOWED", "use GET");
  try {
    const caller = await authenticate(deps.pool, request.headers.get("authorization"));
    const context = createContext(deps, caller);
    const query = new URL(request.url).searchParams;
    const from = query.get("from");
    const to = query.get("to");
    const body = await agentMetrics(context, {
      agentId,
      metrics: query.get("metrics")?.split(",") ?? null,
      window: query.get("window"),
      range: from !== null || to !== null ? { from: from ?? "", to: to ?? "" } : null,
      resolution: query.get("resolution"),
    });
    return new Response(JSON.stringify(body), { status: 200, headers: { "content-type": "application/json" } });
  } catch (error) {
    const code = error instanceof GraphQLError ? error.extensions.code : undefined;
    if (typeof code === "string" && Object.hasOwn(ERROR_CODES, code)) {
      return problem(ERROR_CODES[code as ErrorCode], code, error instanceof Error ? error.message : String(error));
    }
    logger?.error({ err: error }, "metrics route failed");
    return problem(500, "INTERNAL_SERVER_ERROR", "unexpected error");
  }
}

/** Serves the REST routes before yoga's GraphQL handling. */
export function useRestRoutes(deps: ApiDependencies, logger?: Logger): Plugin {
  return {
    async onRequest({ request, url, endResponse }) {
      const match = METRICS_PATH.exec(url.pathname);
      if (match === null) return;
      let agentId: string;
      try {
        agentId = decodeURIComponent(match[1]!);
      } catch {
        endResponse(problem(400, "BAD_USER_INPUT", "agentId: not a valid path segment"));
        return;
      }
      endResponse(await handleMetricsRequest(deps, request, agentId, logger));
    },
  };
}
