/** Shared resolver pieces: agent lookup with the NOT_FOUND rule, and row -> GraphQL mapping. */
import { Kind, type FragmentDefinitionNode, type SelectionSetNode } from "graphql";
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

/**
 * The row columns each Transaction field reads, through toTransaction or its field resolver
 * (agent: agentId; parent: parentTxHash; childCount, runRootTxHash: txHash; channel: eventId).
 */
const TRANSACTION_FIELD_COLUMNS: Readonly<Record<string, readonly (keyof PaymentRow)[]>> = {
  __typename: [],
  id: ["kind", "tx_hash", "id"],
  txHash: ["tx_hash"],
  agentId: ["agent_id"],
  agent: ["agent_id"],
  protocol: ["protocol"],
  rail: ["rail"],
  amountPaid: ["amount_units"],
  amountPaidUnits: ["amount_units"],
  endpoint: ["endpoint"],
  domain: ["domain"],
  policyCheck: ["policy_check"],
  parentTxHash: ["parent_tx_hash"],
  parent: ["parent_tx_hash"],
  solanaExplorer: ["explorer_url"],
  timestamp: ["timestamp"],
  depth: ["depth"],
  status: ["status"],
  settlementStatus: ["settlement_status"],
  rejectionCode: ["reason_code"],
  rejectionReason: ["reason"],
  rejectionRequested: ["reason"],
  rejectionLimit: ["reason"],
  rejectionUnit: ["reason"],
  policyVersion: ["policy_version"],
  childCount: ["tx_hash"],
  runRootTxHash: ["tx_hash"],
  channel: ["kind", "id"],
};

/**
 * The row columns a selection of Transaction fields needs (fragments followed; @skip/@include
 * ignored, so a superset), or undefined (every column) when it names a field not mapped above.
 */
export function transactionColumns(
  selectionSet: SelectionSetNode,
  fragments: Readonly<Record<string, FragmentDefinitionNode>>,
  into: Set<keyof PaymentRow> = new Set(),
): Set<keyof PaymentRow> | undefined {
  for (const selection of selectionSet.selections) {
    if (selection.kind === Kind.FIELD) {
      const columns = TRANSACTION_FIELD_COLUMNS[selection.name.value];
      if (columns === undefined) return undefined;
      for (const column of columns) into.add(column);
      continue;
    }
    const inner = selection.kind === Kind.INLINE_FRAGMENT ? selection.selectionSet : fragments[selection.name.value]?.selectionSet;
    if (inner === undefined || transactionColumns(inner, fragments, into) === undefined) return undefined;
  }
  return into;
}

/**
 * Placeholders for the columns a listing did not read (transactionColumns): toTransaction maps the
 * row whole, and the fields these feed were not asked, so no answer shows them.
 */
export const UNREAD_COLUMNS: PaymentRow = {
  kind: 0,
  id: "0",
  tx_hash: null,
  agent_id: "",
  wallet_address: "",
  payee: null,
  protocol: null,
  rail: null,
  amount_units: "0",
  endpoint: "",
  endpoint_hash: null,
  domain: null,
  policy_check: "",
  parent_tx_hash: null,
  explorer_url: null,
  timestamp: new Date(0),
  time_micros: "0",
  status: "",
  depth: 0,
  settlement_status: null,
  reason_code: null,
  reason: null,
  policy_version: null,
};

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
