/**
 * The settlement store: table `settlements`, the rows the gateway signed (migrations:
 * settlements). The row is the gateway's record of a transaction it signed and may have sent; the
 * chain is the truth for whether it landed, so a row only ever moves from `pending` to `confirmed`
 * or `failed`, never back, and a status already resolved is never overwritten. Reads of the table
 * by the facilitator, the invocations and the REST routes go through here; the settle path
 * (settlement.ts) writes its rows in its own transaction, and the sweeper reads them in its joins.
 */
import type pg from "pg";
import type { Db } from "../../../indexer/db/database.js";

export interface SettlementRecord {
  readonly agentId: string;
  readonly paymentId: bigint;
  readonly txHash: string;
  readonly amountUnits: bigint;
  readonly status: "pending" | "confirmed" | "failed";
  /** The program's error name, `expired`, or the RPC's refusal, for a failed one. */
  readonly error: string | null;
  readonly slot: number | null;
}

/** Resolves a pending row; a row already resolved (by the reconciler or the sender) is left as it is. */
export async function markSettlement(
  pool: pg.Pool,
  signature: string,
  status: "confirmed" | "failed",
  error: string | null,
  slot: number | null,
): Promise<void> {
  await pool.query(
    `UPDATE settlements SET status = $2, error = $3, slot = $4, updated_at = now()
     WHERE signature = $1 AND status = 'pending'`,
    [signature, status, error, slot],
  );
}

/** A settlement the gateway signed, by transaction signature (for retried requests and status reads). */
export async function findSettlement(pool: pg.Pool, signature: string): Promise<SettlementRecord | null> {
  const rows = await pool.query<{
    agent_id: string;
    payment_id: string;
    status: SettlementRecord["status"];
    error: string | null;
    slot: string | null;
    amount_units: string;
  }>("SELECT agent_id, payment_id, status, error, slot, amount_units FROM settlements WHERE signature = $1", [signature]);
  const row = rows.rows[0];
  if (row === undefined) return null;
  return {
    agentId: row.agent_id,
    paymentId: BigInt(row.payment_id),
    txHash: signature,
    amountUnits: BigInt(row.amount_units),
    status: row.status,
    error: row.error,
    slot: row.slot === null ? null : Number(row.slot),
  };
}

/** The oldest pending rows, with the block height after which their transaction can never land. */
export async function pendingSettlements(pool: pg.Pool, limit: number): Promise<{ signature: string; lastValidBlockHeight: number }[]> {
  const rows = await pool.query<{ signature: string; last_valid_block_height: string }>(
    `SELECT signature, last_valid_block_height FROM settlements WHERE status = 'pending'
     ORDER BY created_at LIMIT ${limit}`,
  );
  return rows.rows.map((row) => ({ signature: row.signature, lastValidBlockHeight: Number(row.last_valid_block_height) }));
}

/** The signed transaction (base64 wire bytes) of a row, or undefined if there is no such row. */
export async function settlementTransaction(pool: pg.Pool, signature: string): Promise<string | undefined> {
  const row = await pool.query<{ transaction: string }>("SELECT transaction FROM settlements WHERE signature = $1", [signature]);
  return row.rows[0]?.transaction;
}

/**
 * The payee of `agentId`'s confirmed settlement with this signature, or null when the signature is
 * not a confirmed payment of that agent (an invocation hangs only under its invoker's own payment).
 */
export async function confirmedPaymentPayee(db: Db, signature: string, agentId: string): Promise<string | null> {
  const { rows } = await db.query<{ payee: string }>(
    "SELECT payee FROM settlements WHERE signature = $1 AND agent_id = $2 AND status = 'confirmed'",
    [signature, agentId],
  );
  return rows[0]?.payee ?? null;
}

/** Signatures of the confirmed settlements under an invocation account, oldest first, at most `limit`. */
export async function confirmedSignaturesUnder(db: Db, invocation: string, limit: number): Promise<string[]> {
  const { rows } = await db.query<{ signature: string }>(
    `SELECT signature FROM settlements WHERE invocation = $1 AND status = 'confirmed'
     ORDER BY created_at, payment_id LIMIT $2`,
    [invocation, limit],
  );
  return rows.map((row) => row.signature);
}

/** The signature of the payment's settlement row that has not failed (it may have been sent), or null. */
export async function unfailedSettlementOf(db: Db, paymentRef: string): Promise<string | null> {
  const { rows } = await db.query<{ signature: string }>(
    "SELECT signature FROM settlements WHERE payment_ref = $1 AND status <> 'failed'",
    [paymentRef],
  );
  return rows[0]?.signature ?? null;
}
