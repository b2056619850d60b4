/**
 * API keys of the caller's account (spec 5 leaves issuance open; these are ours):
 * `POST /v1/api-keys` issues a key (shown once; sealed in the idempotency record),
 * `GET /v1/api-keys` lists them by prefix, `DELETE /v1/api-keys/{keyId}` revokes one.
 */
import { randomBytes } from "node:crypto";
import { hashApiKey } from "../../../shared/keys.js";
import { runDatabaseEffect, type RouteResponse } from "../../../shared/http/idempotency.js";
import { objectBody } from "../../../shared/http/input.js";
import { httpError } from "../../../shared/http/problem.js";
import { json, NO_CONTENT } from "../../../shared/http/router.js";
import type { Route, RouteContext } from "../deps.js";

const KEY_PREFIX = "apg_";
const DISPLAY_PREFIX_CHARS = 12;
/** Keys one account may hold unrevoked. */
const MAX_ACTIVE_KEYS = 100;

interface KeyRow {
  id: string;
  prefix: string;
  created_at: Date;
  revoked_at: Date | null;
}

function keyJson(row: KeyRow): Record<string, unknown> {
  return { id: row.id, prefix: row.prefix, createdAt: row.created_at, revokedAt: row.revoked_at };
}

async function createRoute(context: RouteContext): Promise<RouteResponse> {
  objectBody(context.body, [], []);
  if (context.deps.secretBox === undefined)
    throw httpError("SERVICE_UNAVAILABLE", "issuing keys needs the secrets key (WEBHOOK_SECRETS_KEY)");
  return runDatabaseEffect(context.store, context.idempotency, async (client) => {
    const apiKey = `${KEY_PREFIX}${randomBytes(32).toString("base64url")}`;
    const { rows } = await client.query<KeyRow>(
      `INSERT INTO api_keys (account_id, key_sha256, prefix)
       SELECT $1, $2, $3 WHERE (SELECT count(*) FROM api_keys WHERE account_id = $1 AND revoked_at IS NULL) < $4
       RETURNING id, prefix, created_at, revoked_at`,
      [context.caller.accountId, hashApiKey(apiKey), apiKey.slice(0, DISPLAY_PREFIX_CHARS), MAX_ACTIVE_KEYS],
    );
    if (rows[0] === undefined) throw httpError("LIMIT_EXCEEDED", `at most ${MAX_ACTIVE_KEYS} active API keys per account`);
    // Shown once: a replay under the same Idempotency-Key answers the key's record without it
    // (a lost answer means revoking the key by its prefix and issuing another).
    return json(201, { ...keyJson(rows[0]), apiKey }, { replay: { ...keyJson(rows[0]), apiKey: null } });
  });
}

async function listRoute(context: RouteContext): Promise<RouteResponse> {
  const { rows } = await context.deps.pool.query<KeyRow>(
    "SELECT id, prefix, created_at, revoked_at FROM api_keys WHERE account_id = $1 ORDER BY id LIMIT 1000",
    [context.caller.accountId],
  );
  return json(200, { apiKeys: rows.map(keyJson) });
}

async function revokeRoute(context: RouteContext): Promise<RouteResponse> {
  const id = context.params.keyId!;
  if (!/^[1-9]\d{0,17}$/.test(id)) throw httpError("NOT_FOUND", `no API key ${id} in this account`);
  const result = await context.deps.pool.query(
    "UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND account_id = $2 AND revoked_at IS NULL",
    [id, context.caller.accountId],
  );
  if ((result.rowCount ?? 0) === 0) throw httpError("NOT_FOUND", `no active API key ${id} in this account`);
  return NO_CONTENT;
}

export const apiKeyRoutes: readonly Route[] = [
  { method: "POST", path: "/v1/api-keys", handler: createRoute },
  { method: "GET", path: "/v1/api-keys", handler: listRoute },
  { method: "DELETE", path: "/v1/api-keys/:keyId", handler: revokeRoute },
];
