/**
 * The settlement store: table `settlements`, the rows the gateway signed (migrations:
 * settlements). The row is the gateway's record of a transaction it signed and may have sent; the
 * chain is the truth for whether it landed, so a row only ever moves from `pending` to `confirmed`
 * or `failed`, never back, and a status already resolved is never overwritten. The SQL of the
 * settle path (settlement.ts), the facilitator, the invocations and the REST routes on this table
 * lives here; the sweeper's scans, which join it with the claim tables, are in sweeper-store.ts.
 *
 * Besides `settlements`, the settle path's transaction writes two rows it does not own here: the
 * agent's `agent_wallets.next_payment_id` (its payment id allocation; the row lock it takes
 * serializes the agent's settlements while one is signed) and the `endpoints` text by hash. Both
 * are in `allocatePaymentId`, the one statement that must commit together with the pending row.
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

/**
 * Resolves a pending row; a row already resolved (by the reconciler or the sender) is left as it
 * is. `watch`: a failure that is not final (refused before sending: the signed bytes could still
 * land until the blockhash expires), so the reconciler keeps following it.
 */
export async function markSettlement(
  pool: pg.Pool,
  signature: string,
  status: "confirmed" | "failed",
  error: string | null,
  slot: number | null,
  watch = false,
): Promise<void> {
  await pool.query(
    `UPDATE settlements SET status = $2, error = $3, slot = $4, watch = $5, updated_at = now()
     WHERE signature = $1 AND status = 'pending'`,
    [signature, status, error, slot, status === "failed" && watch],
  );
}

/** Failed rows still followed, oldest first, with their last valid block height and payment reference. */
export async function watchedSettlements(
  pool: pg.Pool,
  limit: number,
): Promise<{ signature: string; lastValidBlockHeight: number; paymentRef: string | null }[]> {
  const rows = await pool.query<{ signature: string; last_valid_block_height: string; payment_ref: string | null }>(
    `SELECT signature, last_valid_block_height, payment_ref FROM settlements WHERE status = 'failed' AND watch
     ORDER BY created_at LIMIT ${limit}`,
  );
  return rows.rows.map((row) => ({
    signature: row.signature,
    lastValidBlockHeight: Number(row.last_valid_block_height),
    paymentRef: row.payment_ref,
  }));
}

/** A watched failed row whose transaction landed after all (the chain is the truth): confirmed. True when changed. */
export async function markSettlementLanded(pool: pg.Pool, signature: string, slot: number): Promise<boolean> {
  const result = await pool.query(
    `UPDATE settlements SET status = 'confirmed', error = NULL, slot = $2, watch = false, updated_at = now()
     WHERE signature = $1 AND status = 'failed' AND watch`,
    [signature, slot],
  );
  return (result.rowCount ?? 0) > 0;
}

/** A watched failed row that can no longer land, or landed failed: no longer followed. */
export async function endSettlementWatch(pool: pg.Pool, signature: string, error: string): Promise<void> {
  await pool.query(
    `UPDATE settlements SET watch = false, error = $2, updated_at = now() WHERE signature = $1 AND status = 'failed' AND watch`,
    [signature, error],
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

/** The endpoint text a settlement's hash stands for, and the agent whose next payment id it takes. */
export interface PaymentIdAllocation {
  /** Hex of the endpoint's hash (the `endpoints` key). */
  readonly endpointHash: string;
  readonly endpoint: string;
  readonly domain: string;
  readonly agentId: string;
}

/**
 * Allocates the agent's next payment id and stores the endpoint text by hash, in one statement;
 * null when the agent has no wallet. Call it in the transaction that inserts the pending row (ids
 * stay contiguous across a crash); its row lock holds the agent's other settlements until commit.
 */
export async function allocatePaymentId(client: pg.ClientBase, a: PaymentIdAllocation): Promise<bigint | null> {
  const { rows } = await client.query<{ payment_id: string }>(
    `WITH endpoint AS (
       INSERT INTO endpoints (endpoint_hash, endpoint, domain) VALUES ($1, $2, $3) ON CONFLICT (endpoint_hash) DO NOTHING
     )
     UPDATE agent_wallets SET next_payment_id = next_payment_id + 1
     WHERE agent_id = $4 RETURNING next_payment_id - 1 AS payment_id`,
    [a.endpointHash, a.endpoint, a.domain, a.agentId],
  );
  const row = rows[0];
  return row === undefined ? null : BigInt(row.payment_id);
}

/** A signed, not yet sent settlement, as its `pending` row stores it. */
export interface PendingSettlement {
  readonly agentId: string;
  readonly paymentId: bigint;
  readonly signature: string;
  readonly payer: string;
  readonly payee: string;
  readonly amountUnits: bigint;
  readonly protocol: string;
  readonly rail: string;
  /** Hex of the endpoint's hash. */
  readonly endpointHash: string;
  readonly invocation: string | null;
  /** Base58 of the settlement reference, or null. */
  readonly settlementReference: string | null;
  /** base64 of the signed wire bytes. */
  readonly transaction: string;
  readonly lastValidBlockHeight: number;
  readonly paymentRef: string | null;
  readonly payeeAccountCreated: boolean;
}

/** Inserts the `pending` row of a signed settlement (in the allocation's transaction). */
export async function insertPendingSettlement(client: pg.ClientBase, p: PendingSettlement): Promise<void> {
  await client.query(
    `INSERT INTO settlements (agent_id, payment_id, signature, payer, payee, amount_units, protocol, rail,
       endpoint_hash, invocation, settlement_reference, transaction, last_valid_block_height, status, payment_ref,
       payee_account_created)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, 'pending', $14, $15)`,
    [
      p.agentId,
      p.paymentId.toString(),
      p.signature,
      p.payer,
      p.payee,
      p.amountUnits.toString(),
      p.protocol,
      p.rail,
      p.endpointHash,
      p.invocation,
      p.settlementReference,
      p.transaction,
      p.lastValidBlockHeight,
      p.paymentRef,
      p.payeeAccountCreated,
    ],
  );
}

/**
 * Takes the transaction-level lock of the paying agent's account on new payee token accounts, so
 * that concurrent settlements of one account count and claim its quota one at a time.
 */
export async function lockPayeeAccountQuota(client: pg.ClientBase, agentId: string): Promise<void> {
  await client.query("SELECT pg_advisory_xact_lock(hashtext('payee-accounts:' || account_id)) FROM agents WHERE agent_id = $1", [agentId]);
}

/**
 * Payee token accounts the agent's account had created in the last 24 hours: by settlements that
 * did not fail, and for its own new agents (agent_token_accounts, ./payee-account.ts).
 */
export async function payeeAccountsCreatedToday(db: Db, agentId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `WITH account AS (SELECT account_id FROM agents WHERE agent_id = $1)
     SELECT (SELECT count(*)::int
             FROM settlements s JOIN agents a ON a.agent_id = s.agent_id
             WHERE a.account_id = (SELECT account_id FROM account)
               AND s.payee_account_created AND s.status <> 'failed' AND s.created_at > now() - interval '24 hours')
          + (SELECT count(*)::int FROM agent_token_accounts t
             WHERE t.account_id = (SELECT account_id FROM account) AND t.created_at > now() - interval '24 hours') AS n`,
    [agentId],
  );
  return rows[0]?.n ?? 0;
}
