/**
 * Postgres store of `approvals` (migration 049; docs/policy.md "Approvals"). Reads are tenant
 * scoped: every read names the account, and an agent key's reads also name its agent, so another
 * account's (or agent's) approval is indistinguishable from none. The query service lists and
 * reads; the gateway creates, decides and expires.
 *
 * Each approval is decided exactly once: every decision is one conditional
 * `UPDATE … WHERE status = 'pending' RETURNING`, and Postgres re-checks the condition after the
 * row lock, so of any number of racing deciders (people, the signed link, the timeout loop)
 * exactly one gets the row back. A person's decision that arrives after `expires_at` expires the
 * approval instead (the gateway's clock decides, never the caller's). Releasing the held
 * reservation is the caller's, in the same transaction (`Db` may be its client).
 */
import type { Db } from "../../../indexer/db/database.js";
import { publicAgentId } from "../agent-ids.js";
import { ServiceError } from "../errors.js";
import type { ApprovalRule } from "../policy/approval.js";
import {
  type Approval,
  type ApprovalDecision,
  type ApprovalOutcome,
  type ApprovalStatus,
  DECIDED_BY_LINK,
  DECIDED_BY_TIMEOUT,
  type DecidedBy,
} from "./approval.js";
import { ApprovalNotFoundError } from "./errors.js";

export const APPROVALS_LIMIT_DEFAULT = 50;
export const APPROVALS_LIMIT_MAX = 200;
/** Approvals the timeout loop expires per statement: a bounded batch, the rest next round. */
export const EXPIRE_BATCH_MAX = 500;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Whether `id` has the shape of an approval id; any other text names no approval. */
export function isApprovalId(id: string): boolean {
  return UUID.test(id);
}

interface ApprovalRow {
  id: string;
  account_id: string;
  agent_id: string;
  reservation_id: string;
  amount_units: string;
  endpoint: string;
  domain: string;
  rule: ApprovalRule;
  reason: string;
  status: ApprovalStatus;
  requested_at: Date;
  expires_at: Date;
  decided_at: Date | null;
  decided_by: string | null;
  note: string | null;
  outcome: ApprovalOutcome | null;
  requested_micros: string;
  policy_version: number | null;
}

/** The selected columns, of the table aliased `t` when given (a join's RETURNING needs it). */
function columns(t = ""): string {
  const c = t === "" ? "" : `${t}.`;
  return `${c}id, ${c}account_id, ${c}agent_id, ${c}reservation_id::text AS reservation_id, ${c}amount_units::text AS amount_units,
  ${c}endpoint, ${c}domain, ${c}rule, ${c}reason, ${c}status, ${c}requested_at, ${c}expires_at, ${c}decided_at, ${c}decided_by,
  ${c}note, ${c}outcome, (extract(epoch FROM ${c}requested_at) * 1000000)::bigint::text AS requested_micros, ${c}policy_version`;
}

const COLUMNS = columns();

function toApproval(row: ApprovalRow): Approval {
  return {
    id: row.id,
    accountId: row.account_id,
    agentId: publicAgentId(row.agent_id),
    agentKey: row.agent_id,
    reservationId: row.reservation_id,
    amountUnits: BigInt(row.amount_units),
    endpoint: row.endpoint,
    domain: row.domain,
    rule: row.rule,
    reason: row.reason,
    status: row.status,
    requestedAt: row.requested_at,
    expiresAt: row.expires_at,
    decidedAt: row.decided_at,
    decidedBy: row.decided_by,
    note: row.note,
    outcome: row.outcome,
    policyVersion: row.policy_version,
  };
}

export interface NewApproval {
  readonly accountId: string;
  /** The agent's internal key (agents.agent_id). */
  readonly agentKey: string;
  readonly reservationId: string;
  /** The authorize request's Idempotency-Key, so a repeat resumes this approval. */
  readonly idempotencyKey: string | null;
  readonly amountUnits: bigint;
  readonly endpoint: string;
  readonly domain: string;
  readonly rule: ApprovalRule;
  readonly reason: string;
  readonly requestedAt: Date;
  /** The policy's `approval.timeout`: `expires_at = requested_at + timeoutMs`. */
  readonly timeoutMs: number;
  /** SHA-256 of the signed link's token (32 bytes), or null without a link. */
  readonly linkTokenHash: Buffer | null;
  /** The policy version that held the payment. */
  readonly policyVersion?: number | null;
}

