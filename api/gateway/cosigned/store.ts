/**
 * The co-signed transfer store: tables `cosigned_transfers` and `attested_payers`
 * (migrations/021). A row is the gateway's record of a payer's transaction it co-signed and may
 * have sent; the chain is the truth for whether it landed, so statuses only move from `pending`
 * to `confirmed` or `failed`. Imported by cosigned.ts only.
 */
import type pg from "pg";
import { withTransaction } from "../../../indexer/db/database.js";

export interface NewCosignedTransfer {
  readonly signature: string;
  readonly protocol: "x402" | "mpp";
  readonly accountId: string;
  readonly payer: string;
  readonly payee: string;
  readonly mint: string;
  readonly amountUnits: bigint;
  readonly endpoint: string;
  readonly transaction: string;
  readonly lastValidBlockHeight: number;
  readonly record: "attest" | "payer";
}

export interface CosignedRow {
  readonly signature: string;
  readonly protocol: "x402" | "mpp";
  readonly payer: string;
  readonly payee: string;
  readonly amountUnits: bigint;
  readonly endpoint: string;
  readonly transaction: string;
  readonly lastValidBlockHeight: number;
  readonly status: "pending" | "confirmed" | "failed";
  readonly slot: number | null;
  readonly record: "attest" | "payer";
  readonly recordSignature: string | null;
  readonly recordTransaction: string | null;
  readonly recordLastValidBlockHeight: number | null;
  readonly recordStatus: "pending" | "confirmed" | "failed" | null;
}

interface Row {
  signature: string;
  protocol: "x402" | "mpp";
  payer: string;
  payee: string;
  amount_units: string;
  endpoint: string;
  transaction: string;
  last_valid_block_height: string;
  status: CosignedRow["status"];
  slot: string | null;
  record: "attest" | "payer";
  record_signature: string | null;
  record_transaction: string | null;
  record_last_valid_block_height: string | null;
  record_status: CosignedRow["recordStatus"];
}

const COLUMNS = `signature, protocol, payer, payee, amount_units, endpoint, transaction, last_valid_block_height, status, slot,
  record, record_signature, record_transaction, record_last_valid_block_height, record_status`;

function fromRow(row: Row): CosignedRow {
  return {
    signature: row.signature,
    protocol: row.protocol,
    payer: row.payer,
    payee: row.payee,
    amountUnits: BigInt(row.amount_units),
    endpoint: row.endpoint,
    transaction: row.transaction,
    lastValidBlockHeight: Number(row.last_valid_block_height),
    status: row.status,
    slot: row.slot === null ? null : Number(row.slot),
    record: row.record,
    recordSignature: row.record_signature,
    recordTransaction: row.record_transaction,
    recordLastValidBlockHeight: row.record_last_valid_block_height === null ? null : Number(row.record_last_valid_block_height),
    recordStatus: row.record_status,
  };
}

/**
 * Claims the signature: true for the one caller whose insert created the row. The primary key
 * makes concurrent claims of one transaction exclusive, so it is sent and paid for at most once.
 */
export async function claimCosignedTransfer(pool: pg.Pool, transfer: NewCosignedTransfer): Promise<boolean> {
  const { rowCount } = await pool.query(
    `INSERT INTO cosigned_transfers (signature, protocol, account_id, payer, payee, mint, amount_units, endpoint,
       transaction, last_valid_block_height, record)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (signature) DO NOTHING`,
    [
      transfer.signature,
      transfer.protocol,
      transfer.accountId,
      transfer.payer,
      transfer.payee,
      transfer.mint,
      transfer.amountUnits.toString(),
      transfer.endpoint,
      transfer.transaction,
      transfer.lastValidBlockHeight,
      transfer.record,
    ],
  );
  return rowCount === 1;
}

export async function cosignedTransfer(pool: pg.Pool, signature: string): Promise<CosignedRow | null> {
  const { rows } = await pool.query<Row>(`SELECT ${COLUMNS} FROM cosigned_transfers WHERE signature = $1`, [signature]);
  return rows[0] === undefined ? null : fromRow(rows[0]);
}

