/** The resolver map: one file per concern; field resolvers only where a value is fetched lazily. */
import type { ApiContext } from "../context.js";
import { agentMetrics, type MetricsArgs, spendSummary, type WindowArgs } from "../metrics.js";
import { getTransaction } from "../read/transactions.js";
import { credentialIsLive } from "../../shared/auth.js";
import { apiError } from "../../shared/errors.js";
import { agents, Agent, invocation, invocations, wallet } from "./agents.js";
import { agentField, childCountField, parentField, requireAgent, toTransaction, type TransactionObject } from "./common.js";
import { checkPolicy, policies, policy } from "./policy.js";
import { receivedPayments, transaction, transactions } from "./transactions.js";
import { nodeEndpoint, paymentTree } from "./tree.js";

const CREDENTIAL_RECHECK_MS = 1_000;

async function* transactionRecorded(
  _: unknown,
  args: { agentId?: string | null },
  context: ApiContext,
): AsyncGenerator<{ transactionRecorded: TransactionObject }> {
  const agentId =
    args.agentId === null || args.agentId === undefined ? undefined : (await requireAgent(context, "agentId", args.agentId)).agent_id;
  const feed = context.deps.feed;
  if (feed === undefined) return;
  let checkedAt = Date.now();
  for await (const event of feed.subscribe(context.caller.accountId)) {
    if (agentId !== undefined && event.agentId !== agentId) continue;
    // A stream outlives its request: a key revoked (or a session signed out) since it opened ends
    // it at the next event, at most one check a second.
    if (Date.now() - checkedAt >= CREDENTIAL_RECHECK_MS) {
      if (!(await credentialIsLive(context.deps.primary, context.caller))) {
        throw apiError("AUTHENTICATION_ERROR", "the API key or session of this stream is no longer valid");
      }
      checkedAt = Date.now();
    }
    // The feed's NOTIFY comes from the primary: its row is read there, never from a lagging replica.
    const row = await getTransaction(context.deps.primary, context.caller.accountId, event.txHash);
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
    invocations,
    policy,
    policies,
    checkPolicy,
  },
  Subscription: {
    transactionRecorded: { subscribe: transactionRecorded },
  },
  Agent,
  Transaction: {
    agent: agentField,
    parent: parentField,
    childCount: childCountField,
    runRootTxHash: (parent: TransactionObject, _args: unknown, context: ApiContext) =>
      parent.txHash === null ? null : context.loaders.runRootByHash.load(parent.txHash),
  },
  ReceivedPayment: { agent: agentField },
  PaymentTreeNode: { agent: agentField, endpoint: nodeEndpoint },
};
