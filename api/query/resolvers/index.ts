/** The resolver map: one file per concern; field resolvers only where a value is fetched lazily. */
import type { ApiContext } from "../context.js";
import { agentMetrics, type MetricsArgs, spendSummary, type WindowArgs } from "../metrics.js";
import { getTransaction } from "../read/transactions.js";
import { agents, Agent, invocation, wallet } from "./agents.js";
import { agentField, parentField, requireAgent, toTransaction, type TransactionObject } from "./common.js";
import { checkPolicy, policy } from "./policy.js";
import { receivedPayments, transaction, transactions } from "./transactions.js";
import { nodeEndpoint, paymentTree } from "./tree.js";

async function* transactionRecorded(
  _: unknown,
  args: { agentId?: string | null },
  context: ApiContext,
): AsyncGenerator<{ transactionRecorded: TransactionObject }> {
  const agentId =
    args.agentId === null || args.agentId === undefined ? undefined : (await requireAgent(context, "agentId", args.agentId)).agent_id;
  const feed = context.deps.feed;
  if (feed === undefined) return;
  for await (const event of feed.subscribe(context.caller.accountId)) {
    if (agentId !== undefined && event.agentId !== agentId) continue;
    const row = await getTransaction(context.deps.pool, context.caller.accountId, event.txHash);
    if (row !== null) yield { transactionRecorded: toTransaction(row) };
  }
}

export const resolvers = {
  Query: {
    agents,
    wallet,
    transaction,
    transactions,
    receivedPayments,
    paymentTree,
    spendSummary: (_: unknown, args: WindowArgs & { agentId?: string | null }, context: ApiContext) => spendSummary(context, args),
    metrics: (_: unknown, args: MetricsArgs, context: ApiContext) => agentMetrics(context, args),
    invocation,
    policy,
    checkPolicy,
  },
  Subscription: {
    transactionRecorded: { subscribe: transactionRecorded },
  },
  Agent,
  Transaction: { agent: agentField, parent: parentField },
  ReceivedPayment: { agent: agentField },
  PaymentTreeNode: { agent: agentField, endpoint: nodeEndpoint },
};
