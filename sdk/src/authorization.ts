/**
 * The gateway's payment authorization (`POST /v1/agents/{agentId}/payments/authorize`): the
 * policy check of spec 4.7 step 3, a reservation, and what the pay flow presents to the paid API
 * (signed x402 headers, or an MPP submission). The answer is read defensively: a shape the client
 * cannot use is a typed error, never a payment half made.
 */
import { PaymentProtocolError, ServiceError } from "./errors.js";
import type { Usdc } from "./money.js";

export interface X402Authorization {
  reservationId: string;
  protocol: "x402";
  amount: Usdc;
  headers: Record<string, string>;
}

export interface MppAuthorization {
  reservationId: string;
  protocol: "mpp";
  amount: Usdc;
  method: string;
  paymentEndpoint: string;
  submission: unknown;
}

export type Authorization = X402Authorization | MppAuthorization;

export function parseAuthorization(answer: Record<string, unknown>, endpoint: string): Authorization {
  const reservationId = answer.reservationId;
  const amount = answer.amount;
  if ((typeof reservationId !== "string" && typeof reservationId !== "number") || !isRecord(amount) || typeof amount.usdc !== "number") {
    throw new ServiceError("the gateway's payment authorization is missing reservationId or amount", { detail: answer });
  }
  const common = { reservationId: String(reservationId), amount: { usdc: amount.usdc } };
  if (answer.protocol === "x402" && isRecord(answer.headers)) {
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(answer.headers)) if (typeof value === "string") headers[name] = value;
    return { ...common, protocol: "x402", headers };
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
