/**
 * `GET /v1/agents/{agentId}/metrics` (spec 4.2): the same data as the GraphQL `metrics` field.
 * Errors are the shared REST problem JSON, with the same `code` as GraphQL's `extensions.code`.
 */
import { createContext } from "../context.js";
import { agentMetrics } from "../metrics.js";
import type { QueryRoute, QueryRouteContext } from "./deps.js";

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

async function metricsRoute({ deps, caller, query, params, now }: QueryRouteContext) {
  const from = query.get("from");
  const to = query.get("to");
  const body = await agentMetrics(createContext({ ...deps, primary: deps.primary ?? deps.pool, now: () => now }, caller), {
    agentId: params.agentId!,
    metrics: query.get("metrics")?.split(",") ?? null,
    window: query.get("window"),
    range: from !== null || to !== null ? { from: from ?? "", to: to ?? "" } : null,
    resolution: query.get("resolution"),
  });
  return { status: 200, body: specMetricsJson(body) };
}

export const metricsRoutes: readonly QueryRoute[] = [
  { method: "GET", path: "/v1/agents/:agentId/metrics", scope: "read", handler: metricsRoute },
];
