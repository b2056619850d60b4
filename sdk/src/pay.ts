/**
 * The pay flow (spec 4.7 `pay`, its seven steps) against an API answering 402 over x402 or MPP.
 *
 * It never holds a key: the gateway checks the spend policy, reserves the amount and signs with
 * the agent's custodial wallet (`POST /v1/agents/{id}/payments/authorize`, steps 3-5); the flow
 * presents the signed payment to the paid API and closes the reservation with the ledger
 * transaction (step 6), or releases it when the paid request fails. In order:
 *
 * 1. `#callApi`: the original request (or, with a known MPP session, the request with its token).
 * 2. `readPaymentOffer`: the 402's x402 and MPP requirements, in the spec's formats and the real
 *    protocols' (x402 v2 `PAYMENT-REQUIRED`, x402 v1 body, MPP `WWW-Authenticate: Payment`).
 * 3-5. `#authorize`: the gateway's policy check, reservation and signature (`authorization.ts`);
 *    `#payX402` repeats the request with the payment headers, `#payMpp` confirms the MPP payment
 *    and opens a session, kept in `MppSessions` for the origin (step 4's reuse); `#payTransfer`
 *    repeats the request with the signed transfer of a real x402 / MPP payment and hands the
 *    settlement transaction from its receipt to the gateway, which records it.
 * 6. `#complete` (or `#failed`, which releases and says whether money moved).
 * 7. The paid API's answer as `PaidResult`, with its explorer link.
 */
import { callApi, type ApiAnswer, ApiUnreachableError, type ApiRequest, headersObject } from "./api-call.js";
import {
  type Authorization,
  isTransferAuthorization,
  type MppAuthorization,
  parseAuthorization,
  type TransferAuthorization,
  type TransferFormat,
  type X402Authorization,
} from "./authorization.js";
import { errorFromProblem, InsufficientFundsError, PaymentError, PaymentProtocolError, ServiceError } from "./errors.js";
import { explorerUrl } from "./explorer-links.js";
import { decimalToUnits, unitsToUsdc, type Usdc, usdcToUnits } from "./money.js";
import { type MppRequest, type PaymentOffer, readPaymentOffer } from "./payment-required.js";
import {
  type PaymentReceipt,
  readMppReceipt,
  readPaymentReceipt,
  readX402Receipt,
  X_MPP_ERROR,
  X_MPP_SESSION,
  X_PAYMENT_ERROR,
} from "./receipts.js";
import type { WalletOperations } from "./resources/wallet.js";
import type { MppSession, MppSessions } from "./sessions.js";
import {
  type ChannelPaid,
  type ChannelSessionPayer,
  readSessionChallenge,
  readUptoRequirement,
  type SessionChallenge,
} from "./channel-sessions.js";
import type { DomainRuleCache } from "./domain-rules.js";
import { checkText, InvalidInputError } from "./text-input.js";
import type { FetchFunction, Transport } from "./transport.js";

export type Protocol = "x402" | "mpp";
export type ProtocolPreference = "auto" | "x402" | "mpp";

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
  /**
   * A real x402 / MPP payment (the payee's format below): the transfer transaction its
   * facilitator or server broadcast. `txHash` is then payment_ledger's record of that transfer
   * (the record names it as settlement reference), or this same transaction while the gateway
   * has not recorded it yet.
   */
  settlementTxHash?: string;
  /** A real x402 / MPP payment: the payee's wire format (`x402-v2`, `x402-v1`, `mpp`). */
  format?: TransferFormat;
  /** A real x402 / MPP payment: its receipt (`PAYMENT-RESPONSE`, `X-PAYMENT-RESPONSE`, `Payment-Receipt`), decoded. */
  receipt?: PaymentReceipt;
  /**
   * A call paid by a channel voucher (MPP `session` intent): the channel, the voucher's sequence,
   * payment id and cumulative amount. `txHash` is then the channel's open transaction (the escrow
   * that backs the voucher); the charge itself reaches the ledger with the payee's next settlement.
   */
  channel?: { address: string; sequence: number; paymentId: string; cumulative: Usdc };
}

/** The endpoint did not ask for payment (no 402): its answer as it came. */
export interface UnpaidResult<T = unknown> {
  paid: false;
  status: number;
  data: T;
  headers: Record<string, string>;
}

export type PaymentResult<T = unknown> = PaidResult<T> | UnpaidResult<T>;

/** What `agents.invoke` adds to a payment: the invocation's hard budget and x402 first. */
export interface PayExtras {
  invocationBudget?: Usdc;
  protocolPreference?: ProtocolPreference;
}

/**
 * The state every copy of a client (`withParent`) shares with its pay flow: one transport, one
 * session store, and the explorer facts learned once.
 */
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
  networkName?: Promise<string | undefined>;
  /** The gateway's explorer link around a transaction hash, learned from its first `complete` answer. */
  explorerTemplate?: { prefix: string; suffix: string };
}

