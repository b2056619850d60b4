/**
 * `x402Middleware` (spec 4.5): the resource server side of spec 4.3. A request without payment
 * gets 402 with the spec 2.7 body; a paid one is settled through the gateway's facilitator
 * (`POST /v1/x402/settle`) before the handler runs, which runs at most once per payment. The
 * requirement is always built from the options, never taken from the client, so a payment for
 * other terms (less money, another payee or token) is refused.
 *
 * The same 402 carries the standard formats (standard.ts: x402 v2, x402 v1, an MPP `solana`
 * charge) when the gateway has a fee payer. Answers, refusals and their headers:
 * docs/sdk-server.md.
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
  isAddress,
  nodeMiddleware,
  type NodeMiddleware,
  type OriginOption,
  settlementBusy,
} from "./http.js";
import { parseUnits, usdcOf } from "./money.js";
import {
  checkChallengeSecret,
  PAYMENT_REQUIRED,
  PAYMENT_RESPONSE,
  type StandardOptions,
  StandardPayments,
  type StandardPaymentInfo,
} from "./standard.js";
import type { ChannelBook } from "./channel/book.js";
import { SessionVoucherError } from "./channel/errors.js";
import { parseUptoPayload, type UptoTerms, uptoPayloadOf, uptoRequirement } from "./channel/x402-upto.js";
// The header names are the contract with the client, which sends the payment and reads the receipt (one definition).
import { X_PAYMENT, X_PAYMENT_ERROR, X_PAYMENT_RESPONSE, X_PAYMENT_SIGNATURE } from "../receipts.js";

export { X_PAYMENT, X_PAYMENT_ERROR, X_PAYMENT_RESPONSE, X_PAYMENT_SIGNATURE };
const MAX_HEADER_CHARS = 8_192;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

export interface X402Options extends GatewayConfig, OriginOption, StandardOptions {
  /** Price in the token's smallest unit (spec 4.5): `"50000"` is 0.05 USDC. */
  readonly amount: string | bigint;
  /** `usdc` (resolved to its mint through `GET /v1/x402/supported`) or a token address. */
  readonly token: string;
  /** Settlement network, e.g. `solana-mainnet`; the facilitator's own when absent. */
  readonly network?: string;
  /** Receiving wallet address (base58). */
  readonly payTo: string;
  /** The paid resource's URL in the 402 body; the request's absolute URL when absent. */
  readonly resource?: string;
  /**
   * Channel sessions over x402 v2 `upto` (channel/x402-upto.ts): the payee's book (its payTo must
   * be this one's). Every 402's PAYMENT-REQUIRED then also lists the `upto` requirement, and a
   * PAYMENT-SIGNATURE carrying a channel voucher is accepted locally.
   */
  readonly channels?: ChannelBook;
}

/** What the handler learns about the payment that paid for this request. */
export interface X402Payment {
  /** "mpp" when an MPP client paid the challenge the same 402 carried. */
  readonly protocol: "x402" | "mpp";
  /** The transaction that moved the tokens. */
  readonly txHash: string;
  readonly payer: string;
  readonly amount: { usdc: number };
  readonly amountUnits: bigint;
  readonly network: string;
  /** The standard format the client paid in (standard.ts); absent for the spec's format. */
  readonly standard?: StandardPaymentInfo["standard"];
  /** A standard payment's payment_ledger record (null while pending); absent for the spec's format (txHash records it). */
  readonly recordTxHash?: string | null;
  /** A channel voucher (`upto`): the channel (also in `txHash`: no transaction per request), its sequence and cumulative. */
  readonly channel?: { readonly address: string; readonly sequence: bigint; readonly acceptedCumulativeUnits: bigint };
}

interface Terms {
  readonly network: string;
  readonly token: string;
}

function checkOptions(options: X402Options): bigint {
  checkGatewayConfig(options, "x402Middleware");
  checkOrigin(options.origin, "x402Middleware");
  const units = parseUnits(options.amount, "x402Middleware amount");
  checkPayTo(options.payTo, "x402Middleware");
  checkChallengeSecret(options.challengeSecret, "x402Middleware");
  if (typeof options.token !== "string" || options.token.length === 0) throw new TypeError("x402Middleware: token is required");
  if (options.resource !== undefined) new URL(options.resource);
  if (options.channels !== undefined && options.channels.payTo !== options.payTo) {
    throw new TypeError("x402Middleware: channels must be the book of this payTo");
  }
  return units;
}