/** Resolves the transfer of a pending row; a resolved one is left as it is. */
export async function markTransfer(
  pool: pg.Pool,
  signature: string,
  status: "confirmed" | "failed",
  slot: number | null,
  error: string | null,
): Promise<void> {
  await pool.query(
    `UPDATE cosigned_transfers SET status = $2, slot = $3, error = $4, updated_at = now() WHERE signature = $1 AND status = 'pending'`,
    [signature, status, slot, error],
  );
}

/**
 * Prepares the record of a confirmed transfer in one database transaction: the payer's next
 * attested payment id, the signed record transaction built by `sign` with it, stored as pending.
 * Returns null when the row already has a live record (pending or confirmed): never two records.
 */
export async function prepareRecord(
  pool: pg.Pool,
  signature: string,
  sign: (paymentId: bigint) => Promise<{ signature: string; wire: string; lastValidBlockHeight: number }>,
): Promise<{ signature: string; wire: string; lastValidBlockHeight: number } | null> {
  return withTransaction(pool, async (client) => {
    const { rows } = await client.query<{ payer: string; record_status: string | null }>(
      `SELECT payer, record_status FROM cosigned_transfers
       WHERE signature = $1 AND status = 'confirmed' AND record = 'attest' FOR UPDATE`,
      [signature],
    );
    const row = rows[0];
    if (row === undefined || row.record_status === "pending" || row.record_status === "confirmed") return null;
    const allocated = await client.query<{ payment_id: string }>(
      `INSERT INTO attested_payers (payer, next_payment_id) VALUES ($1, 2)
       ON CONFLICT (payer) DO UPDATE SET next_payment_id = attested_payers.next_payment_id + 1
       RETURNING next_payment_id - 1 AS payment_id`,
      [row.payer],
    );
    const paymentId = BigInt(allocated.rows[0]!.payment_id);
    const signed = await sign(paymentId);
    await client.query(
      `UPDATE cosigned_transfers SET record_payment_id = $2, record_signature = $3, record_transaction = $4,
         record_last_valid_block_height = $5, record_status = 'pending', record_error = NULL, updated_at = now()
       WHERE signature = $1`,
      [signature, paymentId.toString(), signed.signature, signed.wire, signed.lastValidBlockHeight],
    );
    return signed;
  });
}

/** Resolves a pending record (by its own signature); a failed one is prepared again later under a new id. */
export async function markRecord(
  pool: pg.Pool,
  recordSignature: string,
  status: "confirmed" | "failed",
  error: string | null,
): Promise<void> {
  await pool.query(
    `UPDATE cosigned_transfers SET record_status = $2, record_error = $3, updated_at = now()
     WHERE record_signature = $1 AND record_status = 'pending'`,
    [recordSignature, status, error],
  );
}

/** Rows with work left: a transfer not resolved, or a confirmed attested transfer without a confirmed record. */
export async function openCosignedTransfers(pool: pg.Pool, limit: number): Promise<CosignedRow[]> {
  const { rows } = await pool.query<Row>(
    `SELECT ${COLUMNS} FROM cosigned_transfers
     WHERE status = 'pending' OR (status = 'confirmed' AND record = 'attest' AND (record_status IS NULL OR record_status <> 'confirmed'))
     ORDER BY created_at LIMIT ${limit}`,
  );
  return rows.map(fromRow);
}

/** The endpoint text by its hash, for the read models (the `endpoints` table of settlement). */
export async function rememberEndpoint(pool: pg.Pool, hashHex: string, endpoint: string, domain: string): Promise<void> {
  await pool.query("INSERT INTO endpoints (endpoint_hash, endpoint, domain) VALUES ($1, $2, $3) ON CONFLICT (endpoint_hash) DO NOTHING", [
    hashHex,
    endpoint,
    domain,
  ]);
}
