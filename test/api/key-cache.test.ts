/**
 * The API key cache (api/shared/key-cache.ts) on real PostgreSQL: a key held in memory is never
 * served after it stops being valid for longer than the rules allow. A revocation through the key
 * store is pushed by NOTIFY and refused at once; a change nothing announces (a scope edited by
 * hand, a key deleted) is seen once the entry's time bound passes (a pinned clock here, real
 * time through HTTP); the gateway's REST /v1 routes and /mcp go through the same cache under the
 * same bounds; every worker of a multi-process query service refuses a revoked key within 1 s.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { request } from "node:http";
import { dirname, resolve } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createGatewayServer } from "../../api/gateway/server.js";
import { type ApiServer, createApiServer } from "../../api/query/server.js";
import { ApiKeyCache, KEY_CACHE_TTL_MS } from "../../api/shared/key-cache.js";
import { createAccount, hashApiKey, issueApiKey, revokeApiKey, revokeApiKeyById } from "../../api/shared/keys.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { pollUntil } from "../support/poll.js";
import { freePort } from "../support/process-env.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
/** The bound the service promises for a revoked key (docs/api.md); the cache's own is half of it. */
const REVOCATION_BOUND_MS = 1_000;
const START_TIMEOUT_MS = 60_000;

let db: FreshDatabase;
let accountId: string;

beforeAll(async () => {
  db = await createFreshDatabase();
  accountId = await createAccount(db.pool, "key cache");
  await db.pool.query("INSERT INTO agents (agent_id, account_id, name, wallet_address) VALUES ('kc-agent', $1, '', 'kc-wallet')", [
    accountId,
  ]);
});

afterAll(async () => {
  await db?.drop();
});

const keyId = async (apiKey: string): Promise<string> =>
  (await db.pool.query<{ id: string }>("SELECT id::text FROM api_keys WHERE key_sha256 = $1", [hashApiKey(apiKey)])).rows[0]!.id;

describe("the key cache, on a pinned clock", () => {
  it("answers a live key from memory until its time bound, then reads the change made by hand", async () => {
    let now = 0;
    const cache = new ApiKeyCache({ now: () => now });
    const { apiKey } = await issueApiKey(db.pool, accountId);
    expect((await cache.lookup(db.pool, apiKey))?.scope).toEqual({ kind: "admin" });
    // Edited in SQL: nothing announces it, so the entry stands until its bound...
    await db.pool.query("UPDATE api_keys SET scope = 'agent:kc-agent' WHERE key_sha256 = $1", [hashApiKey(apiKey)]);
    now = KEY_CACHE_TTL_MS - 1;
    expect((await cache.lookup(db.pool, apiKey))?.scope).toEqual({ kind: "admin" });
    // ...and not one moment past it.
    now = KEY_CACHE_TTL_MS;
    expect((await cache.lookup(db.pool, apiKey))?.scope).toEqual({ kind: "agent", agentId: "kc-agent" });
    expect(KEY_CACHE_TTL_MS).toBeLessThan(REVOCATION_BOUND_MS);
  });

  it("a deleted key is unknown once its entry's bound has passed", async () => {
    let now = 0;
    const cache = new ApiKeyCache({ now: () => now });
    const { apiKey } = await issueApiKey(db.pool, accountId);
    expect(await cache.lookup(db.pool, apiKey)).not.toBeNull();
    await db.pool.query("DELETE FROM api_keys WHERE key_sha256 = $1", [hashApiKey(apiKey)]);
    now = KEY_CACHE_TTL_MS;
    expect(await cache.lookup(db.pool, apiKey)).toBeNull();
  });

  it("an unknown or revoked key is never held: a key issued after a miss works at once", async () => {
    const cache = new ApiKeyCache({ now: () => 0 });
    const { apiKey } = await issueApiKey(db.pool, accountId);
    await revokeApiKey(db.pool, apiKey);
    expect(await cache.lookup(db.pool, apiKey)).toBeNull();
    await db.pool.query("UPDATE api_keys SET revoked_at = NULL WHERE key_sha256 = $1", [hashApiKey(apiKey)]);
    expect(await cache.lookup(db.pool, apiKey)).not.toBeNull();
  });

  it("a notification drops the entry whatever the clock says", async () => {
    const cache = new ApiKeyCache({ connectionString: db.url, now: () => 0 });
    await cache.start();
    try {
      const { apiKey } = await issueApiKey(db.pool, accountId);
      expect(await cache.lookup(db.pool, apiKey)).not.toBeNull();
      const pushed = new Promise<string>((done) => {
        cache.onChange = done;
      });
      expect(await revokeApiKeyById(db.pool, accountId, await keyId(apiKey))).toBe(true);
      expect(await pushed).toBe(hashApiKey(apiKey));
      expect(await cache.lookup(db.pool, apiKey)).toBeNull();
    } finally {
      await cache.stop();
    }
  });

  it("a lost LISTEN connection empties the cache, reconnects, and pushes again", async () => {
    const cache = new ApiKeyCache({ connectionString: db.url, now: () => 0 });
    await cache.start();
    try {
      const { apiKey } = await issueApiKey(db.pool, accountId);
      expect(await cache.lookup(db.pool, apiKey)).not.toBeNull();
      const listeners = async (): Promise<number[]> =>
        (
          await db.pool.query<{ pid: number }>(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN api_key_changes'",
          )
        ).rows.map((r) => r.pid);
      const [first] = await listeners();
      await db.pool.query("SELECT pg_terminate_backend($1)", [first]);
      // Back with another connection (the old one's notifications are gone: nothing stale is kept).
      await pollUntil(async () => (await listeners()).some((pid) => pid !== first), {
        timeoutMs: 10_000,
        intervalMs: 50,
        what: "the key cache's LISTEN connection to come back",
      });
      await db.pool.query("UPDATE api_keys SET scope = 'approver' WHERE key_sha256 = $1", [hashApiKey(apiKey)]);
      expect((await cache.lookup(db.pool, apiKey))?.scope).toEqual({ kind: "approver" });
      const pushed = new Promise<string>((done) => {
        cache.onChange = done;
      });
      await revokeApiKey(db.pool, apiKey);
      await pushed;
      expect(await cache.lookup(db.pool, apiKey)).toBeNull();
    } finally {
      await cache.stop();
    }
  });
});

