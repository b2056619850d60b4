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
import { problemResponse, toHttpError } from "./http/problem.js";
import { agentMetrics } from "./metrics.js";

const METRICS_PATH = /^\/v1\/agents\/([^/]+)\/metrics\/?$/;

function problem(status: number, code: string, detail: string): Response {
  return new Response(JSON.stringify({ type: `about:blank`, title: code, status, code, detail }), {
    status,
    headers: { "content-type": "application/problem+json" },
  });
}

const RAW = "\u0000raw:";

/**
 * Spec 4.2 gives `metrics.spend[].value` and `metrics.protocol_split.{x402,mpp}` as JSON numbers.
 * They are written as number tokens with the exact decimal digits of the amount (never through a
 * float); the `...Units` fields beside them carry the same values as integer strings.
 */
export function specMetricsJson(body: Record<string, unknown>): string {
  const raw = (text: unknown): unknown => (typeof text === "string" && /^-?\d+(\.\d+)?$/.test(text) ? `${RAW}${text}` : text);
  const metrics = body.metrics as { spend?: { value: unknown }[] | null; protocol_split?: Record<string, unknown> | null };
  const out = {
    ...body,
    metrics: {
      ...metrics,
      spend: metrics.spend?.map((point) => ({ ...point, value: raw(point.value) })) ?? null,
      protocol_split:
        metrics.protocol_split == null
          ? null
          : { ...metrics.protocol_split, x402: raw(metrics.protocol_split.x402), mpp: raw(metrics.protocol_split.mpp) },
    },
  };
  return JSON.stringify(out).replace(/"\\u0000raw:(-?\d+(?:\.\d+)?)"/g, "$1");
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
    return new Response(specMetricsJson(body), { status: 200, headers: { "content-type": "application/json" } });
  } catch (error) {
    // The same problem body and headers as every other /v1 route (errorClass, WWW-Authenticate).
    const known = error instanceof GraphQLError ? toHttpError(error) : null;
    if (known !== null) {
      const answer = problemResponse(known);
      return new Response(answer.body, { status: answer.status, headers: answer.headers });
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
