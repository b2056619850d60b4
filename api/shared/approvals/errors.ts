/**
 * The refusals of the approvals surface (docs/rest.md "Approvals"), each a ServiceError with its
 * registry code: an unknown approval, a second decision, and the two ends of a held payment that
 * did not go (denied by a person, expired by the gateway's clock).
 */
import { ServiceError } from "../errors.js";
import type { Approval } from "./approval.js";

/** 404: no such approval in the account (or of the agent, for an agent key); a dead link token too. */
export class ApprovalNotFoundError extends ServiceError {
  constructor(readonly approvalId: string) {
    super("APPROVAL_NOT_FOUND", `approval ${approvalId} not found`, { extra: { approvalId } });
    this.name = "ApprovalNotFoundError";
  }
}

/** 409: decided before; the answer carries the decision that won. */
export class ApprovalAlreadyDecidedError extends ServiceError {
  constructor(readonly approval: Approval) {
    super("APPROVAL_ALREADY_DECIDED", `approval ${approval.id} was already decided: ${approval.status}`, {
      extra: {
        approvalId: approval.id,
        approval: { status: approval.status, decidedAt: approval.decidedAt?.toISOString() ?? null, decidedBy: approval.decidedBy },
      },
    });
    this.name = "ApprovalAlreadyDecidedError";
  }
}

/** 403: a person denied the held payment; nothing was signed. */
export class ApprovalDeniedError extends ServiceError {
  constructor(readonly approval: Approval) {
    const reason = `approval_denied: approval ${approval.id} was denied${approval.note === null ? "" : `: ${approval.note}`}`;
    super("APPROVAL_DENIED", reason, {
      extra: {
        reasonCode: "approval_denied",
        reason,
        approvalId: approval.id,
        decidedAt: approval.decidedAt?.toISOString() ?? null,
        note: approval.note,
      },
    });
    this.name = "ApprovalDeniedError";
  }
}

/** 403: nobody decided before `expiresAt` (`onTimeout: deny`); nothing was signed. */
export class ApprovalExpiredError extends ServiceError {
  constructor(readonly approval: Approval) {
    const reason = `approval_expired: approval ${approval.id} was not decided before ${approval.expiresAt.toISOString()}`;
    super("APPROVAL_EXPIRED", reason, {
      extra: { reasonCode: "approval_expired", reason, approvalId: approval.id, expiresAt: approval.expiresAt.toISOString() },
    });
    this.name = "ApprovalExpiredError";
  }
}
