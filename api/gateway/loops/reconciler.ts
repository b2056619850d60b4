/**
 * The background loop that resolves pending settlements and wallet operations: once at start
 * (what a crash left behind) and then every `intervalMs`. One pass handles a bounded batch; a
 * full batch is followed by another pass at once. Errors (an RPC or database outage) are reported
 * and retried at the next tick, never fatal: pending rows stay pending until the chain answers.
 */
import { setTimeout as delay } from "node:timers/promises";
import type { ReconcileReport } from "../settlement/reconciliation.js";

export interface Reconcilable {
  reconcilePending(): Promise<ReconcileReport>;
}

export interface ReconcilableOperations {
  reconcilePendingOperations(): Promise<{ confirmed: number; failed: number; pending: number }>;
}

export interface ReconcilerOptions {
  readonly intervalMs?: number;
  readonly signal?: AbortSignal;
  readonly onError?: (error: unknown) => void;
  /** Called after each pass with what it resolved. */
  readonly onPass?: (report: ReconcileReport) => void;
}

const DEFAULT_INTERVAL_MS = 5_000;
/** A pass that resolves this many settlements is followed at once by another. */
const FULL_PASS = 256;
const MAX_IMMEDIATE_PASSES = 20;

/** Runs until `signal` aborts. */
export async function runReconciler(
  settlement: Reconcilable,
  wallets: ReconcilableOperations | null,
  options: ReconcilerOptions = {},
): Promise<void> {
  const intervalMs = options.intervalMs ?? DEFAULT_INTERVAL_MS;
  const aborted = (): boolean => options.signal?.aborted === true;
  while (!aborted()) {
    try {
      for (let pass = 0; pass < MAX_IMMEDIATE_PASSES && !aborted(); pass += 1) {
        const report = await settlement.reconcilePending();
        options.onPass?.(report);
        if (report.confirmed.length + report.failed.length + report.pending.length < FULL_PASS) break;
      }
      await wallets?.reconcilePendingOperations();
    } catch (error) {
      options.onError?.(error);
    }
    // An abort ends the wait early (the promise rejects, only then); the loop's check stops it.
    await delay(intervalMs, undefined, { signal: options.signal }).catch(() => undefined);
  }
}
