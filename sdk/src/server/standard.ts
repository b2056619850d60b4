/**
 * The standard payment formats both middlewares speak beside the spec's own, so the official
 * clients can pay an API protected by them (docs/sdk-server.md, docs/protocols.md "Interop"):
 * x402 v2 (`PAYMENT-REQUIRED` / `PAYMENT-SIGNATURE` / `PAYMENT-RESPONSE`), x402 v1 (`X-PAYMENT`
 * alone), and MPP's `solana` `charge` (`WWW-Authenticate: Payment`, challenge ids an HMAC under
 * the seller's secret).
 *
 * Settlement goes through the gateway (its standard facilitator, its MPP solana charges), which
 * checks, co-signs as fee payer, sends and records the payment. The seller's terms are always
 * this server's, never the client's: a payment for other terms is refused before the gateway is
 * called. Zero dependencies: node builtins and global fetch.
 */
import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { callGateway, type GatewayConfig, GatewayUnavailableError, isObject } from "./gateway.js";
import { answer, base64Json, type GateAnswer, type GateRequest, settlementBusy } from "./http.js";
import { usdcOf } from "./money.js";

export const PAYMENT_REQUIRED = "payment-required";
export const PAYMENT_SIGNATURE = "payment-signature";
export const PAYMENT_RESPONSE = "payment-response";
export const X_PAYMENT_V1 = "x-payment";
export const X_PAYMENT_RESPONSE_V1 = "x-payment-response";
export const WWW_AUTHENTICATE = "www-authenticate";
export const PAYMENT_RECEIPT = "payment-receipt";
/** The refusal reason of a standard payment (the official reason code), beside the 402. */
export const STANDARD_PAYMENT_ERROR = "x-payment-error";

const MAX_HEADER_CHARS = 16_384;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const BASE64URL = /^[A-Za-z0-9_-]*$/;
/** How long an MPP challenge may be paid (its `expires`). */
export const CHALLENGE_TTL_SECONDS = 300;
/** How long a gateway without standard terms is not asked again (a 402 stays spec-only meanwhile). */
const NONE_RETRY_MS = 30_000;
/** x402 `maxTimeoutSeconds`: how long the seller waits for settlement. */
const MAX_TIMEOUT_SECONDS = 60;

/** What the handler learns about a payment made in a standard format. */
export interface StandardPaymentInfo {
  readonly standard: "x402-v2" | "x402-v1" | "mpp-solana-charge";
  readonly protocol: "x402" | "mpp";
  /** The transfer transaction (what moved the tokens). */
  readonly txHash: string;
  /** The payment_ledger record naming it; null while it is pending or when the payer's side records it. */
  readonly recordTxHash: string | null;
  readonly payer: string;
  readonly amount: { usdc: number };
  readonly amountUnits: bigint;
  /** The network as the format named it (CAIP-2 for x402 v2, `localnet`/`devnet`/... for MPP). */
  readonly network: string;
}

export interface StandardOptions extends GatewayConfig {
  /**
   * Secret for the MPP challenge ids (HMAC-SHA256, at least 32 characters). Without it one is
   * derived from `apiKey`, so challenges survive restarts and every instance of the seller agrees.
   */
  readonly challengeSecret?: string;
}

/** The seller's terms for one request. */
export interface SellerTerms {
  readonly amountUnits: bigint;
  readonly payTo: string;
  /** The paid resource's URL. */
  readonly resource: string;
}

interface GatewayTerms {
  readonly x402: { readonly network: string; readonly networkV1: string | null; readonly feePayer: string } | null;
  readonly mpp: {
    readonly network: string;
    readonly currency: string;
    readonly decimals: number;
    readonly tokenProgram: string;
    readonly feePayerKey: string;
  } | null;
  readonly mint: string;
}

export function checkChallengeSecret(secret: string | undefined, where: string): void {
  if (secret !== undefined && (typeof secret !== "string" || secret.length < 32)) {
    throw new TypeError(`${where}: challengeSecret must be at least 32 characters`);
  }
}

export function base64Url(bytes: Uint8Array | string): string {
  return Buffer.from(bytes).toString("base64url");
}

/** RFC 8785 canonical JSON for the values a challenge holds (strings, booleans, safe integers, objects). */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value === "boolean" || typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number") {
    if (!Number.isSafeInteger(value)) throw new TypeError("canonicalJson: only safe integers");
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (isObject(value)) {
    const keys = Object.keys(value)
      .filter((key) => value[key] !== undefined)
      .sort();
    return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson(value[key])}`).join(",")}}`;
  }
  throw new TypeError(`canonicalJson: ${typeof value} is not JSON`);
}

