/**
 * `Authorization: Bearer <API_KEY>` (spec 5) -> the caller's account. Every query is scoped to that
 * account; a missing, malformed, unknown or revoked key is AUTHENTICATION_ERROR, never an empty result.
 *
 * The scheme name is matched case-insensitively (RFC 9110 11.1: `bearer` and `BEARER` are Bearer).
 * Every refusal carries the RFC 6750 challenge for the 401 (`WWW-Authenticate: Bearer realm=...`,
 * with `error="invalid_token"` when a Bearer key was sent but is not a live key of ours) and the
 * spec 7 client class `AuthenticationError` (the registry's class for the code); REST (problem JSON)
 * and GraphQL (yoga reads `extensions.http`) answer with the same header.
 *
 * GraphQL also takes the dashboard's session cookie (api/shared/sessions.ts) when no Authorization
 * header is sent, under the CSRF rule of api/shared/session-cookie.ts. REST /v1 takes keys only,
 * but for the routes that declare `session` (a person deciding an approval in the dashboard).
 * With a key cache (api/shared/key-cache.ts) a live key is answered from memory, revocations
 * pushed to it at once and anything else within 1 s; sessions are always read from the database.
 */
import type pg from "pg";
import { ServiceError } from "./errors.js";
import type { ApiKeyCache } from "./key-cache.js";
import { apiKeyOf, isWellFormedApiKey } from "./keys.js";
import type { Scope } from "./scopes.js";
import { csrfRefusal, readCookie, SESSION_COOKIE } from "./session-cookie.js";
import { sessionIsLive, sessionOfToken } from "./sessions.js";

/** What authenticated a caller: an API key, or a dashboard session made with one. */
export type Credential = { readonly kind: "api_key"; readonly keyId: string } | { readonly kind: "session"; readonly sessionId: string };

export interface Caller {
  readonly accountId: string;
  /** Absent for callers made in process (tests, the gateway's own calls). */
  readonly credential?: Credential;
  /** What the key (or the key a session was made with) may do; absent in process, which is admin. */
  readonly scope?: Scope;
}

/** Who a policy version names as its author: `key:<api key id>`, `admin` (a dashboard session, or in process). */
export function policyActor(caller: Caller): string {
  return caller.credential?.kind === "api_key" ? `key:${caller.credential.keyId}` : "admin";
}

export const AUTH_REALM = "agent-payment-gateway";
/** The challenge when no Bearer credentials were sent (RFC 6750 3: no error code then). */
export const BEARER_CHALLENGE = `Bearer realm="${AUTH_REALM}"`;
/** The challenge when a Bearer key was sent and is not valid (RFC 6750 3.1 invalid_token). */
export const INVALID_TOKEN_CHALLENGE = `Bearer realm="${AUTH_REALM}", error="invalid_token"`;

// auth-scheme 1*SP token68 (RFC 9110 11.4), the scheme compared without regard to case.
const BEARER = /^Bearer +([^\s]+)$/i;

// A GraphQLError: the GraphQL surface authenticates too; REST finds the ServiceError inside it.
function refused(message: string, challenge: string): Error {
  return new ServiceError("AUTHENTICATION_ERROR", message, { headers: { "WWW-Authenticate": challenge } }).toGraphQLError();
}

export async function authenticate(pool: pg.Pool, authorization: string | null, keys?: ApiKeyCache): Promise<Caller> {
  if (authorization === null || authorization.trim() === "") {
    throw refused("missing API key: send Authorization: Bearer <API_KEY>", BEARER_CHALLENGE);
  }
  const trimmed = authorization.trim();
  const match = BEARER.exec(trimmed);
  if (match === null) {
    // Another scheme (Basic, Token...) is no Bearer credential at all: challenge without an error
    // code; a Bearer header whose credentials are not one token is an invalid token.
    const bearer = /^Bearer(\s|$)/i.test(trimmed);
    throw refused("malformed Authorization header: expected Bearer <API_KEY>", bearer ? INVALID_TOKEN_CHALLENGE : BEARER_CHALLENGE);
  }
  const key = match[1]!;
  // A key of the wrong shape cannot be one we issued: no database round trip for it.
  if (!isWellFormedApiKey(key)) throw refused("invalid API key", INVALID_TOKEN_CHALLENGE);
  const live = keys === undefined ? await apiKeyOf(pool, key) : await keys.lookup(pool, key);
  if (live === null) throw refused("invalid API key", INVALID_TOKEN_CHALLENGE);
  return { accountId: live.accountId, credential: { kind: "api_key", keyId: live.id }, scope: live.scope };
}

/**
 * A GraphQL request's caller: the Bearer key when an Authorization header is sent (as on every
 * surface), else the dashboard's session cookie, which counts only under the CSRF rule.
 */
export async function authenticateGraphql(pool: pg.Pool, headers: Headers, keys?: ApiKeyCache): Promise<Caller> {
  return authenticateWithSession(pool, headers, keys);
}

/** The Bearer key when one is sent, else the dashboard's session cookie under the CSRF rule. */
export async function authenticateWithSession(pool: pg.Pool, headers: Headers, keys?: ApiKeyCache): Promise<Caller> {
  const authorization = headers.get("authorization");
  const token = readCookie(headers.get("cookie"), SESSION_COOKIE);
  if ((authorization !== null && authorization.trim() !== "") || token === null) return authenticate(pool, authorization, keys);
  const refusal = csrfRefusal(headers);
  if (refusal !== null) throw refused(refusal, BEARER_CHALLENGE);
  const session = await sessionOfToken(pool, token);
  if (session === null)
    throw refused("the session has expired, was signed out, or its API key was revoked: sign in again", BEARER_CHALLENGE);
  return { accountId: session.accountId, credential: { kind: "session", sessionId: session.sessionId }, scope: session.scope };
}

/** Whether what authenticated `caller` still would (long-lived streams ask between events). */
export async function credentialIsLive(pool: pg.Pool, caller: Caller): Promise<boolean> {
  const credential = caller.credential;
  if (credential === undefined) return true;
  if (credential.kind === "session") return sessionIsLive(pool, credential.sessionId);
  const { rows } = await pool.query("SELECT 1 FROM api_keys WHERE id = $1 AND revoked_at IS NULL", [credential.keyId]);
  return rows.length > 0;
}
