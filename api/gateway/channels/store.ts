/**
 * The channel-session store: every SQL statement on `channel_sessions`, `channel_charges`
 * (migrations/025) and `channel_settlement_sends` (migrations/030). Only api/gateway/channels uses it.
 *
 * Authority:
 * | state | truth |
 * |---|---|
 * | deposit, existence of the channel | the chain (`Channel` account); the row follows it |
 * | settled cumulative/sequence, refunded, which charges a settlement paid | the program's events in the transactions that did them (history.ts); the row follows them |
 * | vouchers signed (signed_*, every `channel_charges` row) | this store: the chain never sees a voucher until it settles |
 * | what the payee accepted (accepted_*) | this store, from the payee's presentation |
 * | a settlement in flight | `channel_settlement_sends` (`pending`): written before the transaction is sent |
 *
 * Concurrency: every write to a channel runs under its `channel_sessions` row lock (`FOR UPDATE`),
 * so the vouchers of one channel are signed one at a time (gap-free sequence, exact cumulative)
 * and at most one settlement per channel is pending (a unique partial index enforces it too).
 */
import type pg from "pg";
import type { Db } from "../../../indexer/db/database.js";

export type SessionStatus = "opening" | "open" | "closing" | "closed" | "failed";
export type ChargeStatus = "signed" | "accepted" | "settled" | "void";

/** What a session is from its opening on: the terms the open_channel carried. */
interface SessionTerms {
  readonly channel: string;
  readonly accountId: string;
  readonly agentId: string;
  readonly payer: string;
  readonly payee: string;
  readonly mint: string;
  readonly channelId: string;
  readonly protocol: "mpp" | "x402";
  readonly serviceOrigin: string;
  readonly parentTxHash: string | null;
  readonly invocation: string | null;
  readonly depositUnits: bigint;
  readonly expiresAt: Date;
  readonly withdrawDelaySeconds: number;
}

export interface SessionRow extends SessionTerms {
  readonly status: SessionStatus;
  readonly openTx: string | null;
  readonly openWire: string | null;
  readonly openLastValidBlockHeight: number | null;
  readonly openedSlot: bigint | null;
  readonly signedCumulative: bigint;
  readonly signedSequence: bigint;
  readonly signedDigest: Uint8Array | null;
  readonly acceptedCumulative: bigint;
  readonly acceptedSequence: bigint;
  readonly settledCumulative: bigint;
  readonly settledSequence: bigint;
  readonly refundedUnits: bigint | null;
  readonly closeTx: string | null;
  readonly refundTx: string | null;
  readonly reservationId: string | null;
  readonly failure: string | null;
  readonly createdAt: Date;
}

interface RawSession {
  channel: string;
  account_id: string;
  agent_id: string;
  payer: string;
  payee: string;
  mint: string;
  channel_id: string;
  protocol: "mpp" | "x402";
  service_origin: string;
  parent_tx_hash: string | null;
  invocation: string | null;
  deposit: string;
  expires_at: Date;
  withdraw_delay_seconds: number;
  status: SessionStatus;
  open_tx: string | null;
  open_wire: string | null;
  open_last_valid_block_height: string | null;
  opened_slot: string | null;
  signed_cumulative: string;
  signed_sequence: string;
  signed_digest: Buffer | null;
  accepted_cumulative: string;
  accepted_sequence: string;
  settled_cumulative: string;
  settled_sequence: string;
  refunded: string | null;
  close_tx: string | null;
  refund_tx: string | null;
  reservation_id: string | null;
  failure: string | null;
  created_at: Date;
}

const big = (text: string): bigint => BigInt(text);
const bigOrNull = (text: string | null): bigint | null => (text === null ? null : BigInt(text));
const numOrNull = (text: string | null): number | null => (text === null ? null : Number(text));