/** Resolves `usdc` and the network once; a failed lookup is retried on the next request. */
function termsResolver(options: X402Options): () => Promise<Terms> {
  let known: Terms | null = null;
  return async () => {
    if (known !== null) return known;
    const needsLookup = !isAddress(options.token) || options.network === undefined;
    if (!needsLookup) return (known = { network: options.network!, token: options.token });
    const supported = await callGateway(options, "GET", "/v1/x402/supported");
    const body = supported.body;
    if (supported.status !== 200 || !isObject(body) || !isObject(body.tokens) || typeof body.network !== "string") {
      throw new GatewayUnavailableError(`GET /v1/x402/supported answered ${supported.status}`);
    }
    const token = isAddress(options.token) ? options.token : body.tokens[options.token.toLowerCase()];
    if (typeof token !== "string") throw new TypeError(`x402Middleware: the facilitator settles no token "${options.token}"`);
    return (known = { network: options.network ?? body.network, token });
  };
}

type Decoded = { ok: true; payment: Record<string, unknown>; header: string } | { ok: false; detail: string };

/** Strict, and total: any garbage is a refusal, never an exception. */
function decodeHeaders(request: GateRequest): Decoded {
  const encoded = request.header(X_PAYMENT);
  const signature = request.header(X_PAYMENT_SIGNATURE);
  if (encoded === undefined || signature === undefined) return { ok: false, detail: "both X-PAYMENT and X-PAYMENT-SIGNATURE are required" };
  if (encoded.length > MAX_HEADER_CHARS || encoded.length % 4 !== 0 || !BASE64.test(encoded)) {
    return { ok: false, detail: "X-PAYMENT is not padded standard base64" };
  }
  let payment: unknown;
  try {
    payment = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(Buffer.from(encoded, "base64")));
  } catch {
    return { ok: false, detail: "X-PAYMENT is not base64 of UTF-8 JSON" };
  }
  if (!isObject(payment) || !isObject(payment.payload)) return { ok: false, detail: "X-PAYMENT is not a PaymentPayload" };
  if (typeof payment.signature !== "string" || payment.signature !== signature.trim()) {
    return { ok: false, detail: "X-PAYMENT-SIGNATURE differs from the payload's signature" };
  }
  return { ok: true, payment, header: encoded };
}

