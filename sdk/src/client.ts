/**
 * The client (spec 4.6, 4.7): its options, the transport and MPP sessions every copy shares, and
 * the resources hung off it, laid out like stripe-node's (one module per resource):
 *
 * - `pay` (spec 4.7's seven steps): `pay/flow.ts` over one module per protocol in `pay/`;
 * - `wallet`, `policies`, `transactions`, `agents`: `resources/*.ts`.
 *
 * This module only builds and wires them. It re-exports their public types, so code importing
 * `Client`, `PaidResult` or `Transaction` from here keeps working.
 */
import { ChannelSessionPayer, type ChannelSessionOptions } from "./channel-sessions.js";
import { DomainRuleCache } from "./domain-rules.js";
import { MppSessions } from "./sessions.js";
import { type FetchFunction, Transport } from "./transport.js";
import { checkApprovalTimeout, type PayOptions } from "./pay/call.js";
import { PayFlow } from "./pay/flow.js";
import type { PaymentResult } from "./pay/result.js";
import type { PayShared, ProtocolPreference } from "./pay/scope.js";
import { AgentOperations } from "./resources/agents.js";
import { ApprovalOperations } from "./resources/approvals.js";
import { PolicyOperations } from "./resources/policies.js";
import { TransactionOperations, TX_HASH } from "./resources/transactions.js";
import { WalletOperations } from "./resources/wallet.js";

export { explorerUrl } from "./explorer-links.js";
export type { Usdc } from "./money.js";
import type { Usdc } from "./money.js";
export type { ChannelSessionOptions } from "./channel-sessions.js";
export type { PayOptions } from "./pay/call.js";
export type { PaidResult, PaymentResult, Protocol, UnpaidResult } from "./pay/result.js";
export type { ProtocolPreference } from "./pay/scope.js";
export type {
  AgentEntry,
  AgentListOptions,
  ArchiveOptions,
  CreateAgentOptions,
  InvocationResult,
  InvokeOptions,
} from "./resources/agents.js";
export type { Approval, ApprovalListOptions, ApprovalPage, ApprovalStatus, DecideOptions } from "./resources/approvals.js";
export type {
  ApprovalRuleFields,
  ApprovalRuleView,
  BacktestCount,
  BacktestOptions,
  BacktestOutcome,
  BacktestPayment,
  EndpointBudgetFields,
  Policy,
  PolicyBacktest,
  PolicyFields,
  PolicyVersion,
  RateLimitWindow,
} from "./resources/policies.js";
export type { Transaction, TransactionFilter } from "./resources/transactions.js";
export type { Wallet, WalletOperation } from "./resources/wallet.js";
export type { AgentOperations, ApprovalOperations, PolicyOperations, TransactionOperations, WalletOperations };

export interface ClientOptions {
  /** Must be a registered agent of the API key's account (spec 4.6). */
  agentId: string;
  apiKey: string;
  /** Default `http://127.0.0.1:4000` (a local gateway). */
  baseUrl?: string;
  /** Per request, in milliseconds (default 30000). */
  timeout?: number;
  /** Retries of transient failures before `PaymentError` (default 3). */
  maxRetries?: number;
  /**
   * Overrides the agent's policy preference when both protocols are offered. When omitted the
   * policy's own preference decides (whose default is `auto`: x402 first).
   */
  protocolPreference?: ProtocolPreference;
  fetch?: FetchFunction;
  /** Backoff tuning (defaults 500 ms doubling, at most 20 s per wait). */
  retryBaseDelayMs?: number;
  retryMaxDelayMs?: number;
  /**
   * RPC URL for explorer links of custom networks (a local ledger), used only when the gateway
   * has not indexed the transaction yet. See docs/sdk.md "Explorer links".
   */
  explorerRpcUrl?: string;
  /**
   * Pay MPP `session` challenges (method `solana`) from escrowed payment channels: one channel per
   * service origin, one voucher per request, no transaction per request (docs/sdk.md "Channel
   * sessions"). Off by default; `true` for the defaults (deposit 100 calls, at most 10 USDC).
   */
  channelSessions?: boolean | ChannelSessionOptions;
  /**
   * How long `pay` waits for a person to decide a payment the agent's policy held (docs/policy.md
   * "Approvals"), in milliseconds, long-polling the gateway; still undecided then, `pay` throws
   * `ApprovalRequiredError` and the same `idempotencyKey` resumes it. Default: `timeout` (30 s);
   * 0 does not wait. `pay`'s own `approvalTimeoutMs` overrides it per call.
   */
  approvalTimeoutMs?: number;
}

const DEFAULT_BASE_URL = "http://127.0.0.1:4000";
const PROTOCOL_PREFERENCES: readonly ProtocolPreference[] = ["auto", "x402", "mpp"];

/** What `withParent`'s copies share with the client they came from (the API key stays in the transport). */
interface Shared extends PayShared {
  options: Readonly<ClientOptions>;
}

export class Client {
  readonly agentId: string;
  readonly parentTxHash: string | undefined;
  readonly wallet: WalletOperations;
  readonly policies: PolicyOperations;
  readonly transactions: TransactionOperations;
  readonly agents: AgentOperations;
  /** Held payments: list and decide (admin, approver keys), read and wait for one (its agent's key too). */
  readonly approvals: ApprovalOperations;
  readonly #shared: Shared;
  readonly #payFlow: PayFlow;

