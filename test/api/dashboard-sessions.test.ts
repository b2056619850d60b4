/**
 * Dashboard sessions (api/shared/sessions.ts) and the GraphQL auth that reads them
 * (api/shared/auth.ts `authenticateGraphql`), on a fresh database: a session lives while it is
 * unexpired, not signed out and its key not revoked; the cookie counts only under the CSRF rule.
 */
import { setTimeout as delay } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { authenticateGraphql, credentialIsLive } from "../../api/shared/auth.js";
import { createAccount, issueApiKey, revokeApiKey } from "../../api/shared/keys.js";
import { createSession, endSession, hashSessionToken, sessionOfToken } from "../../api/shared/sessions.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";

let db: FreshDatabase;
let accountId: string;

beforeAll(async () => {
  db = await createFreshDatabase();
  accountId = await createAccount(db.pool, "sessions");
});

afterAll(async () => {
  await db?.drop();
});

const freshKey = async (): Promise<string> => (await issueApiKey(db.pool, accountId)).apiKey;

function cookieHeaders(token: string, extra: Record<string, string> = {}): Headers {
  return new Headers({ cookie: `other=1; apg_session=${token}`, "x-apg-csrf": "1", ...extra });
}

async function refusal(attempt: Promise<unknown>): Promise<string> {
  try {
    await attempt;
  } catch (error) {
    return String((error as { extensions?: { code?: string } }).extensions?.code);
  }
  return "accepted";
}

describe("dashboard sessions", () => {
  it("are made from a live key, stored as a hash only, and name the account and key prefix", async () => {
    const key = await freshKey();
    const session = (await createSession(db.pool, key))!;
    expect(session.token).toMatch(/^apgs_[A-Za-z0-9_-]{43}$/);
    expect(session).toMatchObject({ accountId, accountName: "sessions", keyPrefix: key.slice(0, 12) });
    const { rows } = await db.pool.query("SELECT token_sha256 FROM dashboard_sessions WHERE id = $1", [session.sessionId]);
    expect(rows[0].token_sha256).toBe(hashSessionToken(session.token));
    expect(JSON.stringify(rows)).not.toContain(session.token);
    expect((await sessionOfToken(db.pool, session.token))?.sessionId).toBe(session.sessionId);
  });

  it("are not made from an unknown or revoked key", async () => {
    expect(await createSession(db.pool, `apg_${"B".repeat(43)}`)).toBeNull();
    const key = await freshKey();
    await revokeApiKey(db.pool, key);
    expect(await createSession(db.pool, key)).toBeNull();
  });

  it("end when their key is revoked, when signed out, and when they expire", async () => {
    const key = await freshKey();
    const revoked = (await createSession(db.pool, key))!;
    await revokeApiKey(db.pool, key);
    expect(await sessionOfToken(db.pool, revoked.token)).toBeNull();

    const signedOut = (await createSession(db.pool, await freshKey()))!;
    expect(await endSession(db.pool, signedOut.token)).toBe(true);
    expect(await sessionOfToken(db.pool, signedOut.token)).toBeNull();
    expect(await endSession(db.pool, signedOut.token)).toBe(false);

    const short = (await createSession(db.pool, await freshKey(), 50))!;
    expect(await sessionOfToken(db.pool, short.token)).not.toBeNull();
    await delay(100); // past its 50 ms lifetime
    expect(await sessionOfToken(db.pool, short.token)).toBeNull();
  });
});

describe("GraphQL authentication with the session cookie", () => {
  it("takes the cookie with the CSRF header, from a same-origin request or one without fetch metadata", async () => {
    const session = (await createSession(db.pool, await freshKey()))!;
    const caller = await authenticateGraphql(db.pool, cookieHeaders(session.token));
    expect(caller).toEqual({ accountId, credential: { kind: "session", sessionId: session.sessionId }, scope: { kind: "admin" } });
    expect((await authenticateGraphql(db.pool, cookieHeaders(session.token, { "sec-fetch-site": "same-origin" }))).accountId).toBe(
      accountId,
    );
  });

  it("refuses the cookie without the CSRF header, from another site, or once the session ended", async () => {
    const key = await freshKey();
    const session = (await createSession(db.pool, key))!;
    const noHeader = new Headers({ cookie: `apg_session=${session.token}` });
    expect(await refusal(authenticateGraphql(db.pool, noHeader))).toBe("AUTHENTICATION_ERROR");
    for (const site of ["cross-site", "same-site"]) {
      expect(await refusal(authenticateGraphql(db.pool, cookieHeaders(session.token, { "sec-fetch-site": site })))).toBe(
        "AUTHENTICATION_ERROR",
      );
    }
    expect(await refusal(authenticateGraphql(db.pool, cookieHeaders(`apgs_${"C".repeat(43)}`)))).toBe("AUTHENTICATION_ERROR");
    await revokeApiKey(db.pool, key);
    expect(await refusal(authenticateGraphql(db.pool, cookieHeaders(session.token)))).toBe("AUTHENTICATION_ERROR");
  });

  it("prefers the Authorization header: a key authenticates as before, a bad key is refused even with a live cookie", async () => {
    const key = await freshKey();
    const session = (await createSession(db.pool, await freshKey()))!;
    const keyed = await authenticateGraphql(
      db.pool,
      new Headers({ authorization: `Bearer ${key}`, cookie: `apg_session=${session.token}` }),
    );
    expect(keyed.credential?.kind).toBe("api_key");
    const bad = new Headers({ authorization: `Bearer apg_${"D".repeat(43)}`, cookie: `apg_session=${session.token}`, "x-apg-csrf": "1" });
    expect(await refusal(authenticateGraphql(db.pool, bad))).toBe("AUTHENTICATION_ERROR");
  });

  it("tells a long-lived stream whether its key or session still stands", async () => {
    const key = await freshKey();
    const byKey = await authenticateGraphql(db.pool, new Headers({ authorization: `Bearer ${key}` }));
    const session = (await createSession(db.pool, key))!;
    const bySession = await authenticateGraphql(db.pool, cookieHeaders(session.token));
    expect(await credentialIsLive(db.pool, byKey)).toBe(true);
    expect(await credentialIsLive(db.pool, bySession)).toBe(true);
    await revokeApiKey(db.pool, key);
    expect(await credentialIsLive(db.pool, byKey)).toBe(false);
    expect(await credentialIsLive(db.pool, bySession)).toBe(false);
  });
});