describe("the query service over HTTP", () => {
  let server: ApiServer;
  let base: string;

  beforeAll(async () => {
    server = createApiServer({ pool: db.pool, databaseUrl: db.url, liveFeed: false });
    base = `http://127.0.0.1:${await server.listen(0)}`;
  });

  afterAll(async () => {
    await server?.close();
  });

  const status = async (apiKey: string, query = "{ __typename }"): Promise<{ status: number; codes: unknown[] }> => {
    const response = await fetch(`${base}/graphql`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
      body: JSON.stringify({ query }),
    });
    const body = (await response.json()) as { errors?: { extensions?: { code?: unknown } }[] };
    return { status: response.status, codes: (body.errors ?? []).map((e) => e.extensions?.code) };
  };

  it("a key revoked through the key store is refused on the next request after its notification", async () => {
    const { apiKey } = await issueApiKey(db.pool, accountId);
    expect((await status(apiKey)).status).toBe(200);
    const pushed = new Promise<string>((done) => {
      server.keys!.onChange = done;
    });
    await revokeApiKeyById(db.pool, accountId, await keyId(apiKey));
    await pushed;
    expect(await status(apiKey)).toEqual({ status: 401, codes: ["AUTHENTICATION_ERROR"] });
  });

  it("a key revoked, re-scoped or deleted by hand in SQL stops serving as it was within 1 s", async () => {
    const revoked = (await issueApiKey(db.pool, accountId)).apiKey;
    const rescoped = (await issueApiKey(db.pool, accountId)).apiKey;
    const deleted = (await issueApiKey(db.pool, accountId)).apiKey;
    const accountWide = "{ indexerStatus { __typename } }";
    for (const key of [revoked, rescoped, deleted]) expect((await status(key, accountWide)).status).toBe(200);
    await db.pool.query("UPDATE api_keys SET revoked_at = now() WHERE key_sha256 = $1", [hashApiKey(revoked)]);
    await db.pool.query("UPDATE api_keys SET scope = 'agent:kc-agent' WHERE key_sha256 = $1", [hashApiKey(rescoped)]);
    await db.pool.query("DELETE FROM api_keys WHERE key_sha256 = $1", [hashApiKey(deleted)]);
    await delay(REVOCATION_BOUND_MS);
    expect(await status(revoked)).toEqual({ status: 401, codes: ["AUTHENTICATION_ERROR"] });
    expect(await status(deleted)).toEqual({ status: 401, codes: ["AUTHENTICATION_ERROR"] });
    // An agent key may not read account-wide figures.
    expect((await status(rescoped, accountWide)).codes).toEqual(["FORBIDDEN_SCOPE"]);
  });
});

