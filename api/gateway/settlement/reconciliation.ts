/**
 * Reconciliation of pending settlements, by signature: what a crash or an unknown send outcome
 * left between "committed as pending" and "marked". The chain decides: landed → confirmed (or
 * failed if it landed with an error); absent once its blockhash can no longer land → failed
 * (nothing moved). Still-valid absent ones stay pending; they are not re-sent, so a payment whose
 * caller saw a crash either already landed or expires. Rows refused before sending (failed,
 * `watch`) are followed the same way until their blockhash expires: one that lands after all is
 * confirmed (record_payment recorded it in the same transaction) and its reservation counts
 * (`landLinkedReservation`). `reconciler.ts` runs this in a loop.
 */
import { Transaction } from "@solana/web3.js";
import type pg from "pg";
import { lookUpOutcomes, type SettlementLedger } from "../chain/ledger.js";
import { ledgerRefusal } from "../chain/ledger-errors.js";
import { landLinkedReservation } from "../reservations/store.js";
import {
  endSettlementWatch,
  markSettlement,
  markSettlementLanded,
  pendingSettlements,
  settlementTransaction,
  watchedSettlements,
} from "./store.js";

const RECONCILE_BATCH = 256;

export interface ReconcileReport {
  readonly confirmed: readonly string[];
  readonly failed: readonly string[];
  readonly pending: readonly string[];
}

/** Resolves one bounded batch of pending settlements, oldest first. */
export async function reconcilePendingSettlements(deps: {
  readonly pool: pg.Pool;
  readonly ledger: SettlementLedger;
}): Promise<ReconcileReport> {
  const rows = await pendingSettlements(deps.pool, RECONCILE_BATCH);
  const outcomes = await lookUpOutcomes(deps.ledger, rows);
  const report = { confirmed: [] as string[], failed: [] as string[], pending: [] as string[] };
  for (const [i, outcome] of outcomes.entries()) {
    const { signature } = rows[i]!;
    report[outcome.status].push(signature);
    if (outcome.status === "confirmed") await markSettlement(deps.pool, signature, "confirmed", null, outcome.slot);
    if (outcome.status === "failed") {
      const error = outcome.reason === "expired" ? "expired" : await includedError(deps, signature, outcome.err);
      await markSettlement(deps.pool, signature, "failed", error, outcome.reason === "included" ? outcome.slot : null);
    }
  }
  const watched = await watchedSettlements(deps.pool, RECONCILE_BATCH);
  const late = await lookUpOutcomes(deps.ledger, watched);
  for (const [i, outcome] of late.entries()) {
    const row = watched[i]!;
    if (outcome.status === "pending") continue;
    if (outcome.status === "failed") {
      await endSettlementWatch(
        deps.pool,
        row.signature,
        outcome.reason === "expired" ? "expired" : await includedError(deps, row.signature, outcome.err),
      );
      continue;
    }
    if (await markSettlementLanded(deps.pool, row.signature, outcome.slot)) report.confirmed.push(row.signature);
    if (row.paymentRef !== null) await landLinkedReservation(deps.pool, row.paymentRef, row.signature);
  }
  return report;
}

/** The program's error name for a transaction that landed with an error, read from its signed bytes. */
async function includedError(deps: { pool: pg.Pool; ledger: SettlementLedger }, signature: string, err: unknown): Promise<string> {
  const wire = await settlementTransaction(deps.pool, signature);
  if (wire === undefined) return "included";
  const programIds = Transaction.from(Buffer.from(wire, "base64")).instructions.map((ix) => ix.programId);
  return ledgerRefusal({ kind: "included", err, programIds }, deps.ledger.programId)?.name ?? `included: ${JSON.stringify(err)}`;
}
