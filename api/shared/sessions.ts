/**
 * Dashboard sign-in sessions: the store of table `dashboard_sessions` (migration 023). A person
 * signs in once with an API key of the account; the dashboard then holds only a random session
 * token, in an HttpOnly, SameSite=Strict cookie the browser sends to /graphql. The key itself is
 * never kept by the browser (no localStorage, no URL, no log).
 *
 * A token is `apgs_` + 32 random bytes (base64url); only its sha256 is stored, as for API keys
 * (api/shared/keys.ts: a 256-bit random token needs no salt or slow hash). A session is live while
 * it is unexpired, not signed out, and the API key it was made with is not revoked: revoking the
 * key ends its sessions at their next request (the join below), and the live feed's open streams
 * at their next event (`credentialIsLive`).
 */
import { createHash, randomBytes } from "node:crypto";
import type { Db } from "../../indexer/db/database.js";
import { hashApiKey } from "./keys.js";
import { type Scope, storedScope } from "./scopes.js";

const TOKEN_PREFIX = "apgs_";
const TOKEN_SHAPE = /^apgs_[A-Za-z0-9_-]{43}$/;
/** How long a session lives after sign-in (absolute, not sliding). */
export const SESSION_TTL_MS = 12 * 3_600_000;
/** Expired or signed-out sessions older than this are deleted at sign-in, at most a batch a time. */
const PRUNE_AFTER_MS = 24 * 3_600_000;
const PRUNE_BATCH = 1_000;

export function hashSessionToken(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}

export function isWellFormedSessionToken(token: string): boolean {
  return TOKEN_SHAPE.test(token);
}

export interface DashboardSession {
  readonly sessionId: string;
  readonly accountId: string;
  readonly accountName: string;
  readonly apiKeyId: string;
  /** The key's display prefix (`apg_1a2b3c4d`), never the key. */
  readonly keyPrefix: string;
  /** The scope of the key the session was made with: what the session may do. */
  readonly scope: Scope;
  readonly expiresAt: Date;
}

export interface CreatedSession extends DashboardSession {
  /** Goes into the cookie once; not recoverable from the database. */
  readonly token: string;
}

interface SessionRow {
  id: string;
  account_id: string;
  account_name: string;
  api_key_id: string;
  prefix: string;
  scope: string;
  expires_at: Date;
}

function fromRow(row: SessionRow): DashboardSession {
  return {
    sessionId: row.id,
    accountId: row.account_id,
    accountName: row.account_name,
    apiKeyId: row.api_key_id,
    keyPrefix: row.prefix,
    scope: storedScope(row.scope),
    expiresAt: row.expires_at,
  };
}

/**
 * A new session for a live API key, or null when the key is unknown or revoked. The key lookup and
 * the insert are one statement, so a key revoked meanwhile makes no session.
 */
export async function createSession(db: Db, apiKey: string, ttlMs: number = SESSION_TTL_MS): Promise<CreatedSession | null> {
  const token = `${TOKEN_PREFIX}${randomBytes(32).toString("base64url")}`;
  const { rows } = await db.query<SessionRow>(
    `WITH key AS (
       SELECT k.id, k.account_id, k.prefix, k.scope, a.name FROM api_keys k JOIN accounts a ON a.id = k.account_id
       WHERE k.key_sha256 = $1 AND k.revoked_at IS NULL),
     created AS (
       INSERT INTO dashboard_sessions (token_sha256, api_key_id, account_id, expires_at)
       SELECT $2, key.id, key.account_id, now() + make_interval(secs => $3::double precision / 1000) FROM key
       RETURNING id, api_key_id, account_id, expires_at)
     SELECT c.id::text, c.account_id, key.name AS account_name, c.api_key_id::text, key.prefix, key.scope, c.expires_at
     FROM created c JOIN key ON key.id = c.api_key_id`,
    [hashApiKey(apiKey), hashSessionToken(token), ttlMs],
  );
  const row = rows[0];
  if (row === undefined) return null;
  await pruneSessions(db);
  return { ...fromRow(row), token };
}

/** The live session of a token, or null (unknown, expired, signed out, or its key revoked). */
export async function sessionOfToken(db: Db, token: string): Promise<DashboardSession | null> {
  if (!isWellFormedSessionToken(token)) return null;
  const { rows } = await db.query<SessionRow>(
    `SELECT s.id::text, s.account_id, a.name AS account_name, s.api_key_id::text, k.prefix, k.scope, s.expires_at
     FROM dashboard_sessions s
     JOIN api_keys k ON k.id = s.api_key_id
     JOIN accounts a ON a.id = s.account_id
     WHERE s.token_sha256 = $1 AND s.signed_out_at IS NULL AND s.expires_at > now() AND k.revoked_at IS NULL`,
    [hashSessionToken(token)],
  );
  return rows[0] === undefined ? null : fromRow(rows[0]);
}

/** Signs a session out; false when the token names no live session. */
export async function endSession(db: Db, token: string): Promise<boolean> {
  if (!isWellFormedSessionToken(token)) return false;
  const result = await db.query(
    "UPDATE dashboard_sessions SET signed_out_at = now() WHERE token_sha256 = $1 AND signed_out_at IS NULL AND expires_at > now()",
    [hashSessionToken(token)],
  );
  return (result.rowCount ?? 0) > 0;
}

/** Whether the session with this id is still live (the live feed asks between events). */
export async function sessionIsLive(db: Db, sessionId: string): Promise<boolean> {
  const { rows } = await db.query(
    `SELECT 1 FROM dashboard_sessions s JOIN api_keys k ON k.id = s.api_key_id
     WHERE s.id = $1 AND s.signed_out_at IS NULL AND s.expires_at > now() AND k.revoked_at IS NULL`,
    [sessionId],
  );
  return rows.length > 0;
}

async function pruneSessions(db: Db): Promise<void> {
  await db.query(
    `DELETE FROM dashboard_sessions WHERE id IN (
       SELECT id FROM dashboard_sessions
       WHERE expires_at < now() - make_interval(secs => $1::double precision / 1000)
          OR signed_out_at < now() - make_interval(secs => $1::double precision / 1000)
       LIMIT $2)`,
    [PRUNE_AFTER_MS, PRUNE_BATCH],
  );
}

/** The API key a session was made with (who decides when a person decides in the dashboard); null when none. */
export async function sessionKeyId(db: Db, sessionId: string): Promise<string | null> {
  const { rows } = await db.query<{ key_id: string }>("SELECT api_key_id::text AS key_id FROM dashboard_sessions WHERE id = $1", [
    sessionId,
  ]);
  return rows[0]?.key_id ?? null;
}
