/**
 * The x402 nonce store: table `x402_nonces`, the facilitator's replay claims, one row per
 * (payer, nonce). A row is inserted `claimed` before any money moves and only ever moves on to
 * `settled` or `failed`; it is never deleted while its payload could still verify (see
 * `pruneExpiredNonces`). The SQL on this table lives here; the facilitator (facilitator.ts) and the
 * REST settle route call it. The sweeper (api/gateway/loops/sweeper.ts) finishes open claims
 * with the `sweepNonce*` writes below; its scan, which joins the table with settlements, is in
 * api/gateway/loops/sweeper-store.ts.
 */
import type { Db } from "../../../indexer/db/database.js";

/** Nonce rows outlive their payload's validity by this much before pruning (clock skew margin). */
export const NONCE_PRUNE_GRACE_SECONDS = 300;

/** A claim as stored: what an earlier settle attempt of the payload left. */
export interface NonceClaim {
  readonly status: "claimed" | "settled" | "failed";
  readonly txHash: string | null;
  readonly failure: string | null;
  /** Internal agent key of the payer. */
  readonly agentId: string;
}

export interface NewNonceClaim {
  readonly payer: string;
  readonly nonce: string;
  readonly agentId: string;
  readonly payTo: string;
  readonly amountUnits: bigint;
  readonly resource: string;
  readonly validUntilSeconds: number;
}

/** Whether the payload's nonce was already claimed (a read: `claimNonce` decides). */
export async function nonceUsed(db: Db, payer: string, nonce: string): Promise<boolean> {
  const used = await db.query("SELECT 1 FROM x402_nonces WHERE payer = $1 AND nonce = $2", [payer, nonce]);
  return used.rowCount !== 0;
}

/** Claims the nonce; false when another claim holds it already (only the claimant may settle). */
export async function claimNonce(db: Db, claim: NewNonceClaim): Promise<boolean> {
  const result = await db.query(
    `INSERT INTO x402_nonces (payer, nonce, agent_id, pay_to, amount_units, resource, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, to_timestamp($7))
     ON CONFLICT (payer, nonce) DO NOTHING
     RETURNING 1`,
    [claim.payer, claim.nonce, claim.agentId, claim.payTo, claim.amountUnits.toString(), claim.resource, claim.validUntilSeconds],
  );
  return result.rowCount === 1;
}

/** The open claim failed for good; it stays burned (the payload can never settle). */
export async function failNonceClaim(db: Db, payer: string, nonce: string, failure: string): Promise<void> {
  await db.query(
    "UPDATE x402_nonces SET status = 'failed', failure = $3, finished_at = now() WHERE payer = $1 AND nonce = $2 AND status = 'claimed'",
    [payer, nonce, failure],
  );
}

/** The open claim's transaction was sent with an unknown outcome: kept open, with it, for reconciliation. */
export async function recordNonceSent(db: Db, payer: string, nonce: string, txHash: string, failure: string): Promise<void> {
  await db.query("UPDATE x402_nonces SET tx_hash = $3, failure = $4 WHERE payer = $1 AND nonce = $2 AND status = 'claimed'", [
    payer,
    nonce,
    txHash,
    failure,
  ]);
}

/**
 * Binds the open claim to the settlement's transaction, in the transaction that commits that
 * settlement as pending: false when the claim is no longer open (the sweeper gave it up first).
 */
export async function bindNonceClaim(db: Db, payer: string, nonce: string, txHash: string): Promise<boolean> {
  const bound = await db.query(
    "UPDATE x402_nonces SET tx_hash = $3 WHERE payer = $1 AND nonce = $2 AND status = 'claimed' AND tx_hash IS NULL",
    [payer, nonce, txHash],
  );
  return bound.rowCount === 1;
}

/** The claim's payment landed with this transaction. */
export async function settleNonceClaim(db: Db, payer: string, nonce: string, txHash: string): Promise<void> {
  await db.query("UPDATE x402_nonces SET status = 'settled', tx_hash = $3, finished_at = now() WHERE payer = $1 AND nonce = $2", [
    payer,
    nonce,
    txHash,
  ]);
}

/** The claim on this nonce, or null when none was made. */
export async function nonceClaim(db: Db, payer: string, nonce: string): Promise<NonceClaim | null> {
  const { rows } = await db.query<{ status: NonceClaim["status"]; tx_hash: string | null; failure: string | null; agent_id: string }>(
    "SELECT status, tx_hash, failure, agent_id FROM x402_nonces WHERE payer = $1 AND nonce = $2",
    [payer, nonce],
  );
  const row = rows[0];
  return row === undefined ? null : { status: row.status, txHash: row.tx_hash, failure: row.failure, agentId: row.agent_id };
}

/** Deletes nonce rows whose payload expired more than the grace ago (they can never verify again). */
export async function pruneExpiredNonces(db: Db, now: Date, limit = 10_000): Promise<number> {
  const result = await db.query(
    `DELETE FROM x402_nonces WHERE ctid IN (
       SELECT ctid FROM x402_nonces WHERE expires_at < $1::timestamptz - make_interval(secs => $2) LIMIT $3)`,
    [now, NONCE_PRUNE_GRACE_SECONDS, limit],
  );
  return result.rowCount ?? 0;
}

// The sweeper's writes: each conditional on the claim still being open, as its scan read it, so a
// facilitator finishing late and the sweeper never undo each other. Each returns the rows changed.

/** An open claim whose settlement was confirmed: settled with that transaction. */
export async function sweepNonceSettled(db: Db, payer: string, nonce: string, txHash: string): Promise<number> {
  const done = await db.query(
    "UPDATE x402_nonces SET status = 'settled', tx_hash = $3, finished_at = now() WHERE payer = $1 AND nonce = $2 AND status = 'claimed'",
    [payer, nonce, txHash],
  );
  return done.rowCount ?? 0;
}

/** An open claim whose settlement failed: failed, keeping a transaction or failure it already had. */
export async function sweepNonceFailed(db: Db, payer: string, nonce: string, txHash: string | null, failure: string): Promise<number> {
  const done = await db.query(
    `UPDATE x402_nonces SET status = 'failed', tx_hash = coalesce(tx_hash, $3), finished_at = now(),
       failure = coalesce(failure, $4) WHERE payer = $1 AND nonce = $2 AND status = 'claimed'`,
    [payer, nonce, txHash, failure],
  );
  return done.rowCount ?? 0;
}

/** An open claim whose settlement is still pending: remember its transaction (the next pass finds it by signature). */
export async function sweepNoncePending(db: Db, payer: string, nonce: string, txHash: string | null): Promise<void> {
  await db.query("UPDATE x402_nonces SET tx_hash = $3 WHERE payer = $1 AND nonce = $2 AND status = 'claimed' AND tx_hash IS NULL", [
    payer,
    nonce,
    txHash,
  ]);
}

/** An open claim for which no settlement was ever prepared: failed (nothing was signed, nothing can move). */
export async function sweepNonceAbandoned(db: Db, payer: string, nonce: string): Promise<number> {
  const done = await db.query(
    `UPDATE x402_nonces SET status = 'failed', failure = 'abandoned: no settlement was prepared', finished_at = now()
     WHERE payer = $1 AND nonce = $2 AND status = 'claimed' AND tx_hash IS NULL`,
    [payer, nonce],
  );
  return done.rowCount ?? 0;
}
