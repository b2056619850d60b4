/**
 * REST /v1 gateway routes against a real Postgres, called in process through the same fetch
 * handler the yoga plugin serves: policies, agents, alerts, webhooks, API keys, problem JSON,
 * exact amounts, and the Idempotency-Key rules (replay, reuse with another body, concurrent
 * duplicates, nothing stored on bad input).
 */
import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readFile } from "node:fs/promises";
import { createSchema, createYoga } from "graphql-yoga";
import {
  createGatewayHandler,
  GATEWAY_ROUTES,
  IDEMPOTENCY_RETENTION_MS,
  pruneIdempotencyKeys,
  useGatewayRoutes,
} from "../../api/gateway/http/index.js";
import { QUERY_ROUTES } from "../../api/query/rest/index.js";
import { createAccount, issueApiKey, registerAgent } from "../../api/shared/keys.js";
import { generateWalletEncryptionKey, keystoreFromEnv } from "../../api/gateway/wallets/index.js";
import { SecretBox } from "../../api/gateway/webhooks/index.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { type RestAnswer, type RestOptions, restCall } from "../support/rest.js";

let db: FreshDatabase;
let handle: (request: Request) => Promise<Response | null>;
let accountA: string;
let keyA: string;
let keyB: string;
let serial = 0;
const NOW = new Date("2026-03-01T12:00:00.000Z");

beforeAll(async () => {
  db = await createFreshDatabase();
  handle = createGatewayHandler({
    pool: db.pool,
    now: () => NOW,
    keystore: keystoreFromEnv({ WALLET_ENCRYPTION_KEY: generateWalletEncryptionKey() }),
    secretBox: new SecretBox(randomBytes(32)),
  });
  accountA = await createAccount(db.pool, "A");
  const accountB = await createAccount(db.pool, "B");
  keyA = (await issueApiKey(db.pool, accountA)).apiKey;
  keyB = (await issueApiKey(db.pool, accountB)).apiKey;
  await registerAgent(db.pool, accountA, { agentId: "agent-a", walletAddress: "WalletA111111111111111111111111111111111111" });
  await registerAgent(db.pool, accountB, { agentId: "agent-b", walletAddress: "WalletB111111111111111111111111111111111111" });
});

afterAll(async () => {
  await db?.drop();
});

/** A REST call into the handler, with account A's key unless `key` says otherwise (null: none). */
function call(method: string, path: string, options: RestOptions = {}): Promise<RestAnswer> {
  return restCall(handle, method, path, { ...options, key: options.key === undefined ? keyA : options.key });
}

/**
 * A new agent of account A: a test that sets a policy or lists alerts starts from nothing, whatever
 * the other tests did to agent-a.
 */
async function freshAgent(prefix: string): Promise<string> {
  const agentId = `${prefix}-${++serial}`;
  await registerAgent(db.pool, accountA, { agentId, walletAddress: `wallet-${agentId}` });
  return agentId;
}

/** A new account and its key, for a test that lists what an account has. */
async function freshAccount(): Promise<{ accountId: string; key: string }> {
  const accountId = await createAccount(db.pool, `fresh-${++serial}`);
  return { accountId, key: (await issueApiKey(db.pool, accountId)).apiKey };
}

const FULL_POLICY = '{"dailyBudget":{"usdc":25.5},"perCallLimit":{"usdc":0.000001},"rateLimit":{"calls":3,"window":"1m"}}';

