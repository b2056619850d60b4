/**
 * The `signed_transfers` table (migrations/020_signed_transfers.sql): one row per transfer the
 * gateway signed for a real x402 / MPP payee, and where it stands (signed → landed → recorded, or
 * expired / failed). Every status change is a conditional UPDATE on the status it leaves, so the
 * pay path (`complete`) and the sweeper, racing on one row, never undo each other. The record's
 * own settlements rows are found by reference prefix (`<payment_ref>:r<attempt>`).
 *
 * Imported by the transfers module only.
 */
import type { Db } from "../../../indexer/db/database.js";
import type { TransferFormat } from "./offers.js";

export type TransferStatus = "signed" | "landed" | "recorded" | "expired" | "failed";

export interface TransferRow {
  readonly id: string;
  readonly paymentRef: string;
  readonly reservationId: string;
  readonly agentId: string;
  readonly protocol: "x402" | "mpp";
  readonly format: TransferFormat;
  readonly payer: string;
  readonly payee: string;
  readonly mint: string;
  readonly amountUnits: bigint;
  readonly endpoint: string;
  readonly parentTxHash: string | null;
  readonly invocation: string | null;
  readonly payerSignature: string;
  readonly feePayer: string;
  readonly expectedTx: string | null;
  readonly lastValidBlockHeight: number;
  readonly status: TransferStatus;
  readonly settlementTx: string | null;
  readonly recordTx: string | null;
  readonly createdAt: Date;
}

export type NewTransfer = Omit<TransferRow, "id" | "status" | "settlementTx" | "recordTx" | "createdAt">;

/** `transfer:<the agent's signature>`: the reservation's and the record's payment reference. */
export const transferPaymentRef = (payerSignature: string): string => `transfer:${payerSignature}`;
export const TRANSFER_REF_PREFIX = "transfer:";

interface Row {
  id: string;
  payment_ref: string;
  reservation_id: string;
  agent_id: string;
  protocol: "x402" | "mpp";
  format: TransferFormat;
  payer: string;
  payee: string;
  mint: string;
  amount_units: string;
  endpoint: string;
  parent_tx_hash: string | null;
  invocation: string | null;
  payer_signature: string;
  fee_payer: string;
  expected_tx: string | null;
  last_valid_block_height: string;
  status: TransferStatus;
  settlement_tx: string | null;
  record_tx: string | null;
  created_at: Date;
}

function fromRow(row: Row): TransferRow {
  return {
    id: row.id,
    paymentRef: row.payment_ref,
    reservationId: row.reservation_id,
    agentId: row.agent_id,
    protocol: row.protocol,
    format: row.format,
    payer: row.payer,
    payee: row.payee,
    mint: row.mint,
    amountUnits: BigInt(row.amount_units),
    endpoint: row.endpoint,
    parentTxHash: row.parent_tx_hash,
    invocation: row.invocation,
    payerSignature: row.payer_signature,
    feePayer: row.fee_payer,
    expectedTx: row.expected_tx,
    lastValidBlockHeight: Number(row.last_valid_block_height),
    status: row.status,
    settlementTx: row.settlement_tx,
    recordTx: row.record_tx,
    createdAt: row.created_at,
  };
}

/** In the authorization's transaction, with its reservation. */
export async function insertTransfer(db: Db, transfer: NewTransfer): Promise<void> {
  await db.query(
    `INSERT INTO signed_transfers (payment_ref, reservation_id, agent_id, protocol, format, payer, payee, mint, amount_units,
       endpoint, parent_tx_hash, invocation, payer_signature, fee_payer, expected_tx, last_valid_block_height)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`,
    [
      transfer.paymentRef,
      transfer.reservationId,
      transfer.agentId,
      transfer.protocol,
      transfer.format,
      transfer.payer,
      transfer.payee,
      transfer.mint,
      transfer.amountUnits.toString(),
      transfer.endpoint,
      transfer.parentTxHash,
      transfer.invocation,
      transfer.payerSignature,
      transfer.feePayer,
      transfer.expectedTx,
      transfer.lastValidBlockHeight,
    ],
  );
}

export async function transferByRef(db: Db, paymentRef: string): Promise<TransferRow | null> {
  const { rows } = await db.query<Row>("SELECT * FROM signed_transfers WHERE payment_ref = $1", [paymentRef]);
  return rows[0] === undefined ? null : fromRow(rows[0]);
}

export async function transferByReservation(db: Db, reservationId: string): Promise<TransferRow | null> {
  const { rows } = await db.query<Row>("SELECT * FROM signed_transfers WHERE reservation_id = $1", [reservationId]);
  return rows[0] === undefined ? null : fromRow(rows[0]);
}

/** Rows still moving (signed or landed), oldest first. */
export async function openTransfers(db: Db, limit: number): Promise<TransferRow[]> {
  const { rows } = await db.query<Row>("SELECT * FROM signed_transfers WHERE status IN ('signed', 'landed') ORDER BY created_at LIMIT $1", [
    limit,
  ]);
  return rows.map(fromRow);
}

/**
 * The transfer is on the ledger as `settlementTx`. From `expired` too: the chain is the truth, and
 * a row can only have expired wrongly if the chain was read wrongly.
 */
export async function markLanded(db: Db, id: string, settlementTx: string): Promise<void> {
  await db.query(
    `UPDATE signed_transfers SET status = 'landed', settlement_tx = $2, updated_at = now()
     WHERE id = $1 AND status IN ('signed', 'expired')`,
    [id, settlementTx],
  );
}

export async function markRecorded(db: Db, id: string, recordTx: string): Promise<boolean> {
  const result = await db.query(
    `UPDATE signed_transfers SET status = 'recorded', record_tx = $2, updated_at = now()
     WHERE id = $1 AND status = 'landed'`,
    [id, recordTx],
  );
  return (result.rowCount ?? 0) > 0;
}

/** Nothing moved: the transfer expired unseen, or landed and failed (`settlementTx`). */
export async function markClosed(
  db: Db,
  id: string,
  status: "expired" | "failed",
  failure: string,
  settlementTx: string | null,
): Promise<boolean> {
  const result = await db.query(
    `UPDATE signed_transfers SET status = $2, failure = $3, settlement_tx = coalesce(settlement_tx, $4), updated_at = now()
     WHERE id = $1 AND status = 'signed'`,
    [id, status, failure, settlementTx],
  );
  return (result.rowCount ?? 0) > 0;
}

/** The record attempts made so far (settlements rows `<payment_ref>:r<n>`), by status. */
export async function recordAttempts(
  db: Db,
  paymentRef: string,
): Promise<{ readonly confirmed: string | null; readonly pending: string | null; readonly failed: number }> {
  const { rows } = await db.query<{ signature: string; status: "pending" | "confirmed" | "failed" }>(
    "SELECT signature, status FROM settlements WHERE left(payment_ref, length($1) + 2) = $1 || ':r'",
    [paymentRef],
  );
  return {
    confirmed: rows.find((row) => row.status === "confirmed")?.signature ?? null,
    pending: rows.find((row) => row.status === "pending")?.signature ?? null,
    failed: rows.filter((row) => row.status === "failed").length,
  };
}
