/**
 * The MPP store: tables `mpp_payments` and `mpp_sessions` (migrations/007_protocols.sql, 013); the
 * SQL on them lives here (the sweeper's scans, which join them with settlements, are in
 * api/gateway/loops/sweeper-store.ts).
 *
 * Authority: `mpp_payments` is the truth for which signed submission (payer, nonce) was claimed (a
 * claim is never released, so a nonce never pays twice) and for what the gateway learned of its
 * settlement; the chain for whether a transaction landed. `mpp_sessions` is the truth for which
 * session tokens (by sha256) are valid and how many prepaid calls a session has left.
 *
 * Writers: the service claims submissions, the sessions claim charges (in the charge policy's
 * transaction) and issue, redeem, refresh (at most once) and revoke sessions; the rail settlement
 * moves a claim to `authorized` (card), `settled` or `failed`; the sweeper finishes what a crash
 * left open, only from `claimed`/`authorized`, with writes conditional on the state it read.
 */
import type pg from "pg";
import type { Db } from "../../../indexer/db/database.js";
import type { MppRail } from "./rails.js";

/** A signed submission about to be claimed by its (payer, nonce). */
export interface NewSubmission {
  readonly agentId: string;
  readonly payer: string;
  readonly nonce: string;
  readonly serviceOrigin: string;
  readonly endpoint: string;
  readonly payee: string;
  readonly method: string;
  readonly rail: MppRail;
  readonly amountUnits: bigint;
  readonly validUntilSeconds: number;
  readonly parentTxHash: string | null;
}

/** A claimed submission as stored: what an earlier attempt left. */
export interface StoredSubmission {
  readonly id: string;
  readonly agentId: string;
  readonly status: string;
  readonly txHash: string | null;
  readonly failure: string | null;
  readonly serviceOrigin: string;
  readonly payee: string;
  readonly method: string;
  readonly rail: MppRail;
  readonly amountUnits: bigint;
  readonly parentTxHash: string | null;
}

/** A charge on a session about to be claimed. */
export interface NewSessionCharge {
  readonly agentId: string;
  readonly payer: string;
  readonly sessionId: string;
  readonly serviceOrigin: string;
  readonly endpoint: string;
  readonly payee: string;
  readonly method: string;
  readonly rail: MppRail;
  readonly amountUnits: bigint;
  readonly parentTxHash: string | null;
}

/** What a new session row holds besides its token and times. */
export interface SessionTerms {
  readonly agentId: string;
  readonly payer: string;
  readonly method: string;
  readonly rail: MppRail;
  readonly amountUnits: bigint;
  readonly prepaidCalls: number;
  readonly reusable: boolean;
  readonly establishedBy: string | null;
  readonly refreshedFrom: string | null;
  readonly parentTxHash: string | null;
}

/** A new session row. */
export interface NewSession extends SessionTerms {
  readonly serviceOrigin: string;
  readonly tokenSha256: Buffer;
  readonly createdAt: Date;
  readonly expiresAt: Date;
}

/** A session row as the sessions read it (snake case: the row itself). */
export interface SessionRow {
  id: string;
  agent_id: string;
  payer: string;
  method: string;
  rail: MppRail;
  amount_units: string;
  reusable: boolean;
  expires_at: Date;
  refreshed_at: Date | null;
  revoked_at: Date | null;
  established_by: string | null;
  parent_tx_hash: string | null;
  prepaid_calls: number;
}

// ---- mpp_payments: submissions and charges ----

/** Claims the submission's (payer, nonce); its row id, or null when the nonce was already used. */
export async function claimSubmission(db: Db, s: NewSubmission): Promise<string | null> {
  const claimed = await db.query<{ id: string }>(
    `INSERT INTO mpp_payments (kind, agent_id, payer, nonce, service_origin, endpoint, payee, method, rail, amount_units, expires_at,
                               parent_tx_hash)
     VALUES ('submission', $1, $2, $3, $4, $5, $6, $7, $8, $9, to_timestamp($10), $11)
     ON CONFLICT (payer, nonce) DO NOTHING RETURNING id`,
    [
      s.agentId,
      s.payer,
      s.nonce,
      s.serviceOrigin,
      s.endpoint,
      s.payee,
      s.method,
      s.rail,
      s.amountUnits.toString(),
      s.validUntilSeconds,
      s.parentTxHash,
    ],
  );
  return claimed.rows[0]?.id ?? null;
}

