/**
 * API keys of the caller's account (spec 5 leaves issuance open; these are ours):
 * `POST /v1/api-keys` `{ scope? }` issues a key of that scope (`admin` by default, `approver`,
 * `agent:<agentId>`; shown once; sealed in the idempotency record), `GET /v1/api-keys` lists them
 * by prefix with their scopes, `DELETE /v1/api-keys/{keyId}` revokes one (admin keys only), and
 * `GET /v1/keys/current` answers any key its own `{ id, scope, accountId }`.
 */
import { type ApiKeyRecord, issueAccountApiKey, listApiKeys, revokeApiKeyById, scopeAgentExists } from "../../../shared/keys.js";
import { ADMIN_SCOPE, formatScope, parseScope, type Scope } from "../../../shared/scopes.js";
import { runDatabaseEffect, type RouteResponse } from "../../../shared/http/idempotency.js";
import { objectBody } from "../../../shared/http/input.js";
import type { JsonValue } from "../../../shared/http/json.js";
import { badRequest, httpError } from "../../../shared/http/problem.js";
import { json, NO_CONTENT } from "../../../shared/http/router.js";
import type { Route, RouteContext } from "../deps.js";

/** Keys one account may hold unrevoked. */
const MAX_ACTIVE_KEYS = 100;
/** Keys a listing answers at most. */
const LIST_LIMIT = 1000;

function keyJson(key: ApiKeyRecord): Record<string, unknown> {
  return { id: key.id, prefix: key.prefix, scope: formatScope(key.scope), createdAt: key.createdAt, revokedAt: key.revokedAt };
}

/** The `scope` field: a known scope (400 otherwise) whose agent is one of the account's (404 otherwise). */
async function scopeField(context: RouteContext, value: JsonValue | undefined): Promise<Scope> {
  if (value === undefined) return ADMIN_SCOPE;
  const scope = typeof value === "string" ? parseScope(value) : null;
  if (scope === null) throw badRequest("scope", "must be admin, approver or agent:<agentId>");
  if (!(await scopeAgentExists(context.deps.pool, context.caller.accountId, scope))) {
    throw httpError("NOT_FOUND", `no agent ${formatScope(scope).slice("agent:".length)} in this account`, { field: "scope" });
  }
  return scope;
}

async function createRoute(context: RouteContext): Promise<RouteResponse> {
  const body = objectBody(context.body, [], ["scope"]);
  const scope = await scopeField(context, body.scope);
  if (context.deps.secretBox === undefined)
    throw httpError("SERVICE_UNAVAILABLE", "issuing keys needs the secrets key (WEBHOOK_SECRETS_KEY)");
  return runDatabaseEffect(context.store, context.idempotency, async (client) => {
    const issued = await issueAccountApiKey(client, context.caller.accountId, MAX_ACTIVE_KEYS, scope);
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

/** The calling key itself (an in-process caller, which has no key, is answered as admin without an id). */
async function currentRoute(context: RouteContext): Promise<RouteResponse> {
  const credential = context.caller.credential;
  const id = credential?.kind === "api_key" ? credential.keyId : null;
  return json(200, { id, scope: formatScope(context.caller.scope ?? ADMIN_SCOPE), accountId: context.caller.accountId });
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
  { method: "POST", path: "/v1/api-keys", scope: "admin", handler: createRoute },
  { method: "GET", path: "/v1/api-keys", scope: "account", handler: listRoute },
  { method: "DELETE", path: "/v1/api-keys/:keyId", scope: "admin", handler: revokeRoute },
  { method: "GET", path: "/v1/keys/current", scope: "any", handler: currentRoute },
];