function fromRaw(row: RawSession): SessionRow {
  return {
    channel: row.channel,
    accountId: row.account_id,
    agentId: row.agent_id,
    payer: row.payer,
    payee: row.payee,
    mint: row.mint,
    channelId: row.channel_id,
    protocol: row.protocol,
    serviceOrigin: row.service_origin,
    parentTxHash: row.parent_tx_hash,
    invocation: row.invocation,
    depositUnits: big(row.deposit),
    expiresAt: row.expires_at,
    withdrawDelaySeconds: row.withdraw_delay_seconds,
    status: row.status,
    openTx: row.open_tx,
    openWire: row.open_wire,
    openLastValidBlockHeight: numOrNull(row.open_last_valid_block_height),
    openedSlot: bigOrNull(row.opened_slot),
    signedCumulative: big(row.signed_cumulative),
    signedSequence: big(row.signed_sequence),
    signedDigest: row.signed_digest === null ? null : new Uint8Array(row.signed_digest),
    acceptedCumulative: big(row.accepted_cumulative),
    acceptedSequence: big(row.accepted_sequence),
    settledCumulative: big(row.settled_cumulative),
    settledSequence: big(row.settled_sequence),
    refundedUnits: bigOrNull(row.refunded),
    closeTx: row.close_tx,
    refundTx: row.refund_tx,
    reservationId: row.reservation_id,
    failure: row.failure,
    createdAt: row.created_at,
  };
}

export async function findSession(db: Db, channel: string): Promise<SessionRow | null> {
  const { rows } = await db.query<RawSession>("SELECT * FROM channel_sessions WHERE channel = $1", [channel]);
  return rows[0] === undefined ? null : fromRaw(rows[0]);
}

/** The row under its lock, in the caller's transaction. */
export async function lockSession(client: pg.ClientBase, channel: string): Promise<SessionRow | null> {
  const { rows } = await client.query<RawSession>("SELECT * FROM channel_sessions WHERE channel = $1 FOR UPDATE", [channel]);
  return rows[0] === undefined ? null : fromRaw(rows[0]);
}

/**
 * The row under its lock with its agent's `archived_at` under a share lock (one round trip): an
 * archive committed first refuses the charge; one starting now waits for it (api/gateway/payments/agent-archive.ts).
 */
export async function lockSessionForCharge(
  client: pg.ClientBase,
  channel: string,
): Promise<{ readonly session: SessionRow; readonly archivedAt: Date | null } | null> {
  const { rows } = await client.query<RawSession & { agent_archived_at: Date | null }>(
    `SELECT s.*, a.archived_at AS agent_archived_at FROM channel_sessions s JOIN agents a ON a.agent_id = s.agent_id
     WHERE s.channel = $1 FOR UPDATE OF s FOR SHARE OF a`,
    [channel],
  );
  return rows[0] === undefined ? null : { session: fromRaw(rows[0]), archivedAt: rows[0].agent_archived_at };
}

export async function sessionByOpenReference(db: Db, reference: string): Promise<SessionRow | null> {
  const { rows } = await db.query<RawSession>("SELECT * FROM channel_sessions WHERE open_reference = $1", [reference]);
  return rows[0] === undefined ? null : fromRaw(rows[0]);
}

export interface NewSession extends SessionTerms {
  readonly reservationId: string;
  readonly openReference: string | null;
  readonly openTx: string;
  readonly openWire: string;
  readonly openLastValidBlockHeight: number;
}

/** The `opening` row with the signed open_channel: committed before the transaction is sent. */
export async function insertOpeningSession(client: pg.ClientBase, s: NewSession): Promise<void> {
  await client.query(
    `INSERT INTO channel_sessions (channel, account_id, agent_id, payer, payee, mint, channel_id, protocol, service_origin,
       parent_tx_hash, invocation, deposit, expires_at, withdraw_delay_seconds, status, reservation_id, open_reference,
       open_tx, open_wire, open_last_valid_block_height)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, 'opening', $15, $16, $17, $18, $19)`,
    [
      s.channel,
      s.accountId,
      s.agentId,
      s.payer,
      s.payee,
      s.mint,
      s.channelId,
      s.protocol,
      s.serviceOrigin,
      s.parentTxHash,
      s.invocation,
      s.depositUnits.toString(),
      s.expiresAt,
      s.withdrawDelaySeconds,
      s.reservationId,
      s.openReference,
      s.openTx,
      s.openWire,
      s.openLastValidBlockHeight,
    ],
  );
}

