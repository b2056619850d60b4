/**
 * The sweeper: closes what the gateway's own pay path left open, run with the reconciler every
 * interval (scripts/system.ts). The facilitator and the MPP service close a payment's claim and
 * reservation in-line; the sweeper finishes the cases a crash, an unknown send outcome or an
 * unused authorization leave behind. Ordered so that each pass first learns what happened to
 * claims, then closes the reservations that follow from them:
 *
 * 1. Claims (`x402_nonces`, `mpp_payments` left `claimed`): the settlement row is the witness.
 *    It is committed, with the payment's reference (`settlements.payment_ref`, migration 012) and
 *    its signature, before anything is sent, and `reconcilePending` resolves it against the chain.
 *    Found by the claim's `tx_hash` (sent, outcome unknown) or by the reference (the process died
 *    before it learned the signature): confirmed → claim settled; failed → claim failed; pending →
 *    wait. No settlement row at all once the claim is older than `claimGraceMs`: nothing was ever
 *    prepared, so nothing can have moved → claim failed. (MPP: only on the stablecoin rail and
 *    only when no settlement row without a reference could be it; card claims and ambiguous ones
 *    are left to the MPP service and counted as `stuck`.)
 * 2. Reservations still `reserved` with a `payment_ref`: settled with the transaction when the
 *    settlement (or the claim) landed, released when it definitely failed, and released when no
 *    claim was ever made and the signed payment expired more than `expiryGraceMs` ago (it can no
 *    longer verify, so nothing can move). A claimed one follows its claim.
 * 3. Invocations: a settled reservation with an invocation budget whose invocation is not open
 *    yet (the opening failed after the payment settled) is opened now; the opening is idempotent
 *    for the same terms, so a retry never opens twice.
 * 4. Signed transfers (payments to real x402 / MPP servers, api/gateway/transfers/sweep.ts):
 *    each is followed on the ledger until it is recorded, or can never land (its reservation
 *    released).
 *
 * Every write is a conditional UPDATE on the state it read (`status = 'claimed'`, `status =
 * 'reserved'`), so two sweepers, or a sweeper and a facilitator finishing late, never undo each
 * other: the last word on a landed payment is always "settled" (the chain is the truth; see
 * `landLinkedReservation`).
 */
import type pg from "pg";
import { landLinkedReservation, mppChargeRef, mppPaymentRef, releaseLinkedReservation, x402PaymentRef } from "../../shared/policy/store.js";
import { type Invocations, openMissingInvocations } from "../invocations/index.js";
import type { SignedTransfers } from "../transfers/index.js";
import type { AgentDirectory } from "../x402/settler.js";
import { sleep } from "./reconciler.js";

/** A claim without a transaction is given this long to commit its settlement row. */
export const DEFAULT_CLAIM_GRACE_MS = 10 * 60_000;
/** An unclaimed reservation is released this long after its signed payment expired. */
export const DEFAULT_EXPIRY_GRACE_MS = 2 * 60_000;
const DEFAULT_BATCH = 256;

export interface SweeperDeps {
  readonly agents: AgentDirectory;
  /** Retries invocation openings; without it step 3 is skipped. */
  readonly invocations?: Invocations | undefined;
  /** Follows signed transfers to their outcome; without it step 4 is skipped. */
  readonly transfers?: SignedTransfers | undefined;
  readonly onWarning?: ((message: string, context: Record<string, unknown>) => void) | undefined;
}

export interface SweepOptions {
  readonly claimGraceMs?: number;
  readonly expiryGraceMs?: number;
  /** Rows per step and pass. */
  readonly batch?: number;
}

export interface SweepReport {
  /** Claims resolved: settled / failed (x402 and MPP). */
  readonly claimsSettled: number;
  readonly claimsFailed: number;
  /** Claims left alone although old: an MPP claim that cannot be resolved from our records. */
  readonly stuck: number;
  readonly reservationsSettled: number;
  readonly reservationsReleased: number;
  readonly invocationsOpened: number;
  /** Signed transfers recorded, found expired (never landed), found failed on the ledger. */
  readonly transfersRecorded: number;
  readonly transfersExpired: number;
  readonly transfersFailed: number;
}

interface Counts {
  claimsSettled: number;
  claimsFailed: number;
  stuck: number;
  reservationsSettled: number;
  reservationsReleased: number;
  invocationsOpened: number;
}

