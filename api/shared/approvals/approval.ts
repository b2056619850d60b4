/**
 * An approval: one payment a policy held for a person (docs/policy.md "Approvals"), as both
 * services read it, and the inputs that decide it (the decision, an optional note). Money stays in
 * base units; each surface renders it.
 */
import type { ApprovalRule } from "../policy/approval.js";
import { ServiceError } from "../errors.js";
import { unstorableText } from "../text.js";

export type ApprovalStatus = "pending" | "approved" | "denied" | "expired";
export const APPROVAL_STATUSES: readonly ApprovalStatus[] = ["pending", "approved", "denied", "expired"];

/** What a person (or the link) decides; `expired` is the gateway's clock alone. */
export type ApprovalDecision = "approved" | "denied";

/** For an approval: whether the re-run policy let the payment through. */
export type ApprovalOutcome = "authorized" | "refused";

/** `decided_by`: the deciding API key's id, the signed link, or the timeout loop. */
export type DecidedBy = string;
export const DECIDED_BY_LINK = "link";
export const DECIDED_BY_TIMEOUT = "timeout";

export interface Approval {
  readonly id: string;
  readonly accountId: string;
  /** The agent's public id (what callers see). */
  readonly agentId: string;
  /** The agent's internal key (agents.agent_id), for the gateway's own tables. */
  readonly agentKey: string;
  /** The spend reservation that holds the amount while the approval waits. */
  readonly reservationId: string;
  readonly amountUnits: bigint;
  readonly endpoint: string;
  readonly domain: string;
  readonly rule: ApprovalRule;
  readonly reason: string;
  readonly status: ApprovalStatus;
  readonly requestedAt: Date;
  readonly expiresAt: Date;
  readonly decidedAt: Date | null;
  readonly decidedBy: DecidedBy | null;
  readonly note: string | null;
  readonly outcome: ApprovalOutcome | null;
  /** The agent's policy version that held the payment (docs/policy.md "Versions"); null when unknown. */
  readonly policyVersion: number | null;
}

export const MAX_NOTE_LENGTH = 500;

/** The optional `note` of a decision: a string of at most 500 characters under the text rule, or absent. */
export function parseNote(value: unknown): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== "string") throw badNote("must be a string");
  if (value.length > MAX_NOTE_LENGTH) throw badNote(`is longer than ${MAX_NOTE_LENGTH} characters`);
  const problem = unstorableText(value);
  if (problem !== null) throw badNote(problem);
  return value === "" ? null : value;
}

function badNote(detail: string): ServiceError {
  return new ServiceError("BAD_USER_INPUT", `note ${detail}`, { field: "note", reason: "invalid_note" });
}

/** A `status` filter of the listing, or BAD_USER_INPUT naming `field`. */
export function parseApprovalStatus(value: string, field = "status"): ApprovalStatus {
  if ((APPROVAL_STATUSES as readonly string[]).includes(value)) return value as ApprovalStatus;
  throw new ServiceError("BAD_USER_INPUT", `${field} must be one of ${APPROVAL_STATUSES.join(", ")}`, { field, reason: "invalid_status" });
}
