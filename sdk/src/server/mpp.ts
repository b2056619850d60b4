/**
 * `mppMiddleware`: the resource server side of spec 4.4, with the gateway as the MPP service.
 * Unpaid requests get 402 with the spec 2.9 body; the payment endpoint on this server forwards
 * the submission to the gateway (`POST /v1/mpp/payments`), which answers a session token; a
 * request with `X-MPP-Session` is redeemed through the gateway (`POST /v1/mpp/sessions/redeem`)
 * before the handler runs, answered with the token to keep and an `X-MPP-Receipt`.
 *
 * Every 402 also carries the standard formats (standard.ts), each such payment settled through
 * the gateway per request (no session). Answers, refusals and their headers: docs/sdk-server.md.
 */
import { createHash } from "node:crypto";
import { callGateway, checkGatewayConfig, type GatewayConfig, GatewayUnavailableError, isObject } from "./gateway.js";
import {
  answer,
  base64Json,
  checkOrigin,
  checkPayTo,
  fetchMiddleware,
  type FetchHandler,
  type Gate,
  type GateAnswer,
  type GateRequest,
  nodeMiddleware,
  type NodeMiddleware,
  type OriginOption,
  settlementBusy,
} from "./http.js";
import { formatDecimal, parseDecimal, parseUnits, usdcOf } from "./money.js";
import { checkChallengeSecret, type StandardOptions, StandardPayments, type StandardPaymentInfo } from "./standard.js";
import type { ChannelBook } from "./channel/book.js";
import { SessionVoucherError } from "./channel/errors.js";
import {
  parseSessionCredential,
  sessionChallenge,
  sessionCredentialOf,
  sessionReceipt,
  type SessionTerms,
} from "./channel/session-intent.js";
// The header names are the contract with the client, which reads the receipts (one definition).
import { X_MPP_ERROR, X_MPP_RECEIPT, X_MPP_SESSION, X_PAYMENT_SIGNATURE } from "../receipts.js";

export { X_MPP_ERROR, X_MPP_RECEIPT, X_MPP_SESSION };
export const MPP_PROTOCOL = "mpp/1.0";
export const DEFAULT_PAYMENT_PATH = "/mpp/pay";
const METHOD = /^[a-z][a-z0-9:_-]{0,63}$/;
const TOKEN = /^[\x21-\x7e]{1,128}$/;

export interface MppOptions extends GatewayConfig, OriginOption, StandardOptions {
  /** Price per call: `{ value: "0.05", currency: "USDC" }`, or base units (bigint or digit string). */
  readonly amount: { value: string; currency: string } | bigint | string;
  /** Offered methods, e.g. `["stablecoin", "card"]`. */
  readonly paymentMethods: readonly string[];
  readonly sessionSupported: boolean;
  /** Receiving wallet address (base58). */
  readonly payTo: string;
  /** Path of the payment endpoint under the mount point; `/mpp/pay` by default. */
  readonly paymentPath?: string;
  /**
   * Channel sessions (MPP `session` intent on payment_ledger channels): the payee's book, shared
   * by every route of this payee (its payTo must be this one's). When set, every 402 also offers
   * a `solana` `session` challenge and vouchers are accepted locally (channel/book.ts).
   */
  readonly channels?: ChannelBook;
}

export interface MppPayment {
  /** "x402" when an x402 client paid the PAYMENT-REQUIRED the same 402 carried. */
  readonly protocol: "mpp" | "x402";
  readonly txHash: string;
  readonly payer: string;
  readonly amount: { usdc: number };
  readonly amountUnits: bigint;
  readonly network: string | null;
  /** The spec session the call was paid from; null for a standard payment (each request pays). */
  readonly sessionId: string | null;
  /** The spec's rail (`stablecoin`, `card`), `solana` for an MPP charge, `exact` for x402. */
  readonly method: string;
  /** false when the call was the one the establishing submission paid. */
  readonly charged: boolean;
  /** The standard format the client paid in (standard.ts); absent for the spec's format. */
  readonly standard?: StandardPaymentInfo["standard"] | "mpp-solana-session";
  /** A channel session's voucher: the channel (also in `txHash` and `sessionId`: no transaction per request) and its sequence. */
  readonly channel?: { readonly address: string; readonly sequence: bigint; readonly acceptedCumulativeUnits: bigint };
  /** A standard payment's payment_ledger record (null while pending); absent for the spec's format. */
  readonly recordTxHash?: string | null;
}