/** The submission claimed under (payer, nonce), or null when none was. */
export async function submissionByNonce(db: Db, payer: string, nonce: string): Promise<StoredSubmission | null> {
  const { rows } = await db.query<{
    id: string;
    agent_id: string;
    status: string;
    tx_hash: string | null;
    failure: string | null;
    service_origin: string;
    payee: string;
    method: string;
    rail: MppRail;
    amount_units: string;
    parent_tx_hash: string | null;
  }>(
    `SELECT id, agent_id, status, tx_hash, failure, service_origin, payee, method, rail, amount_units, parent_tx_hash
     FROM mpp_payments WHERE payer = $1 AND nonce = $2 AND kind = 'submission'`,
    [payer, nonce],
  );
  const row = rows[0];
  if (row === undefined) return null;
  return {
    id: row.id,
    agentId: row.agent_id,
    status: row.status,
    txHash: row.tx_hash,
    failure: row.failure,
    serviceOrigin: row.service_origin,
    payee: row.payee,
    method: row.method,
    rail: row.rail,
    amountUnits: BigInt(row.amount_units),
    parentTxHash: row.parent_tx_hash,
  };
}

/** Claims a session charge row (call it in the transaction that admitted the charge); its id. */
export async function claimSessionCharge(client: pg.ClientBase, c: NewSessionCharge): Promise<string> {
  const { rows } = await client.query<{ id: string }>(
    `INSERT INTO mpp_payments (kind, agent_id, payer, session_id, service_origin, endpoint, payee, method, rail, amount_units,
                               parent_tx_hash)
     VALUES ('session_charge', $1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id`,
    [c.agentId, c.payer, c.sessionId, c.serviceOrigin, c.endpoint, c.payee, c.method, c.rail, c.amountUnits.toString(), c.parentTxHash],
  );
  return rows[0]!.id;
}

/** The row failed for good: nothing moved and nothing will (the claim stays, so no replay). */
export async function markPaymentFailed(db: Db, id: string, failure: string): Promise<void> {
  await db.query("UPDATE mpp_payments SET status = 'failed', failure = $2, finished_at = now() WHERE id = $1", [id, failure]);
}

/** The card processor holds the amount under `cardReference`. */
export async function markPaymentAuthorized(db: Db, id: string, cardReference: string): Promise<void> {
  await db.query("UPDATE mpp_payments SET status = 'authorized', card_reference = $2 WHERE id = $1", [id, cardReference]);
}

/** Sent with an unknown outcome: the row stays unfinished with its transaction, for reconciliation. */
export async function recordPaymentSent(db: Db, id: string, txHash: string, failure: string): Promise<void> {
  await db.query("UPDATE mpp_payments SET tx_hash = $2, failure = $3 WHERE id = $1", [id, txHash, failure]);
}

/** The payment landed with this transaction. */
export async function markPaymentSettled(db: Db, id: string, txHash: string): Promise<void> {
  await db.query("UPDATE mpp_payments SET status = 'settled', tx_hash = $2, finished_at = now() WHERE id = $1", [id, txHash]);
}

/** Notes a problem on a row without changing its status (a failed card capture after the record landed). */
export async function notePaymentFailure(db: Db, id: string, failure: string): Promise<void> {
  await db.query("UPDATE mpp_payments SET failure = $2 WHERE id = $1", [id, failure]);
}

// ---- mpp_payments: the sweeper's conditional writes (on the state its scan read) ----

/** An open claim whose settlement was confirmed: settled. Rows changed (0 when someone finished it first). */
export async function sweepPaymentSettled(db: Db, id: string, txHash: string): Promise<number> {
  const done = await db.query(
    "UPDATE mpp_payments SET status = 'settled', tx_hash = $2, finished_at = now() WHERE id = $1 AND status IN ('claimed', 'authorized')",
    [id, txHash],
  );
  return done.rowCount ?? 0;
}

/** An open claim whose settlement failed: failed, keeping a transaction or failure it already had. Rows changed. */
export async function sweepPaymentFailed(db: Db, id: string, txHash: string | null, failure: string): Promise<number> {
  const done = await db.query(
    `UPDATE mpp_payments SET status = 'failed', tx_hash = coalesce(tx_hash, $2), failure = coalesce(failure, $3), finished_at = now()
     WHERE id = $1 AND status IN ('claimed', 'authorized')`,
    [id, txHash, failure],
  );
  return done.rowCount ?? 0;
}

