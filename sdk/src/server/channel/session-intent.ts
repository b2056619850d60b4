/**
 * The MPP `session` intent on the wire (method `solana`, payment_ledger's channel program): the
 * challenge this payee sends, the credential (`open`, `voucher`, `close`) it reads and the
 * `Payment-Receipt` it answers; shapes in docs/sdk-server.md "Channel sessions".
 *
 * The challenge id is this seller's HMAC (standard.ts), so a credential echoing a challenge never
 * issued is refused. Its expiry binds only `open`: a session outlives a 5-minute challenge, and
 * every voucher is bound by its own signature, sequence and the channel's expiry instead.
 */
import { isObject } from "../gateway.js";
import type { GateRequest } from "../http.js";
import {
  base64Url,
  CHALLENGE_TTL_SECONDS,
  canonicalJson,
  decodeBase64UrlJson,
  paymentCredential,
  type StandardPayments,
} from "../standard.js";
import { base58Decode } from "./base58.js";
import type { PresentedVoucher } from "./book.js";
import { SessionVoucherError } from "./errors.js";

export type SessionAction = "open" | "voucher" | "close";

export interface SessionCredential {
  readonly action: SessionAction;
  readonly challengeId: string;
  readonly channel: string;
  /** Absent for `close`. */
  readonly voucher: PresentedVoucher | undefined;
}

export interface SessionTerms {
  readonly amountUnits: bigint;
  readonly mint: string;
  readonly payTo: string;
  readonly network: string;
  readonly channelProgram: string;
}

const U64 = /^(0|[1-9]\d{0,19})$/;
const HEX32 = /^[0-9a-f]{64}$/;

export function sessionRequest(terms: SessionTerms): Record<string, unknown> {
  return {
    amount: terms.amountUnits.toString(),
    currency: terms.mint,
    recipient: terms.payTo,
    methodDetails: { network: terms.network, channelProgram: terms.channelProgram, decimals: 6, voucherSigner: "client" },
  };
}

/** The `WWW-Authenticate` challenge value for this route. */
export function sessionChallenge(standard: StandardPayments, request: GateRequest, terms: SessionTerms): string {
  const realm = request.url.host;
  const requestB64 = base64Url(canonicalJson(sessionRequest(terms)));
  const expires = new Date(Math.floor(Date.now() / 1000) * 1000 + CHALLENGE_TTL_SECONDS * 1000).toISOString();
  const id = standard.challengeId(realm, requestB64, expires, "session");
  const params = { id, realm, method: "solana", intent: "session", request: requestB64, expires };
  return `Payment ${Object.entries(params)
    .map(([name, value]) => `${name}="${value}"`)
    .join(", ")}`;
}

/** The decoded credential when the request carries a `session` one; undefined for any other (or none). */
export function sessionCredentialOf(request: GateRequest): Record<string, unknown> | undefined {
  const text = paymentCredential(request);
  if (text === undefined) return undefined;
  const credential = decodeBase64UrlJson(text);
  if (!isObject(credential) || !isObject(credential.challenge) || credential.challenge.intent !== "session") return undefined;
  return credential;
}

const U64_MAX = (1n << 64n) - 1n;

function u64(value: unknown, what: string): bigint {
  if (typeof value === "number" && Number.isSafeInteger(value) && value >= 0) return BigInt(value);
  // 20 digits may still pass u64: the value is checked, not only its length.
  if (typeof value !== "string" || !U64.test(value) || BigInt(value) > U64_MAX) {
    throw new SessionVoucherError("malformed-credential", `${what} must be a u64 string`);
  }
  return BigInt(value);
}

/** Parses and authenticates a session credential (challenge ours, fields well-formed); throws SessionVoucherError. */
export function parseSessionCredential(
  standard: StandardPayments,
  request: GateRequest,
  credential: Record<string, unknown>,
): SessionCredential {
  const challenge = credential.challenge as Record<string, unknown>;
  const payload = credential.payload;
  const { id, realm, request: requestB64, expires } = challenge;
  if (typeof id !== "string" || typeof realm !== "string" || typeof requestB64 !== "string" || typeof expires !== "string") {
    throw new SessionVoucherError("malformed-credential", "the challenge is incomplete");
  }
  if (challenge.method !== "solana" || realm !== request.url.host || id !== standard.challengeId(realm, requestB64, expires, "session")) {
    throw new SessionVoucherError("invalid-challenge", "not a challenge of this service");
  }
  if (!isObject(payload) || typeof payload.channelId !== "string" || base58Decode(payload.channelId)?.length !== 32) {
    throw new SessionVoucherError("malformed-credential", "payload.channelId must be a channel address");
  }
  const action = payload.action;
  if (action !== "open" && action !== "voucher" && action !== "close") {
    throw new SessionVoucherError("malformed-credential", "payload.action must be open, voucher or close");
  }
  if (action === "open" && !(Date.parse(expires) > Date.now())) throw new SessionVoucherError("invalid-challenge", "the challenge expired");
  const channel = payload.channelId;
  if (action === "close") return { action, challengeId: id, channel, voucher: undefined };
  return { action, challengeId: id, channel, voucher: parseVoucher(channel, payload) };
}

/**
 * The voucher of a payload `{ voucher: { channelId, cumulativeAmount, sequence, paymentId, amount,
 * endpoint, digest }, signer, signature, signatureType: "ed25519" }` (MPP session credential and
 * x402 upto payload alike); throws SessionVoucherError("malformed-credential").
 */
export function parseVoucher(channel: string, payload: Record<string, unknown>): PresentedVoucher {
  const v = payload.voucher;
  if (!isObject(v) || v.channelId !== channel)
    throw new SessionVoucherError("malformed-credential", "payload.voucher is missing or for another channel");
  if (payload.signatureType !== "ed25519" || typeof payload.signer !== "string" || typeof payload.signature !== "string") {
    throw new SessionVoucherError("malformed-credential", "signer, signature and signatureType ed25519 are required");
  }
  if (typeof v.endpoint !== "string" || v.endpoint.length > 2_048 || typeof v.digest !== "string" || !HEX32.test(v.digest)) {
    throw new SessionVoucherError("malformed-credential", "voucher endpoint and digest (hex) are required");
  }
  return {
    channel,
    cumulativeUnits: u64(v.cumulativeAmount, "cumulativeAmount"),
    sequence: u64(v.sequence, "sequence"),
    paymentId: u64(v.paymentId, "paymentId"),
    amountUnits: u64(v.amount, "amount"),
    endpoint: v.endpoint,
    digest: Buffer.from(v.digest, "hex"),
    signer: payload.signer,
    signature: payload.signature,
  };
}

export function sessionReceipt(channel: string, challengeId: string, acceptedCumulativeUnits: bigint): string {
  const receipt = {
    method: "solana",
    intent: "session",
    status: "success",
    timestamp: new Date().toISOString(),
    reference: channel,
    channelId: channel,
    challengeId,
    acceptedCumulative: acceptedCumulativeUnits.toString(),
    spent: acceptedCumulativeUnits.toString(),
  };
  return base64Url(JSON.stringify(receipt));
}
