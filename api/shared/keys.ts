/**
 * Accounts and API keys. A key is `apg_` + 32 random bytes (base64url); only its sha256 is stored
 * (api_keys.key_sha256), with a short prefix for display. Used by tests and by the gateway.
 *
 * The store of tables `accounts` and `api_keys`: the SQL on them lives here (api/shared/auth.ts
 * resolves a key through `apiKeyOf`). `registerAgent` is the fixture form of agent
 * registration (the gateway registers agents through api/gateway/wallets).
 */
import { createHash, randomBytes } from "node:crypto";
import type pg from "pg";
import type { Db } from "../../indexer/db/database.js";
import { ADMIN_SCOPE, formatScope, type Scope, storedScope } from "./scopes.js";

const KEY_PREFIX = "apg_";
/** `apg_` + 43 base64url characters (32 bytes). */
const KEY_SHAPE = /^apg_[A-Za-z0-9_-]{43}$/;
const DISPLAY_PREFIX_CHARS = 12;

export function hashApiKey(key: string): string {
  return createHash("sha256").update(key, "utf8").digest("hex");
}

export function isWellFormedApiKey(key: string): boolean {
  return KEY_SHAPE.test(key);
}

export interface IssuedKey {
  readonly accountId: string;
  /** Shown once; not recoverable from the database. */
  readonly apiKey: string;
  readonly prefix: string;
  readonly scope: Scope;
}

export async function createAccount(pool: pg.Pool, name: string): Promise<string> {
  const result = await pool.query<{ id: string }>("INSERT INTO accounts (name) VALUES ($1) RETURNING id", [name]);
  return result.rows[0]!.id;
}

/** Whether `accountId` names an account (a text that is no uuid names none). */
export async function accountExists(db: Db, accountId: string): Promise<boolean> {
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(accountId)) return false;
  const { rows } = await db.query("SELECT 1 FROM accounts WHERE id = $1", [accountId]);
  return rows.length > 0;
}

/** The oldest account called `name`, or null (the local system finds its demo account so). */
export async function accountNamed(db: Db, name: string): Promise<string | null> {
  const { rows } = await db.query<{ id: string }>("SELECT id FROM accounts WHERE name = $1 ORDER BY created_at, id LIMIT 1", [name]);
  return rows[0]?.id ?? null;
}

/** A new key of `scope` (admin by default); an agent scope's agent is not checked here (see `agentScopeTarget`). */
export async function issueApiKey(pool: pg.Pool, accountId: string, scope: Scope = ADMIN_SCOPE): Promise<IssuedKey> {
  const apiKey = `${KEY_PREFIX}${randomBytes(32).toString("base64url")}`;
  const prefix = apiKey.slice(0, DISPLAY_PREFIX_CHARS);
  await pool.query("INSERT INTO api_keys (account_id, key_sha256, prefix, scope) VALUES ($1, $2, $3, $4)", [
    accountId,
    hashApiKey(apiKey),
    prefix,
    formatScope(scope),
  ]);
  return { accountId, apiKey, prefix, scope };
}

/**
 * The channel a key's change is announced on, with the key's hash as payload (an empty payload:
 * any key may have changed). api/shared/key-cache.ts listens.
 */
export const API_KEY_CHANGES_CHANNEL = "api_key_changes";

export interface LiveApiKey {
  readonly id: string;
  readonly accountId: string;
  readonly scope: Scope;
}

/** A live (unrevoked) key's id, account and scope, or null. */
export async function apiKeyOf(db: Db, apiKey: string): Promise<LiveApiKey | null> {
  return apiKeyOfHash(db, hashApiKey(apiKey));
}

/** `apiKeyOf` by the key's sha256 (hex). A named statement: parsed and planned once per connection. */
export async function apiKeyOfHash(db: Db, keySha256: string): Promise<LiveApiKey | null> {
  const { rows } = await db.query<{ id: string; account_id: string; scope: string }>({
    name: "api_key_of_hash",
    text: "SELECT id::text, account_id, scope FROM api_keys WHERE key_sha256 = $1 AND revoked_at IS NULL",
    values: [keySha256],
  });
  return rows[0] === undefined ? null : { id: rows[0].id, accountId: rows[0].account_id, scope: storedScope(rows[0].scope) };
}

/**
 * Whether an agent scope names an agent of the account (archived ones included: a key may keep
 * reading an archived agent's history). Admin and approver scopes need no agent.
 */