describe("the gateway's REST /v1 routes and /mcp", () => {
  let server: ApiServer;
  let base: string;

  beforeAll(async () => {
    server = createGatewayServer({ pool: db.pool, databaseUrl: db.url, liveFeed: false });
    base = `http://127.0.0.1:${await server.listen(0)}`;
  });

  afterAll(async () => {
    await server?.close();
  });

  const rest = async (apiKey: string): Promise<number> =>
    (await fetch(`${base}/v1/keys/current`, { headers: { authorization: `Bearer ${apiKey}` } })).status;
  const mcp = async (apiKey: string): Promise<number> => {
    const response = await fetch(`${base}/mcp?agent=kc-agent`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: `Bearer ${apiKey}` },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }),
    });
    await response.body?.cancel();
    return response.status;
  };

  it("authenticate through the server's key cache", async () => {
    const { apiKey } = await issueApiKey(db.pool, accountId);
    const lookup = vi.spyOn(server.keys!, "lookup");
    try {
      expect(await rest(apiKey)).toBe(200);
      expect(lookup).toHaveBeenCalledTimes(1);
      expect(await mcp(apiKey)).not.toBe(401);
      // /mcp checks the key, then its tool calls reach the routes with it in process.
      expect(lookup.mock.calls.length).toBeGreaterThanOrEqual(2);
    } finally {
      lookup.mockRestore();
    }
  });

  it("a key revoked through the key store is refused on the next request after its notification", async () => {
    const { apiKey } = await issueApiKey(db.pool, accountId);
    expect(await rest(apiKey)).toBe(200);
    expect(await mcp(apiKey)).not.toBe(401);
    const pushed = new Promise<string>((done) => {
      server.keys!.onChange = done;
    });
    await revokeApiKeyById(db.pool, accountId, await keyId(apiKey));
    await pushed;
    expect(await rest(apiKey)).toBe(401);
    expect(await mcp(apiKey)).toBe(401);
  });

  it("a key revoked by hand in SQL is refused within 1 s", async () => {
    const { apiKey } = await issueApiKey(db.pool, accountId);
    expect(await rest(apiKey)).toBe(200);
    expect(await mcp(apiKey)).not.toBe(401);
    await db.pool.query("UPDATE api_keys SET revoked_at = now() WHERE key_sha256 = $1", [hashApiKey(apiKey)]);
    await delay(REVOCATION_BOUND_MS);
    expect(await rest(apiKey)).toBe(401);
    expect(await mcp(apiKey)).toBe(401);
  });
});

/** A POST on a connection of its own, so the cluster hands each to a worker in turn. */
function postOnNewConnection(port: number, apiKey: string): Promise<number> {
  return new Promise((done, fail) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        path: "/graphql",
        method: "POST",
        agent: false,
        headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}`, connection: "close" },
      },
      (response) => {
        response.resume();
        response.on("end", () => done(response.statusCode ?? 0));
      },
    );
    req.on("error", fail);
    req.end(JSON.stringify({ query: "{ __typename }" }));
  });
}

describe("QUERY_WORKERS=2: two processes on one port", () => {
  let child: ChildProcess | undefined;
  let port: number;
  let output = "";

  beforeAll(async () => {
    port = await freePort();
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      DATABASE_URL: db.url,
      PORT: String(port),
      HOST: "127.0.0.1",
      QUERY_WORKERS: "2",
      LOG_LEVEL: "warn",
    };
    for (const name of ["DATABASE_READ_URL", "SOLANA_RPC_URL", "SETTLEMENT_MINT", "SOLANA_NETWORK"]) delete env[name];
    child = spawn(process.execPath, ["--import", "tsx", "api/query/main.ts"], { cwd: ROOT, env, stdio: "pipe" });
    const collect = (chunk: Buffer): void => {
      output = (output + chunk.toString("utf8")).slice(-8_000);
    };
    child.stdout!.on("data", collect);
    child.stderr!.on("data", collect);
    await pollUntil(
      async () => {
        if (child?.exitCode !== null) throw new Error(`the query service exited: ${output}`);
        return fetch(`http://127.0.0.1:${port}/graphql`, { method: "POST" }).then(
          (r) => r.status,
          () => null,
        );
      },
      { timeoutMs: START_TIMEOUT_MS - 5_000, intervalMs: 200, what: () => `the query service on ${port}: ${output}` },
    );
  }, START_TIMEOUT_MS);

  afterAll(async () => {
    if (child === undefined || child.exitCode !== null) return;
    const exited = new Promise((done) => child!.once("exit", done));
    child.kill("SIGTERM");
    await exited;
  });

  it("both workers listen for revocations, and neither serves a revoked key 1 s later", async () => {
    // Each worker holds its own LISTEN connection (and its own cache); earlier tests' listeners
    // may take a moment to leave pg_stat_activity.
    const listeners = async (): Promise<number> =>
      (
        await db.pool.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN api_key_changes'",
        )
      ).rows[0]!.n;
    await pollUntil(async () => (await listeners()) === 2, {
      timeoutMs: 10_000,
      intervalMs: 100,
      what: "one LISTEN connection per worker",
    });
    const { apiKey } = await issueApiKey(db.pool, accountId);
    const before = await Promise.all(Array.from({ length: 8 }, () => postOnNewConnection(port, apiKey)));
    expect(before).toEqual(Array(8).fill(200));
    await revokeApiKeyById(db.pool, accountId, await keyId(apiKey));
    await delay(REVOCATION_BOUND_MS);
    const after = await Promise.all(Array.from({ length: 8 }, () => postOnNewConnection(port, apiKey)));
    expect(after).toEqual(Array(8).fill(401));
  });
});
