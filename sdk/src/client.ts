/**
 * The client (spec 4.6, 4.7): `pay` against APIs answering 402 over x402 or MPP, and the wallet,
 * policy, transaction and agent operations of the gateway's REST /v1 API.
 *
 * `pay` never holds a key: the gateway checks the spend policy, reserves the amount and signs with
 * the agent's custodial wallet (`POST /v1/agents/{id}/payments/authorize`); the client presents
 * the signed payment to the paid API and closes the reservation with the ledger transaction.
 */
import { randomUUID } from "node:crypto";
import { callApi, type ApiAnswer, ApiUnreachableError, type ApiRequest, headersObject } from "./api-call.js";
import { errorFromProblem, InsufficientFundsError, PaymentError, PaymentProtocolError, ServiceError } from "./errors.js";
import { decimalToUnits, moneyToUnits, unitsToUsdc, usdcToUnits } from "./money.js";
import { MAX_RATE_LIMIT_CALLS } from "./cli/rate-limit.js";
import { type MppRequest, type PaymentOffer, readPaymentOffer, type X402Requirement } from "./payment-required.js";
import { readMppReceipt, readX402Receipt, X_MPP_ERROR, X_MPP_SESSION, X_PAYMENT_ERROR } from "./receipts.js";
import { type MppSession, MppSessions } from "./sessions.js";
import { type FetchFunction, type QueryValue, Transport } from "./transport.js";

export type Protocol = "x402" | "mpp";
export type ProtocolPreference = "auto" | "x402" | "mpp";
export type Usdc = { usdc: number };

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
}

export interface PayOptions {
  endpoint: string;
  method?: string;
  headers?: Record<string, string>;
  /** Sent as JSON (for POST/PUT/PATCH); a string is sent as it is. */
  body?: unknown;
  /** Makes the payment authorization idempotent across calls (a retried `pay` reserves once). */
  idempotencyKey?: string;
  signal?: AbortSignal;
}

/** Spec 2.3: the paid API's answer and the payment that bought it. */
export interface PaidResult<T = unknown> {
  paid: true;
  status: number;
  protocol: Protocol;
  amountPaid: Usdc;
  txHash: string;
  solanaExplorer: string;
  data: T;
  headers: Record<string, string>;
  sessionId?: string;
}

/** The endpoint did not ask for payment (no 402): its answer as it came. */
export interface UnpaidResult<T = unknown> {
  paid: false;
  status: number;
  data: T;
  headers: Record<string, string>;
}

export type PaymentResult<T = unknown> = PaidResult<T> | UnpaidResult<T>;

export interface Wallet {
  agentId: string;
  address: string;
  balance: Usdc;
  network: string;
}

export interface WalletOperation {
  /** Always present: a pending (202) answer names its operation, to follow it up with `wallet.operation`. */
  operationId: string;
  kind: "fund" | "withdraw";
  agentId: string;
  amount: Usdc;
  /** `failed` only from `wallet.operation` (a POST answers a failure as PaymentError). */
  status: "confirmed" | "pending" | "failed" | string;
  txHash: string | null;
  /** From `wallet.operation`: the withdrawal's destination. */
  to?: string;
  /** From `wallet.operation`: why a failed operation failed. */
  error?: string | null;
}

export type RateLimitWindow = "1m" | "5m" | "15m" | "1h" | "24h";

/** Spec 2.1 fields for `policies.set`: omitted keep their value, `null` removes the limit. */
export interface PolicyFields {
  dailyBudget?: Usdc | null;
  perCallLimit?: Usdc | null;
  allowedDomains?: string[] | null;
  blockedDomains?: string[] | null;
  rateLimit?: { calls: number; window: RateLimitWindow } | null;
  protocolPreference?: ProtocolPreference;
}

export interface Policy {
  agentId: string;
  dailyBudget: Usdc | null;
  perCallLimit: Usdc | null;
  allowedDomains?: string[] | null;
  blockedDomains: string[];
  rateLimit: { calls: number; window: RateLimitWindow } | null;
  protocolPreference: ProtocolPreference;
  usedToday: Usdc;
  [more: string]: unknown;
}

export interface Transaction {
  txHash: string | null;
  agentId: string;
  protocol: Protocol;
  amountPaid: Usdc;
  endpoint: string;
  policyCheck: string;
  parentTxHash: string | null;
  solanaExplorer: string | null;
  timestamp: string;
  depth: number;
  status: string;
  [more: string]: unknown;
}

export interface TransactionFilter {
  limit?: number;
  protocol?: Protocol;
  domain?: string;
  /** A window such as `24h`, or an ISO 8601 time. */
  since?: string;
  status?: "confirmed" | "finalized" | "rejected";
  /** Another agent of the account; default this client's agent. */
  agentId?: string;
}

