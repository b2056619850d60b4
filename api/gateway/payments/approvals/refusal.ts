/**
 * The refusal of an approved payment's re-check (`outcome: refused`), as the resume and the
 * approval object repeat it: the rejection recorded at the decision (same agent, time and amount).
 */
import type { Db } from "../../../../indexer/db/database.js";
import type { Approval } from "../../../shared/approvals/approval.js";
import { type RecordedRejection, rejectionAt } from "../rejections.js";

export async function recheckRefusal(db: Db, approval: Approval): Promise<RecordedRejection | null> {
  if (approval.outcome !== "refused" || approval.decidedAt === null) return null;
  return rejectionAt(db, approval.agentKey, approval.decidedAt, approval.amountUnits);
}
