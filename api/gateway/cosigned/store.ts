/**
 * The co-signed transfer store: tables `cosigned_transfers` and `attested_payers`
 * (migrations/021, 037) and `attested_payer_admissions` (migrations/037). A row is the gateway's
 * record of a payer's transaction it co-signed and may have sent; the chain is the truth for
 * whether it landed, so statuses move from `pending` to `confirmed` or `failed`, and from a
 * watched `failed` to `confirmed` when the chain says it landed. Imported by cosigned.ts only.
 */
import type pg from "pg";
import { withTransaction } from "../../../indexer/db/database.js";

export interface NewCosignedTransfer {
  readonly signature: string;
  /** Hex of the payer's signature: finds the transaction presented again before anything is signed. */
  readonly payerSignature: string;
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
  /** A failed transfer whose bytes could still land (refused before sending): followed until it expires. */
  readonly watch: boolean;
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
  watch: boolean;
  slot: string | null;
  record: "attest" | "payer";
  record_signature: string | null;
  record_transaction: string | null;
  record_last_valid_block_height: string | null;
  record_status: CosignedRow["recordStatus"];
}

const COLUMNS = `signature, protocol, payer, payee, amount_units, endpoint, transaction, last_valid_block_height, status, watch, slot,
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
    watch: row.watch,
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
       transaction, last_valid_block_height, record, payer_signature)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT (signature) DO NOTHING`,
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
      transfer.payerSignature,
    ],
  );
  return rowCount === 1;
}

/** The co-signed transfer whose payer signed with `payerSignature` (hex), if one was claimed. */
export async function cosignedTransferByPayerSignature(pool: pg.Pool, payerSignature: string): Promise<CosignedRow | null> {
  const { rows } = await pool.query<Row>(
    `SELECT ${COLUMNS} FROM cosigned_transfers WHERE payer_signature = $1 ORDER BY created_at LIMIT 1`,
    [payerSignature],
  );
  return rows[0] === undefined ? null : fromRow(rows[0]);
}

export async function cosignedTransfer(pool: pg.Pool, signature: string): Promise<CosignedRow | null> {
  const { rows } = await pool.query<Row>(`SELECT ${COLUMNS} FROM cosigned_transfers WHERE signature = $1`, [signature]);
  return rows[0] === undefined ? null : fromRow(rows[0]);
}

/**
 * Resolves the transfer of a pending row; a resolved one is left as it is. `watch`: a failure that
 * is not final (the node refused it before sending, yet the co-signed bytes exist until the
 * blockhash expires), so the reconciler keeps following it.
 */
export async function markTransfer(
  pool: pg.Pool,
  signature: string,
  status: "confirmed" | "failed",
  slot: number | null,
  error: string | null,
  watch = false,
): Promise<void> {
  await pool.query(
    `UPDATE cosigned_transfers SET status = $2, slot = $3, error = $4, watch = $5, updated_at = now()
     WHERE signature = $1 AND status = 'pending'`,
    [signature, status, slot, error, status === "failed" && watch],
  );
}

/**
 * A watched failed transfer that landed after all: the chain is the truth, so the row becomes
 * confirmed (and the reconciler records the payment). True when this call made the change.
 */
export async function markLateLanding(pool: pg.Pool, signature: string, slot: number): Promise<boolean> {
  const { rowCount } = await pool.query(
    `UPDATE cosigned_transfers SET status = 'confirmed', slot = $2, error = NULL, watch = false, updated_at = now()
     WHERE signature = $1 AND status = 'failed' AND watch`,
    [signature, slot],
  );
  return rowCount === 1;
}

/** A watched failed transfer that can no longer land (expired) or landed failed: no longer followed. */
export async function endWatch(pool: pg.Pool, signature: string, error: string): Promise<void> {
  await pool.query(
    `UPDATE cosigned_transfers SET watch = false, error = $2, updated_at = now() WHERE signature = $1 AND status = 'failed' AND watch`,
    [signature, error],
  );
}

/** Failed transfers still followed, oldest first. */
export async function watchedCosignedTransfers(pool: pg.Pool, limit: number): Promise<CosignedRow[]> {
  const { rows } = await pool.query<Row>(
    `SELECT ${COLUMNS} FROM cosigned_transfers WHERE status = 'failed' AND watch ORDER BY created_at LIMIT ${limit}`,
  );
  return rows.map(fromRow);
}

export type PayerAdmission = "known" | "admitted" | "quota_exceeded";

/**
 * Admits `payer` before its first attested record, whose payer state the authority pays the rent
 * of: a payer already admitted (by any account) is `known`; a new one is admitted against
 * `accountId`'s quota of new payers in the last 24 hours, counted under a per-account transaction
 * lock so concurrent settlements cannot both take the last one.
 */
export async function admitAttestedPayer(
  pool: pg.Pool,
  admission: { readonly payer: string; readonly accountId: string; readonly quota: number },
): Promise<PayerAdmission> {
  return withTransaction(pool, async (client) => {
    const known = await client.query("SELECT 1 FROM attested_payer_admissions WHERE payer = $1", [admission.payer]);
    if ((known.rowCount ?? 0) > 0) return "known";
    await client.query("SELECT pg_advisory_xact_lock(hashtext('attested-payers:' || $1::text))", [admission.accountId]);
    const { rows } = await client.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM attested_payer_admissions WHERE account_id = $1 AND admitted_at > now() - interval '24 hours'`,
      [admission.accountId],
    );
    if ((rows[0]?.n ?? 0) >= admission.quota) return "quota_exceeded";
    const inserted = await client.query(
      "INSERT INTO attested_payer_admissions (payer, account_id) VALUES ($1, $2) ON CONFLICT (payer) DO NOTHING",
      [admission.payer, admission.accountId],
    );
    return (inserted.rowCount ?? 0) === 1 ? "admitted" : "known";
  });
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