type SettlementStatus = "pending" | "confirmed" | "failed";

/** One pass over all three steps. Safe to run concurrently with itself and with the pay path. */
export async function sweepReservations(pool: pg.Pool, deps: SweeperDeps, now: Date, options: SweepOptions = {}): Promise<SweepReport> {
  const claimCutoff = new Date(now.getTime() - (options.claimGraceMs ?? DEFAULT_CLAIM_GRACE_MS));
  const expiryCutoff = new Date(now.getTime() - (options.expiryGraceMs ?? DEFAULT_EXPIRY_GRACE_MS));
  const batch = Math.min(Math.max(options.batch ?? DEFAULT_BATCH, 1), 10_000);
  const counts: Counts = {
    claimsSettled: 0,
    claimsFailed: 0,
    stuck: 0,
    reservationsSettled: 0,
    reservationsReleased: 0,
    invocationsOpened: 0,
  };
  await sweepX402Claims(pool, claimCutoff, batch, counts);
  await sweepMppClaims(pool, claimCutoff, batch, counts);
  await sweepLinkedReservations(pool, expiryCutoff, batch, counts);
  await openInvocations(pool, deps, batch, counts);
  const transfers =
    deps.transfers === undefined
      ? { transfersRecorded: 0, transfersExpired: 0, transfersFailed: 0 }
      : await deps.transfers.sweep(batch, deps.onWarning);
  return { ...counts, ...transfers };
}

async function closeReservation(pool: pg.Pool, paymentRef: string, outcome: { landed: string } | "failed", counts: Counts): Promise<void> {
  if (outcome === "failed") {
    if (await releaseLinkedReservation(pool, paymentRef)) counts.reservationsReleased += 1;
  } else if (await landLinkedReservation(pool, paymentRef, outcome.landed)) {
    counts.reservationsSettled += 1;
  }
}

async function sweepX402Claims(pool: pg.Pool, claimCutoff: Date, batch: number, counts: Counts): Promise<void> {
  // The settlement row by the claim's transaction, else by the payment's reference.
  const { rows } = await pool.query<{
    payer: string;
    nonce: string;
    tx_hash: string | null;
    claimed_at: Date;
    signature: string | null;
    s_status: SettlementStatus | null;
    s_error: string | null;
  }>(
    `SELECT n.payer, n.nonce, n.tx_hash, n.claimed_at, s.signature, s.status AS s_status, s.error AS s_error
     FROM x402_nonces n
     LEFT JOIN settlements s ON s.signature = coalesce(n.tx_hash,
       (SELECT r.signature FROM settlements r WHERE r.payment_ref = 'x402:' || n.payer || ':' || n.nonce))
     WHERE n.status = 'claimed' AND (n.tx_hash IS NOT NULL OR n.claimed_at < $1)
     ORDER BY n.claimed_at LIMIT $2`,
    [claimCutoff, batch],
  );
  for (const row of rows) {
    const ref = x402PaymentRef(row.payer, row.nonce);
    const key = [row.payer, row.nonce];
    if (row.s_status === "confirmed") {
      const done = await pool.query(
        "UPDATE x402_nonces SET status = 'settled', tx_hash = $3, finished_at = now() WHERE payer = $1 AND nonce = $2 AND status = 'claimed'",
        [...key, row.signature],
      );
      counts.claimsSettled += done.rowCount ?? 0;
      await closeReservation(pool, ref, { landed: row.signature! }, counts);
    } else if (row.s_status === "failed") {
      const done = await pool.query(
        `UPDATE x402_nonces SET status = 'failed', tx_hash = coalesce(tx_hash, $3), finished_at = now(),
           failure = coalesce(failure, $4) WHERE payer = $1 AND nonce = $2 AND status = 'claimed'`,
        [...key, row.signature, `settlement failed: ${row.s_error ?? "unknown"}`],
      );
      counts.claimsFailed += done.rowCount ?? 0;
      await closeReservation(pool, ref, "failed", counts);
    } else if (row.s_status === "pending") {
      // Still in flight: remember its transaction so the next pass finds it by signature.
      await pool.query("UPDATE x402_nonces SET tx_hash = $3 WHERE payer = $1 AND nonce = $2 AND status = 'claimed' AND tx_hash IS NULL", [
        ...key,
        row.signature,
      ]);
    } else if (row.tx_hash === null && row.claimed_at < claimCutoff) {
      // No settlement was ever prepared for this claim: nothing was signed, nothing can move.
      const done = await pool.query(
        `UPDATE x402_nonces SET status = 'failed', failure = 'abandoned: no settlement was prepared', finished_at = now()
         WHERE payer = $1 AND nonce = $2 AND status = 'claimed' AND tx_hash IS NULL`,
        key,
      );
      counts.claimsFailed += done.rowCount ?? 0;
      await closeReservation(pool, ref, "failed", counts);
    }
    // A transaction without a settlement row of ours (another settler): left for its owner.
  }
}

