/**
 * Who pays: the agent, the invocation it pays inside (if any), and what every copy of a client
 * (`withParent`) shares with its pay flow (one transport, one session store, the explorer facts
 * learned once). The pay flow reads them; only the client builds them.
 */
import type { ChannelSessionPayer } from "../channel-sessions.js";
import type { DomainRuleCache } from "../domain-rules.js";
import type { Usdc } from "../money.js";
import type { MppSessions } from "../sessions.js";
import type { FetchFunction, Transport } from "../transport.js";

export type ProtocolPreference = "auto" | "x402" | "mpp";

export interface PayShared {
  readonly transport: Transport;
  readonly sessions: MppSessions;
  /** Set when the client pays MPP `session` challenges from payment channels (`channelSessions` option). */
  readonly channelSessions?: ChannelSessionPayer;
  readonly fetch: FetchFunction;
  /** The agents' domain rules, checked before the first request to an endpoint leaves. */
  readonly domainRules: DomainRuleCache;
  /** The client's `protocolPreference` option; omitted lets the agent's policy decide. */
  readonly protocolPreference?: ProtocolPreference;
  readonly explorerRpcUrl?: string;
  /** The client's `approvalTimeoutMs` option; omitted waits as long as the client's `timeout`. */
  readonly approvalTimeoutMs?: number;
  networkName?: Promise<string | undefined>;
  /** The gateway's explorer link around a transaction hash, learned from its first `complete` answer. */
  explorerTemplate?: { prefix: string; suffix: string };
}

/** What the pay flow asks of the agent's wallet: its network (explorer links) and balance (a refused payment). */
export interface PayerWallet {
  get(): Promise<{ network: string }>;
  balance(): Promise<Usdc>;
}

/** What the pay flow asks of approvals: long-poll one until it is decided or the deadline passes. */
export interface ApprovalWaiter {
  waitForDecision(id: string, options: { timeoutMs: number; signal?: AbortSignal }): Promise<{ status: string }>;
}

export interface PayScope {
  agentId: string;
  parentTxHash: string | undefined;
  shared: PayShared;
  wallet: PayerWallet;
  approvals: ApprovalWaiter;
}

/**
 * Whose MPP sessions and channels a call may reuse: the agent's own, or, for a client scoped to an
 * invocation, the ones negotiated under that same parent (the gateway binds a session to the
 * parent of the payment that established it, so its charges count against that invocation's budget).
 */
export function sessionScope(scope: Pick<PayScope, "agentId" | "parentTxHash">): string {
  return scope.parentTxHash === undefined ? scope.agentId : `${scope.agentId}\u0000${scope.parentTxHash}`;
}
