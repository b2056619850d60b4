/**
 * What `pay` answers (spec 2.3): the paid API's answer and the payment that bought it, or the
 * answer of an endpoint that asked for no payment.
 */
import { type ApiAnswer, headersObject } from "../api-call.js";
import type { TransferFormat } from "../authorization.js";
import type { Usdc } from "../money.js";
import type { PaymentReceipt } from "../receipts.js";

export type Protocol = "x402" | "mpp";

/** Spec 2.3: the paid API's answer and the payment that bought it. */
export interface PaidResult<T = unknown> {
  paid: true;
  status: number;
  protocol: Protocol;
  amountPaid: Usdc;
  txHash: string;
  solanaExplorer: string;
  data: T;
  headers: Record<string, string>;
  sessionId?: string;
  /**
   * The policy version the gateway authorized the payment under (docs/policy.md "Versions"; on a
   * payment held for approval, the version the approval's re-check ran under). Absent for a
   * payment without a gateway authorization of its own (a held MPP session or channel voucher)
   * and from a gateway that records no versions.
   */
  policyVersion?: number;
  /**
   * A real x402 / MPP payment (the payee's format below): the transfer transaction its
   * facilitator or server broadcast. `txHash` is then payment_ledger's record of that transfer
   * (the record names it as settlement reference), or this same transaction while the gateway
   * has not recorded it yet.
   */
  settlementTxHash?: string;
  /** A real x402 / MPP payment: the payee's wire format (`x402-v2`, `x402-v1`, `mpp`). */
  format?: TransferFormat;
  /** A real x402 / MPP payment: its receipt (`PAYMENT-RESPONSE`, `X-PAYMENT-RESPONSE`, `Payment-Receipt`), decoded. */
  receipt?: PaymentReceipt;
  /**
   * A call paid by a channel voucher (MPP `session` intent): the channel, the voucher's sequence,
   * payment id and cumulative amount. `txHash` is then the channel's open transaction (the escrow
   * that backs the voucher); the charge itself reaches the ledger with the payee's next settlement.
   */
  channel?: { address: string; sequence: number; paymentId: string; cumulative: Usdc };
}

/** The endpoint did not ask for payment (no 402): its answer as it came. */
export interface UnpaidResult<T = unknown> {
  paid: false;
  status: number;
  data: T;
  headers: Record<string, string>;
}

export type PaymentResult<T = unknown> = PaidResult<T> | UnpaidResult<T>;

export function unpaid(answer: ApiAnswer): UnpaidResult {
  return { paid: false, status: answer.status, data: answer.data, headers: headersObject(answer.headers) };
}