/** Decodes strict padded standard base64 of UTF-8 JSON (x402 headers); undefined for anything else. */
function decodeBase64Json(text: string): unknown {
  if (text.length > MAX_HEADER_CHARS || text.length % 4 !== 0 || !BASE64.test(text)) return undefined;
  try {
    return JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(Buffer.from(text, "base64")));
  } catch {
    return undefined;
  }
}

export function decodeBase64UrlJson(text: string): unknown {
  if (text.length > MAX_HEADER_CHARS || !BASE64URL.test(text)) return undefined;
  try {
    return JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(Buffer.from(text, "base64url")));
  } catch {
    return undefined;
  }
}

/**
 * The standard side of one middleware: the 402's extra headers, and paying a request that carries
 * a standard payment. `terms` resolves the gateway's fee payer, networks and mint once.
 */
export class StandardPayments {
  readonly #secret: Buffer;
  #known: GatewayTerms | null = null;
  /** When the gateway last offered no standard format: asked again only after NONE_RETRY_MS. */
  #noneAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly options: StandardOptions) {
    const secret = options.challengeSecret ?? `apg-mpp-challenge:${createHash("sha256").update(options.apiKey).digest("hex")}`;
    this.#secret = Buffer.from(secret, "utf8");
  }

  /** The gateway's standard terms; null when it offers none (no fee payer configured) or is unreachable now. */
  async terms(): Promise<GatewayTerms | null> {
    if (this.#known !== null) return this.#known;
    if (Date.now() - this.#noneAt < NONE_RETRY_MS) return null;
    let x402: GatewayTerms["x402"] = null;
    let mpp: GatewayTerms["mpp"] = null;
    let mint: string | null = null;
    try {
      const [supported, solana] = await Promise.all([
        callGateway(this.options, "GET", "/v1/x402/facilitator/supported"),
        callGateway(this.options, "GET", "/v1/mpp/solana/supported"),
      ]);
      if (supported.status === 200 && isObject(supported.body) && Array.isArray(supported.body.kinds)) {
        const kinds = supported.body.kinds.filter(isObject);
        const v2 = kinds.find((kind) => kind.x402Version === 2 && kind.scheme === "exact");
        const v1 = kinds.find((kind) => kind.x402Version === 1 && kind.scheme === "exact");
        const feePayer = isObject(v2?.extra) ? v2.extra.feePayer : undefined;
        if (v2 !== undefined && typeof v2.network === "string" && typeof feePayer === "string") {
          x402 = { network: v2.network, networkV1: typeof v1?.network === "string" ? v1.network : null, feePayer };
        }
      }
      const body = solana.body;
      if (
        solana.status === 200 &&
        isObject(body) &&
        typeof body.network === "string" &&
        typeof body.currency === "string" &&
        typeof body.decimals === "number" &&
        typeof body.tokenProgram === "string" &&
        typeof body.feePayerKey === "string"
      ) {
        const { network, currency, decimals, tokenProgram, feePayerKey } = body;
        mpp = { network, currency, decimals, tokenProgram, feePayerKey };
        mint = currency;
      }
      if (mint === null) {
        const spec = await callGateway(this.options, "GET", "/v1/x402/supported");
        if (spec.status === 200 && isObject(spec.body) && isObject(spec.body.tokens) && typeof spec.body.tokens.usdc === "string") {
          mint = spec.body.tokens.usdc;
        }
      }
    } catch (error) {
      if (error instanceof GatewayUnavailableError) return this.#none();
      throw error;
    }
    if (mint === null || (x402 === null && mpp === null)) return this.#none();
    return (this.#known = { x402, mpp, mint });
  }

  /** No standard terms now (no fee payer, or the gateway unreachable): every 402 must not ask again. */
  #none(): null {
    this.#noneAt = Date.now();
    return null;
  }

  /** The headers a 402 carries beside the spec's body; none when the gateway offers no standard format. */
  async challengeHeaders(request: GateRequest, seller: SellerTerms, error?: string): Promise<Record<string, string>> {
    const terms = await this.terms();
    if (terms === null) return {};
    const headers: Record<string, string> = {};
    if (terms.x402 !== null) headers[PAYMENT_REQUIRED] = base64Json(this.#paymentRequired(terms, seller, error));
    if (terms.mpp !== null) headers[WWW_AUTHENTICATE] = this.#challenge(request, terms, seller);
    return headers;
  }

  /**
   * True when the request carries a standard payment: `Authorization: Payment`, `PAYMENT-SIGNATURE`,
   * or an `X-PAYMENT` that is an x402 v1 payload (`x402Version: 1`). The spec's `X-PAYMENT` (with
   * or without its `X-PAYMENT-SIGNATURE`) is the caller's to handle, as before.
   */
  carriesPayment(request: GateRequest, specSignatureHeader: string): boolean {
    if (paymentCredential(request) !== undefined) return true;
    if (request.header(PAYMENT_SIGNATURE) !== undefined) return true;
    const v1 = request.header(X_PAYMENT_V1);
    if (v1 === undefined || request.header(specSignatureHeader) !== undefined) return false;
    const decoded = decodeBase64Json(v1.trim());
    return isObject(decoded) && decoded.x402Version === 1;
  }

  /**
   * Settles the standard payment the request carries, for this seller's terms. `refuse` renders
   * a refusal as the middleware's own 402 (its spec body, fresh challenges, the reason header).
   */
  async pay(
    request: GateRequest,
    seller: SellerTerms,
    refuse: (reason: string) => Promise<GateAnswer>,
  ): Promise<GateAnswer | { kind: "paid"; info: StandardPaymentInfo; headers: Record<string, string> }> {
    const terms = await this.terms();
    if (terms === null) return answer(503, { error: "facilitator_unavailable" }, { "retry-after": "5" });
    try {
      const credential = paymentCredential(request);
      if (credential !== undefined) return await this.#payMpp(request, terms, seller, credential, refuse);
      const v2 = request.header(PAYMENT_SIGNATURE);
      if (v2 !== undefined) return await this.#payX402(terms, seller, v2, 2, refuse);
      return await this.#payX402(terms, seller, request.header(X_PAYMENT_V1) ?? "", 1, refuse);
    } catch (error) {
      if (error instanceof GatewayUnavailableError) return answer(503, { error: "facilitator_unavailable" }, { "retry-after": "5" });
      throw error;
    }
  }

  // ---------------------------------------------------------------- x402

  #requirement(terms: GatewayTerms, seller: SellerTerms, version: 1 | 2): Record<string, unknown> | null {
    const x402 = terms.x402;
    if (x402 === null) return null;
    const extra = { feePayer: x402.feePayer };
    if (version === 2) {
      return {
        scheme: "exact",
        network: x402.network,
        amount: seller.amountUnits.toString(),
        asset: terms.mint,
        payTo: seller.payTo,
        maxTimeoutSeconds: MAX_TIMEOUT_SECONDS,
        extra,
      };
    }
    if (x402.networkV1 === null) return null;
    return {
      scheme: "exact",
      network: x402.networkV1,
      maxAmountRequired: seller.amountUnits.toString(),
      resource: seller.resource,
      description: "",
      mimeType: "application/json",
      payTo: seller.payTo,
      maxTimeoutSeconds: MAX_TIMEOUT_SECONDS,
      asset: terms.mint,
      extra,
    };
  }

  #paymentRequired(terms: GatewayTerms, seller: SellerTerms, error?: string): Record<string, unknown> {
    return {
      x402Version: 2,
      error: error ?? "PAYMENT-SIGNATURE header is required",
      resource: { url: seller.resource, mimeType: "application/json" },
      accepts: [this.#requirement(terms, seller, 2)],
    };
  }

  async #payX402(
    terms: GatewayTerms,
    seller: SellerTerms,
    header: string,
    version: 1 | 2,
    refuse: (reason: string) => Promise<GateAnswer>,
  ): Promise<GateAnswer | { kind: "paid"; info: StandardPaymentInfo; headers: Record<string, string> }> {
    const requirement = this.#requirement(terms, seller, version);
    if (requirement === null) return refuse("invalid_exact_svm_unsupported_scheme");
    const payload = decodeBase64Json(header.trim());
    if (!isObject(payload) || payload.x402Version !== version || !isObject(payload.payload)) return refuse("invalid_payload");
    // The payload must accept exactly this server's requirement (the official server's rule too).
    const accepted = version === 2 ? payload.accepted : payload;
    if (!isObject(accepted) || !sameTerms(accepted, requirement, version)) return refuse("invalid_exact_svm_payment_requirements_mismatch");
    const key = `x402-standard-settle:${createHash("sha256").update(header.trim()).digest("hex")}`;
    // The resource recorded is this server's own URL, whatever the (unsigned) payload says.
    const paymentPayload = version === 2 ? { ...payload, resource: { url: seller.resource, mimeType: "application/json" } } : payload;
    const body = { x402Version: version, paymentPayload, paymentRequirements: requirement };
    const settled = await callGateway(this.options, "POST", "/v1/x402/facilitator/settle", body, key);
    const result = settled.body;
    if (settled.status !== 200 || !isObject(result) || typeof result.success !== "boolean") {
      if (settled.status === 409) return settlementBusy("settlement_in_progress", STANDARD_PAYMENT_ERROR);
      if (settled.status === 400) return refuse("invalid_payload");
      return answer(502, { error: "facilitator_error", status: settled.status });
    }
    if (!result.success) {
      const reason = typeof result.errorReason === "string" ? result.errorReason : "settlement_failed";
      if (reason === "settlement_pending") return settlementBusy("settlement_pending", STANDARD_PAYMENT_ERROR);
      return refuse(reason);
    }
    // A replayed answer is a replayed payment: it paid for a request already served.
    if (settled.headers.get("idempotent-replayed") === "true") return refuse("duplicate_settlement");
    if (typeof result.transaction !== "string" || typeof result.payer !== "string") return answer(502, { error: "facilitator_error" });
    const extra = isObject(result.extra) ? result.extra : {};
    const info: StandardPaymentInfo = {
      standard: version === 2 ? "x402-v2" : "x402-v1",
      protocol: "x402",
      txHash: result.transaction,
      recordTxHash: typeof extra.recordTransaction === "string" ? extra.recordTransaction : null,
      payer: result.payer,
      amount: usdcOf(seller.amountUnits),
      amountUnits: seller.amountUnits,
      network: requirement.network as string,
    };
    const receipt = { success: true, transaction: result.transaction, network: requirement.network, payer: result.payer };
    const name = version === 2 ? PAYMENT_RESPONSE : X_PAYMENT_RESPONSE_V1;
    return { kind: "paid", info, headers: { [name]: base64Json(receipt), "cache-control": "private" } };
  }

  // ---------------------------------------------------------------- MPP

  #chargeRequest(terms: NonNullable<GatewayTerms["mpp"]>, seller: SellerTerms): Record<string, unknown> {
    return {
      amount: seller.amountUnits.toString(),
      currency: terms.currency,
      recipient: seller.payTo,
      methodDetails: {
        network: terms.network,
        decimals: terms.decimals,
        tokenProgram: terms.tokenProgram,
        feePayer: true,
        feePayerKey: terms.feePayerKey,
      },
    };
  }

  /** The id binds every parameter (mppx's seven slots, no digest / opaque): an altered challenge does not verify. */
  challengeId(realm: string, requestB64: string, expires: string, intent: "charge" | "session" = "charge"): string {
    const input = [realm, "solana", intent, requestB64, expires, "", ""].join("|");
    return createHmac("sha256", this.#secret).update(input, "utf8").digest("base64url");
  }

  #challenge(request: GateRequest, terms: GatewayTerms, seller: SellerTerms): string {
    const realm = request.url.host;
    const requestB64 = base64Url(canonicalJson(this.#chargeRequest(terms.mpp!, seller)));
    const expires = new Date(Math.floor(Date.now() / 1000) * 1000 + CHALLENGE_TTL_SECONDS * 1000).toISOString();
    const id = this.challengeId(realm, requestB64, expires);
    const params = { id, realm, method: "solana", intent: "charge", request: requestB64, expires };
    return `Payment ${Object.entries(params)
      .map(([name, value]) => `${name}="${value}"`)
      .join(", ")}`;
  }

  async #payMpp(
    request: GateRequest,
    terms: GatewayTerms,
    seller: SellerTerms,
    credentialText: string,
    refuse: (reason: string) => Promise<GateAnswer>,
  ): Promise<GateAnswer | { kind: "paid"; info: StandardPaymentInfo; headers: Record<string, string> }> {
    if (terms.mpp === null) return refuse("method-unsupported");
    const credential = decodeBase64UrlJson(credentialText);
    if (!isObject(credential) || !isObject(credential.challenge) || !isObject(credential.payload)) return refuse("malformed-credential");
    const challenge = credential.challenge;
    const { id, realm, method, intent, request: requestB64, expires } = challenge;
    if (typeof id !== "string" || typeof realm !== "string" || typeof requestB64 !== "string" || typeof expires !== "string") {
      return refuse("malformed-credential");
    }
    if (challenge.digest !== undefined || challenge.opaque !== undefined) return refuse("invalid-challenge");
    // Only our own challenges: the id is our HMAC of exactly these parameters.
    const expected = Buffer.from(this.challengeId(realm, requestB64, expires));
    const given = Buffer.from(id);
    if (method !== "solana" || intent !== "charge" || given.length !== expected.length || !timingSafeEqual(given, expected)) {
      return refuse("invalid-challenge");
    }
    if (realm !== request.url.host) return refuse("invalid-challenge");
    const expiresAt = Date.parse(expires);
    if (!Number.isFinite(expiresAt) || expiresAt < Date.now()) return refuse("payment-expired");
    // The challenge must be for THIS resource's terms (a cheaper route's credential is not this one's).
    const wanted = base64Url(canonicalJson(this.#chargeRequest(terms.mpp, seller)));
    if (requestB64 !== wanted) return refuse("invalid-challenge");
    const payload = credential.payload;
    if (payload.type !== "transaction" || typeof payload.transaction !== "string") return refuse("method-unsupported");

    const key = `mpp-solana-charge:${createHash("sha256").update(payload.transaction).digest("hex")}`;
    const body = {
      transaction: payload.transaction,
      amount: seller.amountUnits.toString(),
      recipient: seller.payTo,
      endpoint: seller.resource,
    };
    const charged = await callGateway(this.options, "POST", "/v1/mpp/solana/charge", body, key);
    const result = charged.body;
    if (charged.status === 202) return settlementBusy("settlement_pending", STANDARD_PAYMENT_ERROR);
    if (charged.status === 409) return settlementBusy("settlement_in_progress", STANDARD_PAYMENT_ERROR);
    if (charged.status === 400) return refuse("malformed-credential");
    if (charged.status !== 200 || !isObject(result) || typeof result.success !== "boolean") {
      return answer(502, { error: "mpp_service_error", status: charged.status });
    }
    if (!result.success) return refuse(typeof result.reason === "string" ? result.reason : "verification-failed");
    if (charged.headers.get("idempotent-replayed") === "true") return refuse("duplicate_settlement");
    if (typeof result.signature !== "string" || typeof result.payer !== "string") return answer(502, { error: "mpp_service_error" });
    const record = isObject(result.record) ? result.record : {};
    const info: StandardPaymentInfo = {
      standard: "mpp-solana-charge",
      protocol: "mpp",
      txHash: result.signature,
      recordTxHash: typeof record.signature === "string" ? record.signature : null,
      payer: result.payer,
      amount: usdcOf(seller.amountUnits),
      amountUnits: seller.amountUnits,
      network: terms.mpp.network,
    };
    const receipt = {
      method: "solana",
      challengeId: id,
      reference: result.signature,
      status: "success",
      timestamp: new Date().toISOString(),
    };
    return { kind: "paid", info, headers: { [PAYMENT_RECEIPT]: base64Url(JSON.stringify(receipt)), "cache-control": "private" } };
  }
}

/** The `Payment` credential of `Authorization` (one of possibly several comma-separated schemes). */
export function paymentCredential(request: GateRequest): string | undefined {
  const header = request.header("authorization");
  if (header === undefined) return undefined;
  for (const part of header.split(",")) {
    const match = /^\s*Payment\s+([A-Za-z0-9_-]+)\s*$/i.exec(part);
    if (match !== null) return match[1];
  }
  return undefined;
}

/**
 * The accepted requirement is exactly ours in every term that decides the money (v2: `extra`
 * compared key by key). A v1 payload names only scheme and network; its transaction is checked
 * against our requirement's amount and payee by the gateway.
 */
function sameTerms(accepted: Record<string, unknown>, requirement: Record<string, unknown>, version: 1 | 2): boolean {
  const fields = version === 2 ? ["scheme", "network", "asset", "payTo", "amount"] : ["scheme", "network"];
  if (!fields.every((field) => accepted[field] === requirement[field])) return false;
  if (version === 1) return true;
  const extra = isObject(accepted.extra) ? accepted.extra : {};
  const ours = requirement.extra as Record<string, unknown>;
  return Object.keys(ours).every((key) => extra[key] === ours[key]);
}
