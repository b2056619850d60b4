/**
 * The gateway's payment authorization (`POST /v1/agents/{agentId}/payments/authorize`): the
 * policy check of spec 4.7 step 3, a reservation, and what the pay flow presents to the paid API
 * (signed x402 headers, an MPP submission, or a signed transfer for a real x402 / MPP server).
 * The answer is read defensively: a shape the client cannot use is a typed error, never a payment
 * half made.
 */
import { PaymentProtocolError, ServiceError } from "./errors.js";
import type { Usdc } from "./money.js";

export interface X402Authorization {
  reservationId: string;
  /** The policy version the gateway authorized the payment under (absent from a gateway that records none). */
  policyVersion?: number;
  protocol: "x402";
  amount: Usdc;
  headers: Record<string, string>;
}

export interface MppAuthorization {
  reservationId: string;
  /** The policy version the gateway authorized the payment under (absent from a gateway that records none). */
  policyVersion?: number;
  protocol: "mpp";
  amount: Usdc;
  method: string;
  paymentEndpoint: string;
  submission: unknown;
}

/** The payee's own wire format of a real x402 / MPP payment. */
export type TransferFormat = "x402-v2" | "x402-v1" | "mpp";

/**
 * A real x402 or MPP payment: the gateway signed a token transfer the payee's side co-signs and
 * broadcasts; `headers` carry it (`PAYMENT-SIGNATURE`, `X-PAYMENT` or `Authorization: Payment`).
 */
export interface TransferAuthorization {
  reservationId: string;
  /** The policy version the gateway authorized the payment under (absent from a gateway that records none). */
  policyVersion?: number;
  protocol: "x402" | "mpp";
  format: TransferFormat;
  amount: Usdc;
  headers: Record<string, string>;
}

export type Authorization = X402Authorization | MppAuthorization | TransferAuthorization;

const FORMATS: readonly string[] = ["x402-v2", "x402-v1", "mpp"];

export function isTransferAuthorization(authorization: Authorization): authorization is TransferAuthorization {
  return "format" in authorization;
}

function stringHeaders(value: Record<string, unknown>): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, item] of Object.entries(value)) if (typeof item === "string") headers[name] = item;
  return headers;
}

export function parseAuthorization(answer: Record<string, unknown>, endpoint: string): Authorization {
  const reservationId = answer.reservationId;
  const amount = answer.amount;
  if ((typeof reservationId !== "string" && typeof reservationId !== "number") || !isRecord(amount) || typeof amount.usdc !== "number") {
    throw new ServiceError("the gateway's payment authorization is missing reservationId or amount", { detail: answer });
  }
  const version = answer.policyVersion;
  const common = {
    reservationId: String(reservationId),
    amount: { usdc: amount.usdc },
    ...(typeof version === "number" && Number.isSafeInteger(version) && version >= 0 ? { policyVersion: version } : {}),
  };
  if (typeof answer.format === "string" && FORMATS.includes(answer.format) && isRecord(answer.headers)) {
    if (answer.protocol === "x402" || answer.protocol === "mpp") {
      return { ...common, protocol: answer.protocol, format: answer.format as TransferFormat, headers: stringHeaders(answer.headers) };
    }
  }
  if (answer.protocol === "x402" && isRecord(answer.headers)) {
    return { ...common, protocol: "x402", headers: stringHeaders(answer.headers) };
  }
  if (answer.protocol === "mpp" && typeof answer.paymentEndpoint === "string" && answer.submission !== undefined) {
    return {
      ...common,
      protocol: "mpp",
      method: String(answer.method),
      paymentEndpoint: answer.paymentEndpoint,
      submission: answer.submission,
    };
  }
  throw new PaymentProtocolError(`the gateway's payment authorization for ${endpoint} names no usable protocol`, endpoint);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
