/**
 * The backtest end to end on a real Postgres: payments authorized and refused through the
 * gateway's REST route (the real decision, recorded as reservations and rejections), then a
 * candidate policy replayed over them through `POST /v1/policies/{agentId}/backtest` and GraphQL
 * `simulatePolicy` on one server, and through the TypeScript client's `policies.backtest` and
 * `cli policies backtest`. All answer the same; nothing in the tables and no usage counter
 * changes; bad input is a typed 400 naming the field, another account's agent a 404.
 */
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { Keypair } from "@solana/web3.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useGatewayRoutes } from "../../api/gateway/http/index.js";
import { AgentWallets, createAgentWallet, generateWalletEncryptionKey, keystoreFromEnv } from "../../api/gateway/wallets/index.js";
import type { SettlementLedger } from "../../api/gateway/chain/index.js";
import { SecretBox } from "../../api/gateway/webhooks/index.js";
import { createApiServer, type ApiServer } from "../../api/query/server.js";
import { createAccount, issueApiKey } from "../../api/shared/keys.js";
import { getPolicy, putPolicy, readUsage } from "../../api/shared/policy/index.js";
import { EMPTY_POLICY } from "../../api/shared/policy/policy.js";
import { Client } from "../../sdk/src/client.js";
import { runCli } from "../../sdk/src/cli/main.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { type RestAnswer, restCall } from "../support/rest.js";

const NETWORK = "solana-localnet";
const TOKEN = Keypair.generate().publicKey.toBase58();
const PAY_TO = Keypair.generate().publicKey.toBase58();
const T0 = new Date("2026-03-01T09:00:00.000Z");
const NOW = new Date("2026-03-01T12:00:00.000Z");

let db: FreshDatabase;
let server: ApiServer;
let clock = T0;
let apiKey: string;
let otherKey: string;
let baseUrl: string;
const AGENT = "shopper";

beforeAll(async () => {
  db = await createFreshDatabase();
  const keystore = keystoreFromEnv({ WALLET_ENCRYPTION_KEY: generateWalletEncryptionKey() });
  const ledger = { network: NETWORK } as unknown as SettlementLedger;
  const wallets = new AgentWallets({ pool: db.pool, keystore, ledger, fundingSource: { fund: () => Promise.reject(new Error("unused")) } });
  const now = () => clock;
  server = createApiServer({
    pool: db.pool,
    now,
    liveFeed: false,
    plugins: [useGatewayRoutes({ pool: db.pool, wallets, keystore, secretBox: new SecretBox(randomBytes(32)), now })],
  });
  baseUrl = `http://127.0.0.1:${await server.listen(0)}`;
  const accountId = await createAccount(db.pool, "backtest");
  apiKey = (await issueApiKey(db.pool, accountId)).apiKey;
  const other = await createAccount(db.pool, "another account");
  otherKey = (await issueApiKey(db.pool, other)).apiKey;
  await createAgentWallet(db.pool, keystore, { accountId, agentId: AGENT });
  await createAgentWallet(db.pool, keystore, { accountId: other, agentId: "stranger" });
  await putPolicy(db.pool, AGENT, { perCallLimitUnits: 1_000_000n });

  // The history: two payments let through, one refused by the per-call limit, then (with an
  // approval rule set) one held for a person, minutes apart.
  const pay = async (minutes: number, endpoint: string, units: string) => {
    clock = new Date(T0.getTime() + minutes * 60_000);
    return call("POST", `/v1/agents/${AGENT}/payments/authorize`, {
      endpoint,
      x402: { scheme: "exact", network: NETWORK, token: TOKEN, amount: units, payTo: PAY_TO, resource: endpoint },
    });
  };
  expect((await pay(0, "https://api.example.com/v1/search", "250000")).status).toBe(200);
  expect((await pay(5, "https://other.example.org/v1/data", "500000")).status).toBe(200);
  expect((await pay(10, "https://api.example.com/v1/search", "2000000")).status).toBe(403);
  await putPolicy(db.pool, AGENT, {
    approval: { aboveUnits: 400_000n, domains: [], firstPaymentToDomain: false, timeoutMs: 900_000, onTimeout: "deny" },
  });
  expect((await pay(15, "https://api.example.com/v1/search", "450000")).status).toBe(202);
  clock = NOW;
}, 120_000);

afterAll(async () => {
  await server?.close();
  await db?.drop();
});