function amountUnitsOf(amount: MppOptions["amount"]): bigint {
  if (typeof amount === "bigint" || typeof amount === "string") return parseUnits(amount, "mppMiddleware amount");
  if (!isObject(amount) || typeof amount.currency !== "string" || amount.currency.toUpperCase() !== "USDC") {
    throw new TypeError('mppMiddleware amount: expected { value, currency: "USDC" } or base units');
  }
  return parseDecimal(amount.value, "mppMiddleware amount.value");
}

function checkOptions(options: MppOptions): { amountUnits: bigint; paymentPath: string } {
  checkGatewayConfig(options, "mppMiddleware");
  checkOrigin(options.origin, "mppMiddleware");
  const amountUnits = amountUnitsOf(options.amount);
  const methods = options.paymentMethods;
  if (
    !Array.isArray(methods) ||
    methods.length === 0 ||
    methods.length > 16 ||
    !methods.every((m) => typeof m === "string" && METHOD.test(m))
  ) {
    throw new TypeError("mppMiddleware: paymentMethods must be 1 to 16 method identifiers such as stablecoin");
  }
  if (typeof options.sessionSupported !== "boolean") throw new TypeError("mppMiddleware: sessionSupported must be a boolean");
  checkPayTo(options.payTo, "mppMiddleware");
  checkChallengeSecret(options.challengeSecret, "mppMiddleware");
  if (options.channels !== undefined && options.channels.payTo !== options.payTo) {
    throw new TypeError("mppMiddleware: channels must be the book of this payTo");
  }
  const paymentPath = options.paymentPath ?? DEFAULT_PAYMENT_PATH;
  if (!/^\/[A-Za-z0-9._~/-]{0,255}$/.test(paymentPath)) throw new TypeError("mppMiddleware: paymentPath must be a path such as /mpp/pay");
  return { amountUnits, paymentPath };
}

