/**
 * The request headers that carry a signed transfer back to the payee, in the format it asked in:
 *
 * - x402 v2: `PAYMENT-SIGNATURE` = standard base64 of the JSON PaymentPayload
 *   `{x402Version: 2, resource, accepted, payload: {transaction}, extensions}` (`accepted` and
 *   `resource` echoed verbatim: the server compares them with its own requirements);
 * - x402 v1: `X-PAYMENT` = base64 of `{x402Version: 1, scheme, network, payload: {transaction}}`;
 * - MPP: `Authorization: Payment <base64url, no padding, of {challenge, payload}>` with the
 *   challenge's parameters echoed unchanged and `payload = {type: "transaction", transaction}`
 *   (the `solana` method's pull mode).
 *
 * Imported by pay/authorize.ts (via index.ts); pure.
 */
import type { MppChallenge, TransferWire } from "./offers.js";

export const PAYMENT_SIGNATURE = "PAYMENT-SIGNATURE";
export const X_PAYMENT = "X-PAYMENT";
export const AUTHORIZATION = "Authorization";

function base64Json(value: unknown): string {
  return Buffer.from(JSON.stringify(value), "utf8").toString("base64");
}

function mppChallengeFields(challenge: MppChallenge): Record<string, string> {
  const { id, realm, method, intent, request, expires, description, digest, opaque } = challenge;
  return {
    id,
    realm,
    method,
    intent,
    request,
    ...(expires === undefined ? {} : { expires }),
    ...(description === undefined ? {} : { description }),
    ...(digest === undefined ? {} : { digest }),
    ...(opaque === undefined ? {} : { opaque }),
  };
}

/** The headers to add to the retried request, for a transfer signed as base64 `transaction`. */
export function paymentHeaders(wire: TransferWire, transaction: string): Record<string, string> {
  if (wire.format === "x402-v2") {
    return {
      [PAYMENT_SIGNATURE]: base64Json({
        x402Version: 2,
        ...(wire.resource === null ? {} : { resource: wire.resource }),
        accepted: wire.accepted,
        payload: { transaction },
        ...(wire.extensions === null ? {} : { extensions: wire.extensions }),
      }),
    };
  }
  if (wire.format === "x402-v1") {
    return { [X_PAYMENT]: base64Json({ x402Version: 1, scheme: wire.scheme, network: wire.network, payload: { transaction } }) };
  }
  const credential = { challenge: mppChallengeFields(wire.challenge), payload: { type: "transaction", transaction } };
  return { [AUTHORIZATION]: `Payment ${Buffer.from(JSON.stringify(credential), "utf8").toString("base64url")}` };
}
