/** Query.agents, Query.wallet (spec 2.4, 2.5) and Query.invocation (spec 2.6 budgets). */
import type { ApiContext } from "../context.js";
import { formatUsdcFixed } from "../../shared/money.js";
import { listAgents } from "../../shared/agents.js";
import { invocationsByParent } from "../read/invocations.js";
import type { AgentRow } from "../../shared/rows.js";
import { parseTxHash } from "../../shared/validation.js";
import { requireAgent } from "./common.js";

export const DEFAULT_NETWORK = "solana-localnet";

export function agents(_: unknown, args: { includeArchived?: boolean | null }, context: ApiContext): Promise<AgentRow[]> {
  return listAgents(context.deps.pool, context.caller.accountId, args.includeArchived === true);
}

/** Field resolvers of Agent over an `agents` row. */
export const Agent = {
  agentId: (row: AgentRow) => row.public_id,
  walletAddress: (row: AgentRow) => row.wallet_address,
  createdAt: (row: AgentRow) => row.created_at.toISOString(),
  archivedAt: (row: AgentRow) => row.archived_at?.toISOString() ?? null,
  balance: async (row: AgentRow, _args: unknown, context: ApiContext) => {
    const units = await context.loaders.balanceByWallet.load(row.wallet_address);
    return units === null ? null : formatUsdcFixed(units);
  },
  balanceUnits: async (row: AgentRow, _args: unknown, context: ApiContext) => {
    const units = await context.loaders.balanceByWallet.load(row.wallet_address);
    return units === null ? null : units.toString();
  },
};

export async function wallet(_: unknown, args: { agentId: string }, context: ApiContext): Promise<Record<string, unknown>> {
  const agent = await requireAgent(context, "agentId", args.agentId);
  const units = await context.loaders.balanceByWallet.load(agent.wallet_address);
  return {
    agentId: agent.public_id,
    address: agent.wallet_address,
    balance: units === null ? null : formatUsdcFixed(units),
    balanceUnits: units === null ? null : units.toString(),
    network: context.deps.network ?? DEFAULT_NETWORK,
  };
}

function money(prefix: string, unitsValue: bigint): Record<string, string> {
  return { [prefix]: formatUsdcFixed(unitsValue), [`${prefix}Units`]: unitsValue.toString() };
}

export async function invocation(_: unknown, args: { txHash: string }, context: ApiContext): Promise<Record<string, unknown> | null> {
  const parentTxHash = parseTxHash("txHash", args.txHash);
  const rows = await invocationsByParent(context.deps.pool, context.caller.accountId, parentTxHash);
  if (rows.length === 0) return null;
  let budget = 0n;
  let spent = 0n;
  let count = 0;
  const subAgents = rows.map((row) => {
    const b = BigInt(row.budget_units);
    const s = BigInt(row.spent_units);
    budget += b;
    spent += s;
    count += Number(row.payment_count);
    return {
      invocation: row.invocation,
      invokerAgentId: row.invoker_agent_id,
      invokerAddress: row.invoker,
      subAgentId: row.sub_agent_id,
      subAgentAddress: row.sub_agent,
      ...money("budget", b),
      ...money("spent", s),
      ...money("remaining", b > s ? b - s : 0n),
      paymentCount: Number(row.payment_count),
    };
  });
  return {
    parentTxHash,
    ...money("budget", budget),
    ...money("spent", spent),
    ...money("remaining", budget > spent ? budget - spent : 0n),
    paymentCount: count,
    subAgents,
  };
}