/** open_channel confirmed: the channel's opened slot and its initial charges digest. */
export async function markOpened(db: Db, channel: string, openedSlot: bigint, initialDigest: Uint8Array): Promise<boolean> {
  const result = await db.query(
    `UPDATE channel_sessions SET status = 'open', opened_slot = $2, signed_digest = $3, updated_at = now()
     WHERE channel = $1 AND status = 'opening'`,
    [channel, openedSlot.toString(), Buffer.from(initialDigest)],
  );
  return (result.rowCount ?? 0) > 0;
}

/** open_channel definitely did not happen (nothing moved). */
export async function markOpenFailed(client: pg.ClientBase, channel: string, failure: string): Promise<boolean> {
  const result = await client.query(
    "UPDATE channel_sessions SET status = 'failed', failure = $2, updated_at = now() WHERE channel = $1 AND status = 'opening'",
    [channel, failure.slice(0, 1_000)],
  );
  return (result.rowCount ?? 0) > 0;
}

export interface NewCharge {
  readonly channel: string;
  readonly sequence: bigint;
  readonly paymentId: bigint;
  readonly amountUnits: bigint;
  readonly cumulativeUnits: bigint;
  readonly endpoint: string;
  readonly endpointHash: Uint8Array;
  readonly digest: Uint8Array;
  readonly signature: string;
}

/** The signed charge and the session's signed state, in one statement (under the row lock). */
export async function insertSignedCharge(client: pg.ClientBase, c: NewCharge): Promise<void> {
  const result = await client.query(
    `WITH charge AS (
       INSERT INTO channel_charges (channel, sequence, payment_id, amount, cumulative, endpoint, endpoint_hash, digest, signature, status)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'signed')
     )
     UPDATE channel_sessions SET signed_cumulative = $5, signed_sequence = $2, signed_digest = $8, updated_at = now()
     WHERE channel = $1 AND signed_sequence = $2 - 1`,
    [
      c.channel,
      c.sequence.toString(),
      c.paymentId.toString(),
      c.amountUnits.toString(),
      c.cumulativeUnits.toString(),
      c.endpoint,
      Buffer.from(c.endpointHash),
      Buffer.from(c.digest),
      c.signature,
    ],
  );
  // Under the row lock the session is exactly one charge behind; anything else is a bug, and
  // throwing rolls the charge back with it.
  if (result.rowCount !== 1) throw new Error(`channel ${c.channel}: signed state is not at sequence ${c.sequence - 1n}`);
}

export interface ChargeRow {
  readonly sequence: bigint;
  readonly paymentId: bigint;
  readonly amountUnits: bigint;
  readonly cumulativeUnits: bigint;
  readonly endpoint: string;
  readonly endpointHash: Uint8Array;
  readonly digest: Uint8Array;
  readonly signature: string;
  readonly status: ChargeStatus;
  readonly settlementTx: string | null;
}

interface RawCharge {
  sequence: string;
  payment_id: string;
  amount: string;
  cumulative: string;
  endpoint: string;
  endpoint_hash: Buffer;
  digest: Buffer;
  signature: string;
  status: ChargeStatus;
  settlement_tx: string | null;
}

function chargeFromRaw(row: RawCharge): ChargeRow {
  return {
    sequence: BigInt(row.sequence),
    paymentId: BigInt(row.payment_id),
    amountUnits: BigInt(row.amount),
    cumulativeUnits: BigInt(row.cumulative),
    endpoint: row.endpoint,
    endpointHash: new Uint8Array(row.endpoint_hash),
    digest: new Uint8Array(row.digest),
    signature: row.signature,
    status: row.status,
    settlementTx: row.settlement_tx,
  };
}

/** Charges `from`..`to` (inclusive) in sequence order; at most `limit`. */
export async function chargesBetween(db: Db, channel: string, from: bigint, to: bigint, limit = 10_000): Promise<ChargeRow[]> {
  const { rows } = await db.query<RawCharge>(
    `SELECT sequence, payment_id, amount, cumulative, endpoint, endpoint_hash, digest, signature, status, settlement_tx
     FROM channel_charges WHERE channel = $1 AND sequence BETWEEN $2 AND $3 ORDER BY sequence LIMIT $4`,
    [channel, from.toString(), to.toString(), limit],
  );
  return rows.map(chargeFromRaw);
}

