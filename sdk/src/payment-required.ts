/**
 * Reading a 402 answer (spec 4.7 `pay` step 2). The client is lenient where the gateway is strict:
 * unknown fields are ignored, and only the spec's own fields are forwarded to the gateway (whose
 * parsers refuse anything else). A body that is neither spec 2.7 (x402) nor spec 2.9 (MPP) is a
 * `PaymentProtocolError`.
 */
import { PaymentProtocolError } from "./errors.js";

export const MPP_PROTOCOL = "mpp/1.0";

/** Spec 2.7, as forwarded to the gateway. */
export interface X402Requirement {
  scheme: "exact";
  network: string;
  token: string;
  amount: string;
  payTo: string;
  resource: string;
}

/** Spec 2.9, as forwarded to the gateway. */
export interface MppRequest {
  protocol: typeof MPP_PROTOCOL;
  amount: { value: string; currency: string };
  paymentMethods: string[];
  sessionSupported: boolean;
  paymentEndpoint: string;
}

export interface PaymentOffer {
  x402?: X402Requirement;
  mpp?: MppRequest;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isString(value: unknown): value is string {
  return typeof value === "string" && value.length > 0;
}

export function readX402(value: unknown): X402Requirement | undefined {
  if (!isRecord(value) || value.scheme !== "exact") return undefined;
  const { network, token, amount, payTo, resource } = value;
  if (!isString(network) || !isString(token) || !isString(amount) || !isString(payTo) || !isString(resource)) return undefined;
  return { scheme: "exact", network, token, amount, payTo, resource };
}

export function readMpp(value: unknown): MppRequest | undefined {
  if (!isRecord(value) || value.protocol !== MPP_PROTOCOL) return undefined;
  const { amount, paymentMethods, sessionSupported, paymentEndpoint } = value;
  if (!isRecord(amount) || !isString(amount.value) || !isString(amount.currency)) return undefined;
  if (!Array.isArray(paymentMethods) || paymentMethods.length === 0 || paymentMethods.length > 32 || !paymentMethods.every(isString))
    return undefined;
  if (!isString(paymentEndpoint)) return undefined;
  return {
    protocol: MPP_PROTOCOL,
    amount: { value: amount.value, currency: amount.currency },
    paymentMethods: [...paymentMethods],
    sessionSupported: sessionSupported === true,
    paymentEndpoint,
  };
}

/**
 * The offers of a 402 body: the body itself as spec 2.7 or 2.9, or (leniently) a list of such
 * bodies, or an object holding them under `x402` / `mpp`.
 */
export function readPaymentOffer(body: unknown, endpoint: string): PaymentOffer {
  const candidates: unknown[] = Array.isArray(body) ? body.slice(0, 16) : [body];
  if (isRecord(body)) candidates.push(body.x402, body.mpp);
  const offer: PaymentOffer = {};
  for (const candidate of candidates) {
    offer.x402 ??= readX402(candidate);
    offer.mpp ??= readMpp(candidate);
  }
  if (offer.x402 === undefined && offer.mpp === undefined) {
    const named = isRecord(body) && typeof body.protocol === "string" ? ` (protocol ${JSON.stringify(body.protocol.slice(0, 40))})` : "";
    throw new PaymentProtocolError(
      `${endpoint} answered 402 with no recognised payment requirement${named}: neither x402 (spec 2.7) nor MPP mpp/1.0 (spec 2.9)`,
      endpoint,
    );
  }
  return offer;
}
