/**
 * x402 v2's `upto` scheme mapped onto a payment_ledger channel (docs/protocols.md "x402
 * sessions"): beside the `exact` requirement the 402 lists an `upto` one priced per call, paid
 * with `PAYMENT-SIGNATURE` carrying the same cumulative voucher as the MPP session intent and
 * checked by the same ChannelBook. `PAYMENT-RESPONSE` has an empty `transaction`: nothing is
 * sent per request, the charge settles with the payee's next batch.
 *
 * This is NOT the official `@x402/svm` upto scheme (another program, voucher and flow);
 * `extra.paymentFlow: "apg-channel-voucher"` says so, and an official client does not pick it.
 */
import { isObject } from "../gateway.js";
import type { GateRequest } from "../http.js";
import { base58Decode } from "./base58.js";
import type { PresentedVoucher } from "./book.js";
import { SessionVoucherError } from "./errors.js";
import { parseVoucher } from "./session-intent.js";

export const UPTO_PAYMENT_FLOW = "apg-channel-voucher";
const MAX_HEADER_CHARS = 16_384;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

export interface UptoTerms {
  readonly network: string;
  readonly mint: string;
  readonly payTo: string;
  readonly amountUnits: bigint;
  readonly channelProgram: string;
}

export function uptoRequirement(terms: UptoTerms): Record<string, unknown> {
  return {
    scheme: "upto",
    network: terms.network,
    amount: terms.amountUnits.toString(),
    asset: terms.mint,
    payTo: terms.payTo,
    maxTimeoutSeconds: 60,
    extra: { paymentFlow: UPTO_PAYMENT_FLOW, channelProgram: terms.channelProgram, voucherFormat: "payment_ledger:channel-voucher:v1" },
  };
}

/** The decoded `PAYMENT-SIGNATURE` when it pays with an `upto` requirement; undefined otherwise. */
export function uptoPayloadOf(request: GateRequest): Record<string, unknown> | undefined {
  const header = request.header("payment-signature")?.trim();
  if (header === undefined || header.length > MAX_HEADER_CHARS || header.length % 4 !== 0 || !BASE64.test(header)) return undefined;
  try {
    const decoded: unknown = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(Buffer.from(header, "base64")));
    return isObject(decoded) && isObject(decoded.accepted) && decoded.accepted.scheme === "upto" ? decoded : undefined;
  } catch {
    return undefined;
  }
}

/** The voucher an `upto` payload carries, after checking it accepted exactly this route's requirement. */
export function parseUptoPayload(decoded: Record<string, unknown>, terms: UptoTerms): PresentedVoucher {
  const accepted = decoded.accepted as Record<string, unknown>;
  const ours = uptoRequirement(terms);
  const extra = isObject(accepted.extra) ? accepted.extra : {};
  const same =
    decoded.x402Version === 2 &&
    ["scheme", "network", "amount", "asset", "payTo"].every((field) => accepted[field] === ours[field]) &&
    extra.paymentFlow === UPTO_PAYMENT_FLOW &&
    extra.channelProgram === terms.channelProgram;
  if (!same) throw new SessionVoucherError("invalid-challenge", "the payload accepted another requirement than this route's upto");
  const payload = decoded.payload;
  if (!isObject(payload) || typeof payload.channelId !== "string" || base58Decode(payload.channelId)?.length !== 32) {
    throw new SessionVoucherError("malformed-credential", "payload.channelId must be a channel address");
  }
  return parseVoucher(payload.channelId, payload);
}