function mppGate(options: MppOptions): Gate<MppPayment> {
  const { amountUnits, paymentPath } = checkOptions(options);
  const amount = { value: formatDecimal(amountUnits), currency: "USDC" };
  const endpointPath = (request: GateRequest): string => `${request.mountPath.replace(/\/+$/, "")}${paymentPath}`;
  const paymentRequest = (request: GateRequest) => ({
    protocol: MPP_PROTOCOL,
    amount,
    paymentMethods: [...options.paymentMethods],
    sessionSupported: options.sessionSupported,
    paymentEndpoint: new URL(endpointPath(request), request.url.origin).toString(),
  });
  const standard = new StandardPayments(options);
  const seller = (request: GateRequest) => ({ amountUnits, payTo: options.payTo, resource: request.url.toString() });
  // Every 402 offers the standard formats too (fresh challenges), whatever was refused.
  const challengeHeaders = async (request: GateRequest, reason?: string): Promise<Record<string, string>> => {
    const headers = await standard.challengeHeaders(request, seller(request), reason);
    const terms = await sessionTerms();
    if (terms === null) return headers;
    const session = sessionChallenge(standard, request, terms);
    const charge = headers["www-authenticate"];
    return { ...headers, "www-authenticate": charge === undefined ? session : `${charge}, ${session}` };
  };
  const challenge = async (request: GateRequest, reason?: string): Promise<GateAnswer> =>
    answer(402, paymentRequest(request), {
      ...(await challengeHeaders(request, reason)),
      ...(reason === undefined ? {} : { [X_MPP_ERROR]: reason }),
    });
  const channels = options.channels;
  /** The session challenge's terms; null without a book, or without a mint (the gateway unreachable and none configured). */
  async function sessionTerms(): Promise<SessionTerms | null> {
    if (channels === undefined) return null;
    const terms = await standard.terms();
    const mint = channels.mint ?? terms?.mint;
    if (mint === undefined) return null;
    const network = channels.network ?? terms?.mpp?.network ?? "localnet";
    return { amountUnits, mint, payTo: options.payTo, network, channelProgram: channels.programId };
  }

  async function paySession(
    request: GateRequest,
    credential: Record<string, unknown>,
  ): Promise<GateAnswer | { kind: "paid"; payment: MppPayment; headers: Record<string, string> }> {
    const book = channels!;
    try {
      const parsed = parseSessionCredential(standard, request, credential);
      if (parsed.voucher === undefined) {
        await book.close(parsed.channel);
        const state = book.state(parsed.channel)!;
        return answer(
          200,
          {
            channel: parsed.channel,
            status: "closing",
            acceptedCumulative: state.acceptedCumulativeUnits.toString(),
            settledCumulative: state.confirmedCumulativeUnits.toString(),
          },
          {
            "payment-receipt": sessionReceipt(parsed.channel, parsed.challengeId, state.acceptedCumulativeUnits),
            "cache-control": "private",
          },
        );
      }
      const accepted = await book.accept(parsed.voucher, { endpoint: request.url.toString(), priceUnits: amountUnits });
      const payment: MppPayment = {
        protocol: "mpp",
        txHash: accepted.channel,
        payer: accepted.payer,
        amount: usdcOf(amountUnits),
        amountUnits,
        network: (await sessionTerms())?.network ?? null,
        sessionId: accepted.channel,
        method: "solana",
        charged: true,
        standard: "mpp-solana-session",
        recordTxHash: null,
        channel: { address: accepted.channel, sequence: accepted.sequence, acceptedCumulativeUnits: accepted.acceptedCumulativeUnits },
      };
      const receipt = sessionReceipt(accepted.channel, parsed.challengeId, accepted.acceptedCumulativeUnits);
      return { kind: "paid", payment, headers: { "payment-receipt": receipt, "cache-control": "private" } };
    } catch (error) {
      if (!(error instanceof SessionVoucherError)) throw error;
      const headers = {
        ...(await challengeHeaders(request, error.code)),
        [X_MPP_ERROR]: error.code,
        "content-type": "application/problem+json",
      };
      return answer(error.status, error.problem(), headers);
    }
  }
  const unavailable = (): GateAnswer => answer(503, { error: "mpp_service_unavailable" }, { "retry-after": "5" });

  async function pay(request: GateRequest): Promise<GateAnswer> {
    const submission = await request.json();
    if (!isObject(submission)) return answer(400, { error: "malformed_submission", detail: "the body must be a JSON submission" });
    const body = { request: paymentRequest(request), submission, payTo: options.payTo, serviceOrigin: request.url.origin };
    // Keyed by the submission: a retry after a pending answer resolves to its outcome.
    const key = `mpp-pay:${createHash("sha256").update(JSON.stringify(submission)).digest("hex")}`;
    const paid = await callGateway(options, "POST", "/v1/mpp/payments", body, key);
    const result = paid.body;
    if (paid.status === 200 && isObject(result) && result.success === true) {
      // A replayed answer would hand the session out again to whoever replays the submission.
      if (paid.headers.get("idempotent-replayed") === "true") return refusePayment("nonce_reused", "this submission was already used");
      if (typeof result.sessionToken !== "string") return answer(502, { error: "mpp_service_error" });
      return answer(
        200,
        { txHash: result.txHash, sessionId: result.sessionId, expiresAt: result.expiresAt },
        { [X_MPP_SESSION]: result.sessionToken },
      );
    }
    if (paid.status === 200 && isObject(result) && typeof result.reason === "string") {
      return refusePayment(result.reason, typeof result.detail === "string" ? result.detail : result.reason);
    }
    if (paid.status === 202) return settlementBusy("settlement_pending", X_MPP_ERROR);
    if (paid.status === 409) return settlementBusy("settlement_in_progress", X_MPP_ERROR);
    if (paid.status === 422) return refusePayment("nonce_reused", "this submission was already used for another payment");
    if (paid.status === 400) {
      const detail = isObject(result) && typeof result.detail === "string" ? result.detail : "malformed submission";
      return answer(400, { error: "malformed_submission", detail });
    }
    return answer(502, { error: "mpp_service_error", status: paid.status });
  }

  function refusePayment(reason: string, detail: string): GateAnswer {
    return answer(402, { error: reason, detail }, { [X_MPP_ERROR]: reason });
  }

  async function redeem(
    request: GateRequest,
    token: string,
  ): Promise<GateAnswer | { kind: "paid"; payment: MppPayment; headers: Record<string, string> }> {
    if (!TOKEN.test(token)) return challenge(request, "malformed_headers");
    const body = { token, endpoint: request.url.toString(), amount, payTo: options.payTo, serviceOrigin: request.url.origin };
    const used = await callGateway(options, "POST", "/v1/mpp/sessions/redeem", body);
    const result = used.body;
    if (used.status === 200 && isObject(result) && result.success === true) {
      const fields = [result.txHash, result.sessionId, result.token, result.method, result.payer];
      if (!fields.every((f) => typeof f === "string") || typeof result.charged !== "boolean")
        return answer(502, { error: "mpp_service_error" });
      const receipt = { txHash: result.txHash, sessionId: result.sessionId, amount, method: result.method, charged: result.charged };
      const payment: MppPayment = {
        protocol: "mpp",
        txHash: result.txHash as string,
        payer: result.payer as string,
        amount: usdcOf(amountUnits),
        amountUnits,
        network: typeof result.network === "string" ? result.network : null,
        sessionId: result.sessionId as string,
        method: result.method as string,
        charged: result.charged,
      };
      return { kind: "paid", payment, headers: { [X_MPP_SESSION]: result.token as string, [X_MPP_RECEIPT]: base64Json(receipt) } };
    }
    if (used.status === 200 && isObject(result) && typeof result.reason === "string") return challenge(request, result.reason);
    if (used.status === 202) return settlementBusy("settlement_pending", X_MPP_ERROR);
    // The gateway refused the token's shape (or the call): negotiate again.
    if (used.status === 400) return challenge(request, "session_unknown");
    return answer(502, { error: "mpp_service_error", status: used.status });
  }

  async function payStandard(
    request: GateRequest,
  ): Promise<GateAnswer | { kind: "paid"; payment: MppPayment; headers: Record<string, string> }> {
    const paid = await standard.pay(request, seller(request), (reason) => challenge(request, reason));
    if (paid.kind === "answer") return paid;
    const { info } = paid;
    const payment: MppPayment = {
      protocol: info.protocol,
      txHash: info.txHash,
      payer: info.payer,
      amount: info.amount,
      amountUnits: info.amountUnits,
      network: info.network,
      sessionId: null,
      method: info.standard === "mpp-solana-charge" ? "solana" : "exact",
      charged: true,
      standard: info.standard,
      recordTxHash: info.recordTxHash,
    };
    return { kind: "paid", payment, headers: paid.headers };
  }

  return async (request) => {
    try {
      if (request.method === "POST" && request.url.pathname === endpointPath(request)) return await pay(request);
      const session = channels === undefined ? undefined : sessionCredentialOf(request);
      if (session !== undefined) return await paySession(request, session);
      if (standard.carriesPayment(request, X_PAYMENT_SIGNATURE)) return await payStandard(request);
      const token = request.header(X_MPP_SESSION);
      if (token === undefined) return challenge(request);
      return await redeem(request, token.trim());
    } catch (error) {
      if (error instanceof GatewayUnavailableError) return unavailable();
      throw error;
    }
  };
}

/** Node `http` / Express-style `(req, res, next)`; the handler finds the payment in `req.payment`. */
export function mppMiddleware(options: MppOptions): NodeMiddleware {
  return nodeMiddleware(mppGate(options), options.origin);
}

/** Fetch-style `(Request) => Response`; the handler gets the payment as its second argument. */
export function mppHandler(options: MppOptions, handler: FetchHandler<MppPayment>): (request: Request) => Promise<Response> {
  return fetchMiddleware(mppGate(options), options.origin, handler);
}
