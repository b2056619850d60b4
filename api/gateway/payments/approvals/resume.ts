/**
 * Resuming a held payment (docs/rest.md "Approvals"): the caller repeats its authorization with the
 * same Idempotency-Key, and the approval tied to the key says what happens. Pending: the same
 * approval again (202), or, when its `expires_at` passed and the loop has not expired it yet, it
 * is expired here by the gateway's clock. Denied or expired: the typed refusal
 * (APPROVAL_DENIED / APPROVAL_EXPIRED). Approved and allowed by the re-check: the authorization
 * signs its reservation, taken here under a row lock so the approvals loop cannot release it
 * meanwhile. Approved but refused by the re-check: the refusal recorded then.
 */
import type pg from "pg";
import type { Approval } from "../../../shared/approvals/approval.js";
import { ApprovalDeniedError, ApprovalExpiredError } from "../../../shared/approvals/errors.js";
import { expireApproval, getApproval } from "../../../shared/approvals/store.js";
import { httpError, ServiceError } from "../../../shared/errors.js";
import { type BudgetState, budgetState, ERROR_CLASS, type ReasonCode } from "../../../shared/policy/engine.js";
import { EMPTY_POLICY } from "../../../shared/policy/policy.js";
import { getPolicy, readUsage } from "../../../shared/policy/store.js";
import { takeApprovedReservation } from "../../reservations/store.js";
import { closeApproval } from "./decide.js";
import { recheckRefusal } from "./refusal.js";

export type ResumeStep =
  /** Still waiting for a decision: answer the approval again (202). */
  | { readonly kind: "held"; readonly approval: Approval }
  /** Approved and allowed: sign the payment on this reservation (now `reserved`, locked). */
  | {
      readonly kind: "sign";
      readonly approval: Approval;
      readonly reservationId: string;
      readonly budgetState: BudgetState;
      /** The policy version the approval's re-check allowed it under. */
      readonly policyVersion: number | null;
    }
  /** Decided against the payment: the definite answer. */
  | { readonly kind: "closed"; readonly error: ServiceError };

export interface ResumedRequest {
  readonly agentKey: string;
  readonly endpoint: string;
  readonly amountUnits: bigint;
}

export async function resumeApproval(client: pg.ClientBase, approval: Approval, request: ResumedRequest, now: Date): Promise<ResumeStep> {
  if (approval.agentKey !== request.agentKey || approval.endpoint !== request.endpoint || approval.amountUnits !== request.amountUnits) {
    throw httpError(
      "IDEMPOTENCY_KEY_REUSED",
      "this Idempotency-Key holds a payment for another agent, endpoint or amount; use a new key for a new request",
      { approvalId: approval.id },
    );
  }
  switch (approval.status) {
    case "pending":
      return resumePending(client, approval, request, now);
    case "denied":
      return { kind: "closed", error: new ApprovalDeniedError(approval) };
    case "expired":
      return { kind: "closed", error: new ApprovalExpiredError(approval) };
    case "approved":
      return resumeApproved(client, approval, now);
  }
}

async function resumePending(client: pg.ClientBase, approval: Approval, request: ResumedRequest, now: Date): Promise<ResumeStep> {
  if (approval.expiresAt.getTime() > now.getTime()) return { kind: "held", approval };
  const expired = await expireApproval(client, approval.id, now);
  if (expired !== null) {
    await closeApproval(client, expired, now);
    return { kind: "closed", error: new ApprovalExpiredError(expired) };
  }
  // Decided meanwhile by someone else: answer what they decided.
  const current = await getApproval(client, { accountId: approval.accountId }, approval.id);
  if (current === null || current.status === "pending") throw new Error(`approval ${approval.id} is overdue but could not be expired`);
  return resumeApproval(client, current, request, now);
}

async function resumeApproved(client: pg.ClientBase, approval: Approval, now: Date): Promise<ResumeStep> {
  if (approval.outcome === "refused") return { kind: "closed", error: await refusalError(client, approval) };
  const taken = await takeApprovedReservation(client, approval.reservationId, now);
  if (taken === null) {
    const reason = `approval_expired: approval ${approval.id} was approved, but the payment was not resumed in time and its reservation was released`;
    return {
      kind: "closed",
      error: new ServiceError("APPROVAL_EXPIRED", reason, {
        extra: { reasonCode: "approval_expired", reason, approvalId: approval.id, expiresAt: approval.expiresAt.toISOString() },
      }),
    };
  }
  const policy = (await getPolicy(client, approval.agentKey)) ?? EMPTY_POLICY;
  const usage = await readUsage(client, approval.agentKey, policy, now);
  return {
    kind: "sign",
    approval,
    reservationId: approval.reservationId,
    policyVersion: taken.policyVersion,
    budgetState: budgetState(policy.dailyBudgetUnits, usage.usedTodayUnits, usage.budgetExhausted),
  };
}

/** The refusal the re-check recorded, answered as the authorization answers one. */
async function refusalError(client: pg.ClientBase, approval: Approval): Promise<ServiceError> {
  const refusal = await recheckRefusal(client, approval);
  if (refusal === null) throw new Error(`approval ${approval.id} was refused on re-check, but no refusal is recorded`);
  const common = { reason: refusal.reason, reasonCode: refusal.reasonCode, approvalId: approval.id, rejectionId: refusal.rejectionId };
  const errorClass = ERROR_CLASS[refusal.reasonCode as ReasonCode];
  // Not one of the policy's own codes: the caller's check refused it (a sub-agent's invocation budget).
  if (errorClass === undefined) return httpError("BUDGET_EXCEEDED", refusal.reason, { errorClass: "BudgetExceededError", ...common });
  return httpError("POLICY_VIOLATION", refusal.reason, { errorClass, ...common, domain: refusal.domain });
}
