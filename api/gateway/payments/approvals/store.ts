/**
 * The gateway's own statements on approvals beyond the shared store (api/shared/approvals/store.ts,
 * which lists, reads, creates and decides): the link token's hash set after the row exists (the
 * token signs the approval's id), the approval a link names, one overdue approval expired by the
 * gateway's clock, the refusal recorded when an approved payment failed its re-check, and the
 * notification that wakes long-polls (`approval_decided`, sent at commit).
 */
import type { Db } from "../../../../indexer/db/database.js";
import type { Approval } from "../../../shared/approvals/approval.js";
import { getApproval } from "../../../shared/approvals/store.js";

/** The channel long-polls listen on; the payload is the approval's id. */
export const APPROVAL_DECIDED_CHANNEL = "approval_decided";

export async function setApprovalLinkToken(db: Db, approvalId: string, hash: Buffer): Promise<void> {
  await db.query("UPDATE approvals SET link_token_hash = $2 WHERE id = $1 AND link_token_hash IS NULL", [approvalId, hash]);
}

/** The approval whose link has this token hash (used or not), or null. */
export async function approvalByLinkHash(db: Db, hash: Buffer): Promise<Approval | null> {
  const { rows } = await db.query<{ id: string; account_id: string }>("SELECT id, account_id FROM approvals WHERE link_token_hash = $1", [
    hash,
  ]);
  if (rows[0] === undefined) return null;
  return getApproval(db, { accountId: rows[0].account_id }, rows[0].id);
}

/** Whether the link of this hash was used (it decided its approval). */
export async function linkUsed(db: Db, hash: Buffer): Promise<boolean> {
  const { rows } = await db.query<{ used: boolean }>("SELECT link_used_at IS NOT NULL AS used FROM approvals WHERE link_token_hash = $1", [
    hash,
  ]);
  return rows[0]?.used ?? false;
}

/**
 * Expires one pending approval whose `expires_at` passed by `now` (the gateway's clock), as the
 * timeout loop would: for a caller that finds it overdue before the loop did. Once, by the status
 * condition; null when it is not pending or not due.
 */
export async function expireApproval(db: Db, approval: Approval, now: Date): Promise<Approval | null> {
  const { rowCount } = await db.query(
    `UPDATE approvals SET status = 'expired', decided_at = $2, decided_by = 'timeout'
     WHERE id = $1 AND status = 'pending' AND expires_at <= $2`,
    [approval.id, now],
  );
  if (rowCount !== 1) return null;
  return getApproval(db, { accountId: approval.accountId }, approval.id);
}

/** The refusal recorded when the approved payment failed its re-check (same agent, at the decision's time). */
export interface RecheckRefusal {
  readonly rejectionId: string;
  readonly reasonCode: string;
  readonly reason: string;
  readonly domain: string;
}

export async function recheckRefusal(db: Db, approval: Approval): Promise<RecheckRefusal | null> {
  if (approval.decidedAt === null) return null;
  const { rows } = await db.query<{ id: string; reason_code: string; reason: string; domain: string }>(
    `SELECT id::text AS id, reason_code, reason, domain FROM payment_rejections
     WHERE agent_id = $1 AND created_at = $2 AND amount_units = $3 ORDER BY id DESC LIMIT 1`,
    [approval.agentKey, approval.decidedAt, approval.amountUnits.toString()],
  );
  const row = rows[0];
  return row === undefined ? null : { rejectionId: row.id, reasonCode: row.reason_code, reason: row.reason, domain: row.domain };
}

/** Wakes the long-polls on this approval when the caller's transaction commits. */
export async function notifyDecided(db: Db, approvalId: string): Promise<void> {
  await db.query("SELECT pg_notify($1, $2)", [APPROVAL_DECIDED_CHANNEL, approvalId]);
}
