/**
 * x402 failures as values with stable reasons. A malformed 402 body or payment header is a
 * `X402FormatError` (BAD_USER_INPUT: the resource server answers 400); a well-formed payment the
 * facilitator refuses is a `VerifyFailureReason` (402 again); a settlement that did not complete
 * is the outcome `settlement_failed` (the nonce stays burned, see facilitator.ts).
 */
import { ServiceError } from "../../shared/errors.js";

export type X402FormatReason = "malformed_requirement" | "malformed_payload" | "malformed_headers";

export class X402FormatError extends ServiceError {
  declare readonly reason: X402FormatReason;
  /** The field (dotted path) or header at fault. */
  declare readonly field: string;

  constructor(reason: X402FormatReason, field: string, detail: string) {
    super("BAD_USER_INPUT", `${reason}: ${field}: ${detail}`, { reason, field });
    this.name = "X402FormatError";
  }
}

/** Why the facilitator refuses a well-formed payment. Codes are stable; never reuse one. */
export const VERIFY_FAILURES = [
  "invalid_signature",
  "nonce_reused",
  "network_mismatch",
  "token_mismatch",
  "pay_to_mismatch",
  "amount_mismatch",
  "expired",
  "validity_too_long",
  "unknown_payer",
  "payment_revoked",
  /** `payTo` is not a wallet the ledger can credit safely (api/gateway/chain/payee.ts). */
  "payee_refused",
] as const;
export type VerifyFailureReason = (typeof VERIFY_FAILURES)[number];
