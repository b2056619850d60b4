/**
 * A seller's server forwarding an agent's MPP submission to the gateway (`POST /v1/mpp/payments`
 * parses it and renders the outcome): the service verifies and settles it, or, for a retried
 * request whose first attempt may have run, resolves it through the submission's nonce claim. The
 * payment's spend reservation (made when the gateway authorized it, linked as
 * `mpp:<payer>:<nonce>`; none if another gateway or a hand-signed submission paid) is closed here:
 * settled with the transaction on success, released on a definite failure, left open while the
 * outcome is pending.
 */
import type pg from "pg";
import { landLinkedReservation, mppPaymentRef, releaseLinkedReservation } from "../reservations/store.js";
import { MppPaymentError, type MppPaymentFailure } from "./errors.js";
import type { MppPaymentRequest } from "./request.js";
import type { MppConfirmation, MppService, ResumedSubmission } from "./service.js";
import type { MppSubmission } from "./submission.js";

export type MppPaymentOutcome =
  | { readonly kind: "paid"; readonly payment: MppConfirmation | ResumedSubmission }
  /** Sent, outcome unknown: the reservation keeps counting until it is known. */
  | { readonly kind: "pending"; readonly reason: "settlement_pending"; readonly detail: string }
  | { readonly kind: "refused"; readonly reason: MppPaymentFailure; readonly detail: string };

/** Submits (or, `resumed`, first looks up) the submission and closes its reservation by the outcome. */
export async function payMppSubmission(
  pool: pg.Pool,
  service: MppService,
  payment: { readonly submission: MppSubmission; readonly request: MppPaymentRequest; readonly resumed: boolean },
): Promise<MppPaymentOutcome> {
  const { submission, request } = payment;
  const ref = mppPaymentRef(submission.authorization.payer, submission.authorization.nonce);
  const outcome = await submitOrResume(service, submission, request, payment.resumed);
  if (outcome.kind === "paid") await landLinkedReservation(pool, ref, outcome.payment.txHash);
  // A reused nonce is someone else's claim (or this one's replay): its reservation is not ours to free.
  if (outcome.kind === "refused" && outcome.reason !== "nonce_reused") await releaseLinkedReservation(pool, ref);
  return outcome;
}

async function submitOrResume(
  service: MppService,
  submission: MppSubmission,
  request: MppPaymentRequest,
  resumed: boolean,
): Promise<MppPaymentOutcome> {
  try {
    const resumedPayment = resumed ? await service.resumeSubmission(submission, request) : null;
    return { kind: "paid", payment: resumedPayment ?? (await service.submitPayment(submission, request)) };
  } catch (error) {
    if (!(error instanceof MppPaymentError)) throw error;
    if (error.reason === "settlement_pending") return { kind: "pending", reason: error.reason, detail: error.message };
    return { kind: "refused", reason: error.reason, detail: error.message };
  }
}
