/**
 * The approvals' timeout loop (docs/policy.md "Approvals"): decides every pending approval whose
 * `expires_at` passed as `expired` (`onTimeout: deny`) by the gateway's clock, releasing its held
 * reservation and emitting `approval.decided` in the same transaction; and releases the
 * reservations of approved payments whose caller never resumed them by their deadline.
 *
 * It keeps no state: everything is in `approvals`, so a gateway killed while approvals are pending
 * picks up every one that fell due at its first pass after restart, and the store's conditional
 * UPDATE (`WHERE status = 'pending'`, SKIP LOCKED batches) decides each exactly once across any
 * number of loops, people and links. Bounded: `batch` rows per step and pass, the rest next pass.
 */
import { setTimeout as delay } from "node:timers/promises";
import type pg from "pg";
import { withTransaction } from "../../../indexer/db/database.js";
import { EXPIRE_BATCH_MAX, expireDueApprovals } from "../../shared/approvals/store.js";
import { closeApproval } from "../payments/approvals/index.js";
import { releaseUnresumedReservations } from "../reservations/store.js";

export const DEFAULT_APPROVAL_TIMEOUT_INTERVAL_MS = 1_000;

export interface ApprovalTimeoutReport {
  /** Pending approvals decided `expired` by this pass. */
  readonly expired: number;
  /** Approved payments' reservations released because the caller did not resume in time. */
  readonly unresumedReleased: number;
}

/** One pass at `now`. */
export async function expireApprovals(pool: pg.Pool, now: Date, batch = EXPIRE_BATCH_MAX): Promise<ApprovalTimeoutReport> {
  const expired = await withTransaction(
    pool,
    async (client) => {
      const due = await expireDueApprovals(client, now, batch);
      for (const approval of due) await closeApproval(client, approval, now);
      return due.length;
    },
    { isolation: "read committed" },
  );
  const unresumedReleased = await releaseUnresumedReservations(pool, now, batch);
  return { expired, unresumedReleased };
}

export interface ApprovalTimeoutLoopOptions {
  readonly signal?: AbortSignal;
  readonly intervalMs?: number;
  readonly batch?: number;
  /** The gateway's clock (tests pin it). */
  readonly clock?: () => Date;
  readonly onPass?: (report: ApprovalTimeoutReport) => void;
  readonly onError?: (error: unknown) => void;
}

/** Runs passes until the signal aborts; a full batch runs the next pass at once. */
export async function runApprovalTimeouts(pool: pg.Pool, options: ApprovalTimeoutLoopOptions = {}): Promise<void> {
  const intervalMs = options.intervalMs ?? DEFAULT_APPROVAL_TIMEOUT_INTERVAL_MS;
  const batch = Math.max(1, Math.min(options.batch ?? EXPIRE_BATCH_MAX, EXPIRE_BATCH_MAX));
  const clock = options.clock ?? (() => new Date());
  while (options.signal?.aborted !== true) {
    let full = false;
    try {
      const report = await expireApprovals(pool, clock(), batch);
      full = report.expired === batch || report.unresumedReleased === batch;
      options.onPass?.(report);
    } catch (error) {
      options.onError?.(error);
    }
    if (full) continue;
    // An abort ends the wait early (the promise rejects, only then); the loop's check stops it.
    await delay(intervalMs, undefined, { signal: options.signal }).catch(() => undefined);
  }
}
