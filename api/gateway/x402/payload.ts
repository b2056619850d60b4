/**
 * The x402 PaymentPayload of spec 2.8 and the exact bytes its ed25519 signature covers.
 *
 * Wire shape (JSON, base64 in `X-PAYMENT`):
 *   { scheme, network, payload: { from, to, amount, token, nonce, validUntil }, signature }
 * `payload.validUntil` (unix seconds, decimal string) is our addition to 2.8: it bounds how long
 * a signed payload may be settled and so how long its nonce must be remembered. `signature` is
 * the base58 encoding of the 64-byte detached signature.
 *
 * Canonical signing bytes (version 1), documented in docs/protocols.md:
 *   field(DOMAIN) || field(scheme) || field(network) || field(from) || field(to) || field(amount)
 *   || field(token) || field(nonce) || field(validUntil)
 * where field(s) = u32 big-endian byte length of UTF-8(s) || UTF-8(s), DOMAIN =
 * "apg-x402-payment-v1", and every field is the string exactly as it travels (the parser admits
 * only one spelling of each: amounts without leading zeros, canonical base58 addresses).
 */
import bs58 from "bs58";
import { X402FormatError } from "./errors.js";
import { address, lengthPrefixed, parseNonce, parseSeconds, parseSignature } from "../wire/consent.js";
import { network, X402_SCHEME } from "./requirement.js";
import { exactKeys, type Fail, object, unitsText } from "../wire/strict-json.js";

export const PAYLOAD_DOMAIN = "apg-x402-payment-v1";
export interface PaymentAuthorization {
  /** Agent wallet address (base58). */
  readonly from: string;
  readonly to: string;
  readonly amountUnits: bigint;
  readonly token: string;
  readonly nonce: string;
  /** Unix seconds after which the payload must not be settled. */
  readonly validUntilSeconds: number;
}

export interface PaymentPayload {
  readonly scheme: typeof X402_SCHEME;
  readonly network: string;
  readonly payload: PaymentAuthorization;
  /** The 64-byte ed25519 signature over `canonicalPayloadBytes`. */
  readonly signature: Uint8Array;
}

export interface PaymentPayloadBody {
  scheme: string;
  network: string;
  payload: { from: string; to: string; amount: string; token: string; nonce: string; validUntil: string };
  signature: string;
}

const fail: Fail = (field, detail) => {
  throw new X402FormatError("malformed_payload", field, detail);
};

export function parsePaymentPayload(json: unknown): PaymentPayload {
  const body = object(json, "body", fail);
  exactKeys(body, ["scheme", "network", "payload", "signature"], [], "", fail);
  if (body.scheme !== X402_SCHEME) fail("scheme", `expected "${X402_SCHEME}"`);
  const inner = object(body.payload, "payload", fail);
  exactKeys(inner, ["from", "to", "amount", "token", "nonce", "validUntil"], [], "payload.", fail);
  return {
    scheme: X402_SCHEME,
    network: network(body.network, "network", fail),
    payload: {
      from: address(inner.from, "payload.from", fail),
      to: address(inner.to, "payload.to", fail),
      amountUnits: unitsText(inner.amount, "payload.amount", fail),
      token: address(inner.token, "payload.token", fail),
      nonce: parseNonce(inner.nonce, "payload.nonce", fail),
      validUntilSeconds: parseSeconds(inner.validUntil, "payload.validUntil", fail),
    },
    signature: parseSignature(body.signature, "signature", fail),
  };
}

export function payloadBody(payload: PaymentPayload): PaymentPayloadBody {
  const p = payload.payload;
  return {
    scheme: payload.scheme,
    network: payload.network,
    payload: {
      from: p.from,
      to: p.to,
      amount: p.amountUnits.toString(),
      token: p.token,
      nonce: p.nonce,
      validUntil: String(p.validUntilSeconds),
    },
    signature: bs58.encode(payload.signature),
  };
}

/** The bytes the agent signs and the facilitator verifies (see the header comment). */
export function canonicalPayloadBytes(scheme: string, networkName: string, p: PaymentAuthorization): Uint8Array {
  return lengthPrefixed([
    PAYLOAD_DOMAIN,
    scheme,
    networkName,
    p.from,
    p.to,
    p.amountUnits.toString(),
    p.token,
    p.nonce,
    String(p.validUntilSeconds),
  ]);
}
