/**
 * The x402 retry headers of spec 4.3: `X-PAYMENT` carries the PaymentPayload as standard base64
 * (RFC 4648 §4, padded) of its UTF-8 JSON; `X-PAYMENT-SIGNATURE` carries the signature (base58),
 * the same value as the payload's `signature` field. Both must be present and agree.
 *
 * Not to be confused with x402 v2's `PAYMENT-SIGNATURE`, which carries a whole payload (see
 * docs/protocols.md).
 */
import bs58 from "bs58";
import { X402FormatError } from "./errors.js";
import { type PaymentPayload, parsePaymentPayload, payloadBody } from "./payload.js";

export const X_PAYMENT = "X-PAYMENT";
export const X_PAYMENT_SIGNATURE = "X-PAYMENT-SIGNATURE";

/** Bound on the decoded header: a payload is a few hundred bytes. */
export const MAX_PAYMENT_HEADER_CHARS = 8_192;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

export function encodePaymentHeaders(payload: PaymentPayload): Record<typeof X_PAYMENT | typeof X_PAYMENT_SIGNATURE, string> {
  return {
    [X_PAYMENT]: Buffer.from(JSON.stringify(payloadBody(payload)), "utf8").toString("base64"),
    [X_PAYMENT_SIGNATURE]: bs58.encode(payload.signature),
  };
}

/** Header lookup, case-insensitive as HTTP is; node's IncomingHttpHeaders and fetch Headers both fit. */
export type HeaderSource = { get(name: string): string | null } | Record<string, string | string[] | undefined>;

export function header(source: HeaderSource, name: string): string | undefined {
  if (typeof source.get === "function") return (source as { get(name: string): string | null }).get(name) ?? undefined;
  const record = source as Record<string, string | string[] | undefined>;
  const value = record[name.toLowerCase()] ?? record[name];
  return Array.isArray(value) ? value.join(", ") : value;
}

const fail = (field: string, detail: string): never => {
  throw new X402FormatError("malformed_headers", field, detail);
};

/** True when the request carries either payment header (an attempt to pay, even a broken one). */
export function hasPaymentHeaders(source: HeaderSource): boolean {
  return header(source, X_PAYMENT) !== undefined || header(source, X_PAYMENT_SIGNATURE) !== undefined;
}

/** Decodes and parses both headers; throws `X402FormatError` for anything malformed or mismatched. */
export function decodePaymentHeaders(source: HeaderSource): PaymentPayload {
  const encoded = header(source, X_PAYMENT);
  const signature = header(source, X_PAYMENT_SIGNATURE);
  if (encoded === undefined) return fail(X_PAYMENT, "missing");
  if (signature === undefined) return fail(X_PAYMENT_SIGNATURE, "missing");
  if (encoded.length > MAX_PAYMENT_HEADER_CHARS || !BASE64.test(encoded) || encoded.length % 4 !== 0) {
    return fail(X_PAYMENT, "expected padded standard base64");
  }
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(encoded, "base64").toString("utf8"));
  } catch {
    return fail(X_PAYMENT, "not base64 of JSON");
  }
  const payload = parsePaymentPayload(json);
  if (signature.trim() !== bs58.encode(payload.signature)) fail(X_PAYMENT_SIGNATURE, "differs from the payload's signature");
  return payload;
}