export interface AgentEntry {
  agentId: string;
  /** Spec 2.5; `{ usdc: 0 }` for a wallet never funded. Null only from a gateway that reads no chain. */
  balance: Usdc | null;
  /** ISO time the agent was archived (`agents.archive`); null while active. */
  archivedAt?: string | null;
  [more: string]: unknown;
}

export interface AgentListOptions {
  /** Also list archived agents (left out by default). */
  includeArchived?: boolean;
}

export interface ArchiveOptions {
  /** Archive even while the wallet holds funds or payments are open (the funds stay withdrawable). */
  force?: boolean;
}

export interface InvokeOptions {
  agentEndpoint: string;
  task: unknown;
  budget: Usdc;
  idempotencyKey?: string;
  signal?: AbortSignal;
}

/** Spec 2.6. */
export interface InvocationResult<T = unknown> {
  output: T;
  totalCost: Usdc;
  paymentChain: string[];
}

interface X402Authorization {
  reservationId: string;
  protocol: "x402";
  amount: Usdc;
  headers: Record<string, string>;
}

interface MppAuthorization {
  reservationId: string;
  protocol: "mpp";
  amount: Usdc;
  method: string;
  paymentEndpoint: string;
  submission: unknown;
}

type Authorization = X402Authorization | MppAuthorization;

interface PayContext {
  request: ApiRequest;
  endpoint: string;
  origin: string;
  signal: AbortSignal | undefined;
}

interface PayExtras {
  invocationBudget?: Usdc;
  protocolPreference?: ProtocolPreference;
}

const DEFAULT_BASE_URL = "http://127.0.0.1:4000";
const PROTOCOL_PREFERENCES: readonly ProtocolPreference[] = ["auto", "x402", "mpp"];
const TX_HASH = /^[1-9A-HJ-NP-Za-km-z]{32,128}$/;
const METHOD = /^[A-Z]{1,16}$/;

interface Shared {
  transport: Transport;
  sessions: MppSessions;
  options: Readonly<ClientOptions>;
  fetch: FetchFunction;
  networkName?: Promise<string | undefined>;
  /** The gateway's explorer link around a transaction hash, learned from its first `complete` answer. */
  explorerTemplate?: { prefix: string; suffix: string };
}

