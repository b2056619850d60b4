/**
 * MPP failures as values with stable codes: a malformed body (`MppFormatError`, answered 400), a
 * submission the service refuses (`MppPaymentError`, 402 with a fresh request), a session token
 * that cannot be used (`MppSessionError`, 402 so the client negotiates again), a session charge the
 * agent's spend policy refuses (`MppPolicyError`, 402 too: the paying client negotiates again and
 * meets the typed policy error at its own authorize step).
 *
 * Only the format error is a ServiceError (problem JSON). The others are protocol outcomes the MPP
 * routes answer in the protocol's own bodies (`{ success: false, reason, detail }`); their field
 * names are those bodies' (`MppPolicyError.reasonCode` is the policy's machine reason, as the
 * POLICY_VIOLATION problem names it, because spec 7 makes `reason` the refusal's text there).
 */
import { ServiceError } from "../../shared/errors.js";

export type MppFormatReason = "malformed_request" | "malformed_submission";

/** A malformed MPP body: BAD_USER_INPUT naming the field (dotted path) at fault. */
export class MppFormatError extends ServiceError {
  declare readonly reason: MppFormatReason;
  declare readonly field: string;

  constructor(reason: MppFormatReason, field: string, detail: string) {
    super("BAD_USER_INPUT", `${reason}: ${field}: ${detail}`, { reason, field });
    this.name = "MppFormatError";
  }
}

export const MPP_PAYMENT_FAILURES = [
  "method_not_offered",
  "method_unsupported",
  "amount_mismatch",
  "currency_mismatch",
  "endpoint_mismatch",
  "resource_mismatch",
  "invalid_signature",
  "nonce_reused",
  "expired",
  "validity_too_long",
  "unknown_payer",
  /** The agent released the reservation of this submission before it was settled. */
  "payment_revoked",
  "card_declined",
  "settlement_failed",
  /** Sent to the ledger, outcome not known yet: neither paid nor failed until reconciled. */
  "settlement_pending",
] as const;
export type MppPaymentFailure = (typeof MPP_PAYMENT_FAILURES)[number];

export class MppPaymentError extends Error {
  constructor(
    readonly reason: MppPaymentFailure,
    detail: string,
  ) {
    super(`${reason}: ${detail}`);
    this.name = "MppPaymentError";
  }
}

export const MPP_SESSION_FAILURES = [
  /** No such token for this service (never issued, revoked, or another service's). */
  "session_unknown",
  "session_expired",
  /** A single-use token (service without session support) whose paid call was already redeemed. */
  "session_exhausted",
  /** The call costs more than the per-call price the session was established at. */
  "session_amount_exceeded",
] as const;
export type MppSessionFailure = (typeof MPP_SESSION_FAILURES)[number];

export class MppSessionError extends Error {
  constructor(
    readonly reason: MppSessionFailure,
    detail: string,
  ) {
    super(`${reason}: ${detail}`);
    this.name = "MppSessionError";
  }
}

/**
 * Why a session charge was refused before any money moved: `policy_violation` (the agent's spend
 * policy) or `budget_exceeded` (the remaining budget of the sub-agent's invocation the session was
 * established under).
 */
export type MppPolicyFailure = "policy_violation" | "budget_exceeded";

/** A session charge refused by the agent's spend policy or its invocation's budget; the rejection is already recorded. */
export class MppPolicyError extends Error {
  constructor(
    /** The policy's machine code, e.g. `per_call_limit_exceeded`. */
    readonly reasonCode: string,
    /** Spec 7 text: `<reason_code>: requested <amount> <unit>, limit is <amount> <unit>`. */
    readonly detail: string,
    /** The spec 7 class the paying client would raise (`PolicyViolationError`, `BudgetExceededError`, ...). */
    readonly errorClass: string,
    /** The redeem answer's `reason`. */
    readonly reason: MppPolicyFailure = "policy_violation",
  ) {
    super(detail);
    this.name = "MppPolicyError";
  }
}