/** Records a held payment, pending; in the transaction that reserved its amount. */
export async function createApproval(db: Db, input: NewApproval): Promise<Approval> {
  const expiresAt = new Date(input.requestedAt.getTime() + input.timeoutMs);
  const { rows } = await db.query<ApprovalRow>(
    `INSERT INTO approvals (account_id, agent_id, reservation_id, idempotency_key, amount_units, endpoint, domain, rule, reason,
                            requested_at, expires_at, link_token_hash, policy_version)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
     RETURNING ${COLUMNS}`,
    [
      input.accountId,
      input.agentKey,
      input.reservationId,
      input.idempotencyKey,
      input.amountUnits.toString(),
      input.endpoint,
      input.domain,
      input.rule,
      input.reason,
      input.requestedAt,
      expiresAt,
      input.linkTokenHash,
      input.policyVersion ?? null,
    ],
  );
  return toApproval(rows[0]!);
}

/** Who reads: the account, and for an agent key its agent (internal key) alone. */
export interface ApprovalReader {
  readonly accountId: string;
  readonly agentKey?: string | null;
}

/** One approval of the account (of the agent, for an agent key), or null: unknown ids and others' alike. */
export async function getApproval(db: Db, reader: ApprovalReader, id: string): Promise<Approval | null> {
  if (!isApprovalId(id)) return null;
  const { rows } = await db.query<ApprovalRow>(
    `SELECT ${COLUMNS} FROM approvals WHERE id = $1 AND account_id = $2 AND ($3::text IS NULL OR agent_id = $3)`,
    [id, reader.accountId, reader.agentKey ?? null],
  );
  return rows[0] === undefined ? null : toApproval(rows[0]);
}

/** The approval a repeated authorize with this Idempotency-Key resumes, or null. */
export async function findApprovalByIdempotencyKey(db: Db, accountId: string, idempotencyKey: string): Promise<Approval | null> {
  // Named (prepared once per connection): asked by every authorization that carries a key.
  const { rows } = await db.query<ApprovalRow>({
    name: "approval-by-idempotency-key",
    text: `SELECT ${COLUMNS} FROM approvals WHERE account_id = $1 AND idempotency_key = $2`,
    values: [accountId, idempotencyKey],
  });
  return rows[0] === undefined ? null : toApproval(rows[0]);
}

export interface ApprovalFilter {
  readonly status?: ApprovalStatus | null;
  /** An agent's internal key. */
  readonly agentKey?: string | null;
  /** 1 to 200; default 50. */
  readonly limit?: number;
  /** The previous page's `nextCursor`. */
  readonly cursor?: string | null;
}

export interface ApprovalPage {
  readonly approvals: readonly Approval[];
  /** Null on the last page. */
  readonly nextCursor: string | null;
}

/** The account's approvals, newest `requestedAt` first (then id), one page. */
export async function listApprovals(db: Db, accountId: string, filter: ApprovalFilter = {}): Promise<ApprovalPage> {
  const limit = filter.limit ?? APPROVALS_LIMIT_DEFAULT;
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > APPROVALS_LIMIT_MAX) {
    throw new ServiceError("BAD_USER_INPUT", `limit must be an integer from 1 to ${APPROVALS_LIMIT_MAX}`, { field: "limit" });
  }
  const after = filter.cursor == null ? null : parseApprovalCursor(filter.cursor);
  const { rows } = await db.query<ApprovalRow>(
    `SELECT ${COLUMNS} FROM approvals
     WHERE account_id = $1
       AND ($2::text IS NULL OR status = $2)
       AND ($3::text IS NULL OR agent_id = $3)
       AND ($4::bigint IS NULL OR (requested_at, id) < ('epoch'::timestamptz + $4::bigint * interval '1 microsecond', $5::uuid))
     ORDER BY requested_at DESC, id DESC
     LIMIT $6`,
    [accountId, filter.status ?? null, filter.agentKey ?? null, after?.micros ?? null, after?.id ?? null, limit + 1],
  );
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  const nextCursor = rows.length > limit && last !== undefined ? encodeApprovalCursor(last.requested_micros, last.id) : null;
  return { approvals: page.map(toApproval), nextCursor };
}

function encodeApprovalCursor(micros: string, id: string): string {
  return Buffer.from(`${micros}:${id}`, "utf8").toString("base64url");
}

