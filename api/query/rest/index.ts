/**
 * The query service's REST read views (docs/rest.md): the spec's metrics path and the
 * transactions views, on the shared REST pipeline (api/shared/http/router.ts), served before
 * GraphQL as a yoga plugin.
 */
import type { Plugin } from "graphql-yoga";
import { Router } from "../../shared/http/router.js";
import type { QueryRoute, QueryRouteDeps } from "./deps.js";
import { metricsRoutes } from "./metrics.js";
import { transactionRoutes } from "./transactions.js";

export type { QueryRoute, QueryRouteContext, QueryRouteDeps } from "./deps.js";
export { specMetricsJson } from "./metrics.js";

export const QUERY_ROUTES: readonly QueryRoute[] = [...metricsRoutes, ...transactionRoutes];

/** Serves the read views before yoga's GraphQL handling; other paths go on to the next handler. */
export function useQueryRoutes(deps: QueryRouteDeps): Plugin {
  const router = new Router(QUERY_ROUTES);
  return {
    async onRequest({ request, endResponse }) {
      const response = await router.handle(deps, request);
      if (response !== null) endResponse(response);
    },
  };
}
