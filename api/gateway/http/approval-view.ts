/**
 * An approval as REST answers it (docs/rest.md "Approvals"): the authorize's 202, the approvals
 * routes, the decisions. Money as `{ usdc }`, times ISO, the agent by its public id.
 */
import type { Approval } from "../../shared/approvals/approval.js";
import { usdcJson } from "../../shared/money.js";

/** The refusal of an approved payment's re-check (`outcome: refused`), else null. */
export interface ApprovalRefusal {
  readonly reasonCode: string;
  readonly reason: string;
}

export function approvalJson(approval: Approval, refusal: ApprovalRefusal | null = null): Record<string, unknown> {
  return {
    id: approval.id,
    status: approval.status,
    agentId: approval.agentId,
    amount: usdcJson(approval.amountUnits),
    endpoint: approval.endpoint,
    domain: approval.domain,
    rule: approval.rule,
    reason: approval.reason,
    requestedAt: approval.requestedAt.toISOString(),
    expiresAt: approval.expiresAt.toISOString(),
    decidedAt: approval.decidedAt?.toISOString() ?? null,
    decidedBy: approval.decidedBy,
    note: approval.note,
    outcome: approval.outcome,
    policyVersion: approval.policyVersion,
    refusal: refusal === null ? null : { reasonCode: refusal.reasonCode, reason: refusal.reason },
  };
}
