/** The resolver map: one file per concern; field resolvers only where a value is fetched lazily. */
import type { ApiContext } from "../context.js";
import { agentMetrics, type MetricsArgs, spendSummary, type WindowArgs } from "../metrics.js";
import type { ChannelEventName, FeedEvent } from "../live-feed.js";
import { channelsByAddresses } from "../read/channels.js";
import { getTransaction } from "../read/transactions.js";
import { withFieldScopes } from "../field-scopes.js";
import { credentialIsLive } from "../../shared/auth.js";
import { apiError } from "../../shared/errors.js";
import { agents, Agent, invocation, invocations, wallet } from "./agents.js";
import { agentField, childCountField, parentField, requireAgent, toTransaction, type TransactionObject } from "./common.js";
import { Channel, type ChannelObject, channel, channels, toChannel, transactionChannel } from "./channels.js";
import { approval, approvals } from "./approvals.js";
import { checkPolicy, policies, policy, policyHistory, simulatePolicy } from "./policy.js";
import { agentList, budgetUse, indexerStatus, rejectionCounts, runs, webhookHealth } from "./overview.js";
import { receivedPayments, transaction, transactions } from "./transactions.js";
import { nodeEndpoint, paymentTree } from "./tree.js";

const CREDENTIAL_RECHECK_MS = 1_000;

/**
 * The account's feed events (of one agent when given), ending the stream when its credential is
 * no longer valid: a stream outlives its request, so a key revoked (or a session signed out)
 * since it opened ends it at the next event, at most one check a second.
 */
async function* accountEvents(context: ApiContext, agentIdArgument: string | null | undefined): AsyncGenerator<FeedEvent> {
  const agentId =
    agentIdArgument === null || agentIdArgument === undefined
      ? undefined
      : (await requireAgent(context, "agentId", agentIdArgument)).agent_id;
  const feed = context.deps.feed;
  if (feed === undefined) return;
  let checkedAt = Date.now();
  for await (const event of feed.subscribe(context.caller.accountId)) {
    if (agentId !== undefined && event.agentId !== agentId) continue;
    if (Date.now() - checkedAt >= CREDENTIAL_RECHECK_MS) {
      if (!(await credentialIsLive(context.deps.primary, context.caller))) {
        throw apiError("AUTHENTICATION_ERROR", "the API key or session of this stream is no longer valid");
      }
      checkedAt = Date.now();
    }
    yield event;
  }
}

async function* transactionRecorded(
  _: unknown,
  args: { agentId?: string | null },
  context: ApiContext,
): AsyncGenerator<{ transactionRecorded: TransactionObject }> {
  for await (const event of accountEvents(context, args.agentId)) {
    if (event.kind !== "transaction") continue;
    // The feed's NOTIFY comes from the primary: its row is read there, never from a lagging replica.
    const row = await getTransaction(context.deps.primary, context.caller.accountId, event.txHash);
    if (row !== null) yield { transactionRecorded: toTransaction(row) };
  }
}

/** The feed's names of the chain's channel events. */
const CHANNEL_UPDATE_EVENTS: Record<ChannelEventName, string> = {
  ChannelOpened: "opened",
  ChannelToppedUp: "toppedUp",
  ChannelSettled: "settled",
  ChannelCloseRequested: "closeRequested",
  ChannelClosed: "closed",
};

async function* channelUpdated(
  _: unknown,
  args: { agentId?: string | null },
  context: ApiContext,
): AsyncGenerator<{ channelUpdated: { event: string; txHash: string; slot: string; channel: ChannelObject } }> {
  for await (const event of accountEvents(context, args.agentId)) {
    if (event.kind !== "channel") continue;
    // Read fresh (not through the request's loaders: a stream's loaders would cache the first
    // answer), and from the primary, where the NOTIFY came from.
    const [row] = await channelsByAddresses(context.deps.primary, context.caller.accountId, [event.channel]);
    if (row === null || row === undefined) continue;
    yield {
      channelUpdated: {
        event: CHANNEL_UPDATE_EVENTS[event.event],
        txHash: event.txHash,
        slot: event.slot,
        channel: toChannel(row, context.deps.now?.() ?? new Date()),
      },
    };
  }
}

/** Every root field behind its scope check (api/query/field-scopes.ts). */
export const resolvers = withFieldScopes({
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
    simulatePolicy,
    policyHistory,
    channels,
    channel,
    approvals,
    approval,
    agentList,
    budgetUse,
    rejectionCounts,
    webhookHealth,
    indexerStatus,
    runs,
  },
  Subscription: {
    transactionRecorded: { subscribe: transactionRecorded },
    channelUpdated: { subscribe: channelUpdated },
  },
  Agent,
  Channel: { ...Channel, agent: agentField },
  Transaction: {
    channel: transactionChannel,
    agent: agentField,
    parent: parentField,
    childCount: childCountField,
    runRootTxHash: (parent: TransactionObject, _args: unknown, context: ApiContext) =>
      parent.txHash === null ? null : context.loaders.runRootByHash.load(parent.txHash),
  },
  ReceivedPayment: { agent: agentField },
  PaymentTreeNode: { agent: agentField, endpoint: nodeEndpoint },
});
