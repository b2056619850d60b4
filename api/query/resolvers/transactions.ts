/** Query.transaction and Query.transactions (spec 4.7 transactions.get / transactions.list). */
import type { ApiContext } from "../context.js";
import { badInput } from "../../shared/errors.js";
import { getTransaction, listTransactions, type Protocol, type TransactionStatus } from "../read/transactions.js";
import {
  encodeCursor,
  parseCursor,
  parseIntInRange,
  parseSince,
  parseTxHash,
  TRANSACTIONS_LIMIT_DEFAULT,
  TRANSACTIONS_LIMIT_MAX,
} from "../../shared/validation.js";
import { requireAgent, type TransactionObject, toTransaction } from "./common.js";

interface TransactionsArgs {
  agentId?: string | null;
  limit?: number | null;
  protocol?: Protocol | null;
  domain?: string | null;
  since?: string | null;
  status?: TransactionStatus | null;
  after?: string | null;
}

const DOMAIN = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;

export async function transaction(_: unknown, args: { txHash: string }, context: ApiContext): Promise<TransactionObject | null> {
  const row = await getTransaction(context.deps.pool, context.caller.accountId, parseTxHash("txHash", args.txHash));
  return row === null ? null : toTransaction(row);
}

export async function transactions(
  _: unknown,
  args: TransactionsArgs,
  context: ApiContext,
): Promise<{ nodes: TransactionObject[]; pageInfo: { hasNextPage: boolean; endCursor: string | null } }> {
  const limit = parseIntInRange("limit", args.limit, TRANSACTIONS_LIMIT_DEFAULT, 1, TRANSACTIONS_LIMIT_MAX);
  let domain: string | undefined;
  if (args.domain !== null && args.domain !== undefined) {
    domain = args.domain.trim().toLowerCase();
    if (!DOMAIN.test(domain)) throw badInput("domain", `not a domain name: "${args.domain}"`);
  }
  const agentId =
    args.agentId === null || args.agentId === undefined ? undefined : (await requireAgent(context, "agentId", args.agentId)).agent_id;
  const rows = await listTransactions(context.deps.pool, {
    accountId: context.caller.accountId,
    agentId,
    protocol: args.protocol ?? undefined,
    domain,
    since: args.since === null || args.since === undefined ? undefined : parseSince("since", args.since, context.now),
    status: args.status ?? undefined,
    after: args.after === null || args.after === undefined ? undefined : parseCursor("after", args.after),
    limit,
  });
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return {
    nodes: page.map(toTransaction),
    pageInfo: {
      hasNextPage: rows.length > limit,
      endCursor: last === undefined ? null : encodeCursor({ timeMicros: BigInt(last.time_micros), kind: last.kind, id: BigInt(last.id) }),
    },
  };
}