export class Client {
  readonly agentId: string;
  readonly parentTxHash: string | undefined;
  readonly wallet: WalletOperations;
  readonly policies: PolicyOperations;
  readonly transactions: TransactionOperations;
  readonly agents: AgentOperations;
  readonly #shared: Shared;

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
    this.#shared = shared ?? {
      transport: new Transport({
        baseUrl: options.baseUrl ?? DEFAULT_BASE_URL,
        apiKey: options.apiKey,
        ...(options.timeout === undefined ? {} : { timeout: options.timeout }),
        ...(options.maxRetries === undefined ? {} : { maxRetries: options.maxRetries }),
        ...(options.retryBaseDelayMs === undefined ? {} : { retryBaseDelayMs: options.retryBaseDelayMs }),
        ...(options.retryMaxDelayMs === undefined ? {} : { retryMaxDelayMs: options.retryMaxDelayMs }),
        ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
      }),
      sessions: new MppSessions(),
      options: { ...options, apiKey: "" },
      fetch: options.fetch ?? ((input, init) => fetch(input, init)),
    };
    const agentPath = `/v1/agents/${encodeURIComponent(this.agentId)}`;
    this.wallet = new WalletOperations(this.#shared.transport, agentPath);
    this.policies = new PolicyOperations(this.#shared.transport, `/v1/policies/${encodeURIComponent(this.agentId)}`);
    this.transactions = new TransactionOperations(this.#shared.transport, this.agentId);
    this.agents = new AgentOperations(this.#shared.transport, (options) => this.#invoke(options));
  }

  /** The gateway transport, for operations the client does not wrap (the cli uses it). */
  get transport(): Transport {
    return this.#shared.transport;
  }

  /**
   * A client for work done inside an invocation (`agents.invoke` on the other side): its payments
   * carry `parentTxHash`, count against that invocation's budget (else `BudgetExceededError`) and
   * never reuse an MPP session (a session charge could not carry the parent).
   */
  /**
   * Whose MPP sessions a call may reuse: the agent's own, or, for a client scoped to an invocation,
   * the ones negotiated under that same parent (the gateway binds a session to the parent of the
   * payment that established it, so its charges count against that invocation's budget).
   */
  get #sessionScope(): string {
    return this.parentTxHash === undefined ? this.agentId : `${this.agentId}\u0000${this.parentTxHash}`;
  }

  withParent(parentTxHash: string): Client {
    if (!TX_HASH.test(parentTxHash)) throw new TypeError("parentTxHash must be a base58 transaction hash");
    return new Client({ ...this.#shared.options, agentId: this.agentId }, this.#shared, parentTxHash);
  }

  toJSON(): Record<string, unknown> {
    return { agentId: this.agentId, parentTxHash: this.parentTxHash ?? null, transport: this.#shared.transport.toJSON() };
  }

  /** Spec 4.7 `pay`. */
  async pay<T = unknown>(options: PayOptions): Promise<PaymentResult<T>> {
    return (await this.#pay(options, {})) as PaymentResult<T>;
  }

  async #pay(options: PayOptions, extras: PayExtras): Promise<PaymentResult> {
    const context = this.#payContext(options);
    const sessions = this.#shared.sessions;
    const reusable = extras.invocationBudget === undefined ? sessions.get(this.#sessionScope, context.origin) : undefined;

    let first: ApiAnswer;
    if (reusable !== undefined) {
      // Spec 4.4 step 5: a known session skips negotiation; a 402 means it is no longer valid.
      first = await this.#callApi(context, { [X_MPP_SESSION]: reusable.token }, false);
      if (first.status !== 402) {
        const receipt = readMppReceipt(first.headers, first.data);
        if (receipt !== undefined) return this.#sessionPaid(context, first, reusable, receipt);
        if (first.headers.get(X_MPP_ERROR) !== null) {
          // The service refused the session without a new 402 (e.g. a charge the policy
          // refused, answered as a problem with `errorClass`): the token is of no further use.
          sessions.forget(this.#sessionScope, context.origin);
          if (isRecord(first.data) && typeof first.data.errorClass === "string") throw errorFromProblem(first.status, first.data);
        }
        return unpaid(first);
      }
    } else {
      first = await this.#callApi(context, {}, false);
      if (first.status !== 402) return unpaid(first);
    }

    let offer: PaymentOffer;
    try {
      offer = readPaymentOffer(first.data, context.endpoint);
    } catch (error) {
      if (reusable !== undefined) sessions.forget(this.#sessionScope, context.origin);
      throw error;
    }
    // A 402 that offers MPP refuses the session; one that offers only x402 comes from an
    // endpoint of the same origin that does not take MPP at all, and says nothing about the
    // session: keep it for the origin's MPP endpoints (otherwise every x402 call on a mixed origin
    // would cost the next MPP call a whole new negotiation and settlement).
    if (reusable !== undefined && offer.mpp !== undefined) sessions.forget(this.#sessionScope, context.origin);
    const authorization = await this.#authorize(context, offer, options.idempotencyKey, extras);
    if (authorization.protocol === "x402") return this.#payX402(context, authorization);
    if (authorization.protocol === "mpp" && offer.mpp !== undefined) return this.#payMpp(context, authorization, offer.mpp);
    throw new PaymentProtocolError(`the gateway chose ${String((authorization as { protocol?: unknown }).protocol)}, which ${context.endpoint} did not offer`, context.endpoint);
  }

  #payContext(options: PayOptions): PayContext {
    if (typeof options?.endpoint !== "string") throw new TypeError("endpoint is required");
    let url: URL;
    try {
      url = new URL(options.endpoint);
    } catch {
      throw new TypeError(`endpoint is not a URL: ${options.endpoint}`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new TypeError(`endpoint must be http(s): ${options.endpoint}`);
    const method = (options.method ?? "GET").toUpperCase();
    if (!METHOD.test(method)) throw new TypeError(`method is not an HTTP method: ${options.method}`);
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(options.headers ?? {})) headers[name.toLowerCase()] = String(value);
    let body: string | undefined;
    if (options.body !== undefined && options.body !== null) {
      if (method === "GET" || method === "HEAD") throw new TypeError(`a ${method} request has no body`);
      body = typeof options.body === "string" ? options.body : JSON.stringify(options.body);
      headers["content-type"] ??= "application/json";
    }
    headers.accept ??= "application/json";
    const request: ApiRequest = { url: url.toString(), method, headers, ...(body === undefined ? {} : { body }) };
    return { request, endpoint: url.toString(), origin: url.origin, signal: options.signal };
  }

  async #callApi(context: PayContext, extraHeaders: Record<string, string>, paid: boolean): Promise<ApiAnswer> {
    const transport = this.#shared.transport;
    const request = { ...context.request, headers: { ...context.request.headers, ...extraHeaders } };
    try {
      return await callApi(request, {
        fetch: this.#shared.fetch,
        timeoutMs: transport.timeout,
        retry: transport.retryOptions,
        retryServerErrors: paid,
        signal: context.signal,
      });
    } catch (error) {
      if (error instanceof ApiUnreachableError) throw new PaymentError(error.message, { cause: error });
      throw error;
    }
  }

  async #authorize(context: PayContext, offer: PaymentOffer, idempotencyKey: string | undefined, extras: PayExtras): Promise<Authorization> {
    const preference = extras.protocolPreference ?? this.#shared.options.protocolPreference;
    const body: Record<string, unknown> = {
      endpoint: context.endpoint,
      ...(offer.x402 === undefined ? {} : { x402: offer.x402 }),
      ...(offer.mpp === undefined ? {} : { mpp: offer.mpp }),
      ...(preference === undefined ? {} : { protocolPreference: preference }),
      ...(this.parentTxHash === undefined ? {} : { parentTxHash: this.parentTxHash }),
      ...(extras.invocationBudget === undefined ? {} : { invocationBudget: extras.invocationBudget }),
    };
    const answer = await this.#shared.transport.request<Record<string, unknown>>("POST", `/v1/agents/${encodeURIComponent(this.agentId)}/payments/authorize`, {
      body,
      ...(idempotencyKey === undefined ? {} : { idempotencyKey }),
      ...(context.signal === undefined ? {} : { signal: context.signal }),
    });
    return parseAuthorization(answer, context.endpoint);
  }

  async #payX402(context: PayContext, authorization: X402Authorization): Promise<PaidResult> {
    let paid: ApiAnswer;
    try {
      paid = await this.#callApi(context, authorization.headers, true);
    } catch (error) {
      throw await this.#failed(authorization, context, `the paid request to ${context.endpoint} got no answer`, error);
    }
    const receipt = readX402Receipt(paid.headers);
    if (receipt === undefined || !receipt.success) {
      const refusal = paid.headers.get(X_PAYMENT_ERROR);
      throw await this.#failed(
        authorization,
        context,
        `${context.endpoint} did not accept the payment: ${paid.status}${refusal === null ? " without a payment receipt" : ` ${refusal}`}`,
      );
    }
    const explorer = await this.#complete(authorization.reservationId, receipt.transaction);
    return {
      paid: true,
      status: paid.status,
      protocol: "x402",
      amountPaid: authorization.amount,
      txHash: receipt.transaction,
      solanaExplorer: explorer ?? (await this.#explorer(receipt.transaction, receipt.network)),
      data: paid.data,
      headers: headersObject(paid.headers),
    };
  }

  async #payMpp(context: PayContext, authorization: MppAuthorization, request: MppRequest): Promise<PaidResult> {
    let confirmation: ApiAnswer;
    try {
      confirmation = await callApi(
        { url: authorization.paymentEndpoint, method: "POST", headers: { "content-type": "application/json", accept: "application/json" }, body: JSON.stringify(authorization.submission) },
        {
          fetch: this.#shared.fetch,
          timeoutMs: this.#shared.transport.timeout,
          retry: this.#shared.transport.retryOptions,
          retryServerErrors: true,
          signal: context.signal,
        },
      );
    } catch (error) {
      throw await this.#failed(authorization, context, `the MPP payment endpoint ${authorization.paymentEndpoint} got no answer`, error);
    }
    const confirmed = isRecord(confirmation.data) ? confirmation.data : {};
    const txHash = typeof confirmed.txHash === "string" ? confirmed.txHash : undefined;
    const token = confirmation.headers.get(X_MPP_SESSION);
    if (confirmation.status < 200 || confirmation.status > 299 || txHash === undefined) {
      const refusal = confirmation.headers.get(X_MPP_ERROR) ?? (typeof confirmed.error === "string" ? confirmed.error : null);
      throw await this.#failed(authorization, context, `the MPP payment was not confirmed: ${confirmation.status}${refusal === null ? "" : ` ${refusal}`}`);
    }
    // The money moved with the confirmation: close the reservation before using the session.
    const explorer = await this.#complete(authorization.reservationId, txHash);
    if (token === null) throw new PaymentError(`the MPP payment ${txHash} was confirmed without an ${X_MPP_SESSION} token`);

    const paid = await this.#callApi(context, { [X_MPP_SESSION]: token }, true);
    if (paid.status === 402) {
      const refusal = paid.headers.get(X_MPP_ERROR);
      throw new PaymentError(`paid ${txHash}, but ${context.endpoint} refused the new session${refusal === null ? "" : `: ${refusal}`}`);
    }
    const receipt = readMppReceipt(paid.headers, paid.data);
    const sessionId = receipt?.sessionId ?? (typeof confirmed.sessionId === "string" ? confirmed.sessionId : undefined);
    if (request.sessionSupported) {
      const amountUnits = usdcToUnits(authorization.amount.usdc);
      this.#shared.sessions.put(this.#sessionScope, context.origin, {
        token: paid.headers.get(X_MPP_SESSION) ?? token,
        amountUnits,
        ...(sessionId === undefined ? {} : { sessionId }),
      });
    }
    return {
      paid: true,
      status: paid.status,
      protocol: "mpp",
      amountPaid: authorization.amount,
      txHash,
      solanaExplorer: explorer ?? (await this.#explorer(txHash)),
      data: paid.data,
      headers: headersObject(paid.headers),
      ...(sessionId === undefined ? {} : { sessionId }),
    };
  }

  /** A call paid by an existing MPP session (no 402, no authorization round trip). */
  async #sessionPaid(context: PayContext, answer: ApiAnswer, session: MppSession, receipt: NonNullable<ReturnType<typeof readMppReceipt>>): Promise<PaidResult> {
    const refreshed = answer.headers.get(X_MPP_SESSION);
    const sessionId = receipt.sessionId ?? session.sessionId;
    if (refreshed !== null && refreshed !== session.token) {
      this.#shared.sessions.put(this.#sessionScope, context.origin, { ...session, token: refreshed, ...(sessionId === undefined ? {} : { sessionId }) });
    }
    let amountUnits = session.amountUnits;
    if (receipt.charged === false) amountUnits = 0n;
    else if (receipt.amount !== undefined) amountUnits = decimalToUnits(receipt.amount.value);
    const txHash = receipt.txHash!;
    return {
      paid: true,
      status: answer.status,
      protocol: "mpp",
      amountPaid: { usdc: unitsToUsdc(amountUnits) },
      txHash,
      solanaExplorer: await this.#explorer(txHash),
      data: answer.data,
      headers: headersObject(answer.headers),
      ...(sessionId === undefined ? {} : { sessionId }),
    };
  }

  /**
   * Step 6: the payment landed. The gateway's facilitator usually closed the reservation itself
   * already (200 or 409 CONFLICT "settled" both mean done). Any other failure here is not thrown:
   * the caller has paid and holds the answer, and throwing would invite paying again; the
   * gateway closes linked reservations on settlement and releases unused ones when they expire.
   */
  /** Closes the reservation; answers the transaction's explorer link when the gateway gives one. */
  async #complete(reservationId: string, txHash: string): Promise<string | undefined> {
    try {
      const answer = await this.#shared.transport.request<{ solanaExplorer?: unknown }>(
        "POST",
        `/v1/agents/${encodeURIComponent(this.agentId)}/payments/${encodeURIComponent(reservationId)}/complete`,
        { body: { txHash } },
      );
      const link = answer?.solanaExplorer;
      if (typeof link !== "string" || !link.includes(txHash)) return undefined;
      const at = link.indexOf(txHash);
      this.#shared.explorerTemplate ??= { prefix: link.slice(0, at), suffix: link.slice(at + txHash.length) };
      return link;
    } catch {
      // Already closed (409 CONFLICT: the gateway closed it itself) or unreachable: the payment
      // happened either way, and the caller holds the answer it paid for. Never thrown.
      return undefined;
    }
  }

  /**
   * The paid request failed definitively: release the reservation and build the PaymentError. If
   * the gateway answers that the reservation was settled meanwhile, the money moved although the
   * answer was lost; the error says so (do not pay again without checking transactions.list).
   */
  async #failed(authorization: Authorization, context: PayContext, message: string, cause?: unknown): Promise<PaymentError | InsufficientFundsError> {
    try {
      await this.#shared.transport.request("POST", `/v1/agents/${encodeURIComponent(this.agentId)}/payments/${encodeURIComponent(authorization.reservationId)}/release`, {
        body: {},
      });
    } catch (error) {
      if (error instanceof ServiceError && error.code === "CONFLICT" && /being settled/.test(error.message)) {
        // The payee already handed the payment to the facilitator: it may still land (and counts
        // against the policy meanwhile). Not paid again here; transactions.list shows the outcome.
        return new PaymentError(`${message}; reservation ${authorization.reservationId} is being settled: the payment may still land`, {
          cause: cause ?? error,
          code: "PAYMENT_OUTCOME_UNKNOWN",
        });
      }
      if (error instanceof ServiceError && error.code === "CONFLICT" && /settled/.test(error.message)) {
        return new PaymentError(`${message}; the gateway reports reservation ${authorization.reservationId} as settled: the payment was made, the answer was lost`, {
          cause: cause ?? error,
          code: "PAYMENT_SETTLED_ANSWER_LOST",
        });
      }
    }
    // The gateway does not hold funds back at authorization; a settlement the ledger refused for
    // want of funds shows here as a wallet balance below the price (spec 7 InsufficientFundsError).
    const balance = await this.wallet.balance().catch(() => undefined);
    if (balance !== undefined && usdcToUnits(balance.usdc) < usdcToUnits(authorization.amount.usdc)) {
      return new InsufficientFundsError(
        `insufficient funds: agent ${this.agentId} needs ${authorization.amount.usdc} usdc for ${context.endpoint}, balance is ${balance.usdc} usdc`,
        balance,
        { code: "INSUFFICIENT_FUNDS", ...(cause === undefined ? {} : { cause }) },
      );
    }
    return new PaymentError(message, cause === undefined ? {} : { cause });
  }

  async #explorer(txHash: string, network?: string): Promise<string> {
    const template = this.#shared.explorerTemplate;
    if (template !== undefined) return `${template.prefix}${encodeURIComponent(txHash)}${template.suffix}`;
    try {
      const transaction = await this.#shared.transport.request<{ solanaExplorer?: unknown }>("GET", `/v1/transactions/${encodeURIComponent(txHash)}`);
      if (typeof transaction?.solanaExplorer === "string" && transaction.solanaExplorer.length > 0) return transaction.solanaExplorer;
    } catch {
      // Not indexed yet (404) or unreachable: build the link from the network instead.
    }
    return explorerUrl(txHash, network ?? (await this.#networkName()), this.#shared.options.explorerRpcUrl);
  }

  #networkName(): Promise<string | undefined> {
    this.#shared.networkName ??= this.wallet.get().then(
      (wallet) => wallet.network,
      () => undefined,
    );
    return this.#shared.networkName;
  }

  async #invoke(options: InvokeOptions): Promise<InvocationResult> {
    const budgetUnits = moneyToUnits(options.budget, "budget");
    if (budgetUnits === 0n) throw new TypeError("budget must be positive");
    const result = await this.#pay(
      {
        endpoint: options.agentEndpoint,
        method: "POST",
        body: options.task ?? {},
        ...(options.idempotencyKey === undefined ? {} : { idempotencyKey: options.idempotencyKey }),
        ...(options.signal === undefined ? {} : { signal: options.signal }),
      },
      { invocationBudget: { usdc: unitsToUsdc(budgetUnits) }, protocolPreference: "x402" },
    );
    if (!result.paid) return { output: result.data, totalCost: { usdc: 0 }, paymentChain: [] };
    const paidUnits = usdcToUnits(result.amountPaid.usdc);
    try {
      const invocation = await this.#shared.transport.request<{ spent?: Usdc; payments?: unknown }>(
        "GET",
        `/v1/agents/${encodeURIComponent(this.agentId)}/invocations/${encodeURIComponent(result.txHash)}`,
      );
      const spentUnits = invocation.spent === undefined ? 0n : moneyToUnits(invocation.spent, "spent");
      const payments = Array.isArray(invocation.payments) ? invocation.payments.filter((hash): hash is string => typeof hash === "string") : [];
      return { output: result.data, totalCost: { usdc: unitsToUsdc(paidUnits + spentUnits) }, paymentChain: [result.txHash, ...payments] };
    } catch (error) {
      // No invocation under this payment (the payee is not an agent of this gateway): the
      // payment itself is the whole cost.
      if (error instanceof ServiceError && error.status === 404) {
        return { output: result.data, totalCost: result.amountPaid, paymentChain: [result.txHash] };
      }
      throw error;
    }
  }
}