  constructor(options: ClientOptions);
  /** @internal `withParent`'s copy sharing the transport. */
  constructor(options: ClientOptions, shared: Shared, parentTxHash: string);
  constructor(options: ClientOptions, shared?: Shared, parentTxHash?: string) {
    if (typeof options?.agentId !== "string" || !/^[\x21-\x7e]{1,128}$/.test(options.agentId)) {
      throw new TypeError("agentId must be the id of a registered agent (1-128 visible ASCII characters)");
    }
    if (options.protocolPreference !== undefined && !PROTOCOL_PREFERENCES.includes(options.protocolPreference)) {
      throw new TypeError("protocolPreference must be auto, x402 or mpp");
    }
    this.agentId = options.agentId;
    this.parentTxHash = parentTxHash;
    this.#shared = shared ?? Client.#newShared(options);
    const transport = this.#shared.transport;
    this.wallet = new WalletOperations(transport, `/v1/agents/${encodeURIComponent(this.agentId)}`);
    const domainRules = this.#shared.domainRules;
    this.policies = new PolicyOperations(transport, `/v1/policies/${encodeURIComponent(this.agentId)}`, () =>
      domainRules.forget(this.agentId),
    );
    this.transactions = new TransactionOperations(transport, this.agentId);
    this.approvals = new ApprovalOperations(transport);
    this.#payFlow = new PayFlow({
      agentId: this.agentId,
      parentTxHash,
      shared: this.#shared,
      wallet: this.wallet,
      approvals: this.approvals,
    });
    this.agents = new AgentOperations(transport, this.agentId, (payOptions, extras) => this.#payFlow.pay(payOptions, extras));
  }

  static #newShared(options: ClientOptions): Shared {
    const transport = new Transport({
      baseUrl: options.baseUrl ?? DEFAULT_BASE_URL,
      apiKey: options.apiKey,
      ...(options.timeout === undefined ? {} : { timeout: options.timeout }),
      ...(options.maxRetries === undefined ? {} : { maxRetries: options.maxRetries }),
      ...(options.retryBaseDelayMs === undefined ? {} : { retryBaseDelayMs: options.retryBaseDelayMs }),
      ...(options.retryMaxDelayMs === undefined ? {} : { retryMaxDelayMs: options.retryMaxDelayMs }),
      ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
    });
    const fetchFn: FetchFunction = options.fetch ?? ((input, init) => fetch(input, init));
    const channels = options.channelSessions;
    return {
      transport,
      sessions: new MppSessions(),
      options: { ...options, apiKey: "" },
      fetch: fetchFn,
      domainRules: new DomainRuleCache(transport),
      ...(channels === undefined || channels === false
        ? {}
        : { channelSessions: new ChannelSessionPayer(transport, fetchFn, channels === true ? {} : channels) }),
      ...(options.protocolPreference === undefined ? {} : { protocolPreference: options.protocolPreference }),
      ...(options.explorerRpcUrl === undefined ? {} : { explorerRpcUrl: options.explorerRpcUrl }),
      ...(options.approvalTimeoutMs === undefined ? {} : { approvalTimeoutMs: checkApprovalTimeout(options.approvalTimeoutMs) }),
    };
  }

  /** The gateway transport, for operations the client does not wrap (the cli uses it). */
  get transport(): Transport {
    return this.#shared.transport;
  }

  /**
   * A client for work done inside an invocation (`agents.invoke` on the other side): its payments
   * carry `parentTxHash` and count against that invocation's budget (else `BudgetExceededError`).
   * It shares this client's transport and session store, but reuses only MPP sessions negotiated
   * under that same parent, never the agent's own: the gateway binds a session to the parent of
   * the payment that established it, so a session charge counts against that parent's budget.
   */
  withParent(parentTxHash: string): Client {
    if (!TX_HASH.test(parentTxHash)) throw new TypeError("parentTxHash must be a base58 transaction hash");
    return new Client({ ...this.#shared.options, agentId: this.agentId }, this.#shared, parentTxHash);
  }

  toJSON(): Record<string, unknown> {
    return { agentId: this.agentId, parentTxHash: this.parentTxHash ?? null, transport: this.#shared.transport.toJSON() };
  }

  /**
   * Closes the channel sessions this client (agent, or agent under this parent) opened: each
   * service's payee presents its last voucher, then the gateway settles it and refunds the rest.
   */
  async closeChannelSessions(): Promise<Array<{ channel: string; settledCumulative: Usdc; refunded: Usdc; closeTx: string | null }>> {
    const channels = this.#shared.channelSessions;
    if (channels === undefined) return [];
    return channels.closeAll(this.#payFlow.channelScope);
  }

  /** Spec 4.7 `pay` (see `pay/flow.ts`). */
  async pay<T = unknown>(options: PayOptions): Promise<PaymentResult<T>> {
    return (await this.#payFlow.pay(options, {})) as PaymentResult<T>;
  }
}

/** The spec calls the class `client`. */
export { Client as client };

export function createClient(options: ClientOptions): Client {
  return new Client(options);
}
