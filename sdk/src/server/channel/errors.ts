/**
 * Why a payee refuses a session voucher: one class, one code per failure, named as the MPP session
 * drafts name their problem types (`https://paymentauth.org/problems/session/<code>`), with the
 * HTTP status the draft gives (402: pay again differently; 410: this channel is over).
 */
export const SESSION_PROBLEM_BASE = "https://paymentauth.org/problems/session/";

export const SESSION_ERRORS = {
  "malformed-credential": 402,
  "invalid-challenge": 402,
  "invalid-signature": 402,
  "signer-mismatch": 402,
  "amount-exceeds-deposit": 402,
  /** The voucher's amount is not this route's price. */
  "amount-mismatch": 402,
  /** cumulative ≠ previous accepted + amount. */
  "cumulative-mismatch": 402,
  /** sequence ≠ previous accepted + 1: a replayed, lower or skipped voucher. */
  "sequence-mismatch": 402,
  /** The payment id does not increase. */
  "payment-id-reused": 402,
  /** The voucher names another endpoint than this request's. */
  "endpoint-mismatch": 402,
  /** The digest is not the chain advanced by this charge (another endpoint, amount or id). */
  "digest-mismatch": 402,
  /** Too close to (or past) the channel's expiry to be settled safely. */
  "channel-expired": 402,
  /** The channel pays another payee or in another mint. */
  "recipient-mismatch": 402,
  "channel-not-found": 410,
  "channel-finalized": 410,
} as const;

export type SessionErrorCode = keyof typeof SESSION_ERRORS;

export class SessionVoucherError extends Error {
  readonly status: number;
  constructor(
    readonly code: SessionErrorCode,
    detail: string,
  ) {
    super(detail);
    this.name = "SessionVoucherError";
    this.status = SESSION_ERRORS[code];
  }

  /** RFC 9457 problem body. */
  problem(): Record<string, unknown> {
    return { type: `${SESSION_PROBLEM_BASE}${this.code}`, title: this.code, status: this.status, detail: this.message };
  }
}
