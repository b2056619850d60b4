/**
 * `Authorization: Bearer <API_KEY>` (spec 5) -> the caller's account. Every query is scoped to that
 * account; a missing, malformed, unknown or revoked key is AUTHENTICATION_ERROR, never an empty result.
 */
import type pg from "pg";
import { apiError } from "./errors.js";
import { hashApiKey, isWellFormedApiKey } from "./keys.js";

export interface Caller {
  readonly accountId: string;
}

const BEARER = /^Bearer ([^\s]+)$/;

export async function authenticate(pool: pg.Pool, authorization: string | null): Promise<Caller> {
  if (authorization === null || authorization === "") {
    throw apiError("AUTHENTICATION_ERROR", "missing API key: send Authorization: Bearer <API_KEY>");
  }
  const match = BEARER.exec(authorization.trim());
  if (match === null) throw apiError("AUTHENTICATION_ERROR", "malformed Authorization header: expected Bearer <API_KEY>");
  const key = match[1]!;
  // A key of the wrong shape cannot be one we issued: no database round trip for it.
  if (!isWellFormedApiKey(key)) throw apiError("AUTHENTICATION_ERROR", "invalid API key");
  const result = await pool.query<{ account_id: string }>(
    "SELECT account_id FROM api_keys WHERE key_sha256 = $1 AND revoked_at IS NULL",
    [hashApiKey(key)],
  );
  const row = result.rows[0];
  if (row === undefined) throw apiError("AUTHENTICATION_ERROR", "invalid API key");
  return { accountId: row.account_id };
}