/** The spec calls the class `client`. */
export { Client as client };

export function createClient(options: ClientOptions): Client {
  return new Client(options);
}

class WalletOperations {
  constructor(
    private readonly transport: Transport,
    private readonly agentPath: string,
  ) {}

  get(): Promise<Wallet> {
    return this.transport.request<Wallet>("GET", `${this.agentPath}/wallet`);
  }

  balance(): Promise<Usdc> {
    return this.transport.request<Usdc>("GET", `${this.agentPath}/wallet/balance`);
  }

  /**
   * One operation as it stands now (a pending one is looked up on the chain by the gateway): how
   * a `pending` answer is followed up.
   */
  operation(operationId: string): Promise<WalletOperation> {
    if (typeof operationId !== "string" || !/^[1-9][0-9]{0,18}$/.test(operationId)) throw new TypeError("operationId must be a wallet operation id");
    return this.transport.request<WalletOperation>("GET", `${this.agentPath}/wallet/operations/${operationId}`);
  }

  /** Tops the wallet up from the account's funding source (spec 4.7). */
  async fund(amount: Usdc, options: { idempotencyKey?: string } = {}): Promise<WalletOperation> {
    const usdc = positiveUsdc(amount);
    return this.perform(`${this.agentPath}/wallet/fund`, { usdc }, options.idempotencyKey);
  }

