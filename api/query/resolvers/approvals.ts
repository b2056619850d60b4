/**
 * Query.approvals and Query.approval: the payments the account's policies held for a person
 * (docs/policy.md "Approvals"), read through the approvals store of api/shared. Reads only:
 * deciding is the gateway's (REST `POST /v1/approvals/{id}/approve|deny`).
 */
import type { Approval, ApprovalStatus } from "../../shared/approvals/approval.js";
import { getApproval, listApprovals } from "../../shared/approvals/store.js";
import { badInput, isServiceError } from "../../shared/errors.js";
import { formatUsdcFixed } from "../../shared/money.js";
import { parseIntInRange } from "../../shared/validation.js";
import type { ApiContext } from "../context.js";
import { requireAgent } from "./common.js";

export const APPROVALS_FIRST_DEFAULT = 20;
export const APPROVALS_FIRST_MAX = 100;

export interface ApprovalObject {
  readonly id: string;
  readonly agentId: string;
  readonly amount: string;
  readonly amountUnits: string;
  readonly endpoint: string;
  readonly domain: string;
  readonly rule: string;
  readonly reason: string;
  readonly status: ApprovalStatus;
  readonly requestedAt: string;
  readonly expiresAt: string;
  readonly decidedAt: string | null;
  readonly decidedBy: string | null;
  readonly note: string | null;
  readonly outcome: string | null;
}

export function toApprovalObject(approval: Approval): ApprovalObject {
  return {
    id: approval.id,
    agentId: approval.agentId,
    amount: formatUsdcFixed(approval.amountUnits),
    amountUnits: approval.amountUnits.toString(),
    endpoint: approval.endpoint,
    domain: approval.domain,
    rule: approval.rule,
    reason: approval.reason,
    status: approval.status,
    requestedAt: approval.requestedAt.toISOString(),
    expiresAt: approval.expiresAt.toISOString(),
    decidedAt: approval.decidedAt?.toISOString() ?? null,
    decidedBy: approval.decidedBy,
    note: approval.note,
    outcome: approval.outcome,
  };
}

interface ApprovalsArgs {
  readonly status?: ApprovalStatus | null;
  readonly agentId?: string | null;
  readonly first?: number | null;
  readonly after?: string | null;
}

export async function approvals(
  _: unknown,
  args: ApprovalsArgs,
  context: ApiContext,
): Promise<{ nodes: ApprovalObject[]; pageInfo: { hasNextPage: boolean; endCursor: string | null } }> {
  const limit = parseIntInRange("first", args.first, APPROVALS_FIRST_DEFAULT, 1, APPROVALS_FIRST_MAX);
  const agentKey = args.agentId == null ? null : (await requireAgent(context, "agentId", args.agentId)).agent_id;
  try {
    // From the primary: what the gateway decides on, never a replica's lagging copy of a decision.
    const page = await listApprovals(context.deps.primary, context.caller.accountId, {
      status: args.status ?? null,
      agentKey,
      limit,
      cursor: args.after ?? null,
    });
    return { nodes: page.approvals.map(toApprovalObject), pageInfo: { hasNextPage: page.nextCursor !== null, endCursor: page.nextCursor } };
  } catch (error) {
    if (isServiceError(error, "BAD_USER_INPUT") && error.field === "cursor") throw badInput("after", error.message);
    throw error;
  }
}

export async function approval(_: unknown, args: { id: string }, context: ApiContext): Promise<ApprovalObject | null> {
  const found = await getApproval(context.deps.primary, { accountId: context.caller.accountId }, args.id);
  return found === null ? null : toApprovalObject(found);
}