function call(method: string, path: string, body?: unknown, key = apiKey): Promise<RestAnswer> {
  return restCall((request) => Promise.resolve(server.yoga.fetch(request)), method, path, { key, body });
}

async function graphql(query: string, variables: Record<string, unknown>, key = apiKey): Promise<any> {
  const answer = await call("POST", "/graphql", { query, variables }, key);
  expect(answer.status).toBe(200);
  return answer.body;
}

const SIMULATE = `query($agentId: ID!, $policy: String!, $window: String!, $limit: Int) {
  simulatePolicy(agentId: $agentId, policy: $policy, window: $window, limit: $limit) {
    agentId window truncated
    totals {
      attempts changed
      passed { count amount amountUnits } refused { count amount amountUnits } needsApproval { count amount amountUnits }
      refusedByRule { rule count amount amountUnits } refusedByDomain { domain count amount amountUnits }
      needsApprovalByRule { rule count amount amountUnits }
    }
    payments { id at endpoint domain amount amountUnits protocol recorded outcome rule reason }
  }
}`;

/** Every row of the tables a payment writes, and the agent's usage: what a backtest must leave as it was. */
async function snapshot(): Promise<unknown> {
  const tables: Record<string, unknown> = {};
  for (const table of ["spend_reservations", "spend_periods", "payment_rejections", "approvals", "policies", "idempotency_keys"]) {
    tables[table] = (await db.pool.query(`SELECT * FROM ${table} ORDER BY 1, 2`)).rows;
  }
  const policy = (await getPolicy(db.pool, AGENT)) ?? EMPTY_POLICY;
  const probe = { ...policy, rateLimit: { calls: 10, window: "24h" as const } };
  return { tables, usage: await readUsage(db.pool, AGENT, probe, NOW) };
}