  async withdraw(input: { to: string; usdc: number }, options: { idempotencyKey?: string } = {}): Promise<WalletOperation> {
    if (typeof input?.to !== "string" || !/^[1-9A-HJ-NP-Za-km-z]{32,44}$/.test(input.to)) throw new TypeError("to must be a base58 ledger address");
    const usdc = positiveUsdc({ usdc: input.usdc });
    return this.perform(`${this.agentPath}/wallet/withdraw`, { to: input.to, usdc }, options.idempotencyKey);
  }

  /**
   * A pending answer (202: sent to the ledger, not yet confirmed) is asked again with the same
   * key, which resumes the same operation, a bounded number of times.
   */
  private async perform(path: string, body: Record<string, unknown>, idempotencyKey: string | undefined): Promise<WalletOperation> {
    const key = idempotencyKey ?? randomUUID();
    let result = await this.transport.request<WalletOperation>("POST", path, { body, idempotencyKey: key });
    for (let attempt = 0; result.status === "pending" && attempt < this.transport.maxRetries; attempt += 1) {
      await new Promise((resolve) => setTimeout(resolve, 500 * 2 ** attempt));
      result = await this.transport.request<WalletOperation>("POST", path, { body, idempotencyKey: key });
    }
    return result;
  }
}

class PolicyOperations {
  constructor(
    private readonly transport: Transport,
    private readonly path: string,
  ) {}