async function count(table: string): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`);
  return rows[0]!.n;
}

describe("policies", () => {
  it("PUT sets the given fields and answers the read view with usedToday and rate usage", async () => {
    const agentId = await freshAgent("policy");
    const put = await call("PUT", `/v1/policies/${agentId}`, { raw: FULL_POLICY });
    expect(put.status).toBe(200);
    expect(put.text).toContain('"dailyBudget":{"usdc":25.5}');
    expect(put.text).toContain('"perCallLimit":{"usdc":0.000001}');
    expect(put.body).toMatchObject({
      agentId,
      allowedDomains: null,
      blockedDomains: [],
      rateLimit: { calls: 3, window: "1m" },
      protocolPreference: "auto",
      usedToday: { usdc: 0 },
      rateUsage: { calls: 0, limit: 3, window: "1m" },
    });
    const get = await call("GET", `/v1/policies/${agentId}`);
    expect(get.status).toBe(200);
    expect(get.body.dailyBudget).toEqual({ usdc: 25.5 });
  });

  it("omitted fields keep their values and null removes a limit", async () => {
    const agentId = await freshAgent("policy");
    expect((await call("PUT", `/v1/policies/${agentId}`, { raw: FULL_POLICY })).status).toBe(200);
    const put = await call("PUT", `/v1/policies/${agentId}`, { body: { perCallLimit: null, allowedDomains: ["example.com"] } });
    expect(put.status).toBe(200);
    expect(put.body.dailyBudget).toEqual({ usdc: 25.5 });
    expect(put.body.perCallLimit).toBeNull();
    expect(put.body.allowedDomains).toEqual(["example.com"]);
    expect(put.body.rateLimit).toEqual({ calls: 3, window: "1m" });
  });

  it("amounts are read exactly: more than 6 decimals, negatives, strings and exponents are 400 and change nothing", async () => {
    const agentId = await freshAgent("policy");
    expect((await call("PUT", `/v1/policies/${agentId}`, { raw: FULL_POLICY })).status).toBe(200);
    for (const raw of [
      '{"dailyBudget":{"usdc":1.0000001}}',
      '{"dailyBudget":{"usdc":-1}}',
      '{"dailyBudget":{"usdc":"5"}}',
      '{"dailyBudget":{"usdc":1e2}}',
      '{"dailyBudget":{"usdc":0}}',
      '{"dailyBudget":5}',
      '{"usedToday":{"usdc":1}}',
      '{"rateLimit":{"calls":3,"window":"2m"}}',
      '{"allowedDomains":["https://x.com/path"]}',
      '{"dailyBudget":{"usdc":1},"dailyBudget":{"usdc":2}}',
      '{"dailyBudget":',
    ]) {
      const answer = await call("PUT", `/v1/policies/${agentId}`, { raw });
      expect(answer.status, raw).toBe(400);
      expect(answer.headers.get("content-type")).toBe("application/problem+json");
      expect(["BAD_USER_INPUT", "INVALID_JSON"]).toContain(answer.body.code);
      expect(answer.body.status).toBe(400);
    }
    const get = await call("GET", `/v1/policies/${agentId}`);
    expect(get.body.dailyBudget).toEqual({ usdc: 25.5 });
  });

  it("an amount beyond a float's precision is kept to the last unit", async () => {
    const agentId = await freshAgent("policy");
    const put = await call("PUT", `/v1/policies/${agentId}`, { raw: '{"dailyBudget":{"usdc":12345678901.000001}}' });
    expect(put.status).toBe(200);
    expect(put.text).toContain('"dailyBudget":{"usdc":12345678901.000001}');
    const { rows } = await db.pool.query("SELECT daily_budget_units::text AS u FROM policies WHERE agent_id = $1", [agentId]);
    expect(rows[0].u).toBe("12345678901000001");
  });

  it("DELETE clears every limit (policies.clear)", async () => {
    const agentId = await freshAgent("policy");
    expect((await call("PUT", `/v1/policies/${agentId}`, { raw: FULL_POLICY })).status).toBe(200);
    expect((await call("DELETE", `/v1/policies/${agentId}`)).status).toBe(204);
    const get = await call("GET", `/v1/policies/${agentId}`);
    expect(get.body).toMatchObject({
      dailyBudget: null,
      perCallLimit: null,
      allowedDomains: null,
      rateLimit: null,
      usedToday: { usdc: 0 },
    });
  });

  it("another account's agent is 404, a missing key 401, a wrong content type 415, a wrong method 405", async () => {
    expect((await call("GET", "/v1/policies/agent-b")).body.code).toBe("NOT_FOUND");
    expect((await call("PUT", "/v1/policies/agent-b", { body: {} })).status).toBe(404);
    const noKey = await call("GET", "/v1/policies/agent-a", { key: null });
    expect(noKey.status).toBe(401);
    expect(noKey.body.code).toBe("AUTHENTICATION_ERROR");
    expect((await call("PUT", "/v1/policies/agent-a", { raw: "dailyBudget=1", contentType: "text/plain" })).status).toBe(415);
    const post = await call("POST", "/v1/policies/agent-a", { body: {} });
    expect(post.status).toBe(405);
    expect(post.headers.get("allow")).toContain("PUT");
  });
});

describe("endpoint budgets and policy versions", () => {
  it("PUT stores endpointBudgets normalized, with exact amounts; the read view shows them and the version", async () => {
    const agentId = await freshAgent("endpoints");
    const put = await call("PUT", `/v1/policies/${agentId}`, {
      raw:
        '{"dailyBudget":{"usdc":10},"endpointBudgets":[{"match":"API.Example.COM/v1/search/","dailyBudget":{"usdc":1.000001},' +
        '"rateLimit":{"calls":2,"window":"1m"}},{"match":"other.io","perCallLimit":{"usdc":0.5}}]}',
    });
    expect(put.status).toBe(200);
    expect(put.text).toContain('"dailyBudget":{"usdc":1.000001}');
    expect(put.body.version).toBe(1);
    expect(put.body.endpointBudgets).toEqual([
      { match: "api.example.com/v1/search", dailyBudget: { usdc: 1.000001 }, perCallLimit: null, rateLimit: { calls: 2, window: "1m" } },
      { match: "other.io", dailyBudget: null, perCallLimit: { usdc: 0.5 }, rateLimit: null },
    ]);
    const get = await call("GET", `/v1/policies/${agentId}`);
    expect(get.body.endpointBudgets).toEqual(put.body.endpointBudgets);
  });

  it("bad endpointBudgets are a typed 400 naming the field and change nothing (no version either)", async () => {
    const agentId = await freshAgent("endpoints");
    expect((await call("PUT", `/v1/policies/${agentId}`, { raw: '{"dailyBudget":{"usdc":10}}' })).status).toBe(200);
    const cases: Array<[unknown, string]> = [
      [[{ match: "https://api.example.com/v1", perCallLimit: { usdc: 1 } }], "endpointBudgets[0].match"],
      [[{ match: "*.example.com", perCallLimit: { usdc: 1 } }], "endpointBudgets[0].match"],
      [[{ match: "api.example.com/v1?q=1", perCallLimit: { usdc: 1 } }], "endpointBudgets[0].match"],
      [[{ match: "api.example.com/v1/../x", perCallLimit: { usdc: 1 } }], "endpointBudgets[0].match"],
      [[{ match: "co.uk", perCallLimit: { usdc: 1 } }], "endpointBudgets[0].match"],
      [
        [
          { match: "api.example.com/v1", perCallLimit: { usdc: 1 } },
          { match: "API.example.com/v1/", dailyBudget: { usdc: 1 } },
        ],
        "endpointBudgets[1].match",
      ],
      [[{ match: "api.example.com", rateLimit: { calls: 2, window: "2m" } }], "endpointBudgets[0].rateLimit.window"],
      [[{ match: "api.example.com", rateLimit: { calls: 0, window: "1m" } }], "endpointBudgets[0].rateLimit.calls"],
      [[{ match: "api.example.com", perCallLimit: { usdc: -1 } }], "endpointBudgets[0].perCallLimit.usdc"],
      [[{ match: "api.example.com" }], "endpointBudgets[0]"],
      [[{ match: "api.example.com", perCallLimit: { usdc: 1 }, extra: 1 }], "endpointBudgets[0].extra"],
      ["api.example.com", "endpointBudgets"],
    ];
    for (const [endpointBudgets, field] of cases) {
      const answer = await call("PUT", `/v1/policies/${agentId}`, { body: { endpointBudgets } });
      expect(answer.status, JSON.stringify(endpointBudgets)).toBe(400);
      expect(answer.body.code, JSON.stringify(endpointBudgets)).toBe("BAD_USER_INPUT");
      expect(answer.body.field, JSON.stringify(endpointBudgets)).toBe(field);
    }
    const get = await call("GET", `/v1/policies/${agentId}`);
    expect(get.body).toMatchObject({ dailyBudget: { usdc: 10 }, endpointBudgets: [], version: 1 });
    expect((await call("GET", `/v1/policies/${agentId}/history`)).body.versions).toHaveLength(1);
  });

  it("every change is a version: who, when, the whole policy and its hash, newest first, paged; clear is one too", async () => {
    const agentId = await freshAgent("versions");
    expect((await call("GET", `/v1/policies/${agentId}`)).body.version).toBe(0);
    expect((await call("PUT", `/v1/policies/${agentId}`, { raw: '{"dailyBudget":{"usdc":10}}' })).status).toBe(200);
    expect((await call("PUT", `/v1/policies/${agentId}`, { body: { blockedDomains: ["evil.example"] } })).status).toBe(200);
    expect((await call("DELETE", `/v1/policies/${agentId}`)).status).toBe(204);
    expect((await call("PUT", `/v1/policies/${agentId}`, { raw: '{"dailyBudget":{"usdc":10}}' })).status).toBe(200);
    const history = await call("GET", `/v1/policies/${agentId}/history`);
    expect(history.status).toBe(200);
    const versions = history.body.versions as Array<Record<string, any>>;
    expect(versions.map((v) => v.version)).toEqual([4, 3, 2, 1]);
    const { rows } = await db.pool.query<{ id: string }>("SELECT id::text FROM api_keys WHERE account_id = $1 ORDER BY id LIMIT 1", [
      accountA,
    ]);
    for (const v of versions) {
      expect(v).toMatchObject({ agentId, createdBy: `key:${rows[0]!.id}`, createdAt: NOW.toISOString() });
      expect(v.hash).toMatch(/^[0-9a-f]{64}$/);
    }
    expect(versions[3]!.policy).toMatchObject({ dailyBudgetUnits: "10000000", blockedDomains: [], endpointBudgets: [] });
    expect(versions[2]!.policy).toMatchObject({ dailyBudgetUnits: "10000000", blockedDomains: ["evil.example"] });
    // The clearing is the empty policy; setting the same policy again gives the same hash.
    expect(versions[1]!.policy).toMatchObject({ dailyBudgetUnits: null, blockedDomains: [] });
    expect(versions[0]!.hash).toBe(versions[3]!.hash);
    expect(versions[0]!.hash).not.toBe(versions[2]!.hash);
    const page = await call("GET", `/v1/policies/${agentId}/history?limit=2`);
    expect(page.body.versions.map((v: { version: number }) => v.version)).toEqual([4, 3]);
    expect(page.body.nextBefore).toBe(3);
    const next = await call("GET", `/v1/policies/${agentId}/history?limit=2&before=3`);
    expect(next.body.versions.map((v: { version: number }) => v.version)).toEqual([2, 1]);
    for (const bad of ["limit=0", "limit=101", "limit=x", "before=0", "before=-1"]) {
      const answer = await call("GET", `/v1/policies/${agentId}/history?${bad}`);
      expect(answer.status, bad).toBe(400);
      expect(answer.body.code, bad).toBe("BAD_USER_INPUT");
    }
    expect((await call("GET", "/v1/policies/agent-b/history")).status).toBe(404);
  });
});

describe("agents", () => {
  it("registers an agent with a wallet and lists the account's agents only", async () => {
    // An account of its own: other tests register agents in account A.
    const { accountId, key } = await freshAccount();
    await registerAgent(db.pool, accountId, { agentId: "agent-first", walletAddress: `wallet-first-${accountId}` });
    const created = await call("POST", "/v1/agents", { body: { agentId: "agent-new", name: "New" }, idem: randomUUID(), key });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ agentId: "agent-new", name: "New", balance: { usdc: 0 } });
    expect(created.body.address).toMatch(/^[1-9A-HJ-NP-Za-km-z]{32,44}$/);
    const list = await call("GET", "/v1/agents", { key });
    expect(list.body.agents.map((a: { agentId: string }) => a.agentId)).toEqual(["agent-first", "agent-new"]);
    expect((await call("GET", "/v1/agents/agent-new", { key })).body.address).toBe(created.body.address);
  });

  it("a retried registration returns the first answer; a second registration of the id is 409", async () => {
    const idem = randomUUID();
    const first = await call("POST", "/v1/agents", { body: { agentId: "agent-retry" }, idem });
    const again = await call("POST", "/v1/agents", { body: { agentId: "agent-retry" }, idem });
    expect(again.status).toBe(201);
    expect(again.text).toBe(first.text);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    const other = await call("POST", "/v1/agents", { body: { agentId: "agent-retry" }, idem: randomUUID() });
    expect(other.status).toBe(409);
    expect(other.body.code).toBe("AGENT_EXISTS");
  });

  it("bad registrations are 400 and store nothing", async () => {
    const before = [await count("agents"), await count("idempotency_keys")];
    for (const body of [{}, { agentId: "" }, { agentId: "has space" }, { agentId: "ok-id", extra: 1 }, { agentId: 42 }]) {
      const answer = await call("POST", "/v1/agents", { body, idem: randomUUID() });
      expect(answer.status, JSON.stringify(body)).toBe(400);
    }
    expect([await count("agents"), await count("idempotency_keys")]).toEqual(before);
  });
});

describe("alerts, webhooks and API keys", () => {
  it("creates, lists, reads and deletes an alert; the threshold is written exactly", async () => {
    // An agent of its own: other tests create alerts for agent-a.
    const agentId = await freshAgent("alerted");
    const created = await call("POST", "/v1/alerts", {
      raw: `{"agentId":"${agentId}","type":"spend_rate","threshold":12.345678,"window":"1h","notify":"webhook:https://hooks.example.com/a"}`,
    });
    expect(created.status).toBe(201);
    expect(created.text).toContain('"threshold":12.345678');
    expect(created.body.signingSecret).toMatch(/^whsec_/);
    const id = created.body.id;
    expect((await call("GET", `/v1/alerts/${id}`)).body).toMatchObject({ id, type: "spend_rate", window: "1h" });
    expect((await call("GET", `/v1/alerts?agentId=${agentId}`)).body.alerts).toHaveLength(1);
    expect((await call("GET", `/v1/alerts/${id}`, { key: keyB })).status).toBe(404);
    expect((await call("DELETE", `/v1/alerts/${id}`)).status).toBe(204);
    expect((await call("DELETE", `/v1/alerts/${id}`)).status).toBe(404);
  });

  it("bad alerts are 400 (unknown type, bad window, bad target) and another account's agent 404", async () => {
    const base = { agentId: "agent-a", type: "budget_pct", threshold: 80, notify: "email:ops@example.com" };
    expect((await call("POST", "/v1/alerts", { body: { ...base, type: "nope" } })).status).toBe(400);
    expect((await call("POST", "/v1/alerts", { body: { ...base, threshold: 101 } })).status).toBe(400);
    expect((await call("POST", "/v1/alerts", { body: { ...base, threshold: "80" } })).status).toBe(400);
    expect((await call("POST", "/v1/alerts", { body: { ...base, notify: "sms:123" } })).status).toBe(400);
    expect((await call("POST", "/v1/alerts", { body: { ...base, agentId: "agent-b" } })).status).toBe(404);
    const ok = await call("POST", "/v1/alerts", { body: base });
    expect(ok.status).toBe(201);
    expect(ok.body).toMatchObject({ threshold: 80, signingSecret: null });
    // approval_requested takes neither a threshold nor a window: a typed 400.
    const approval = { agentId: "agent-a", type: "approval_requested", notify: "email:ops@example.com" };
    for (const extra of [{ threshold: 80 }, { window: "1h" }]) {
      const refused = await call("POST", "/v1/alerts", { body: { ...approval, ...extra } });
      expect(refused.status).toBe(400);
      expect(refused.body).toMatchObject({
        code: "BAD_USER_INPUT",
        reason: "invalid_alert",
        detail: expect.stringContaining("approval_requested"),
      });
    }
    const held = await call("POST", "/v1/alerts", { body: approval });
    expect(held.status).toBe(201);
    expect(held.body).toMatchObject({ type: "approval_requested", threshold: null, window: null });
  });

  it("an e-mail alert on a server without a mail transport is stored with a warning; with one, or for a webhook target, there is none", async () => {
    const agentId = await freshAgent("mailed");
    const email = { agentId, type: "policy_violation", notify: "email:ops@example.com" };
    const idem = randomUUID();
    const warned = await call("POST", "/v1/alerts", { body: email, idem });
    expect(warned.status).toBe(201);
    expect(warned.body.warnings).toEqual([{ code: "email_transport_not_configured", message: expect.stringContaining("SMTP_URL") }]);
    // A replay under the same key says it again; the alert is stored either way.
    expect((await call("POST", "/v1/alerts", { body: email, idem })).body.warnings).toEqual(warned.body.warnings);
    expect((await call("GET", `/v1/alerts/${warned.body.id}`)).status).toBe(200);

    const webhook = await call("POST", "/v1/alerts", { body: { ...email, notify: "webhook:https://hooks.example.com/m" } });
    expect(webhook.body.warnings).toEqual([]);

    const withMail = createGatewayHandler({
      pool: db.pool,
      now: () => NOW,
      secretBox: new SecretBox(randomBytes(32)),
      mailConfigured: true,
    });
    const configured = await restCall(withMail, "POST", "/v1/alerts", { key: keyA, body: email });
    expect(configured.status).toBe(201);
    expect(configured.body.warnings).toEqual([]);
  });

  it("webhook endpoints: create shows the secret once, rotate gives a new one, delete removes it", async () => {
    // An account of its own: other tests register endpoints in account A.
    const { key } = await freshAccount();
    const created = await call("POST", "/v1/webhooks", {
      body: { url: "https://hooks.example.com/w", eventTypes: ["policy.violation"] },
      key,
    });
    expect(created.status).toBe(201);
    expect(created.body.secret).toMatch(/^whsec_/);
    const list = await call("GET", "/v1/webhooks", { key });
    expect(list.body.webhooks).toEqual([expect.not.objectContaining({ secret: expect.anything() })]);
    const rotated = await call("POST", `/v1/webhooks/${created.body.id}/rotate-secret`, { key });
    expect(rotated.body.secret).toMatch(/^whsec_/);
    expect(rotated.body.secret).not.toBe(created.body.secret);
    expect((await call("POST", "/v1/webhooks", { body: { url: "ftp://x" }, key })).status).toBe(400);
    expect((await call("POST", "/v1/webhooks", { body: { url: "https://x.example.com", eventTypes: ["nope"] }, key })).status).toBe(400);
    expect((await call("DELETE", `/v1/webhooks/${created.body.id}`, { key })).status).toBe(204);
    expect((await call("GET", "/v1/webhooks", { key })).body.webhooks).toEqual([]);
  });

  it("API keys: a new key works, is listed by prefix only, and stops working once revoked", async () => {
    const created = await call("POST", "/v1/api-keys");
    expect(created.status).toBe(201);
    const newKey: string = created.body.apiKey;
    expect((await call("GET", "/v1/policies/agent-a", { key: newKey })).status).toBe(200);
    const list = await call("GET", "/v1/api-keys", { key: newKey });
    expect(list.text).not.toContain(newKey);
    expect(list.body.apiKeys.map((k: { prefix: string }) => k.prefix)).toContain(newKey.slice(0, 12));
    expect((await call("DELETE", `/v1/api-keys/${created.body.id}`)).status).toBe(204);
    expect((await call("GET", "/v1/policies/agent-a", { key: newKey })).status).toBe(401);
    expect((await call("DELETE", `/v1/api-keys/${created.body.id}`, { key: keyB })).status).toBe(404);
  });
});

describe("Idempotency-Key", () => {
  it("the same key and body returns the first result; nothing is created twice", async () => {
    const idem = randomUUID();
    const body = { agentId: "agent-a", type: "policy_violation", notify: "webhook:https://hooks.example.com/idem" };
    const first = await call("POST", "/v1/alerts", { body, idem });
    const second = await call("POST", "/v1/alerts", {
      raw: '{ "notify":"webhook:https://hooks.example.com/idem", "type":"policy_violation", "agentId":"agent-a" }',
      idem,
    });
    expect(first.status).toBe(201);
    expect(second.status).toBe(201);
    // The same alert, but its signing secret is shown once.
    expect(first.body.signingSecret).toMatch(/^whsec_/);
    expect(second.body).toEqual({ ...first.body, signingSecret: null });
    expect(second.headers.get("idempotent-replayed")).toBe("true");
    const { rows } = await db.pool.query("SELECT count(*)::int AS n FROM alerts WHERE notify = 'webhook:https://hooks.example.com/idem'");
    expect(rows[0].n).toBe(1);
  });

  it("a new API key is shown once: never stored, and a replay answers its record without it", async () => {
    const idem = randomUUID();
    const created = await call("POST", "/v1/api-keys", { idem });
    expect(created.body.apiKey).toMatch(/^apg_/);
    const { rows } = await db.pool.query("SELECT response_body, response_sealed FROM idempotency_keys WHERE key = $1", [idem]);
    expect(rows[0].response_body ?? "").not.toContain(created.body.apiKey);
    expect(rows[0].response_sealed?.toString("latin1") ?? "").not.toContain(created.body.apiKey);
    const replay = await call("POST", "/v1/api-keys", { idem });
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body).toEqual({ ...created.body, apiKey: null });
  });

  it("the same key with a different body, or on another route, is 422 IDEMPOTENCY_KEY_REUSED", async () => {
    const idem = randomUUID();
    const body = { agentId: "agent-a", type: "budget_pct", threshold: 50, notify: "email:a@example.com" };
    expect((await call("POST", "/v1/alerts", { body, idem })).status).toBe(201);
    const changed = await call("POST", "/v1/alerts", { body: { ...body, threshold: 60 }, idem });
    expect(changed.status).toBe(422);
    expect(changed.body.code).toBe("IDEMPOTENCY_KEY_REUSED");
    const elsewhere = await call("POST", "/v1/webhooks", { body: { url: "https://hooks.example.com/z" }, idem });
    expect(elsewhere.status).toBe(422);
    // Keys are per account: account B may use the same key for its own request.
    expect((await call("POST", "/v1/api-keys", { idem, key: keyB })).status).toBe(201);
  });

  it("a request that fails validation stores no key: a corrected retry with the key succeeds", async () => {
    const idem = randomUUID();
    const bad = await call("POST", "/v1/webhooks", { body: { url: "not a url" }, idem });
    expect(bad.status).toBe(400);
    expect((await db.pool.query("SELECT 1 FROM idempotency_keys WHERE key = $1", [idem])).rowCount).toBe(0);
    expect((await call("POST", "/v1/webhooks", { body: { url: "https://hooks.example.com/fixed" }, idem })).status).toBe(201);
  });

  it("a malformed key is 400", async () => {
    const answer = await call("POST", "/v1/api-keys", { idem: "has space" });
    expect(answer.status).toBe(400);
    expect(answer.body.code).toBe("INVALID_IDEMPOTENCY_KEY");
    expect((await call("POST", "/v1/api-keys", { idem: "x".repeat(256) })).status).toBe(400);
  });

  it("50 concurrent requests with one key create one alert and all answer the same alert, its secret once", async () => {
    const idem = randomUUID();
    const body = { agentId: "agent-a", type: "policy_violation", notify: "webhook:https://hooks.example.com/concurrent" };
    const answers = await Promise.all(Array.from({ length: 50 }, () => call("POST", "/v1/alerts", { body, idem })));
    expect(answers.map((a) => a.status)).toEqual(Array(50).fill(201));
    const withSecret = answers.filter((a) => a.body.signingSecret !== null);
    expect(withSecret).toHaveLength(1);
    expect(new Set(answers.map((a) => JSON.stringify({ ...a.body, signingSecret: null }))).size).toBe(1);
    const { rows } = await db.pool.query(
      "SELECT count(*)::int AS n FROM alerts WHERE notify = 'webhook:https://hooks.example.com/concurrent'",
    );
    expect(rows[0].n).toBe(1);
  });

  it("50 concurrent registrations with one key create one agent; the others replay or are told to retry", async () => {
    const idem = randomUUID();
    const answers = await Promise.all(
      Array.from({ length: 50 }, () => call("POST", "/v1/agents", { body: { agentId: "agent-race" }, idem })),
    );
    const statuses = answers.map((a) => a.status);
    expect(statuses.every((s) => s === 201 || s === 409)).toBe(true);
    expect(answers.filter((a) => a.status === 409).every((a) => a.body.code === "IDEMPOTENCY_IN_PROGRESS")).toBe(true);
    expect(new Set(answers.filter((a) => a.status === 201).map((a) => a.text)).size).toBe(1);
    expect((await db.pool.query("SELECT count(*)::int AS n FROM agents WHERE public_id = 'agent-race'")).rows[0].n).toBe(1);
    const after = await call("POST", "/v1/agents", { body: { agentId: "agent-race" }, idem });
    expect(after.status).toBe(201);
  });

  it("more concurrent keyed registrations than the pool has connections all complete", async () => {
    // Each holds its key's lock while the wallet module needs pool connections of its own.
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, i) => call("POST", "/v1/agents", { body: { agentId: `agent-pool-${i}` }, idem: randomUUID() })),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(8).fill(201));
  });

  it("a registration whose key a crash left in_progress answers with the agent it created", async () => {
    const idem = randomUUID();
    const first = await call("POST", "/v1/agents", { body: { agentId: "agent-crash" }, idem });
    await db.pool.query("UPDATE idempotency_keys SET status = 'in_progress', response_status = NULL, response_body = NULL WHERE key = $1", [
      idem,
    ]);
    const retried = await call("POST", "/v1/agents", { body: { agentId: "agent-crash" }, idem });
    expect(retried.status).toBe(201);
    expect(retried.body.address).toBe(first.body.address);
    const { rows } = await db.pool.query("SELECT status FROM idempotency_keys WHERE key = $1", [idem]);
    expect(rows[0].status).toBe("completed");
  });

  it("pruning deletes expired completed keys only", async () => {
    const idem = randomUUID();
    await call("POST", "/v1/api-keys", { idem });
    const later = new Date(NOW.getTime() + IDEMPOTENCY_RETENTION_MS + 1);
    await db.pool.query(
      "INSERT INTO idempotency_keys (account_id, key, fingerprint, method, path, status, expires_at) SELECT account_id, 'stuck', fingerprint, method, path, 'in_progress', $2 FROM idempotency_keys WHERE key = $1",
      [idem, NOW],
    );
    expect(await pruneIdempotencyKeys(db.pool, later)).toBeGreaterThan(0);
    const left = await db.pool.query<{ key: string }>("SELECT key FROM idempotency_keys");
    expect(left.rows.map((r) => r.key)).toEqual(["stuck"]);
  });

  it("an expired key is a new request", async () => {
    const idem = randomUUID();
    const first = await call("POST", "/v1/api-keys", { idem });
    await db.pool.query("UPDATE idempotency_keys SET expires_at = $2 WHERE key = $1", [idem, new Date(NOW.getTime() - 1)]);
    const second = await call("POST", "/v1/api-keys", { idem });
    expect(second.status).toBe(201);
    expect(second.body.apiKey).not.toBe(first.body.apiKey);
  });

  it("an expired key reused for another request is that request's from then on, and concurrent reuses run it once", async () => {
    const idem = randomUUID();
    await call("POST", "/v1/api-keys", { idem });
    const expire = () => db.pool.query("UPDATE idempotency_keys SET expires_at = $2 WHERE key = $1", [idem, new Date(NOW.getTime() - 1)]);
    await expire();
    // Another method and path under the expired key: a new request, not IDEMPOTENCY_KEY_REUSED.
    const agent = await call("POST", "/v1/agents", { body: { agentId: "agent-expired-key" }, idem });
    expect(agent.status).toBe(201);
    const replay = await call("POST", "/v1/agents", { body: { agentId: "agent-expired-key" }, idem });
    expect(replay.status).toBe(201);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body.address).toBe(agent.body.address);
    const { rows } = await db.pool.query("SELECT status, method, path FROM idempotency_keys WHERE key = $1", [idem]);
    expect(rows).toEqual([{ status: "completed", method: "POST", path: "/v1/agents" }]);
    // Expired again: of eight concurrent database effects under it, one runs; the others replay
    // its answer, or are told it is in progress.
    await expire();
    const before = (await db.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM api_keys")).rows[0]!.n;
    const burst = await Promise.all(Array.from({ length: 8 }, () => call("POST", "/v1/api-keys", { idem })));
    const created = burst.filter((a) => a.status === 201 && a.headers.get("idempotent-replayed") !== "true");
    expect(created).toHaveLength(1);
    for (const a of burst) {
      if (a.status === 201) expect(a.body.id).toBe(created[0]!.body.id);
      else expect([a.status, a.body.code]).toEqual([409, "IDEMPOTENCY_IN_PROGRESS"]);
    }
    expect((await db.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM api_keys")).rows[0]!.n).toBe(before + 1);
  });

  it("keys are kept at least 24 hours", async () => {
    const idem = randomUUID();
    await call("POST", "/v1/api-keys", { idem });
    const { rows } = await db.pool.query("SELECT expires_at - created_at AS kept FROM idempotency_keys WHERE key = $1", [idem]);
    expect(rows[0].kept.hours ?? rows[0].kept.days * 24).toBeGreaterThanOrEqual(24);
  });
});

describe("Idempotency-Key under a burst", () => {
  it("150 concurrent keyed registrations (external effects) all answer 201, beyond the server's connection limit", async () => {
    // Each keyed external effect holds a lock connection while it runs. Unbounded, 150 of them
    // at once exceeded PostgreSQL's max_connections (100 here) and failed mid-request with 500.
    const { rows } = await db.pool.query<{ max: number }>("SELECT current_setting('max_connections')::int AS max");
    const burst = rows[0]!.max + 50;
    const answers = await Promise.all(
      Array.from({ length: burst }, (_, i) => call("POST", "/v1/agents", { body: { agentId: `burst-${i}` }, idem: `burst-key-${i}` })),
    );
    expect(answers.filter((a) => a.status !== 201).map((a) => `${a.status} ${a.text}`)).toEqual([]);
    const { rows: agents } = await db.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM agents WHERE public_id LIKE 'burst-%'");
    expect(agents[0]!.n).toBe(burst);
    // Every key completed with its answer: a retry replays it instead of registering again.
    const replay = await call("POST", "/v1/agents", { body: { agentId: "burst-7" }, idem: "burst-key-7" });
    expect(replay.status).toBe(201);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
  });
});

describe("docs/openapi.yaml", () => {
  it("documents every route with its method, and the metrics route", async () => {
    const doc = await readFile(new URL("../../docs/openapi.yaml", import.meta.url), "utf8");
    expect(doc.length).toBeGreaterThan(1000);
    const blocks = new Map<string, string>();
    const parts = doc.split(/\n {2}(?=\/v1\/)/);
    for (const part of parts.slice(1)) blocks.set(part.slice(0, part.indexOf(":")), part);
    for (const route of [...GATEWAY_ROUTES, ...QUERY_ROUTES]) {
      const path = route.path.replace(/:([A-Za-z]+)/g, "{$1}");
      expect(blocks.has(path), path).toBe(true);
      expect(blocks.get(path)!, `${route.method} ${path}`).toMatch(new RegExp(`\\n    ${route.method.toLowerCase()}:`));
    }
    expect(blocks.has("/v1/agents/{agentId}/metrics")).toBe(true);
  });
});

describe("as a yoga plugin", () => {
  it("answers /v1 routes before GraphQL and leaves other paths to yoga", async () => {
    const yoga = createYoga({
      schema: createSchema({ typeDefs: "type Query { ok: Boolean }", resolvers: { Query: { ok: () => true } } }),
      plugins: [useGatewayRoutes({ pool: db.pool, now: () => NOW })],
      graphiql: false,
      landingPage: false,
      logging: false,
    });
    const policy = await yoga.fetch("http://gateway.test/v1/policies/agent-a", { headers: { authorization: `Bearer ${keyA}` } });
    expect(policy.status).toBe(200);
    expect(((await policy.json()) as { agentId: string }).agentId).toBe("agent-a");
    const graphql = await yoga.fetch("http://gateway.test/graphql", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ query: "{ ok }" }),
    });
    expect(await graphql.json()).toEqual({ data: { ok: true } });
    expect((await yoga.fetch("http://gateway.test/v1/unknown")).status).toBe(404);
  });
});

describe("unknown paths", () => {
  it("are left to the next handler", async () => {
    expect(await handle(new Request("http://gateway.test/v1/nope"))).toBeNull();
    expect(await handle(new Request("http://gateway.test/graphql"))).toBeNull();
  });
});