/** An open claim whose settlement is still pending: remember its transaction (the next pass finds it by signature). */
export async function sweepPaymentPending(db: Db, id: string, txHash: string | null): Promise<void> {
  await db.query("UPDATE mpp_payments SET tx_hash = $2 WHERE id = $1 AND status IN ('claimed', 'authorized') AND tx_hash IS NULL", [
    id,
    txHash,
  ]);
}

/** A claim for which no settlement was ever prepared: failed (nothing was signed). Rows changed. */
export async function sweepPaymentAbandoned(db: Db, id: string): Promise<number> {
  const done = await db.query(
    `UPDATE mpp_payments SET status = 'failed', failure = 'abandoned: no settlement was prepared', finished_at = now()
     WHERE id = $1 AND status = 'claimed' AND tx_hash IS NULL`,
    [id],
  );
  return done.rowCount ?? 0;
}

// ---- mpp_sessions ----

/** Inserts a session row; its id. */
export async function insertSession(db: Db, s: NewSession): Promise<string> {
  const { rows } = await db.query<{ id: string }>(
    `INSERT INTO mpp_sessions (agent_id, payer, service_origin, token_sha256, method, rail, amount_units, prepaid_calls,
                               reusable, established_by, refreshed_from, created_at, expires_at, parent_tx_hash)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) RETURNING id`,
    [
      s.agentId,
      s.payer,
      s.serviceOrigin,
      s.tokenSha256,
      s.method,
      s.rail,
      s.amountUnits.toString(),
      s.prepaidCalls,
      s.reusable,
      s.establishedBy,
      s.refreshedFrom,
      s.createdAt,
      s.expiresAt,
      s.parentTxHash,
    ],
  );
  return rows[0]!.id;
}

/** Revokes the live sessions a payment established; the prepaid calls each had left. */
export async function revokeSessionsEstablishedBy(db: Db, paymentId: string, at: Date): Promise<number[]> {
  const revoked = await db.query<{ prepaid_calls: number }>(
    "UPDATE mpp_sessions SET revoked_at = $2 WHERE established_by = $1 AND revoked_at IS NULL RETURNING prepaid_calls",
    [paymentId, at],
  );
  return revoked.rows.map((r) => r.prepaid_calls);
}

/** Whether the payment ever established a session (revoked ones included). */
export async function establishedAnySession(db: Db, paymentId: string): Promise<boolean> {
  const opened = await db.query("SELECT 1 FROM mpp_sessions WHERE established_by = $1", [paymentId]);
  return (opened.rowCount ?? 0) !== 0;
}

/** The session a token opens on this service (origin and receiving wallet), or undefined. */
export async function sessionByToken(db: Db, tokenSha256: Buffer, serviceOrigin: string, payee: string): Promise<SessionRow | undefined> {
  const { rows } = await db.query<SessionRow>(
    `SELECT s.id, s.agent_id, s.payer, s.method, s.rail, s.amount_units, s.reusable, s.expires_at, s.refreshed_at, s.revoked_at,
            s.established_by, s.parent_tx_hash, s.prepaid_calls
     FROM mpp_sessions s JOIN mpp_payments p ON p.id = s.established_by
     WHERE s.token_sha256 = $1 AND s.service_origin = $2 AND p.payee = $3`,
    [tokenSha256, serviceOrigin, payee],
  );
  return rows[0];
}

/**
 * Consumes one prepaid call of an unexpired session: the establishing payment's transaction and
 * amount, or undefined when none was left.
 */
export async function redeemPrepaidCall(
  db: Db,
  sessionId: string,
  now: Date,
): Promise<{ tx_hash: string; amount_units: string } | undefined> {
  const prepaid = await db.query<{ tx_hash: string; amount_units: string }>(
    `UPDATE mpp_sessions s SET prepaid_calls = prepaid_calls - 1
     FROM mpp_payments p
     WHERE s.id = $1 AND s.prepaid_calls > 0 AND s.expires_at > $2 AND p.id = s.established_by
     RETURNING p.tx_hash, p.amount_units`,
    [sessionId, now],
  );
  return prepaid.rows[0];
}

/** Marks the session refreshed; true only for the one caller that did (one successor per session). */
export async function claimSessionRefresh(db: Db, sessionId: string, now: Date): Promise<boolean> {
  const won = await db.query("UPDATE mpp_sessions SET refreshed_at = $2 WHERE id = $1 AND refreshed_at IS NULL", [sessionId, now]);
  return won.rowCount === 1;
}
