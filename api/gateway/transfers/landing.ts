/**
 * After the payee's side broadcast a signed transfer: finding it on the ledger, recording it in
 * payment_ledger, closing its reservation. Called by `complete` (the client names the transaction
 * from the payee's receipt) and by the sweeper (which searches the ledger itself, or retries).
 *
 * - Ours: a transaction on the ledger carrying the agent's signature is the message we signed
 *   (the ledger verified it), so a named hash counts only when its transaction carries it.
 * - Recorded once: a `record_payment` naming the transfer as settlement reference, under the
 *   payment reference `<payment_ref>:r<attempt>` that the settlements table holds once; a new
 *   attempt starts only when every earlier one definitely failed.
 * - The reservation: claimed from the moment the bytes were handed out; settled with the record
 *   (even after a release: the chain is the truth); released only when the transfer can never land.
 */
import { getAssociatedTokenAddressSync } from "@solana/spl-token";
import { PublicKey } from "@solana/web3.js";
import type pg from "pg";
import { landLinkedReservation, releaseLinkedReservation } from "../reservations/store.js";
import type { SettlePaymentInput } from "../settlement/settle-input.js";
import { COMMITMENT, type SettlementLedger } from "../chain/ledger.js";
import { pendingSettlementSignature, type SettleResult } from "../settlement/settler.js";
import { markClosed, markLanded, markRecorded, recordAttempts, type TransferRow } from "./store.js";

/** `Settlement.settlePayment`: records a payment (here always with a settlement reference). */
export interface TransferRecorder {
  settlePayment(input: SettlePaymentInput): Promise<SettleResult>;
}

export interface TransferDeps {
  readonly pool: pg.Pool;
  readonly ledger: SettlementLedger;
  readonly recorder: TransferRecorder;
}

export interface FoundTransfer {
  /** The transaction's id (its first signature). */
  readonly signature: string;
  /** It landed but failed: nothing moved. */
  readonly failed: boolean;
}

export type RecordOutcome =
  | { readonly outcome: "recorded"; readonly recordTx: string; readonly settlementTx: string }
  /** A record was sent and its outcome is not known yet (or another recorder is at it). */
  | { readonly outcome: "pending"; readonly settlementTx: string };

/** How far back (before the row was written) the sweeper's search looks, for clock skew. */
const SEARCH_MARGIN_SECONDS = 120;
const SEARCH_PAGE = 1_000;
/** Pages read before the search gives up for this pass (it is retried, never taken as "absent"). */
const SEARCH_MAX_PAGES = 10;

/** The transaction `signature`, if it is on the ledger and carries the agent's signature of `row`. */
export async function transferBySignature(deps: TransferDeps, row: TransferRow, signature: string): Promise<FoundTransfer | null> {
  const tx = await deps.ledger.connection.getTransaction(signature, { commitment: COMMITMENT, maxSupportedTransactionVersion: 0 });
  if (tx === null || !tx.transaction.signatures.includes(row.payerSignature)) return null;
  return { signature, failed: tx.meta?.err !== null && tx.meta?.err !== undefined };
}

/**
 * Looks the transfer up on the ledger: by its id when the gateway knows it (it paid the fee),
 * else among the agent's token account's transactions, newest first, page by page down to
 * shortly before the row was written. Null means it is not there; a search that could not reach
 * that point throws instead, because "not found" is what lets the sweeper release a reservation.
 */
export async function findTransfer(deps: TransferDeps, row: TransferRow): Promise<FoundTransfer | null> {
  if (row.expectedTx !== null) return transferBySignature(deps, row, row.expectedTx);
  const { connection, mint } = deps.ledger;
  const source = getAssociatedTokenAddressSync(mint, new PublicKey(row.payer), true);
  const since = row.createdAt.getTime() / 1000 - SEARCH_MARGIN_SECONDS;
  let before: string | undefined;
  for (let page = 0; page < SEARCH_MAX_PAGES; page += 1) {
    const entries = await connection.getSignaturesForAddress(
      source,
      { limit: SEARCH_PAGE, ...(before === undefined ? {} : { before }) },
      COMMITMENT,
    );
    for (const entry of entries) {
      // Older than the transfer can be: everything newer was searched.
      if (entry.blockTime !== null && entry.blockTime !== undefined && entry.blockTime < since) return null;
      const found = await transferBySignature(deps, row, entry.signature);
      if (found !== null) return found;
    }
    if (entries.length < SEARCH_PAGE) return null;
    before = entries[entries.length - 1]!.signature;
  }
  throw new Error(`transfer ${row.paymentRef}: search of ${source.toBase58()} stopped after ${SEARCH_MAX_PAGES} pages`);
}

function uniqueViolation(error: unknown): boolean {
  return typeof error === "object" && error !== null && (error as { code?: unknown }).code === "23505";
}

/**
 * The transfer landed as `settlementTx` (checked by the caller): records it in payment_ledger,
 * once, and settles the reservation with the record. Throws when the record failed on the ledger
 * (the next call starts a new attempt); the reservation keeps counting meanwhile.
 */
export async function recordLanded(deps: TransferDeps, row: TransferRow, settlementTx: string): Promise<RecordOutcome> {
  const { pool, recorder } = deps;
  await markLanded(pool, row.id, settlementTx);
  const attempts = await recordAttempts(pool, row.paymentRef);
  const finish = async (recordTx: string): Promise<RecordOutcome> => {
    await markRecorded(pool, row.id, recordTx);
    await landLinkedReservation(pool, row.paymentRef, recordTx);
    return { outcome: "recorded", recordTx, settlementTx };
  };
  if (attempts.confirmed !== null) return finish(attempts.confirmed);
  if (attempts.pending !== null) return { outcome: "pending", settlementTx };
  let result: SettleResult;
  try {
    result = await recorder.settlePayment({
      agentId: row.agentId,
      payee: row.payee,
      amountUnits: row.amountUnits,
      protocol: row.protocol,
      rail: "stablecoin",
      endpoint: row.endpoint,
      settlementReference: settlementTx,
      paymentRef: `${row.paymentRef}:r${attempts.failed}`,
      ...(row.invocation === null ? {} : { invocation: row.invocation }),
    });
  } catch (error) {
    // Sent with an unknown outcome, or another recorder holds this attempt: not a failure.
    if (pendingSettlementSignature(error) !== null || uniqueViolation(error)) return { outcome: "pending", settlementTx };
    throw error;
  }
  return finish(result.txHash);
}

/** Nothing moved (expired unseen, or landed and failed): the reservation stops counting. */
export async function closeUnpaid(
  deps: TransferDeps,
  row: TransferRow,
  status: "expired" | "failed",
  failure: string,
  settlementTx: string | null,
): Promise<boolean> {
  const closed = await markClosed(deps.pool, row.id, status, failure, settlementTx);
  if (closed) await releaseLinkedReservation(deps.pool, row.paymentRef);
  return closed;
}