/** The gate both `x402Middleware` and `paidTool` (mcp.ts) put in front of a paid handler. */
export function x402Gate(options: X402Options): Gate<X402Payment> {
  const amountUnits = checkOptions(options);
  const terms = termsResolver(options);
  const standard = new StandardPayments(options);
  const channels = options.channels;
  /** The `upto` terms: the standard (CAIP-2) network and the gateway's mint when known. Null without a book. */
  async function uptoTerms(resolved: Terms): Promise<UptoTerms | null> {
    if (channels === undefined) return null;
    const known = await standard.terms();
    return {
      network: channels.network ?? known?.x402?.network ?? resolved.network,
      mint: channels.mint ?? known?.mint ?? resolved.token,
      payTo: options.payTo,
      amountUnits,
      channelProgram: channels.programId,
    };
  }
  return async (request) => {
    let resolved: Terms;
    try {
      resolved = await terms();
    } catch (error) {
      if (error instanceof GatewayUnavailableError) return answer(503, { error: "facilitator_unavailable" }, { "retry-after": "5" });
      throw error;
    }
    const requirement = {
      scheme: "exact",
      network: resolved.network,
      token: resolved.token,
      amount: amountUnits.toString(),
      payTo: options.payTo,
      resource: options.resource ?? request.url.toString(),
    };
    const seller = { amountUnits, payTo: options.payTo, resource: requirement.resource };
    // Every 402 offers the standard formats too (fresh challenges), whatever was refused.
    const upto = await uptoTerms(resolved);
    const refuse = async (reason?: string): Promise<GateAnswer> =>
      answer(402, requirement, {
        ...withUpto(await standard.challengeHeaders(request, seller, reason), upto, seller.resource, reason),
        ...(reason === undefined ? {} : { [X_PAYMENT_ERROR]: reason }),
      });
    const uptoPayload = upto === null ? undefined : uptoPayloadOf(request);
    if (upto !== null && uptoPayload !== undefined) {
      try {
        const voucher = parseUptoPayload(uptoPayload, upto);
        const accepted = await options.channels!.accept(voucher, { endpoint: seller.resource, priceUnits: amountUnits });
        const payment: X402Payment = {
          protocol: "x402",
          txHash: accepted.channel,
          payer: accepted.payer,
          amount: usdcOf(amountUnits),
          amountUnits,
          network: upto.network,
          channel: { address: accepted.channel, sequence: accepted.sequence, acceptedCumulativeUnits: accepted.acceptedCumulativeUnits },
        };
        const receipt = {
          success: true,
          transaction: "",
          network: upto.network,
          payer: accepted.payer,
          extra: {
            channel: accepted.channel,
            sequence: accepted.sequence.toString(),
            acceptedCumulative: accepted.acceptedCumulativeUnits.toString(),
          },
        };
        return { kind: "paid", payment, headers: { [PAYMENT_RESPONSE]: base64Json(receipt), "cache-control": "private" } };
      } catch (error) {
        if (error instanceof SessionVoucherError) return refuse(error.code);
        if (error instanceof GatewayUnavailableError) return answer(503, { error: "facilitator_unavailable" }, { "retry-after": "5" });
        throw error;
      }
    }
    if (standard.carriesPayment(request, X_PAYMENT_SIGNATURE)) {
      const paid = await standard.pay(request, seller, refuse);
      if (paid.kind === "answer") return paid;
      const { info } = paid;
      const payment: X402Payment = {
        protocol: info.protocol,
        txHash: info.txHash,
        payer: info.payer,
        amount: info.amount,
        amountUnits: info.amountUnits,
        network: info.network,
        standard: info.standard,
        recordTxHash: info.recordTxHash,
      };
      return { kind: "paid", payment, headers: paid.headers };
    }
    if (request.header(X_PAYMENT) === undefined && request.header(X_PAYMENT_SIGNATURE) === undefined) return refuse();
    const decoded = decodeHeaders(request);
    if (!decoded.ok) return refuse("malformed_headers");

    // The key makes a retry of a payment whose settlement was pending resolve to its outcome.
    const key = `x402-settle:${createHash("sha256").update(decoded.header).digest("hex")}`;
    let settled;
    try {
      settled = await callGateway(options, "POST", "/v1/x402/settle", { payment: decoded.payment, requirement }, key);
    } catch (error) {
      if (error instanceof GatewayUnavailableError) return answer(503, { error: "facilitator_unavailable" }, { "retry-after": "5" });
      throw error;
    }
    const body = settled.body;
    if (settled.status === 200 && isObject(body) && body.success === true) {
      // A replayed answer is a replayed payment: it paid for a request already served.
      if (settled.headers.get("idempotent-replayed") === "true") return refuse("nonce_reused");
      if (typeof body.txHash !== "string" || typeof body.payer !== "string") return answer(502, { error: "facilitator_error" });
      const network = typeof body.network === "string" ? body.network : resolved.network;
      const payment: X402Payment = {
        protocol: "x402",
        txHash: body.txHash,
        payer: body.payer,
        amount: usdcOf(amountUnits),
        amountUnits,
        network,
      };
      const receipt = { success: true, transaction: body.txHash, network, payer: body.payer };
      return { kind: "paid", payment, headers: { [X_PAYMENT_RESPONSE]: base64Json(receipt) } };
    }
    if (settled.status === 200 && isObject(body) && body.success === false && typeof body.reason === "string") return refuse(body.reason);
    if (settled.status === 202) return settlementBusy("settlement_pending", X_PAYMENT_ERROR);
    if (settled.status === 409) return settlementBusy("settlement_in_progress", X_PAYMENT_ERROR);
    if (settled.status === 422) return refuse("nonce_reused");
    if (settled.status === 400) {
      const reason = isObject(body) && typeof body.reason === "string" ? body.reason : "malformed_payload";
      return refuse(reason);
    }
    // 401/403/404: this server's configuration, not the payment.
    return answer(502, { error: "facilitator_error", status: settled.status });
  };
}

/** The 402's `PAYMENT-REQUIRED` with the `upto` requirement added (or alone, when the gateway offers no `exact`). */
function withUpto(headers: Record<string, string>, upto: UptoTerms | null, resource: string, reason?: string): Record<string, string> {
  if (upto === null) return headers;
  const current = headers[PAYMENT_REQUIRED];
  let required: Record<string, unknown> = {
    x402Version: 2,
    error: reason ?? "PAYMENT-SIGNATURE header is required",
    resource: { url: resource, mimeType: "application/json" },
    accepts: [],
  };
  if (current !== undefined) required = JSON.parse(Buffer.from(current, "base64").toString("utf8")) as Record<string, unknown>;
  const accepts = Array.isArray(required.accepts) ? required.accepts : [];
  return { ...headers, [PAYMENT_REQUIRED]: base64Json({ ...required, accepts: [...accepts, uptoRequirement(upto)] }) };
}

/** Node `http` / Express-style `(req, res, next)`; the handler finds the payment in `req.payment`. */
export function x402Middleware(options: X402Options): NodeMiddleware {
  return nodeMiddleware(x402Gate(options), options.origin);
}

/** Fetch-style `(Request) => Response`; the handler gets the payment as its second argument. */
export function x402Handler(options: X402Options, handler: FetchHandler<X402Payment>): (request: Request) => Promise<Response> {
  return fetchMiddleware(x402Gate(options), options.origin, handler);
}