  /** Spec 4.1: omitted fields keep their current values; `null` removes a limit. */
  async set(fields: PolicyFields): Promise<Policy> {
    if (typeof fields !== "object" || fields === null || Array.isArray(fields)) throw new TypeError("policies.set takes an object of spec 2.1 fields");
    for (const name of ["dailyBudget", "perCallLimit"] as const) {
      const value: Usdc | null | undefined = fields[name];
      if (value !== undefined && value !== null) moneyToUnits(value, name);
    }
    // A count: a fraction, NaN or 1e21 (which JSON writes as "1e+21") would be sent as a number
    // the gateway refuses; say so here, before the request.
    const calls: unknown = fields.rateLimit?.calls;
    if (fields.rateLimit != null && (!Number.isSafeInteger(calls) || (calls as number) < 1 || (calls as number) > MAX_RATE_LIMIT_CALLS)) {
      throw new TypeError(`rateLimit.calls must be an integer from 1 to ${MAX_RATE_LIMIT_CALLS}, got ${String(calls)}`);
    }
    return this.transport.request<Policy>("PUT", this.path, { body: fields });
  }

  get(): Promise<Policy> {
    return this.transport.request<Policy>("GET", this.path);
  }

  /** Removes every spend policy of the agent. */
  async clear(): Promise<void> {
    await this.transport.request<void>("DELETE", this.path);
  }
}