function parseApprovalCursor(cursor: string): { micros: string; id: string } {
  const match = /^(\d{1,19}):([0-9a-f-]{36})$/.exec(Buffer.from(cursor, "base64url").toString("utf8"));
  if (match === null || !isApprovalId(match[2]!)) {
    throw new ServiceError("BAD_USER_INPUT", "cursor is not one this service issued", { field: "cursor", reason: "invalid_cursor" });
  }
  return { micros: match[1]!, id: match[2]! };
}

/**
 * What a decision did:
 * - `decided`: this call decided it (as asked);
 * - `expired`: it arrived after `expires_at`, so this call expired it instead (the caller releases
 *   the reservation, as the timeout loop would have);
 * - `already_decided`: someone decided first; `approval` is the decision that won (409).
 */
export type DecisionResult =
  | { readonly kind: "decided"; readonly approval: Approval }
  | { readonly kind: "expired"; readonly approval: Approval }
  | { readonly kind: "already_decided"; readonly approval: Approval };

export interface DecisionInput {
  readonly accountId: string;
  readonly approvalId: string;
  readonly decision: ApprovalDecision;
  /** The deciding API key's id. */
  readonly decidedBy: DecidedBy;
  readonly note: string | null;
  /** The gateway's clock. */
  readonly at: Date;
}

/** Approve or deny, once. Throws ApprovalNotFoundError for an id the account does not have. */
export async function decideApproval(db: Db, input: DecisionInput): Promise<DecisionResult> {
  if (!isApprovalId(input.approvalId)) throw new ApprovalNotFoundError(input.approvalId);
  const { rows } = await db.query<ApprovalRow & { in_time: boolean }>(
    `UPDATE approvals SET
       status     = CASE WHEN expires_at > $3 THEN $4 ELSE 'expired' END,
       decided_at = $3,
       decided_by = CASE WHEN expires_at > $3 THEN $5 ELSE '${DECIDED_BY_TIMEOUT}' END,
       note       = CASE WHEN expires_at > $3 THEN $6 ELSE NULL END
     WHERE id = $1 AND account_id = $2 AND status = 'pending'
     RETURNING ${COLUMNS}, expires_at > $3 AS in_time`,
    [input.approvalId, input.accountId, input.at, input.decision, input.decidedBy, input.note],
  );
  const row = rows[0];
  if (row !== undefined) return { kind: row.in_time ? "decided" : "expired", approval: toApproval(row) };
  const current = await getApproval(db, { accountId: input.accountId }, input.approvalId);
  if (current === null) throw new ApprovalNotFoundError(input.approvalId);
  return { kind: "already_decided", approval: current };
}

/**
 * Approve or deny through the signed link, once: the token (by its hash) must be unused and its
 * approval pending. Throws ApprovalNotFoundError when no approval has this token; a used token's
 * approval is `already_decided`.
 */
export async function decideByLink(
  db: Db,
  input: { readonly tokenHash: Buffer; readonly decision: ApprovalDecision; readonly note: string | null; readonly at: Date },
): Promise<DecisionResult> {
  const { rows } = await db.query<ApprovalRow & { in_time: boolean }>(
    `UPDATE approvals SET
       status       = CASE WHEN expires_at > $2 THEN $3 ELSE 'expired' END,
       decided_at   = $2,
       decided_by   = CASE WHEN expires_at > $2 THEN '${DECIDED_BY_LINK}' ELSE '${DECIDED_BY_TIMEOUT}' END,
       note         = CASE WHEN expires_at > $2 THEN $4 ELSE NULL END,
       link_used_at = CASE WHEN expires_at > $2 THEN $2 ELSE NULL END
     WHERE link_token_hash = $1 AND link_used_at IS NULL AND status = 'pending'
     RETURNING ${COLUMNS}, expires_at > $2 AS in_time`,
    [input.tokenHash, input.at, input.decision, input.note],
  );
  const row = rows[0];
  if (row !== undefined) return { kind: row.in_time ? "decided" : "expired", approval: toApproval(row) };
  const found = await db.query<ApprovalRow>(`SELECT ${COLUMNS} FROM approvals WHERE link_token_hash = $1`, [input.tokenHash]);
  if (found.rows[0] === undefined) throw new ApprovalNotFoundError("(link)");
  return { kind: "already_decided", approval: toApproval(found.rows[0]) };
}

