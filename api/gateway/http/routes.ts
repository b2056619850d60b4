/**
 * The gateway's REST /v1 surface as one fetch handler and as a graphql-yoga plugin that answers
 * before GraphQL. The handler also answers the query service's read views (api/query/rest:
 * metrics, transactions), so a gateway client needs one base URL; the query service serves those
 * alone when it runs on its own.
 */
import type { Plugin } from "graphql-yoga";
import { Router } from "../../shared/http/router.js";
import { QUERY_ROUTES } from "../../query/rest/index.js";
import { createApprovalLinkHandler } from "./approval-link.js";
import type { GatewayDeps, Route } from "./deps.js";
import { agentRoutes } from "./routes/agents.js";
import { approvalRoutes } from "./routes/approvals.js";
import { alertRoutes } from "./routes/alerts.js";
import { apiKeyRoutes } from "./routes/api-keys.js";
import { channelRoutes } from "./routes/channels.js";
import { exactFacilitatorRoutes } from "./routes/exact-facilitator.js";
import { facilitatorRoutes } from "./routes/facilitator.js";
import { invocationRoutes } from "./routes/invocations.js";
import { mppRoutes } from "./routes/mpp.js";
import { mppSolanaRoutes } from "./routes/mpp-solana.js";
import { paymentRoutes } from "./routes/payments.js";
import { policyRoutes } from "./routes/policies.js";
import { webhookRoutes } from "./routes/webhooks.js";

export const GATEWAY_ROUTES: readonly Route[] = [
  ...policyRoutes,
  ...agentRoutes,
  ...paymentRoutes,
  ...approvalRoutes,
  ...invocationRoutes,
  ...channelRoutes,
  ...facilitatorRoutes,
  ...exactFacilitatorRoutes,
  ...mppRoutes,
  ...mppSolanaRoutes,
  ...alertRoutes,
  ...webhookRoutes,
  ...apiKeyRoutes,
];

/** The /v1 routes as a fetch handler: a Response, or null when the path is not one of them. */
export function createGatewayHandler(deps: GatewayDeps): (request: Request) => Promise<Response | null> {
  const router = new Router<GatewayDeps>([...GATEWAY_ROUTES, ...QUERY_ROUTES]);
  // The approvals' signed link takes no key and speaks HTML forms: answered before the router.
  const link = createApprovalLinkHandler(deps);
  return async (request) => (await link(request)) ?? router.handle(deps, request);
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