describe("policy backtest over recorded payments", () => {
  const candidate = { perCallLimit: { usdc: 0.3 }, blockedDomains: ["other.example.org"] };

  it("REST replays the window's attempts in order: per payment outcome, rule and text, and totals by rule and domain", async () => {
    const answer = await call("POST", `/v1/policies/${AGENT}/backtest`, { policy: candidate, window: "24h" });
    expect(answer.status).toBe(200);
    expect(answer.body.totals).toEqual({
      attempts: 4,
      passed: { count: 1, amount: "0.250000", amountUnits: "250000" },
      refused: { count: 3, amount: "2.950000", amountUnits: "2950000" },
      needsApproval: { count: 0, amount: "0.000000", amountUnits: "0" },
      changed: 2,
      refusedByRule: [
        { rule: "per_call_limit_exceeded", count: 2, amount: "2.450000", amountUnits: "2450000" },
        { rule: "domain_blocked", count: 1, amount: "0.500000", amountUnits: "500000" },
      ],
      refusedByDomain: [
        { domain: "api.example.com", count: 2, amount: "2.450000", amountUnits: "2450000" },
        { domain: "other.example.org", count: 1, amount: "0.500000", amountUnits: "500000" },
      ],
      needsApprovalByRule: [],
    });
    expect(answer.body.payments.map((p: any) => [p.at, p.recorded, p.outcome, p.rule, p.reason])).toEqual([
      ["2026-03-01T09:00:00.000Z", "pass", "pass", null, null],
      [
        "2026-03-01T09:05:00.000Z",
        "pass",
        "refuse",
        "domain_blocked",
        "domain_blocked: other.example.org is blocked by the policy (blockedDomains entry other.example.org)",
      ],
      [
        "2026-03-01T09:10:00.000Z",
        "refuse",
        "refuse",
        "per_call_limit_exceeded",
        "per_call_limit_exceeded: requested 2 usdc, limit is 0.3 usdc",
      ],
      [
        "2026-03-01T09:15:00.000Z",
        "needs_approval",
        "refuse",
        "per_call_limit_exceeded",
        "per_call_limit_exceeded: requested 0.45 usdc, limit is 0.3 usdc",
      ],
    ]);
    expect(answer.body.payments.map((p: any) => p.id.replace(/:.*/, ""))).toEqual(["reservation", "reservation", "rejection", "approval"]);
  });

  it("an endpoint budget of the candidate counts what went through the endpoints it covers", async () => {
    const policy = { endpointBudgets: [{ match: "api.example.com/v1/search", dailyBudget: { usdc: 0.5 } }] };
    const answer = await call("POST", `/v1/policies/${AGENT}/backtest`, { policy, window: "24h" });
    expect(answer.status).toBe(200);
    expect(answer.body.payments.map((p: any) => [p.outcome, p.rule])).toEqual([
      ["pass", null],
      ["pass", null],
      ["refuse", "daily_budget_exceeded"],
      ["refuse", "daily_budget_exceeded"],
    ]);
    expect(answer.body.payments[2].reason).toContain("(endpointBudgets api.example.com/v1/search)");
    expect(answer.body.totals.refusedByDomain).toEqual([
      { domain: "api.example.com", count: 2, amount: "2.450000", amountUnits: "2450000" },
    ]);

    // From 09:07 only the last two are replayed; the rule starts from the 0.25 spent through it at 09:00,
    // so 0.45 does not fit either (alone it would).
    clock = new Date(T0.getTime() + 67 * 60_000);
    try {
      const late = await call("POST", `/v1/policies/${AGENT}/backtest`, { policy, window: "1h" });
      expect(late.body.payments.map((p: any) => [p.at, p.outcome])).toEqual([
        ["2026-03-01T09:10:00.000Z", "refuse"],
        ["2026-03-01T09:15:00.000Z", "refuse"],
      ]);
      expect(late.body.payments[1].reason).toContain("(used 0.25 usdc, ");
    } finally {
      clock = NOW;
    }
  });

  it("GraphQL simulatePolicy answers what REST answers; approval rules hold payments", async () => {
    const rest = await call("POST", `/v1/policies/${AGENT}/backtest`, { policy: candidate, window: "24h" });
    const data = await graphql(SIMULATE, { agentId: AGENT, policy: JSON.stringify(candidate), window: "24h" });
    expect(data.errors).toBeUndefined();
    const { from: _from, to: _to, ...restView } = rest.body;
    expect(data.data.simulatePolicy).toEqual(restView);

    const held = await graphql(SIMULATE, {
      agentId: AGENT,
      policy: JSON.stringify({ approval: { above: { usdc: 0.3 }, timeout: "15m" }, allowedDomains: ["example.com"] }),
      window: "30d",
      limit: 2,
    });
    const view = held.data.simulatePolicy;
    expect(view.payments.map((p: any) => [p.outcome, p.rule])).toEqual([
      ["pass", null],
      ["refuse", "domain_not_allowed"],
    ]);
    expect(view.totals.needsApproval).toEqual({ count: 2, amount: "2.450000", amountUnits: "2450000" });
    expect(view.totals.needsApprovalByRule).toEqual([{ rule: "above", count: 2, amount: "2.450000", amountUnits: "2450000" }]);
  });

  it("moves nothing and consumes no counter: every table and the usage read are as before", async () => {
    const before = await snapshot();
    for (let i = 0; i < 3; i += 1) {
      expect(
        (await call("POST", `/v1/policies/${AGENT}/backtest`, { policy: { rateLimit: { calls: 1, window: "1m" } }, window: "1h" })).status,
      ).toBe(200);
      expect((await graphql(SIMULATE, { agentId: AGENT, policy: "{}", window: "7d" })).errors).toBeUndefined();
    }
    expect(await snapshot()).toEqual(before);
  });

  it("a window outside 1h..90d is a 400 naming window; so is a missing one", async () => {
    for (const window of ["59m", "91d", "30x", "0d", 30, ""]) {
      const answer = await call("POST", `/v1/policies/${AGENT}/backtest`, { policy: {}, window });
      expect(answer.status, String(window)).toBe(400);
      expect(answer.body).toMatchObject({ code: "BAD_USER_INPUT", field: "window" });
    }
    expect((await call("POST", `/v1/policies/${AGENT}/backtest`, { policy: {} })).body).toMatchObject({ field: "window" });
    const gql = await graphql(SIMULATE, { agentId: AGENT, policy: "{}", window: "120d" });
    expect(gql.errors[0].extensions).toMatchObject({ code: "BAD_USER_INPUT", argument: "window" });
  });

  it("an invalid candidate policy is a 400 with the policy validation's field name (as PUT names it)", async () => {
    // REST reads money from the exact number token, as PUT /v1/policies does (so it names `.usdc`).
    const cases: Array<[unknown, string, string]> = [
      [{ perCallLimit: { usdc: -1 } }, "perCallLimit.usdc", "perCallLimit"],
      [{ dailyBudget: { usdc: 0 } }, "dailyBudget.usdc", "dailyBudget"],
      [{ rateLimit: { calls: 3, window: "2m" } }, "rateLimit.window", "rateLimit.window"],
      [{ allowedDomains: ["not a host"] }, "allowedDomains", "allowedDomains"],
      [{ approval: { above: { usdc: 1 } } }, "approval.timeout", "approval.timeout"],
      [{ usedToday: { usdc: 1 } }, "usedToday", "usedToday"],
    ];
    for (const [policy, restField, argument] of cases) {
      const answer = await call("POST", `/v1/policies/${AGENT}/backtest`, { policy, window: "24h" });
      expect(answer.status, restField).toBe(400);
      expect(answer.body, restField).toMatchObject({ code: "BAD_USER_INPUT", field: restField });
      const gql = await graphql(SIMULATE, { agentId: AGENT, policy: JSON.stringify(policy), window: "24h" });
      expect(gql.errors[0].extensions, argument).toMatchObject({ code: "BAD_USER_INPUT", argument });
    }
    expect((await call("POST", `/v1/policies/${AGENT}/backtest`, { policy: "everything", window: "24h" })).body).toMatchObject({
      code: "BAD_USER_INPUT",
      field: "policy",
    });
    const notJson = await graphql(SIMULATE, { agentId: AGENT, policy: "{not json", window: "24h" });
    expect(notJson.errors[0].extensions).toMatchObject({ code: "BAD_USER_INPUT", argument: "policy" });
  });

  it("an unknown agent and another account's agent are both 404, on REST and GraphQL", async () => {
    for (const agent of ["nobody", "stranger"]) {
      const answer = await call("POST", `/v1/policies/${agent}/backtest`, { policy: {}, window: "24h" });
      expect(answer.status, agent).toBe(404);
      expect(answer.body.code).toBe("NOT_FOUND");
      const gql = await graphql(SIMULATE, { agentId: agent, policy: "{}", window: "24h" });
      expect(gql.errors[0].extensions.code, agent).toBe("NOT_FOUND");
    }
    // The other account sees its own agent, and not ours.
    expect((await call("POST", "/v1/policies/stranger/backtest", { policy: {}, window: "24h" }, otherKey)).status).toBe(200);
    expect((await call("POST", `/v1/policies/${AGENT}/backtest`, { policy: {}, window: "24h" }, otherKey)).status).toBe(404);
  });

  it("the TypeScript client and the CLI answer what REST answers", async () => {
    const rest = await call("POST", `/v1/policies/${AGENT}/backtest`, { policy: candidate, window: "24h" });
    const client = new Client({ apiKey, baseUrl, agentId: AGENT, maxRetries: 0 });
    const viaClient = await client.policies.backtest(
      { perCallLimit: { usdc: 0.3 }, blockedDomains: ["other.example.org"] },
      { window: "24h" },
    );
    expect(viaClient).toEqual(rest.body);
    expect(() => client.policies.backtest({}, { window: "forever" })).toThrow(TypeError);

    const dir = await mkdtemp(join(tmpdir(), "backtest-"));
    const file = join(dir, "policy.json");
    await writeFile(file, JSON.stringify(candidate));
    const out: string[] = [];
    const err: string[] = [];
    const cli = (argv: string[]) =>
      runCli(argv, {
        env: { APG_API_KEY: apiKey, APG_BASE_URL: baseUrl },
        stdout: { write: (chunk: string) => out.push(chunk) },
        stderr: { write: (chunk: string) => err.push(chunk) },
        maxRetries: 0,
      });
    expect(await cli(["policies", "backtest", AGENT, "--file", file, "--window", "24h"])).toBe(0);
    const printed = out.join("");
    expect(printed).toMatch(/Would refuse:\s+3 \(2\.95 USDC\)/);
    expect(printed).toMatch(/per_call_limit_exceeded\s+2\s+2\.45 USDC/);
    expect(printed).toContain("other.example.org/v1/data");
    expect(printed).toContain("would refuse");
    out.length = 0;
    expect(await cli(["policies", "backtest", AGENT, "--file", file, "--window", "24h", "--json"])).toBe(0);
    const { from: _f, to: _t, ...json } = JSON.parse(out.join(""));
    const { from: _rf, to: _rt, ...restView } = rest.body;
    expect(json).toEqual(restView);
    expect(await cli(["policies", "backtest", AGENT, "--file", file, "--window", "100d"])).toBe(1);
    expect(err.join("")).toContain("BAD_USER_INPUT");
    expect(await cli(["policies", "backtest", AGENT, "--window", "24h"])).toBe(2);
  });
});
