/**
 * `agents.invoke` invocations (spec 2.6, 4.7): `GET /v1/agents/{agentId}/invocations/{parentTxHash}`
 * reads the invocation the transaction `parentTxHash` opened, seen from either side: `agentId` is
 * the sub-agent (its invocation under that parent) or the invoker (the parent is its own payment
 * to the sub-agent). Budget and spend come from the chain (the invocation account); `payments` are
 * the sub-agent's confirmed settlements under it, oldest first: the SDK builds spec 2.6's
 * `totalCost` and `paymentChain` from them.
 *
 * Tenant isolation: `agentId` must be the caller's; the other side's agent id is shown only when
 * it is the caller's agent too (its wallet address always, as the chain shows it).
 */
import { PublicKey } from "@solana/web3.js";
import { parseTxHash } from "../../../shared/validation.js";
import { invocationAddress } from "../../invocations/index.js";
import type { RouteResponse } from "../../../shared/http/idempotency.js";
import { requireAgent } from "../../../shared/http/input.js";
import { usdcJson } from "../../../shared/money.js";
import { json } from "../../../shared/http/router.js";
import type { Route, RouteContext } from "../deps.js";
import { invocationNotFound, invocationService } from "./payments.js";

/** An invocation's payments are bounded by its budget; this bounds the answer all the same. */
const MAX_PAYMENTS = 1_000;

async function invocationRoute(context: RouteContext): Promise<RouteResponse> {
  const agent = await requireAgent(context, context.params.agentId!);
  const parentTxHash = parseTxHash("parentTxHash", context.params.parentTxHash!);
  const service = invocationService(context);
  const { pool } = context.deps;

  // As the sub-agent: the invocation is derived from the parent and this agent's wallet.
  let invocation = invocationAddress(parentTxHash, agent.wallet_address);
  let state = await service.invocationState(new PublicKey(invocation));
  if (state === null || state.subAgent !== agent.wallet_address) {
    // As the invoker: the parent is this agent's own confirmed payment to the sub-agent.
    const { rows } = await pool.query<{ payee: string }>(
      "SELECT payee FROM settlements WHERE signature = $1 AND agent_id = $2 AND status = 'confirmed'",
      [parentTxHash, agent.agent_id],
    );
    const payee = rows[0]?.payee;
    invocation = payee === undefined ? invocation : invocationAddress(parentTxHash, payee);
    state = payee === undefined ? null : await service.invocationState(new PublicKey(invocation));
    if (state === null || state.invoker !== agent.wallet_address) {
      throw invocationNotFound(`agent ${agent.public_id} has no invocation under transaction ${parentTxHash}`);
    }
  }

  // Public ids: only this account's agents are named (the other side stays an address).
  const names = await pool.query<{ public_id: string; wallet_address: string }>(
    "SELECT public_id, wallet_address FROM agents WHERE account_id = $1 AND wallet_address = ANY($2::text[])",
    [context.caller.accountId, [state.invoker, state.subAgent]],
  );
  const idOf = (address: string): string | null => names.rows.find((row) => row.wallet_address === address)?.public_id ?? null;
  const payments = await pool.query<{ signature: string }>(
    `SELECT signature FROM settlements WHERE invocation = $1 AND status = 'confirmed'
     ORDER BY created_at, payment_id LIMIT ${MAX_PAYMENTS}`,
    [invocation],
  );
  const remaining = state.budgetUnits > state.spentUnits ? state.budgetUnits - state.spentUnits : 0n;
  return json(200, {
    parentTxHash,
    invocation,
    invoker: idOf(state.invoker),
    invokerAddress: state.invoker,
    subAgentId: idOf(state.subAgent),
    subAgentAddress: state.subAgent,
    budget: usdcJson(state.budgetUnits),
    spent: usdcJson(state.spentUnits),
    remaining: usdcJson(remaining),
    payments: payments.rows.map((row) => row.signature),
  });
}

export const invocationRoutes: readonly Route[] = [
  { method: "GET", path: "/v1/agents/:agentId/invocations/:parentTxHash", handler: invocationRoute },
];
