/**
 * The dashboard's session cookie and its CSRF rule, one place for the gateway that sets it
 * (api/gateway/dashboard) and the auth that reads it (auth.ts).
 *
 * - `apg_session=<token>; HttpOnly; SameSite=Strict; Path=/`, `Secure` when the request came over
 *   HTTPS (directly or as `X-Forwarded-Proto: https` from a proxy). HttpOnly: page scripts cannot
 *   read it; SameSite=Strict: the browser does not send it on requests another site starts.
 * - CSRF: a cookie counts only on requests that carry `X-APG-CSRF: 1`, a header a cross-site form
 *   cannot send and a cross-site fetch can send only after a CORS preflight this server never
 *   grants; and never on a request the browser marks `Sec-Fetch-Site` cross-site or same-site.
 */
export const SESSION_COOKIE = "apg_session";
export const CSRF_HEADER = "x-apg-csrf";

/** The value of cookie `name` in a Cookie header, or null. */
export function readCookie(header: string | null, name: string): string | null {
  if (header === null) return null;
  for (const part of header.split(";")) {
    const index = part.indexOf("=");
    if (index < 0) continue;
    if (part.slice(0, index).trim() === name) return part.slice(index + 1).trim();
  }
  return null;
}

/** Whether a cookie-authenticated request passes the CSRF rule; the reason when it does not. */
export function csrfRefusal(headers: Headers): string | null {
  if (headers.get(CSRF_HEADER) !== "1") return `a session cookie counts only with the header ${CSRF_HEADER}: 1`;
  const site = headers.get("sec-fetch-site");
  if (site !== null && site !== "same-origin" && site !== "none") return `a session cookie is not accepted from a ${site} request`;
  return null;
}

function isHttps(request: Request): boolean {
  return new URL(request.url).protocol === "https:" || request.headers.get("x-forwarded-proto")?.split(",")[0]?.trim() === "https";
}

export function sessionCookie(request: Request, token: string, maxAgeMs: number): string {
  const secure = isHttps(request) ? "; Secure" : "";
  return `${SESSION_COOKIE}=${token}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${Math.floor(maxAgeMs / 1000)}${secure}`;
}

export function clearedSessionCookie(request: Request): string {
  const secure = isHttps(request) ? "; Secure" : "";
  return `${SESSION_COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0${secure}`;
}