export async function scopeAgentExists(db: Db, accountId: string, scope: Scope): Promise<boolean> {
  if (scope.kind !== "agent") return true;
  const { rows } = await db.query("SELECT 1 FROM agents WHERE account_id = $1 AND public_id = $2", [accountId, scope.agentId]);
  return rows.length > 0;
}

/** An API key as its account lists it: never the key itself. */
export interface ApiKeyRecord {
  readonly id: string;
  readonly prefix: string;
  readonly scope: Scope;
  readonly createdAt: Date;
  readonly revokedAt: Date | null;
}

interface ApiKeyRow {
  id: string;
  prefix: string;
  scope: string;
  created_at: Date;
  revoked_at: Date | null;
}

function fromKeyRow(row: ApiKeyRow): ApiKeyRecord {
  return { id: row.id, prefix: row.prefix, scope: storedScope(row.scope), createdAt: row.created_at, revokedAt: row.revoked_at };
}

/**
 * A new key for the account, unless it already holds `maxActive` unrevoked keys (null then). The
 * count and the insert are one statement.
 */
export async function issueAccountApiKey(
  db: Db,
  accountId: string,
  maxActive: number,
  scope: Scope = ADMIN_SCOPE,
): Promise<{ readonly record: ApiKeyRecord; readonly apiKey: string } | null> {
  const apiKey = `${KEY_PREFIX}${randomBytes(32).toString("base64url")}`;
  const { rows } = await db.query<ApiKeyRow>(
    `INSERT INTO api_keys (account_id, key_sha256, prefix, scope)
     SELECT $1, $2, $3, $5 WHERE (SELECT count(*) FROM api_keys WHERE account_id = $1 AND revoked_at IS NULL) < $4
     RETURNING id, prefix, scope, created_at, revoked_at`,
    [accountId, hashApiKey(apiKey), apiKey.slice(0, DISPLAY_PREFIX_CHARS), maxActive, formatScope(scope)],
  );
  return rows[0] === undefined ? null : { record: fromKeyRow(rows[0]), apiKey };
}

/** The account's keys, revoked ones included, oldest first (at most `limit`). */
export async function listApiKeys(db: Db, accountId: string, limit: number): Promise<ApiKeyRecord[]> {
  const { rows } = await db.query<ApiKeyRow>(
    "SELECT id, prefix, scope, created_at, revoked_at FROM api_keys WHERE account_id = $1 ORDER BY id LIMIT $2",
    [accountId, limit],
  );
  return rows.map(fromKeyRow);
}

// A revocation and its announcement are one statement: the notification is delivered when (and
// only if) the revocation commits, to every process caching keys (api/shared/key-cache.ts).
const REVOKED_NOTIFY = `SELECT pg_notify('${API_KEY_CHANGES_CHANNEL}', key_sha256) FROM revoked`;

/** Revokes the account's active key `id`; false when the account has no such active key. */
export async function revokeApiKeyById(db: Db, accountId: string, id: string): Promise<boolean> {
  const result = await db.query(
    `WITH revoked AS (
       UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND account_id = $2 AND revoked_at IS NULL RETURNING key_sha256)
     ${REVOKED_NOTIFY}`,
    [id, accountId],
  );
  return (result.rowCount ?? 0) > 0;
}

export async function revokeApiKey(pool: pg.Pool, apiKey: string): Promise<boolean> {
  const result = await pool.query(
    `WITH revoked AS (UPDATE api_keys SET revoked_at = now() WHERE key_sha256 = $1 AND revoked_at IS NULL RETURNING key_sha256)
     ${REVOKED_NOTIFY}`,
    [hashApiKey(apiKey)],
  );
  return (result.rowCount ?? 0) > 0;
}

/**
 * Registers an agent of the account with the wallet the chain records as payer. `agentId` is the
 * internal key (api/shared/agent-ids.ts): `internalAgentId(accountId, publicId)` for a new agent, as
 * `POST /v1/agents` and `admin.ts register-agent` pass; a bare id is the form from before
 * migrations/018_agent_public_ids.sql (key = public id), which test fixtures still use.
 */
export async function registerAgent(
  pool: pg.Pool,
  accountId: string,
  agent: { agentId: string; walletAddress: string; name?: string },
): Promise<void> {
  await pool.query("INSERT INTO agents (agent_id, account_id, name, wallet_address) VALUES ($1, $2, $3, $4)", [
    agent.agentId,
    accountId,
    agent.name ?? "",
    agent.walletAddress,
  ]);
}
