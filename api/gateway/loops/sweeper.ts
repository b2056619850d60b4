/**
 * The sweeper: finishes what a crash, an unknown send outcome or an unused authorization left
 * open in the pay path (the facilitator and the MPP service close claims and reservations in-line).
 * Each pass first learns what happened to claims, then closes what follows from them:
 *
 * 1. claims (`x402_nonces`, `mpp_payments` left `claimed`), by their settlement row (committed,
 *    with `payment_ref`, before anything is sent): landed → settled, failed → failed, no row after
 *    the claim grace → failed (nothing was prepared, nothing moved); ambiguous MPP claims are `stuck`;
 * 2. reservations still `reserved` with a `payment_ref`: settled, released once failed, or released
 *    when never claimed and expired `expiryGraceMs` ago;
 * 3. invocations a settled payment starts but whose opening failed, opened again (idempotent);
 * 4. signed transfers to real x402 / MPP servers, followed until recorded or unable to land.
 *
 * Every write is a conditional UPDATE on the state it read, so two sweepers, or a sweeper and a
 * late facilitator, never undo each other. No SQL here: the scans are in sweeper-store.ts, each
 * write in the store that owns its row.
 */
import { setTimeout as delay } from "node:timers/promises";
import type pg from "pg";
import {
  landLinkedReservation,
  mppChargeRef,
  mppPaymentRef,
  releaseLinkedReservation,
  releaseUnclaimedReservation,
  x402PaymentRef,
} from "../reservations/store.js";
import { type Invocations, openMissingInvocations } from "../invocations/index.js";
import { sweepPaymentAbandoned, sweepPaymentFailed, sweepPaymentPending, sweepPaymentSettled } from "../mpp/store.js";
import { sweepNonceAbandoned, sweepNonceFailed, sweepNoncePending, sweepNonceSettled } from "../x402/nonces.js";
import type { SignedTransfers } from "../transfers/index.js";
import type { AgentDirectory } from "../settlement/settler.js";
import { linkedReservationsToSweep, mppClaimsToSweep, PAYMENT_REF_KINDS, x402ClaimsToSweep } from "./sweeper-store.js";

/** An MPP claim without a transaction is given this long to commit its settlement row. */
export const DEFAULT_CLAIM_GRACE_MS = 10 * 60_000;
/**
 * An x402 claim without a transaction is failed after this long. Its settlement binds the claim
 * in the transaction that commits it (`bindNonceClaim`), so failing an unbound claim never fails
 * a payment that moves; the grace only spares a settle in flight. Short, so that a client
 * resuming a payment whose settle died before its settlement was prepared (a database restart)
 * learns within seconds that nothing moved.
 */
export const DEFAULT_X402_CLAIM_GRACE_MS = 30_000;
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

/** One pass over all three steps. Safe to run concurrently with itself and with the pay path. */
export async function sweepReservations(pool: pg.Pool, deps: SweeperDeps, now: Date, options: SweepOptions = {}): Promise<SweepReport> {
  const claimCutoff = new Date(now.getTime() - (options.claimGraceMs ?? DEFAULT_CLAIM_GRACE_MS));
  const x402ClaimCutoff = new Date(now.getTime() - (options.claimGraceMs ?? DEFAULT_X402_CLAIM_GRACE_MS));
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
  await sweepX402Claims(pool, x402ClaimCutoff, batch, counts);
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
  const rows = await x402ClaimsToSweep(pool, claimCutoff, batch);
  for (const row of rows) {
    const ref = x402PaymentRef(row.payer, row.nonce);
    if (row.s_status === "confirmed") {
      const done = await sweepNonceSettled(pool, row.payer, row.nonce, row.signature!);
      counts.claimsSettled += done;
      await closeReservation(pool, ref, { landed: row.signature! }, counts);
    } else if (row.s_status === "failed") {
      const failure = `settlement failed: ${row.s_error ?? "unknown"}`;
      const done = await sweepNonceFailed(pool, row.payer, row.nonce, row.signature, failure);
      counts.claimsFailed += done;
      await closeReservation(pool, ref, "failed", counts);
    } else if (row.s_status === "pending") {
      // Still in flight: remember its transaction so the next pass finds it by signature.
      await sweepNoncePending(pool, row.payer, row.nonce, row.signature);
    } else if (row.tx_hash === null && row.claimed_at < claimCutoff) {
      // No settlement was ever prepared for this claim: nothing was signed, nothing can move.
      const done = await sweepNonceAbandoned(pool, row.payer, row.nonce);
      counts.claimsFailed += done;
      await closeReservation(pool, ref, "failed", counts);
    }
    // A transaction without a settlement row of ours (another settler): left for its owner.
  }
}

async function sweepMppClaims(pool: pg.Pool, claimCutoff: Date, batch: number, counts: Counts): Promise<void> {
  const rows = await mppClaimsToSweep(pool, claimCutoff, batch);
  for (const row of rows) {
    const ref = row.kind === "submission" ? mppPaymentRef(row.payer, row.nonce!) : mppChargeRef(row.id);
    if (row.s_status === "confirmed") {
      const done = await sweepPaymentSettled(pool, row.id, row.signature!);
      counts.claimsSettled += done;
      await closeReservation(pool, ref, { landed: row.signature! }, counts);
    } else if (row.s_status === "failed") {
      const done = await sweepPaymentFailed(pool, row.id, row.signature, `settlement failed: ${row.s_error ?? "unknown"}`);
      counts.claimsFailed += done;
      await closeReservation(pool, ref, "failed", counts);
    } else if (row.s_status === "pending") {
      await sweepPaymentPending(pool, row.id, row.signature);
    } else if (row.tx_hash === null && row.status === "claimed" && row.rail === "stablecoin" && !row.ambiguous) {
      const done = await sweepPaymentAbandoned(pool, row.id);
      counts.claimsFailed += done;
      await closeReservation(pool, ref, "failed", counts);
    } else {
      // A card authorization, or a settlement row without a reference that could be this one:
      // our records cannot tell, so it is left to the MPP service (the reservation keeps counting).
      counts.stuck += 1;
    }
  }
}

async function sweepLinkedReservations(pool: pg.Pool, expiryCutoff: Date, batch: number, counts: Counts): Promise<void> {
  for (const kind of PAYMENT_REF_KINDS) {
    const rows = await linkedReservationsToSweep(pool, kind, expiryCutoff, batch);
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
        const done = await releaseUnclaimedReservation(pool, row.payment_ref);
        counts.reservationsReleased += done;
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
    // An abort ends the wait early (the promise rejects, only then); the loop's check stops it.
    await delay(intervalMs, undefined, { signal: options.signal }).catch(() => undefined);
  }
}
