/**
 * The REST /v1 gateway surface as one fetch handler and as a graphql-yoga plugin that answers
 * before GraphQL (like api/rest.ts `useRestRoutes`). `GET /v1/agents/{agentId}/metrics` stays in
 * api/rest.ts (shared with the GraphQL resolver); every other /v1 route is here.
 */
import type { Plugin } from "graphql-yoga";
import { type GatewayDeps, type Route, Router } from "./router.js";
import { agentRoutes } from "./routes/agents.js";
import { alertRoutes } from "./routes/alerts.js";
import { apiKeyRoutes } from "./routes/api-keys.js";
import { facilitatorRoutes } from "./routes/facilitator.js";
import { invocationRoutes } from "./routes/invocations.js";
import { mppRoutes } from "./routes/mpp.js";
import { paymentRoutes } from "./routes/payments.js";
import { policyRoutes } from "./routes/policies.js";
import { transactionRoutes } from "./routes/transactions.js";
import { webhookRoutes } from "./routes/webhooks.js";

export const GATEWAY_ROUTES: readonly Route[] = [
  ...policyRoutes,
  ...agentRoutes,
  ...paymentRoutes,
  ...invocationRoutes,
  ...facilitatorRoutes,
  ...mppRoutes,
  ...transactionRoutes,
  ...alertRoutes,
  ...webhookRoutes,
  ...apiKeyRoutes,
];

/** The /v1 routes as a fetch handler: a Response, or null when the path is not one of them. */
export function createGatewayHandler(deps: GatewayDeps): (request: Request) => Promise<Response | null> {
  const router = new Router(GATEWAY_ROUTES);
  return (request) => router.handle(deps, request);
}

/** Serves the /v1 gateway routes before yoga's GraphQL handling. */
export function useGatewayRoutes(deps: GatewayDeps): Plugin {
  const handle = createGatewayHandler(deps);
  return {
    async onRequest({ request, endResponse }) {
      const response = await handle(request);
      if (response !== null) endResponse(response);
    },
  };
}
