/** Query.agents, Query.wallet (spec 2.4, 2.5) and Query.invocation (spec 2.6 budgets). */
import type { ApiContext } from "../context.js";
import { formatUsdcFixed } from "../../shared/money.js";
import { listAgents } from "../../shared/agents.js";
import { type InvocationRow, invocationsByParent, invocationsByParents } from "../read/invocations.js";
import { badInput } from "../../shared/errors.js";
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
  return rows.length === 0 ? null : toInvocation(parentTxHash, rows);
}

/** Hashes one `invocations` call reads at most (a run view asks for every node with children). */
export const INVOCATIONS_HASHES_MAX = 100;

export async function invocations(
  _: unknown,
  args: { txHashes: readonly string[] },
  context: ApiContext,
): Promise<Record<string, unknown>[]> {
  if (args.txHashes.length > INVOCATIONS_HASHES_MAX) throw badInput("txHashes", `at most ${INVOCATIONS_HASHES_MAX} hashes`);
  const hashes = [...new Set(args.txHashes.map((hash) => parseTxHash("txHashes", hash)))];
  const rows = await invocationsByParents(context.deps.pool, context.caller.accountId, hashes);
  const byParent = new Map<string, InvocationRow[]>();
  for (const row of rows) byParent.set(row.parent_tx_hash, [...(byParent.get(row.parent_tx_hash) ?? []), row]);
  return hashes.flatMap((hash) => {
    const group = byParent.get(hash);
    return group === undefined ? [] : [toInvocation(hash, group)];
  });
}

function toInvocation(parentTxHash: string, rows: readonly InvocationRow[]): Record<string, unknown> {
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
