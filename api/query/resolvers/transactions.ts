/** Query.transaction and Query.transactions (spec 4.7 transactions.get / transactions.list). */
import { Kind, type GraphQLResolveInfo } from "graphql";
import type { ApiContext } from "../context.js";
import type { PaymentRow } from "../../shared/rows.js";
import { badInput } from "../../shared/errors.js";
import { listReceivedPayments } from "../read/received.js";
import { getTransaction, listTransactions, type Protocol, type TransactionStatus } from "../read/transactions.js";
import { formatUsdcFixed } from "../../shared/money.js";
import {
  encodeCursor,
  parseCursor,
  parseIntInRange,
  parseSince,
  parseTxHash,
  TRANSACTIONS_LIMIT_DEFAULT,
  TRANSACTIONS_LIMIT_MAX,
} from "../../shared/validation.js";
import { requireAgent, type TransactionObject, toTransaction, transactionColumns, UNREAD_COLUMNS } from "./common.js";

interface TransactionsArgs {
  agentId?: string | null;
  limit?: number | null;
  protocol?: Protocol | null;
  domain?: string | null;
  since?: string | null;
  status?: TransactionStatus | null;
  after?: string | null;
  reason?: string | null;
}

const DOMAIN = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;

/** A spec 7 reason code filter: lower-case words joined by underscores. */
function reasonCode(value: string | null | undefined): string | undefined {
  if (value === null || value === undefined) return undefined;
  if (!/^[a-z][a-z_]{0,63}$/.test(value)) throw badInput("reason", `not a reason code: "${value}"`);
  return value;
}

export async function transaction(_: unknown, args: { txHash: string }, context: ApiContext): Promise<TransactionObject | null> {
  const row = await getTransaction(context.deps.pool, context.caller.accountId, parseTxHash("txHash", args.txHash));
  return row === null ? null : toTransaction(row);
}

/**
 * The row columns the query's `nodes { … }` asks for (the listing reads only those: fewer bytes to
 * send and decode, and the policy version's subquery only when asked); undefined for all of them
 * (no info: the REST route, which answers every field; or a selection not mapped).
 */
function askedColumns(info: GraphQLResolveInfo | undefined): Set<keyof PaymentRow> | undefined {
  if (info === undefined) return undefined;
  const columns = new Set<keyof PaymentRow>();
  for (const field of info.fieldNodes) {
    for (const selection of field.selectionSet?.selections ?? []) {
      if (selection.kind !== Kind.FIELD) return undefined;
      const name = selection.name.value;
      if (name === "nodes") {
        if (selection.selectionSet === undefined || transactionColumns(selection.selectionSet, info.fragments, columns) === undefined) {
          return undefined;
        }
      } else if (name !== "pageInfo" && name !== "__typename") {
        return undefined;
      }
    }
  }
  return columns;
}

export async function transactions(
  _: unknown,
  args: TransactionsArgs,
  context: ApiContext,
  info?: GraphQLResolveInfo,
): Promise<{ nodes: TransactionObject[]; pageInfo: { hasNextPage: boolean; endCursor: string | null } }> {
  const limit = parseIntInRange("limit", args.limit, TRANSACTIONS_LIMIT_DEFAULT, 1, TRANSACTIONS_LIMIT_MAX);
  let domain: string | undefined;
  if (args.domain !== null && args.domain !== undefined) {
    domain = args.domain.trim().toLowerCase();
    if (!DOMAIN.test(domain)) throw badInput("domain", `not a domain name: "${args.domain}"`);
  }
  const agentId =
    args.agentId === null || args.agentId === undefined ? undefined : (await requireAgent(context, "agentId", args.agentId)).agent_id;
  const columns = askedColumns(info);
  const rows = await listTransactions(
    context.deps.pool,
    {
      accountId: context.caller.accountId,
      agentId,
      protocol: args.protocol ?? undefined,
      domain,
      since: args.since === null || args.since === undefined ? undefined : parseSince("since", args.since, context.now),
      status: args.status ?? undefined,
      after: args.after === null || args.after === undefined ? undefined : parseCursor("after", args.after),
      reasonCode: reasonCode(args.reason),
      limit,
    },
    columns,
  );
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return {
    nodes: columns === undefined ? page.map(toTransaction) : page.map((row) => toTransaction({ ...UNREAD_COLUMNS, ...row })),
    pageInfo: {
      hasNextPage: rows.length > limit,
      endCursor: last === undefined ? null : encodeCursor({ timeMicros: BigInt(last.time_micros), kind: last.kind, id: BigInt(last.id) }),
    },
  };
}

export interface ReceivedPaymentObject {
  readonly txHash: string;
  readonly payer: string;
  readonly agentId: string;
  readonly protocol: string;
  readonly rail: string;
  readonly amountPaid: string;
  readonly amountPaidUnits: string;
  readonly endpoint: string;
  readonly domain: string | null;
  readonly settlementReference: string | null;
  readonly settlementStatus: string | null;
  readonly solanaExplorer: string | null;
  readonly timestamp: string;
  readonly status: string;
}

/** Query.receivedPayments: what the account's agents were paid, whoever paid. */
export async function receivedPayments(
  _: unknown,
  args: { agentId?: string | null; limit?: number | null },
  context: ApiContext,
): Promise<ReceivedPaymentObject[]> {
  const limit = parseIntInRange("limit", args.limit, TRANSACTIONS_LIMIT_DEFAULT, 1, TRANSACTIONS_LIMIT_MAX);
  const agentId =
    args.agentId === null || args.agentId === undefined ? undefined : (await requireAgent(context, "agentId", args.agentId)).agent_id;
  const rows = await listReceivedPayments(context.deps.pool, { accountId: context.caller.accountId, agentId, limit });
  return rows.map((row) => ({
    txHash: row.tx_hash,
    payer: row.payer,
    agentId: row.payee_agent_id,
    protocol: row.protocol,
    rail: row.rail,
    amountPaid: formatUsdcFixed(BigInt(row.amount_units)),
    amountPaidUnits: row.amount_units,
    endpoint: row.endpoint,
    domain: row.domain,
    settlementReference: row.settlement_reference,
    settlementStatus: row.settlement_status,
    solanaExplorer: row.explorer_url,
    timestamp: row.timestamp.toISOString(),
    status: row.status,
  }));
}
