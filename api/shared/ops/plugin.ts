/**
 * The operator's routes of a service process, as a graphql-yoga plugin answering before anything
 * else: `GET /healthz` (the process is alive: 200 while it runs), `GET /readyz` (./readiness.ts:
 * 200 or 503 with every check), `GET /metrics` (./metrics.ts, Prometheus text). It also times every
 * request by route template, and carries the draining switch of a graceful shutdown: once
 * `drain()` is called, new mutating /v1 requests answer 503 (problem JSON, `Retry-After`) and
 * /readyz turns red, while requests already in flight finish; `idle()` resolves when none is left.
 */
import type { Plugin } from "graphql-yoga";
import { ServiceError } from "../errors.js";
import { PROBLEM_CONTENT_TYPE } from "../http/problem.js";
import { writeJson } from "../http/json.js";
import type { OpsMetrics } from "./metrics.js";
import { type ReadinessOptions, readiness } from "./readiness.js";

export interface OpsRoutes {
  readonly plugin: Plugin;
  /** Stop taking new payments and other writes; /readyz answers 503 from now on. */
  drain(): void;
  /** Resolves once no request is in flight (or after `timeoutMs`); true when none is left. */
  idle(timeoutMs: number): Promise<boolean>;
  readonly inFlight: () => number;
  /**
   * For a request answered beside the yoga plugin (the query service's direct GraphQL path): counts
   * it in flight at once; the returned call records it as `onResponse` does, with its status, or
   * only ends it (null) when the request is handed on to yoga, which then counts it itself.
   */
  track(method: string, pathname: string): (status: number | null) => void;
}

/** The path segment after each collection names an id: replaced by the OpenAPI parameter name. */
const PLACEHOLDERS: Readonly<Record<string, string>> = {
  agents: "{agentId}",
  policies: "{agentId}",
  channels: "{channel}",
  transactions: "{txHash}",
  alerts: "{alertId}",
  webhooks: "{endpointId}",
  "api-keys": "{keyId}",
  invocations: "{parentTxHash}",
  operations: "{operationId}",
};

/** Route templates for labels: ids in paths are replaced, so no label grows per agent or payment. */
export function routeTemplate(pathname: string): string {
  if (!pathname.startsWith("/v1/"))
    return pathname === "/graphql" || pathname.startsWith("/dashboard") ? pathname.split("/", 2).join("/") : "other";
  return pathname
    .split("/")
    .map((segment, index, all) => {
      const previous = all[index - 1];
      if (index <= 1 || segment === "") return segment;
      const placeholder = PLACEHOLDERS[previous ?? ""];
      if (placeholder !== undefined) return placeholder;
      if (previous === "payments" && segment !== "authorize") return "{reservationId}";
      return segment;
    })
    .join("/");
}

const DRAINING_RETRY_AFTER_SECONDS = 5;
const SETTLEMENT_ROUTES =
  /\/payments\/\{reservationId\}\/complete$|^\/v1\/x402\/(?:facilitator\/)?settle$|^\/v1\/mpp\/(?:solana\/charge|payments)$/;

export function useOpsRoutes(options: { readonly metrics: OpsMetrics; readonly readiness: ReadinessOptions }): OpsRoutes {
  const { metrics } = options;
  const started = new WeakMap<Request, number>();
  let draining = false;
  let inFlight = 0;
  const waiters = new Set<() => void>();
  const settle = (): void => {
    inFlight -= 1;
    if (inFlight === 0) for (const wake of waiters) wake();
  };

  const plugin: Plugin = {
    async onRequest({ request, url, endResponse }) {
      if (request.method === "GET" && url.pathname === "/healthz") {
        return endResponse(Response.json({ status: "alive" }));
      }
      if (request.method === "GET" && url.pathname === "/readyz") {
        const answer = await readiness(options.readiness);
        const ready = answer.ready && !draining;
        const body = { ready, ...(draining ? { draining: true } : {}), checks: answer.checks };
        return endResponse(Response.json(body, { status: ready ? 200 : 503 }));
      }
      if (request.method === "GET" && url.pathname === "/metrics") {
        const text = await metrics.registry.metrics();
        return endResponse(new Response(text, { headers: { "content-type": metrics.registry.contentType } }));
      }
      if (draining && request.method !== "GET" && url.pathname.startsWith("/v1/")) {
        const refused = new ServiceError("SERVICE_UNAVAILABLE", "the gateway is shutting down: retry on another instance");
        return endResponse(
          new Response(writeJson(refused.toProblem()), {
            status: refused.status,
            headers: { "content-type": PROBLEM_CONTENT_TYPE, "retry-after": String(DRAINING_RETRY_AFTER_SECONDS) },
          }),
        );
      }
      started.set(request, performance.now());
      inFlight += 1;
    },
    onResponse({ request, response }) {
      const at = started.get(request);
      if (at === undefined) return;
      started.delete(request);
      settle();
      record(request.method, new URL(request.url).pathname, response.status, at);
    },
  };

  function record(method: string, pathname: string, status: number, at: number): void {
    const seconds = (performance.now() - at) / 1_000;
    // A path nothing serves keeps no label of its own: arbitrary paths would grow the series.
    const route = status === 404 ? "unmatched" : routeTemplate(pathname);
    metrics.requests.inc({ route, method, status: String(status) });
    metrics.requestSeconds.observe({ route, method }, seconds);
    const outcome = status < 300 ? "ok" : status < 500 ? "refused" : "error";
    if (method === "POST" && route.endsWith("/payments/authorize")) metrics.reservationSeconds.observe({ outcome }, seconds);
    if (method === "POST" && SETTLEMENT_ROUTES.test(route)) metrics.settlementSeconds.observe({ outcome }, seconds);
  }

  return {
    plugin,
    drain() {
      draining = true;
    },
    inFlight: () => inFlight,
    track(method, pathname) {
      const at = performance.now();
      inFlight += 1;
      let ended = false;
      return (status) => {
        if (ended) return;
        ended = true;
        settle();
        if (status !== null) record(method, pathname, status, at);
      };
    },
    idle(timeoutMs) {
      if (inFlight === 0) return Promise.resolve(true);
      return new Promise((resolveIdle) => {
        const done = (): void => {
          clearTimeout(timer);
          waiters.delete(done);
          resolveIdle(inFlight === 0);
        };
        const timer = setTimeout(done, timeoutMs);
        waiters.add(done);
      });
    },
  };
}
