/**
 * The dashboard's sign-in, as three requests on `/dashboard/api/session` (outside REST /v1: a
 * browser surface, authenticated by its cookie):
 *
 * - `POST` with `Authorization: Bearer <API_KEY>` (no body): exchanges the key once for a session
 *   (api/shared/sessions.ts) and answers 201 `{ accountId, accountName, keyPrefix, scope, expiresAt }`
 *   with the HttpOnly, SameSite=Strict cookie (api/shared/session-cookie.ts). The key travels in a
 *   header, never in a URL or a body that could be logged, and is not kept by the page.
 * - `GET` with the cookie: the same JSON while the session is live, else 401.
 * - `DELETE` with the cookie and the CSRF header: signs out (the stored session ends, the cookie is
 *   cleared); 204 even without a live session, so signing out twice is not an error.
 *
 * Signing in needs an `admin` or `approver` key (`SIGN_IN_REQUIREMENT`): an agent key answers 403
 * FORBIDDEN_SCOPE and makes no session. Errors are problem JSON with the registry's codes (401
 * AUTHENTICATION_ERROR, 403 FORBIDDEN_SCOPE, 405).
 */
import type pg from "pg";
import { authenticate } from "../../shared/auth.js";
import { ServiceError, toServiceError } from "../../shared/errors.js";
import { writeJson } from "../../shared/http/json.js";
import { PROBLEM_CONTENT_TYPE } from "../../shared/http/problem.js";
import { clearedSessionCookie, csrfRefusal, readCookie, SESSION_COOKIE, sessionCookie } from "../../shared/session-cookie.js";
import { forbiddenScope, formatScope, kindAllows, type Requirement } from "../../shared/scopes.js";
import { createSession, type DashboardSession, endSession, SESSION_TTL_MS, sessionOfToken } from "../../shared/sessions.js";

export const SESSION_PATH = "/dashboard/api/session";
/** What signing in needs: the dashboard reads the whole account (api/shared/scopes.ts). */
export const SIGN_IN_REQUIREMENT: Requirement = "account";

const NO_STORE = { "cache-control": "no-store" };

function sessionJson(session: DashboardSession): Record<string, unknown> {
  return {
    accountId: session.accountId,
    accountName: session.accountName,
    keyPrefix: session.keyPrefix,
    scope: formatScope(session.scope),
    expiresAt: session.expiresAt.toISOString(),
  };
}

function jsonResponse(status: number, value: unknown, headers: Record<string, string> = {}): Response {
  return new Response(writeJson(value), { status, headers: { "content-type": "application/json", ...NO_STORE, ...headers } });
}

function problem(error: ServiceError, headers: Record<string, string> = {}): Response {
  return new Response(writeJson(error.toProblem()), {
    status: error.status,
    headers: { "content-type": PROBLEM_CONTENT_TYPE, ...NO_STORE, ...error.headers, ...headers },
  });
}

const signedOut = (message: string): ServiceError => new ServiceError("AUTHENTICATION_ERROR", message);

async function signIn(pool: pg.Pool, request: Request): Promise<Response> {
  // The key is checked exactly as every API request checks it (same answers, same challenge).
  const caller = await authenticate(pool, request.headers.get("authorization"));
  // The dashboard shows the whole account: admin and approver keys sign in, agent keys do not.
  if (caller.scope !== undefined && !kindAllows(caller.scope, SIGN_IN_REQUIREMENT)) {
    throw forbiddenScope(caller.scope, SIGN_IN_REQUIREMENT, "sign in to the dashboard");
  }
  const key = /^Bearer +(\S+)$/i.exec(request.headers.get("authorization")!.trim())![1]!;
  const session = await createSession(pool, key);
  // Revoked between the two statements: the same answer as any revoked key.
  if (session === null) throw signedOut("invalid API key");
  return jsonResponse(201, sessionJson(session), { "set-cookie": sessionCookie(request, session.token, SESSION_TTL_MS) });
}

async function current(pool: pg.Pool, request: Request): Promise<Response> {
  const token = readCookie(request.headers.get("cookie"), SESSION_COOKIE);
  const session = token === null ? null : await sessionOfToken(pool, token);
  if (session === null) {
    const error = signedOut(token === null ? "not signed in" : "the session has expired, was signed out, or its API key was revoked");
    // A dead cookie is cleared so the browser stops sending it.
    return problem(error, token === null ? {} : { "set-cookie": clearedSessionCookie(request) });
  }
  return jsonResponse(200, sessionJson(session));
}

async function signOut(pool: pg.Pool, request: Request): Promise<Response> {
  const refusal = csrfRefusal(request.headers);
  if (refusal !== null) throw signedOut(refusal);
  const token = readCookie(request.headers.get("cookie"), SESSION_COOKIE);
  if (token !== null) await endSession(pool, token);
  return new Response(null, { status: 204, headers: { ...NO_STORE, "set-cookie": clearedSessionCookie(request) } });
}

/** The answer to a request on SESSION_PATH. */
export async function handleSession(pool: pg.Pool, request: Request): Promise<Response> {
  try {
    if (request.method === "POST") return await signIn(pool, request);
    if (request.method === "GET") return await current(pool, request);
    if (request.method === "DELETE") return await signOut(pool, request);
    return problem(new ServiceError("METHOD_NOT_ALLOWED", "use GET, POST or DELETE", { headers: { allow: "GET, POST, DELETE" } }));
  } catch (error) {
    const known = toServiceError(error);
    if (known === null) throw error;
    return problem(known);
  }
}