/** Who pays: the agent, the invocation it pays inside (if any), and its wallet resource. */
export interface PayScope {
  agentId: string;
  parentTxHash: string | undefined;
  shared: PayShared;
  wallet: WalletOperations;
}

interface PayContext {
  request: ApiRequest;
  endpoint: string;
  origin: string;
  signal: AbortSignal | undefined;
}

const METHOD = /^[A-Z]{1,16}$/;

export class PayFlow {
  readonly #agentId: string;
  readonly #parentTxHash: string | undefined;
  readonly #shared: PayShared;
  readonly #wallet: WalletOperations;

  constructor(scope: PayScope) {
    this.#agentId = scope.agentId;
    this.#parentTxHash = scope.parentTxHash;
    this.#shared = scope.shared;
    this.#wallet = scope.wallet;
  }

  /**
   * Whose MPP sessions a call may reuse: the agent's own, or, for a client scoped to an invocation,
   * the ones negotiated under that same parent (the gateway binds a session to the parent of the
   * payment that established it, so its charges count against that invocation's budget).
   */
  get #sessionScope(): string {
    return this.#parentTxHash === undefined ? this.#agentId : `${this.#agentId}\u0000${this.#parentTxHash}`;
  }

  /** The channels this scope opened (`Client.closeChannelSessions`). */
  get channelScope(): string {
    return this.#sessionScope;
  }

  /** Spec 4.7 `pay`, steps 1-7; `extras` only from `agents.invoke`. */
  async pay(options: PayOptions, extras: PayExtras): Promise<PaymentResult> {
    const context = this.#payContext(options);
    // Spec 2.1's domain rules before anything is sent: a refused host receives nothing.
    await this.#shared.domainRules.check(this.#agentId, new URL(context.endpoint), context.signal);
    const channels = extras.invocationBudget === undefined ? this.#shared.channelSessions : undefined;
    if (channels !== undefined) {
      // A known channel and a known price: the voucher goes with the first request (no 402).
      const open = channels.get(this.#sessionScope, context.origin);
      const price = channels.price(context.endpoint);
      if (open !== undefined && price !== undefined) {
        const paid = await channels.payRequest(open, context.request, price, context.signal);
        if (!("over" in paid)) return this.#channelPaid(paid);
        channels.forget(this.#sessionScope, context.origin);
      }
    }
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
      offer = readPaymentOffer(first.data, context.endpoint, first.headers);
    } catch (error) {
      if (reusable !== undefined) sessions.forget(this.#sessionScope, context.origin);
      throw error;
    }
    // A 402 that offers MPP refuses the session; one that offers only x402 comes from an
    // endpoint of the same origin that does not take MPP at all, and says nothing about the
    // session: keep it for the origin's MPP endpoints (otherwise every x402 call on a mixed origin
    // would cost the next MPP call a whole new negotiation and settlement).
    if (reusable !== undefined && offer.mpp !== undefined) sessions.forget(this.#sessionScope, context.origin);
    // A channel offer: the MPP session intent first, else x402 v2 upto over our channel vouchers.
    const session = channels === undefined ? undefined : (readSessionChallenge(offer.mppChallenges) ?? readUptoRequirement(offer.x402v2));
    if (channels !== undefined && session !== undefined) return this.#payOnChannel(context, channels, session);
    const authorization = await this.#authorize(context, offer, options.idempotencyKey, extras);
    if (isTransferAuthorization(authorization)) return this.#payTransfer(context, authorization);
    if (authorization.protocol === "x402") return this.#payX402(context, authorization);
    if (authorization.protocol === "mpp" && offer.mpp !== undefined) return this.#payMpp(context, authorization, offer.mpp);
    throw new PaymentProtocolError(
      `the gateway chose ${String((authorization as { protocol?: unknown }).protocol)}, which ${context.endpoint} did not offer`,
      context.endpoint,
    );
  }

  #payContext(options: PayOptions): PayContext {
    if (typeof options?.endpoint !== "string") throw new InvalidInputError("endpoint", "is required");
    checkText("endpoint", options.endpoint);
    if (options.method !== undefined) checkText("method", String(options.method));
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
    for (const [name, value] of Object.entries(options.headers ?? {})) {
      checkText(`headers.${name}`, name);
      checkText(`headers.${name}`, String(value));
      headers[name.toLowerCase()] = String(value);
    }
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
      if (error instanceof ApiUnreachableError) throw new PaymentError(error.message, { cause: error, code: "API_UNREACHABLE" });
      throw error;
    }
  }

  async #authorize(
    context: PayContext,
    offer: PaymentOffer,
    idempotencyKey: string | undefined,
    extras: PayExtras,
  ): Promise<Authorization> {
    const preference = extras.protocolPreference ?? this.#shared.protocolPreference;
    const body: Record<string, unknown> = {
      endpoint: context.endpoint,
      ...(offer.x402 === undefined ? {} : { x402: offer.x402 }),
      ...(offer.mpp === undefined ? {} : { mpp: offer.mpp }),
      ...(offer.x402v2 === undefined ? {} : { x402v2: offer.x402v2 }),
      ...(offer.x402v1 === undefined ? {} : { x402v1: offer.x402v1 }),
      ...(offer.mppChallenges === undefined ? {} : { mppChallenges: offer.mppChallenges }),
      ...(preference === undefined ? {} : { protocolPreference: preference }),
      ...(this.#parentTxHash === undefined ? {} : { parentTxHash: this.#parentTxHash }),
      ...(extras.invocationBudget === undefined ? {} : { invocationBudget: extras.invocationBudget }),
    };
    const answer = await this.#shared.transport.request<Record<string, unknown>>(
      "POST",
      `/v1/agents/${encodeURIComponent(this.#agentId)}/payments/authorize`,
      {
        body,
        ...(idempotencyKey === undefined ? {} : { idempotencyKey }),
        ...(context.signal === undefined ? {} : { signal: context.signal }),
      },
    );
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
        {
          url: authorization.paymentEndpoint,
          method: "POST",
          headers: { "content-type": "application/json", accept: "application/json" },
          body: JSON.stringify(authorization.submission),
        },
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
      throw await this.#failed(
        authorization,
        context,
        `the MPP payment was not confirmed: ${confirmation.status}${refusal === null ? "" : ` ${refusal}`}`,
      );
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

  /**
   * Pays a `session` challenge from a channel to its recipient: the open one of this origin, or a
   * new one. A channel the service or the gateway calls over is replaced once.
   */
  async #payOnChannel(context: PayContext, channels: ChannelSessionPayer, session: SessionChallenge): Promise<PaidResult> {
    channels.learnPrice(context.endpoint, session.amountUnits);
    let open = channels.get(this.#sessionScope, context.origin);
    if (open !== undefined && open.payee !== session.recipient) open = undefined;
    if (open !== undefined) open.offer = session;
    for (let attempt = 0; attempt < 2; attempt += 1) {
      open ??= await channels.open(this.#agentId, this.#sessionScope, context.origin, session, this.#parentTxHash, context.endpoint);
      const paid = await channels.payRequest(open, context.request, session.amountUnits, context.signal);
      if (!("over" in paid)) return this.#channelPaid(paid);
      channels.forget(this.#sessionScope, context.origin);
      open = undefined;
    }
    throw new PaymentError(`${context.endpoint} refused a voucher on a freshly opened channel`);
  }

  async #channelPaid(paid: ChannelPaid): Promise<PaidResult> {
    const { channel } = paid;
    channel.explorer ??= await this.#explorer(channel.openTx);
    return {
      paid: true,
      status: paid.answer.status,
      protocol: channel.offer.wire === "x402-upto" ? "x402" : "mpp",
      amountPaid: { usdc: unitsToUsdc(paid.amountUnits) },
      txHash: channel.openTx,
      solanaExplorer: channel.explorer,
      data: paid.answer.data,
      headers: headersObject(paid.answer.headers),
      sessionId: channel.channel,
      channel: {
        address: channel.channel,
        sequence: Number(paid.sequence),
        paymentId: paid.paymentId,
        cumulative: { usdc: unitsToUsdc(channel.cumulativeUnits) },
      },
    };
  }

  /**
   * A real x402 / MPP payment: the request again with the signed transfer; its receipt names the
   * transfer's transaction, which the gateway checks on the ledger and records (`complete`).
   * Refused or unanswered, the reservation is released if it still can be; a signed transfer
   * cannot be released while it may still land (`PAYMENT_OUTCOME_UNKNOWN`, the gateway closes it
   * once its blockhash expired).
   */
  async #payTransfer(context: PayContext, authorization: TransferAuthorization): Promise<PaidResult> {
    let paid: ApiAnswer;
    try {
      paid = await this.#callApi(context, authorization.headers, true);
    } catch (error) {
      throw await this.#failed(authorization, context, `the paid request to ${context.endpoint} got no answer`, error);
    }
    const receipt = readPaymentReceipt(authorization.format, paid.headers);
    if (paid.status < 200 || paid.status > 299 || receipt === undefined || !receipt.success || receipt.transaction === undefined) {
      const reason = typeof receipt?.value.errorReason === "string" ? ` (${receipt.value.errorReason})` : "";
      throw await this.#failed(
        authorization,
        context,
        `${context.endpoint} did not accept the ${authorization.format} payment: ${paid.status}${receipt === undefined ? " without a payment receipt" : reason}`,
      );
    }
    const settlementTxHash = receipt.transaction;
    const recorded = await this.#completeTransfer(authorization.reservationId, settlementTxHash);
    const txHash = recorded?.txHash ?? settlementTxHash;
    return {
      paid: true,
      status: paid.status,
      protocol: authorization.protocol,
      amountPaid: authorization.amount,
      txHash,
      solanaExplorer: recorded?.solanaExplorer ?? (await this.#explorer(txHash)),
      data: paid.data,
      headers: headersObject(paid.headers),
      settlementTxHash,
      format: authorization.format,
      receipt,
    };
  }

  /**
   * Hands the settlement transaction to the gateway, which records the payment: the record's
   * transaction and its explorer link, or undefined when it is not recorded yet (never thrown:
   * the payment happened, the gateway's sweeper records it anyway).
   */
  async #completeTransfer(
    reservationId: string,
    settlementTxHash: string,
  ): Promise<{ txHash: string; solanaExplorer?: string } | undefined> {
    try {
      const answer = await this.#shared.transport.request<{ txHash?: unknown; solanaExplorer?: unknown }>(
        "POST",
        `/v1/agents/${encodeURIComponent(this.#agentId)}/payments/${encodeURIComponent(reservationId)}/complete`,
        { body: { txHash: settlementTxHash } },
      );
      if (typeof answer?.txHash !== "string") return undefined;
      const link = answer.solanaExplorer;
      return { txHash: answer.txHash, ...(typeof link === "string" && link.includes(answer.txHash) ? { solanaExplorer: link } : {}) };
    } catch {
      return undefined;
    }
  }

  /** A call paid by an existing MPP session (no 402, no authorization round trip). */
  async #sessionPaid(
    context: PayContext,
    answer: ApiAnswer,
    session: MppSession,
    receipt: NonNullable<ReturnType<typeof readMppReceipt>>,
  ): Promise<PaidResult> {
    const refreshed = answer.headers.get(X_MPP_SESSION);
    const sessionId = receipt.sessionId ?? session.sessionId;
    if (refreshed !== null && refreshed !== session.token) {
      this.#shared.sessions.put(this.#sessionScope, context.origin, {
        ...session,
        token: refreshed,
        ...(sessionId === undefined ? {} : { sessionId }),
      });
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
   * Answers the transaction's explorer link when the gateway gives one.
   */
  async #complete(reservationId: string, txHash: string): Promise<string | undefined> {
    try {
      const answer = await this.#shared.transport.request<{ solanaExplorer?: unknown }>(
        "POST",
        `/v1/agents/${encodeURIComponent(this.#agentId)}/payments/${encodeURIComponent(reservationId)}/complete`,
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
  async #failed(
    authorization: Authorization,
    context: PayContext,
    message: string,
    cause?: unknown,
  ): Promise<PaymentError | InsufficientFundsError> {
    try {
      await this.#shared.transport.request(
        "POST",
        `/v1/agents/${encodeURIComponent(this.#agentId)}/payments/${encodeURIComponent(authorization.reservationId)}/release`,
        {
          body: {},
        },
      );
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
        return new PaymentError(
          `${message}; the gateway reports reservation ${authorization.reservationId} as settled: the payment was made, the answer was lost`,
          {
            cause: cause ?? error,
            code: "PAYMENT_SETTLED_ANSWER_LOST",
          },
        );
      }
    }
    // The gateway does not hold funds back at authorization; a settlement the ledger refused for
    // want of funds shows here as a wallet balance below the price (spec 7 InsufficientFundsError).
    const balance = await this.#wallet.balance().catch(() => undefined);
    if (balance !== undefined && usdcToUnits(balance.usdc) < usdcToUnits(authorization.amount.usdc)) {
      return new InsufficientFundsError(
        `insufficient funds: agent ${this.#agentId} needs ${authorization.amount.usdc} usdc for ${context.endpoint}, balance is ${balance.usdc} usdc`,
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
      const transaction = await this.#shared.transport.request<{ solanaExplorer?: unknown }>(
        "GET",
        `/v1/transactions/${encodeURIComponent(txHash)}`,
      );
      if (typeof transaction?.solanaExplorer === "string" && transaction.solanaExplorer.length > 0) return transaction.solanaExplorer;
    } catch {
      // Not indexed yet (404) or unreachable: build the link from the network instead.
    }
    return explorerUrl(txHash, network ?? (await this.#networkName()), this.#shared.explorerRpcUrl);
  }

  #networkName(): Promise<string | undefined> {
    this.#shared.networkName ??= this.#wallet.get().then(
      (wallet) => wallet.network,
      () => undefined,
    );
    return this.#shared.networkName;
  }
}

function unpaid(answer: ApiAnswer): UnpaidResult {
  return { paid: false, status: answer.status, data: answer.data, headers: headersObject(answer.headers) };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