/**
 * The timeout loop's step: expires up to `limit` pending approvals whose `expires_at` is at or
 * before `now` (the gateway's clock), oldest first, and returns them, each exactly once across any
 * number of loops (SKIP LOCKED spreads them; the status condition makes a second expiry impossible).
 */
export async function expireDueApprovals(db: Db, now: Date, limit = EXPIRE_BATCH_MAX): Promise<Approval[]> {
  const batch = Math.max(1, Math.min(limit, EXPIRE_BATCH_MAX));
  const { rows } = await db.query<ApprovalRow>(
    // A MATERIALIZED CTE runs the locking LIMIT once; as an `IN (subquery)` the planner may rescan
    // it and SKIP LOCKED then hands out further rows past the limit.
    `WITH due AS MATERIALIZED (
       SELECT id FROM approvals WHERE status = 'pending' AND expires_at <= $1
       ORDER BY expires_at, id LIMIT $2 FOR UPDATE SKIP LOCKED)
     UPDATE approvals a SET status = 'expired', decided_at = $1, decided_by = '${DECIDED_BY_TIMEOUT}'
     FROM due WHERE a.id = due.id AND a.status = 'pending'
     RETURNING ${columns("a")}`,
    [now, batch],
  );
  return rows.map(toApproval).sort((x, y) => x.expiresAt.getTime() - y.expiresAt.getTime() || (x.id < y.id ? -1 : 1));
}

/** The earliest `expires_at` of a pending approval, for the loop's next wake-up; null when none. */
export async function nextApprovalExpiry(db: Db): Promise<Date | null> {
  const { rows } = await db.query<{ at: Date | null }>("SELECT min(expires_at) AS at FROM approvals WHERE status = 'pending'");
  return rows[0]?.at ?? null;
}

/** Records what re-running the policy did with an approved payment, once. */
export async function recordApprovalOutcome(db: Db, approvalId: string, outcome: ApprovalOutcome): Promise<boolean> {
  const result = await db.query("UPDATE approvals SET outcome = $2 WHERE id = $1 AND status = 'approved' AND outcome IS NULL", [
    approvalId,
    outcome,
  ]);
  return result.rowCount === 1;
}

/** The channel long-polls listen on (`LISTEN approval_decided`); the payload is the approval's id. */
export const APPROVAL_DECIDED_CHANNEL = "approval_decided";

/** Wakes the long-polls on this approval when the caller's transaction commits. */
export async function notifyDecided(db: Db, approvalId: string): Promise<void> {
  await db.query("SELECT pg_notify($1, $2)", [APPROVAL_DECIDED_CHANNEL, approvalId]);
}

/** Stores the signed link's token hash, set once after the row exists (the token signs its id). */
export async function setApprovalLinkToken(db: Db, approvalId: string, hash: Buffer): Promise<void> {
  await db.query("UPDATE approvals SET link_token_hash = $2 WHERE id = $1 AND link_token_hash IS NULL", [approvalId, hash]);
}

/** The approval whose link has this token hash, and whether the link was used; null when none has it. */
export async function approvalByLinkHash(
  db: Db,
  hash: Buffer,
): Promise<{ readonly approval: Approval; readonly linkUsed: boolean } | null> {
  const { rows } = await db.query<ApprovalRow & { link_used: boolean }>(
    `SELECT ${COLUMNS}, link_used_at IS NOT NULL AS link_used FROM approvals WHERE link_token_hash = $1`,
    [hash],
  );
  return rows[0] === undefined ? null : { approval: toApproval(rows[0]), linkUsed: rows[0].link_used };
}

/**
 * Expires one pending approval whose `expires_at` passed by `now` (the gateway's clock), as the
 * timeout loop would, for a caller that finds it overdue first. Once, by the status condition;
 * null when it is not pending or not due.
 */
export async function expireApproval(db: Db, approvalId: string, now: Date): Promise<Approval | null> {
  const { rows } = await db.query<ApprovalRow>(
    `UPDATE approvals SET status = 'expired', decided_at = $2, decided_by = '${DECIDED_BY_TIMEOUT}'
     WHERE id = $1 AND status = 'pending' AND expires_at <= $2
     RETURNING ${COLUMNS}`,
    [approvalId, now],
  );
  return rows[0] === undefined ? null : toApproval(rows[0]);
}
