/**
 * The payer's agent id, answered by the seller-side routes (x402 verify/settle, MPP payments) only
 * to the account that owns the payer: any account may present any payer's signed payment, and an
 * agent id is that account's own business.
 */
import { agentsByWallets } from "../../shared/agents.js";
import type { RouteContext } from "../../shared/http/router.js";

/**
 * `{ agentId }` (the public id) when the caller's account owns the payer wallet, else `{}` (see
 * the header). `agentId` is the internal key the facilitator resolved (api/shared/agent-ids.ts).
 */
export async function ownAgentId(context: RouteContext, payer: string, agentId: string): Promise<{ agentId?: string }> {
  const [row] = await agentsByWallets(context.deps.pool, context.caller.accountId, [payer]);
  return row?.agent_id === agentId ? { agentId: row.public_id } : {};
}