/** The payee accepted every charge up to `sequence` (the voucher it presented). */
export async function markAccepted(client: pg.ClientBase, channel: string, sequence: bigint, cumulativeUnits: bigint): Promise<void> {
  await client.query(
    `WITH charges AS (
       UPDATE channel_charges SET status = 'accepted', accepted_at = now()
       WHERE channel = $1 AND sequence <= $2 AND status = 'signed'
     )
     UPDATE channel_sessions SET accepted_sequence = $2, accepted_cumulative = $3, updated_at = now()
     WHERE channel = $1 AND accepted_sequence < $2`,
    [channel, sequence.toString(), cumulativeUnits.toString()],
  );
}

export interface SettlementIntent {
  readonly signature: string;
  readonly channel: string;
  readonly fromSequence: bigint;
  readonly toSequence: bigint;
  readonly cumulativeUnits: bigint;
  readonly wire: string;
  readonly lastValidBlockHeight: number;
}

interface RawIntent {
  signature: string;
  channel: string;
  from_sequence: string;
  to_sequence: string;
  cumulative: string;
  wire: string;
  last_valid_block_height: string;
}

function intentFromRaw(row: RawIntent): SettlementIntent {
  return {
    signature: row.signature,
    channel: row.channel,
    fromSequence: BigInt(row.from_sequence),
    toSequence: BigInt(row.to_sequence),
    cumulativeUnits: BigInt(row.cumulative),
    wire: row.wire,
    lastValidBlockHeight: Number(row.last_valid_block_height),
  };
}

const INTENT_COLUMNS = "signature, channel, from_sequence, to_sequence, cumulative, wire, last_valid_block_height";

/** The durable intent, before the settlement is sent (under the channel's row lock). */
export async function insertSettlementIntent(client: pg.ClientBase, s: SettlementIntent): Promise<void> {
  await client.query(
    `INSERT INTO channel_settlement_sends (signature, channel, from_sequence, to_sequence, cumulative, wire, last_valid_block_height, status)
     VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending')`,
    [
      s.signature,
      s.channel,
      s.fromSequence.toString(),
      s.toSequence.toString(),
      s.cumulativeUnits.toString(),
      s.wire,
      s.lastValidBlockHeight,
    ],
  );
}

/** A settlement made outside the gateway, found on chain: recorded confirmed (no bytes of ours). */
export async function insertAdoptedSettlement(client: pg.ClientBase, s: SettlementIntent, slot: number): Promise<void> {
  await client.query(
    `INSERT INTO channel_settlement_sends (signature, channel, from_sequence, to_sequence, cumulative, wire, last_valid_block_height, status, slot, resolved_at)
     VALUES ($1, $2, $3, $4, $5, '', 0, 'confirmed', $6, now()) ON CONFLICT (signature) DO NOTHING`,
    [s.signature, s.channel, s.fromSequence.toString(), s.toSequence.toString(), s.cumulativeUnits.toString(), slot],
  );
}

export async function pendingSettlement(db: Db, channel: string): Promise<SettlementIntent | null> {
  const { rows } = await db.query<RawIntent>(
    `SELECT ${INTENT_COLUMNS} FROM channel_settlement_sends WHERE channel = $1 AND status = 'pending'`,
    [channel],
  );
  return rows[0] === undefined ? null : intentFromRaw(rows[0]);
}

/** Every pending settlement, oldest first (the reconciler's scan). */
export async function pendingSettlements(db: Db, limit: number): Promise<SettlementIntent[]> {
  const { rows } = await db.query<RawIntent>(
    `SELECT ${INTENT_COLUMNS} FROM channel_settlement_sends WHERE status = 'pending' ORDER BY created_at LIMIT $1`,
    [limit],
  );
  return rows.map(intentFromRaw);
}

/**
 * The settlement landed: its charges are settled with it and the session's settled state moves to
 * the voucher's (only forward: applying it twice changes nothing).
 */