class TransactionOperations {
  constructor(
    private readonly transport: Transport,
    private readonly agentId: string,
  ) {}

  async list(filter: TransactionFilter = {}): Promise<Transaction[]> {
    if (filter.limit !== undefined && (!Number.isSafeInteger(filter.limit) || filter.limit < 1)) throw new TypeError("limit must be a positive integer");
    const query: Record<string, QueryValue> = {
      agentId: filter.agentId ?? this.agentId,
      limit: filter.limit,
      protocol: filter.protocol,
      domain: filter.domain,
      since: filter.since,
      status: filter.status,
    };
    const page = await this.transport.request<{ transactions: Transaction[] }>("GET", "/v1/transactions", { query });
    return page.transactions;
  }

  async get(txHash: string): Promise<Transaction> {
    return this.transport.request<Transaction>("GET", `/v1/transactions/${encodeURIComponent(checkTxHash(txHash))}`);
  }

  /** The payment tree under `txHash`, each transaction with its `depth` (root 0). */
  async getChain(txHash: string): Promise<Transaction[]> {
    const chain = await this.transport.request<{ transactions: Transaction[] }>("GET", `/v1/transactions/${encodeURIComponent(checkTxHash(txHash))}/chain`);
    return chain.transactions;
  }
}

/** Page size `agents.list` asks for (the gateway's maximum). */
const AGENTS_PAGE = 500;

class AgentOperations {
  constructor(
    private readonly transport: Transport,
    private readonly invoker: (options: InvokeOptions) => Promise<InvocationResult>,
  ) {}

