/**
 * API keys of the caller's account (spec 5 leaves issuance open; these are ours):
 * `POST /v1/api-keys` issues a key (shown once; sealed in the idempotency record),
 * `GET /v1/api-keys` lists them by prefix, `DELETE /v1/api-keys/{keyId}` revokes one.
 */
import { type ApiKeyRecord, issueAccountApiKey, listApiKeys, revokeApiKeyById } from "../../../shared/keys.js";
import { runDatabaseEffect, type RouteResponse } from "../../../shared/http/idempotency.js";
import { objectBody } from "../../../shared/http/input.js";
import { httpError } from "../../../shared/http/problem.js";
import { json, NO_CONTENT } from "../../../shared/http/router.js";
import type { Route, RouteContext } from "../deps.js";

/** Keys one account may hold unrevoked. */
const MAX_ACTIVE_KEYS = 100;
/** Keys a listing answers at most. */
const LIST_LIMIT = 1000;

function keyJson(key: ApiKeyRecord): Record<string, unknown> {
  return { id: key.id, prefix: key.prefix, createdAt: key.createdAt, revokedAt: key.revokedAt };
}

async function createRoute(context: RouteContext): Promise<RouteResponse> {
  objectBody(context.body, [], []);
  if (context.deps.secretBox === undefined)
    throw httpError("SERVICE_UNAVAILABLE", "issuing keys needs the secrets key (WEBHOOK_SECRETS_KEY)");
  return runDatabaseEffect(context.store, context.idempotency, async (client) => {
    const issued = await issueAccountApiKey(client, context.caller.accountId, MAX_ACTIVE_KEYS);
    if (issued === null) throw httpError("LIMIT_EXCEEDED", `at most ${MAX_ACTIVE_KEYS} active API keys per account`);
    const { record, apiKey } = issued;
    // Shown once: a replay under the same Idempotency-Key answers the key's record without it
    // (a lost answer means revoking the key by its prefix and issuing another).
    return json(201, { ...keyJson(record), apiKey }, { replay: { ...keyJson(record), apiKey: null } });
  });
}

async function listRoute(context: RouteContext): Promise<RouteResponse> {
  return json(200, { apiKeys: (await listApiKeys(context.deps.pool, context.caller.accountId, LIST_LIMIT)).map(keyJson) });
}

async function revokeRoute(context: RouteContext): Promise<RouteResponse> {
  const id = context.params.keyId!;
  if (!/^[1-9]\d{0,17}$/.test(id)) throw httpError("NOT_FOUND", `no API key ${id} in this account`);
  if (!(await revokeApiKeyById(context.deps.pool, context.caller.accountId, id))) {
    throw httpError("NOT_FOUND", `no active API key ${id} in this account`);
  }
  return NO_CONTENT;
}

export const apiKeyRoutes: readonly Route[] = [
  { method: "POST", path: "/v1/api-keys", handler: createRoute },
  { method: "GET", path: "/v1/api-keys", handler: listRoute },
  { method: "DELETE", path: "/v1/api-keys/:keyId", handler: revokeRoute },
];