export async function applyConfirmedSettlement(client: pg.ClientBase, intent: SettlementIntent, slot: number | null): Promise<void> {
  await client.query(
    `UPDATE channel_settlement_sends SET status = 'confirmed', slot = $2, resolved_at = now(), error = NULL
     WHERE signature = $1 AND status <> 'confirmed'`,
    [intent.signature, slot],
  );
  await client.query(
    `UPDATE channel_charges SET status = 'settled', settlement_tx = $2, settled_at = now(), accepted_at = coalesce(accepted_at, now())
     WHERE channel = $1 AND sequence BETWEEN $3 AND $4 AND status IN ('signed', 'accepted')`,
    [intent.channel, intent.signature, intent.fromSequence.toString(), intent.toSequence.toString()],
  );
  await client.query(
    `UPDATE channel_sessions SET settled_sequence = $2, settled_cumulative = $3,
       accepted_sequence = greatest(accepted_sequence, $2), accepted_cumulative = greatest(accepted_cumulative, $3), updated_at = now()
     WHERE channel = $1 AND settled_sequence < $2`,
    [intent.channel, intent.toSequence.toString(), intent.cumulativeUnits.toString()],
  );
}

/** The settlement can never land (or the ledger refused it): its charges stay accepted for the next one. */
export async function markSettlementFailed(db: Db, signature: string, error: string): Promise<boolean> {
  const result = await db.query(
    "UPDATE channel_settlement_sends SET status = 'failed', error = $2, resolved_at = now() WHERE signature = $1 AND status = 'pending'",
    [signature, error.slice(0, 1_000)],
  );
  return (result.rowCount ?? 0) > 0;
}

/** Signatures of the channel's confirmed settlements, in order. */
export async function confirmedSettlementTxs(db: Db, channel: string): Promise<string[]> {
  const { rows } = await db.query<{ signature: string }>(
    "SELECT signature FROM channel_settlement_sends WHERE channel = $1 AND status = 'confirmed' ORDER BY to_sequence LIMIT 10000",
    [channel],
  );
  return rows.map((row) => row.signature);
}

/**
 * The session is closing: our `close_channel` was signed as `closeTx` (written before it is sent),
 * or the close was requested by someone else / is being forced (null: no transaction of ours to
 * name, and a signature of ours that did not land is no longer named).
 */
export async function markClosing(client: Db, channel: string, closeTx: string | null): Promise<void> {
  await client.query(
    "UPDATE channel_sessions SET status = 'closing', close_tx = $2, updated_at = now() WHERE channel = $1 AND status IN ('open', 'closing')",
    [channel, closeTx],
  );
}

/** The program refused our close: its signature never landed (not kept), the refusal recorded. */
export async function markCloseRefused(client: Db, channel: string, failure: string): Promise<void> {
  await client.query(
    "UPDATE channel_sessions SET close_tx = NULL, failure = $2, updated_at = now() WHERE channel = $1 AND status = 'closing'",
    [channel, failure.slice(0, 1_000)],
  );
}

/**
 * The refund landed: the channel's settled state is final (every charge up to it was settled by
 * a confirmed settlement), the charges beyond it void (never paid), the refund recorded.
 */
export async function markClosed(
  client: pg.ClientBase,
  channel: string,
  final: { readonly sequence: bigint; readonly cumulativeUnits: bigint; readonly refundedUnits: bigint; readonly refundTx: string | null },
): Promise<void> {
  await client.query(
    "UPDATE channel_charges SET status = 'void' WHERE channel = $1 AND sequence > $2 AND status IN ('signed', 'accepted')",
    [channel, final.sequence.toString()],
  );
  await client.query(
    `UPDATE channel_sessions SET status = 'closed', settled_sequence = $2, settled_cumulative = $3,
       accepted_sequence = greatest(accepted_sequence, $2), accepted_cumulative = greatest(accepted_cumulative, $3),
       refunded = $4, refund_tx = $5, closed_at = now(), updated_at = now()
     WHERE channel = $1 AND status <> 'closed'`,
    [channel, final.sequence.toString(), final.cumulativeUnits.toString(), final.refundedUnits.toString(), final.refundTx],
  );
}

/**
 * Sessions whose open or close awaits the chain's word, with accepted charges not yet settled, or
 * open past their expiry (the loop's scan; `channel_sessions_live` serves it). Oldest change first.
 */
export async function sessionsNeedingWork(db: Db, limit: number): Promise<SessionRow[]> {
  const { rows } = await db.query<RawSession>(
    `SELECT * FROM channel_sessions
     WHERE status IN ('opening', 'closing') OR (status = 'open' AND (accepted_sequence > settled_sequence OR expires_at < now()))
     ORDER BY updated_at LIMIT $1`,
    [limit],
  );
  return rows.map(fromRaw);
}