  /** Spec 4.7 `agents.list`: every agent of the account, following the gateway's pages. */
  async list(options: AgentListOptions = {}): Promise<AgentEntry[]> {
    if (options.includeArchived !== undefined && typeof options.includeArchived !== "boolean") throw new TypeError("includeArchived must be a boolean");
    const agents: AgentEntry[] = [];
    let after: string | undefined;
    for (;;) {
      const query: Record<string, QueryValue> = { limit: AGENTS_PAGE, after, includeArchived: options.includeArchived === true ? "true" : undefined };
      const page = await this.transport.request<{ agents: AgentEntry[]; nextCursor?: string | null }>("GET", "/v1/agents", { query });
      agents.push(...page.agents);
      // A cursor that does not move would loop forever: only a later agent id continues.
      if (typeof page.nextCursor !== "string" || page.nextCursor === after) return agents;
      after = page.nextCursor;
    }
  }

  /**
   * Archives an agent (`DELETE /v1/agents/{agentId}`): it can no longer pay or be funded, leaves
   * `list()` and keeps its history. Refused (`ServiceError` code `AGENT_NOT_EMPTY`) while its wallet
   * holds funds or payments are open, unless `force`. Archiving an archived agent answers it again.
   */
  async archive(agentId: string, options: ArchiveOptions = {}): Promise<AgentEntry> {
    if (typeof agentId !== "string" || !/^[\x21-\x7e]{1,128}$/.test(agentId)) throw new TypeError("agentId must be an agent id (1-128 visible ASCII characters)");
    if (options.force !== undefined && typeof options.force !== "boolean") throw new TypeError("force must be a boolean");
    const query: Record<string, QueryValue> = { force: options.force === true ? "true" : undefined };
    return this.transport.request<AgentEntry>("DELETE", `/v1/agents/${encodeURIComponent(agentId)}`, { query });
  }

  /** Spec 4.7 `agents.invoke`: pays the sub-agent's endpoint with `task`, under a hard `budget`. */
  invoke<T = unknown>(options: InvokeOptions): Promise<InvocationResult<T>> {
    return this.invoker(options) as Promise<InvocationResult<T>>;
  }
}

function unpaid(answer: ApiAnswer): UnpaidResult {
  return { paid: false, status: answer.status, data: answer.data, headers: headersObject(answer.headers) };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function positiveUsdc(amount: Usdc): number {
  const units = moneyToUnits(amount);
  if (units === 0n) throw new TypeError("usdc must be positive");
  return amount.usdc;
}

function checkTxHash(txHash: string): string {
  if (typeof txHash !== "string" || !TX_HASH.test(txHash)) throw new TypeError("txHash must be a base58 transaction hash");
  return txHash;
}

function parseAuthorization(answer: Record<string, unknown>, endpoint: string): Authorization {
  const reservationId = answer.reservationId;
  const amount = answer.amount;
  if ((typeof reservationId !== "string" && typeof reservationId !== "number") || !isRecord(amount) || typeof amount.usdc !== "number") {
    throw new ServiceError("the gateway's payment authorization is missing reservationId or amount", { detail: answer });
  }
  const common = { reservationId: String(reservationId), amount: { usdc: amount.usdc } };
  if (answer.protocol === "x402" && isRecord(answer.headers)) {
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(answer.headers)) if (typeof value === "string") headers[name] = value;
    return { ...common, protocol: "x402", headers };
  }
  if (answer.protocol === "mpp" && typeof answer.paymentEndpoint === "string" && answer.submission !== undefined) {
    return { ...common, protocol: "mpp", method: String(answer.method), paymentEndpoint: answer.paymentEndpoint, submission: answer.submission };
  }
  throw new PaymentProtocolError(`the gateway's payment authorization for ${endpoint} names no usable protocol`, endpoint);
}

/**
 * `https://explorer.solana.com/tx/<txHash>` with the cluster of the network: none for mainnet,
 * `?cluster=devnet|testnet`, else a custom cluster (with `customUrl` when the RPC URL is known).
 */
export function explorerUrl(txHash: string, network: string | undefined, rpcUrl?: string): string {
  const base = `https://explorer.solana.com/tx/${encodeURIComponent(txHash)}`;
  if (network === "solana-mainnet" || network === "solana-mainnet-beta") return base;
  if (network === "solana-devnet") return `${base}?cluster=devnet`;
  if (network === "solana-testnet") return `${base}?cluster=testnet`;
  return rpcUrl === undefined ? `${base}?cluster=custom` : `${base}?cluster=custom&customUrl=${encodeURIComponent(rpcUrl)}`;
}
