/** Shared resolver pieces: agent lookup with the NOT_FOUND rule, and row -> GraphQL mapping. */
import type { ApiContext } from "../context.js";
import { apiError } from "../../shared/errors.js";
import { formatUsdcFixed } from "../../shared/money.js";
import { reasonTerms } from "../../shared/policy/reasons.js";
import type { AgentRow, PaymentRow } from "../../shared/rows.js";
import { parseAgentId } from "../../shared/validation.js";

/**
 * The caller's agent by public id, or NOT_FOUND: another account's agent gets the same answer as
 * none (ids are scoped per account, api/shared/agent-ids.ts). Use `.agent_id` for queries, `.public_id`
 * in answers.
 */
export async function requireAgent(context: ApiContext, argument: string, agentId: string): Promise<AgentRow> {
  const agent = await context.loaders.agentById.load(parseAgentId(argument, agentId));
  if (agent === null) throw apiError("NOT_FOUND", `no agent ${agentId} in this account`, { argument });
  return agent;
}

export interface TransactionObject {
  readonly id: string;
  readonly txHash: string | null;
  /** The payment's event in the store (`transactions.event_id`); null for a rejection. Not in the schema. */
  readonly eventId: string | null;
  readonly agentId: string;
  readonly protocol: string | null;
  readonly rail: string | null;
  readonly amountPaid: string;
  readonly amountPaidUnits: string;
  readonly endpoint: string;
  readonly domain: string | null;
  readonly policyCheck: string;
  readonly parentTxHash: string | null;
  readonly solanaExplorer: string | null;
  readonly timestamp: string;
  readonly depth: number;
  readonly status: string;
  readonly settlementStatus: string | null;
  readonly rejectionCode: string | null;
  readonly rejectionReason: string | null;
  readonly rejectionRequested: string | null;
  readonly rejectionLimit: string | null;
  readonly rejectionUnit: string | null;
  /** The agent's policy version the gateway decided it under (docs/policy.md "Versions"). */
  readonly policyVersion: number | null;
}

export function toTransaction(row: PaymentRow): TransactionObject {
  const amount = BigInt(row.amount_units);
  const terms = reasonTerms(row.reason);
  return {
    id: row.kind === 0 ? row.tx_hash! : `rejection:${row.id}`,
    txHash: row.tx_hash,
    eventId: row.kind === 0 ? row.id : null,
    agentId: row.agent_id,
    protocol: row.protocol,
    rail: row.rail,
    amountPaid: formatUsdcFixed(amount),
    amountPaidUnits: amount.toString(),
    endpoint: row.endpoint,
    domain: row.domain,
    policyCheck: row.policy_check,
    parentTxHash: row.parent_tx_hash,
    solanaExplorer: row.explorer_url,
    timestamp: row.timestamp.toISOString(),
    depth: row.depth,
    status: row.status,
    settlementStatus: row.settlement_status,
    rejectionCode: row.reason_code,
    rejectionReason: row.reason,
    rejectionRequested: terms?.requested ?? null,
    rejectionLimit: terms?.limit ?? null,
    rejectionUnit: terms?.unit ?? null,
    policyVersion: row.policy_version ?? null,
  };
}

/** Field resolver of `agent` on any object carrying a public `agentId` (the loader is by public id). */
export function agentField(parent: { agentId: string }, _args: unknown, context: ApiContext): Promise<AgentRow | null> {
  return context.loaders.agentById.load(parent.agentId);
}

/** Transaction.parent: the invoking transaction, when it is one of the account's (batched). */
export async function parentField(
  parent: { parentTxHash: string | null },
  _args: unknown,
  context: ApiContext,
): Promise<TransactionObject | null> {
  if (parent.parentTxHash === null) return null;
  const row = await context.loaders.transactionByHash.load(parent.parentTxHash);
  return row === null ? null : toTransaction(row);
}

/** Transaction.childCount: payments made under it by the account's agents (batched). */
export function childCountField(parent: { txHash: string | null }, _args: unknown, context: ApiContext): Promise<number> | number {
  return parent.txHash === null ? 0 : context.loaders.childCountByHash.load(parent.txHash);
}