async function sweepMppClaims(pool: pg.Pool, claimCutoff: Date, batch: number, counts: Counts): Promise<void> {
  const { rows } = await pool.query<{
    id: string;
    kind: "submission" | "session_charge";
    payer: string;
    nonce: string | null;
    rail: "stablecoin" | "card";
    status: "claimed" | "authorized";
    tx_hash: string | null;
    created_at: Date;
    signature: string | null;
    s_status: SettlementStatus | null;
    s_error: string | null;
    ambiguous: boolean;
  }>(
    `SELECT p.id, p.kind, p.payer, p.nonce, p.rail, p.status, p.tx_hash, p.created_at,
            s.signature, s.status AS s_status, s.error AS s_error,
            EXISTS (SELECT 1 FROM settlements c WHERE c.agent_id = p.agent_id AND c.payee = p.payee AND c.amount_units = p.amount_units
                      AND c.protocol = 'mpp' AND c.payment_ref IS NULL AND c.created_at >= p.created_at) AS ambiguous
     FROM mpp_payments p
     LEFT JOIN settlements s ON s.signature = coalesce(p.tx_hash,
       (SELECT r.signature FROM settlements r WHERE r.payment_ref =
          CASE WHEN p.kind = 'submission' THEN 'mpp:' || p.payer || ':' || p.nonce ELSE 'mpp-charge:' || p.id END))
     WHERE p.status IN ('claimed', 'authorized') AND (p.tx_hash IS NOT NULL OR p.created_at < $1)
     ORDER BY p.created_at LIMIT $2`,
    [claimCutoff, batch],
  );
  for (const row of rows) {
    const ref = row.kind === "submission" ? mppPaymentRef(row.payer, row.nonce!) : mppChargeRef(row.id);
    if (row.s_status === "confirmed") {
      const done = await pool.query(
        "UPDATE mpp_payments SET status = 'settled', tx_hash = $2, finished_at = now() WHERE id = $1 AND status IN ('claimed', 'authorized')",
        [row.id, row.signature],
      );
      counts.claimsSettled += done.rowCount ?? 0;
      await closeReservation(pool, ref, { landed: row.signature! }, counts);
    } else if (row.s_status === "failed") {
      const done = await pool.query(
        `UPDATE mpp_payments SET status = 'failed', tx_hash = coalesce(tx_hash, $2), failure = coalesce(failure, $3), finished_at = now()
         WHERE id = $1 AND status IN ('claimed', 'authorized')`,
        [row.id, row.signature, `settlement failed: ${row.s_error ?? "unknown"}`],
      );
      counts.claimsFailed += done.rowCount ?? 0;
      await closeReservation(pool, ref, "failed", counts);
    } else if (row.s_status === "pending") {
      await pool.query("UPDATE mpp_payments SET tx_hash = $2 WHERE id = $1 AND status IN ('claimed', 'authorized') AND tx_hash IS NULL", [
        row.id,
        row.signature,
      ]);
    } else if (row.tx_hash === null && row.status === "claimed" && row.rail === "stablecoin" && !row.ambiguous) {
      const done = await pool.query(
        `UPDATE mpp_payments SET status = 'failed', failure = 'abandoned: no settlement was prepared', finished_at = now()
         WHERE id = $1 AND status = 'claimed' AND tx_hash IS NULL`,
        [row.id],
      );
      counts.claimsFailed += done.rowCount ?? 0;
      await closeReservation(pool, ref, "failed", counts);
    } else {
      // A card authorization, or a settlement row without a reference that could be this one:
      // our records cannot tell, so it is left to the MPP service (the reservation keeps counting).
      counts.stuck += 1;
    }
  }
}

