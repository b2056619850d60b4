/**
 * `agents.invoke` invocations (spec 2.6, 4.7): `GET /v1/agents/{agentId}/invocations/{parentTxHash}`
 * reads the invocation the transaction `parentTxHash` opened, seen from either side: `agentId` is
 * the sub-agent (its invocation under that parent) or the invoker (the parent is its own payment
 * to the sub-agent). Budget and spend come from the chain (the invocation account); `payments` are
 * the sub-agent's confirmed settlements under it, oldest first: the SDK builds spec 2.6's
 * `totalCost` and `paymentChain` from them.
 *
 * Tenant isolation: `agentId` must be the caller's; the other side's agent id is shown only when
 * it is the caller's agent too (its wallet address always, as the chain shows it). The lookup is
 * api/gateway/invocations/lookup.ts.
 */
import { parseTxHash } from "../../../shared/validation.js";
import { agentInvocation } from "../../invocations/index.js";
import type { RouteResponse } from "../../../shared/http/idempotency.js";
import { requireAgent } from "../../../shared/http/input.js";
import { usdcJson } from "../../../shared/money.js";
import { json } from "../../../shared/http/router.js";
import type { Route, RouteContext } from "../deps.js";

async function invocationRoute(context: RouteContext): Promise<RouteResponse> {
  const agent = await requireAgent(context, context.params.agentId!);
  const parentTxHash = parseTxHash("parentTxHash", context.params.parentTxHash!);
  const view = await agentInvocation(
    { pool: context.deps.pool, invocations: context.deps.invocations },
    { accountId: context.caller.accountId, agent, parentTxHash },
  );
  return json(200, {
    parentTxHash,
    invocation: view.invocation,
    invoker: view.invokerId,
    invokerAddress: view.state.invoker,
    subAgentId: view.subAgentId,
    subAgentAddress: view.state.subAgent,
    budget: usdcJson(view.state.budgetUnits),
    spent: usdcJson(view.state.spentUnits),
    remaining: usdcJson(view.remainingUnits),
    payments: view.payments,
  });
}

export const invocationRoutes: readonly Route[] = [
  { method: "GET", path: "/v1/agents/:agentId/invocations/:parentTxHash", scope: "read", handler: invocationRoute },
];
