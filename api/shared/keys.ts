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
}

export async function createAccount(pool: pg.Pool, name: string): Promise<string> {
  const result = await pool.query<{ id: string }>("INSERT INTO accounts (name) VALUES ($1) RETURNING id", [name]);
  return result.rows[0]!.id;
}

/** The oldest account called `name`, or null (the local system finds its demo account so). */
export async function accountNamed(db: Db, name: string): Promise<string | null> {
  const { rows } = await db.query<{ id: string }>("SELECT id FROM accounts WHERE name = $1 ORDER BY created_at, id LIMIT 1", [name]);
  return rows[0]?.id ?? null;
}

export async function issueApiKey(pool: pg.Pool, accountId: string): Promise<IssuedKey> {
  const apiKey = `${KEY_PREFIX}${randomBytes(32).toString("base64url")}`;
  const prefix = apiKey.slice(0, DISPLAY_PREFIX_CHARS);
  await pool.query("INSERT INTO api_keys (account_id, key_sha256, prefix) VALUES ($1, $2, $3)", [accountId, hashApiKey(apiKey), prefix]);
  return { accountId, apiKey, prefix };
}

/** A live (unrevoked) key's id and account, or null. */
export async function apiKeyOf(db: Db, apiKey: string): Promise<{ readonly id: string; readonly accountId: string } | null> {
  const { rows } = await db.query<{ id: string; account_id: string }>(
    "SELECT id::text, account_id FROM api_keys WHERE key_sha256 = $1 AND revoked_at IS NULL",
    [hashApiKey(apiKey)],
  );
  return rows[0] === undefined ? null : { id: rows[0].id, accountId: rows[0].account_id };
}

/** An API key as its account lists it: never the key itself. */
export interface ApiKeyRecord {
  readonly id: string;
  readonly prefix: string;
  readonly createdAt: Date;
  readonly revokedAt: Date | null;
}

interface ApiKeyRow {
  id: string;
  prefix: string;
  created_at: Date;
  revoked_at: Date | null;
}

function fromKeyRow(row: ApiKeyRow): ApiKeyRecord {
  return { id: row.id, prefix: row.prefix, createdAt: row.created_at, revokedAt: row.revoked_at };
}

/**
 * A new key for the account, unless it already holds `maxActive` unrevoked keys (null then). The
 * count and the insert are one statement.
 */
export async function issueAccountApiKey(
  db: Db,
  accountId: string,
  maxActive: number,
): Promise<{ readonly record: ApiKeyRecord; readonly apiKey: string } | null> {
  const apiKey = `${KEY_PREFIX}${randomBytes(32).toString("base64url")}`;
  const { rows } = await db.query<ApiKeyRow>(
    `INSERT INTO api_keys (account_id, key_sha256, prefix)
     SELECT $1, $2, $3 WHERE (SELECT count(*) FROM api_keys WHERE account_id = $1 AND revoked_at IS NULL) < $4
     RETURNING id, prefix, created_at, revoked_at`,
    [accountId, hashApiKey(apiKey), apiKey.slice(0, DISPLAY_PREFIX_CHARS), maxActive],
  );
  return rows[0] === undefined ? null : { record: fromKeyRow(rows[0]), apiKey };
}

/** The account's keys, revoked ones included, oldest first (at most `limit`). */
export async function listApiKeys(db: Db, accountId: string, limit: number): Promise<ApiKeyRecord[]> {
  const { rows } = await db.query<ApiKeyRow>(
    "SELECT id, prefix, created_at, revoked_at FROM api_keys WHERE account_id = $1 ORDER BY id LIMIT $2",
    [accountId, limit],
  );
  return rows.map(fromKeyRow);
}

/** Revokes the account's active key `id`; false when the account has no such active key. */
export async function revokeApiKeyById(db: Db, accountId: string, id: string): Promise<boolean> {
  const result = await db.query("UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND account_id = $2 AND revoked_at IS NULL", [
    id,
    accountId,
  ]);
  return (result.rowCount ?? 0) > 0;
}

export async function revokeApiKey(pool: pg.Pool, apiKey: string): Promise<boolean> {
  const result = await pool.query("UPDATE api_keys SET revoked_at = now() WHERE key_sha256 = $1 AND revoked_at IS NULL", [
    hashApiKey(apiKey),
  ]);
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