/** The claim-table join of each kind of payment reference. */
const CLAIM_JOINS = [
  {
    like: "x402:%",
    join: `LEFT JOIN x402_nonces c ON c.payer = split_part(r.payment_ref, ':', 2) AND c.nonce = split_part(r.payment_ref, ':', 3)`,
    exists: "c.payer IS NOT NULL",
  },
  {
    like: "mpp:%",
    join: `LEFT JOIN mpp_payments c ON c.payer = split_part(r.payment_ref, ':', 2) AND c.nonce = split_part(r.payment_ref, ':', 3)`,
    exists: "c.id IS NOT NULL",
  },
  {
    like: "mpp-charge:%",
    join: `LEFT JOIN mpp_payments c ON c.kind = 'session_charge' AND c.id =
      CASE WHEN split_part(r.payment_ref, ':', 2) ~ '^[0-9]{1,18}$' THEN split_part(r.payment_ref, ':', 2)::bigint END`,
    exists: "c.id IS NOT NULL",
  },
] as const;

async function sweepLinkedReservations(pool: pg.Pool, expiryCutoff: Date, batch: number, counts: Counts): Promise<void> {
  for (const kind of CLAIM_JOINS) {
    const { rows } = await pool.query<{
      payment_ref: string;
      claim_status: string | null;
      claim_tx: string | null;
      signature: string | null;
      s_status: SettlementStatus | null;
    }>(
      `SELECT r.payment_ref, c.status AS claim_status, c.tx_hash AS claim_tx, s.signature, s.status AS s_status
       FROM spend_reservations r
       ${kind.join}
       LEFT JOIN settlements s ON s.payment_ref = r.payment_ref
       WHERE r.status = 'reserved' AND r.payment_ref LIKE '${kind.like}'
         AND (s.status IN ('confirmed', 'failed') OR c.status IN ('settled', 'failed')
              OR (s.signature IS NULL AND NOT (${kind.exists}) AND r.expires_at < $1))
       ORDER BY r.id LIMIT $2`,
      [expiryCutoff, batch],
    );
    for (const row of rows) {
      // The settlement row is the stronger witness; the claim's own status otherwise.
      if (row.s_status === "confirmed") await closeReservation(pool, row.payment_ref, { landed: row.signature! }, counts);
      else if (row.s_status === "failed") await closeReservation(pool, row.payment_ref, "failed", counts);
      else if (row.s_status === "pending") continue;
      else if (row.claim_status === "settled" && row.claim_tx !== null)
        await closeReservation(pool, row.payment_ref, { landed: row.claim_tx }, counts);
      else if (row.claim_status === "failed") await closeReservation(pool, row.payment_ref, "failed", counts);
      else if (row.claim_status === null) {
        // Never claimed and expired: the signed payment can no longer verify, nothing can move.
        // Released only while still unclaimed (a claim racing in keeps it).
        const done = await pool.query(
          `UPDATE spend_reservations r SET status = 'released' WHERE r.payment_ref = $1 AND r.status = 'reserved'
             AND r.claimed_at IS NULL AND NOT EXISTS (SELECT 1 FROM settlements s WHERE s.payment_ref = r.payment_ref)`,
          [row.payment_ref],
        );
        counts.reservationsReleased += done.rowCount ?? 0;
      }
    }
  }
}

async function openInvocations(pool: pg.Pool, deps: SweeperDeps, batch: number, counts: Counts): Promise<void> {
  if (deps.invocations === undefined) return;
  const { agents, invocations, onWarning } = deps;
  counts.invocationsOpened += await openMissingInvocations({ pool, agents, invocations, onWarning }, batch);
}

export interface SweeperLoopOptions extends SweepOptions {
  readonly intervalMs?: number;
  readonly signal?: AbortSignal;
  readonly clock?: () => Date;
  readonly onError?: (error: unknown) => void;
  readonly onPass?: (report: SweepReport) => void;
}

/** Runs a pass at once and then every `intervalMs` until `signal` aborts; errors are reported, never fatal. */
export async function runSweeper(pool: pg.Pool, deps: SweeperDeps, options: SweeperLoopOptions = {}): Promise<void> {
  const intervalMs = options.intervalMs ?? 5_000;
  const clock = options.clock ?? (() => new Date());
  while (options.signal?.aborted !== true) {
    try {
      options.onPass?.(await sweepReservations(pool, deps, clock(), options));
    } catch (error) {
      options.onError?.(error);
    }
    await sleep(intervalMs, options.signal);
  }
}
