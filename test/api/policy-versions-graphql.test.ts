/**
 * GraphQL over real HTTP against a real Postgres: the policy's `version` and `endpointBudgets`,
 * `policyHistory` (newest first, paged, bad arguments refused) and a transaction's
 * `policyVersion`: the version a refusal was decided under, as the gateway records it.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { recordRejection } from "../../api/gateway/payments/rejections.js";
import { reserveWithinPolicy } from "../../api/gateway/reservations/store.js";
import { type ApiServer, createApiServer } from "../../api/query/server.js";
import { createAccount, issueApiKey, registerAgent } from "../../api/shared/keys.js";
import { putPolicy } from "../../api/shared/policy/index.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { agentKey } from "../support/agent-keys.js";
import { createClient } from "./client.js";

const NOW = new Date("2026-03-01T12:00:00.000Z");

let db: FreshDatabase;
let server: ApiServer;
let client: ReturnType<typeof createClient>;
let key = "";
let foreignKey = "";
let agent = "";

beforeAll(async () => {
  db = await createFreshDatabase();
  const account = await createAccount(db.pool, "versions");
  await registerAgent(db.pool, account, { agentId: "auditor", walletAddress: randomBytes(16).toString("hex") });
  key = (await issueApiKey(db.pool, account)).apiKey;
  foreignKey = (await issueApiKey(db.pool, await createAccount(db.pool, "foreign"))).apiKey;
  agent = await agentKey(db.pool, "auditor", account);
  await putPolicy(db.pool, agent, { dailyBudgetUnits: 5_000_000n }, NOW, "admin");
  await putPolicy(
    db.pool,
    agent,
    { endpointBudgets: [{ match: "api.example.com/v1/search", dailyBudgetUnits: null, perCallLimitUnits: 100_000n, rateLimit: null }] },
    NOW,
    "key:7",
  );
  // A refusal by the endpoint rule, recorded as the gateway records it, with the version it was decided under.
  const { decision, policyVersion } = await reserveWithinPolicy(
    db.pool,
    agent,
    { endpoint: "https://api.example.com/v1/search", amountUnits: 200_000n },
    NOW,
  );
  if (decision.decision !== "reject") throw new Error("the endpoint rule must refuse");
  await recordRejection(db.pool, {
    agentId: agent,
    amountUnits: 200_000n,
    endpoint: "api.example.com/v1/search",
    domain: decision.domain,
    protocol: "x402",
    reasonCode: decision.reasonCode,
    reason: decision.reason,
    at: NOW,
    policyVersion,
  });
  server = createApiServer({ pool: db.pool, now: () => NOW, liveFeed: false });
  client = createClient(`http://127.0.0.1:${await server.listen(0)}`);
});

afterAll(async () => {
  await server?.close();
  await db?.drop();
});

describe("policy versions over GraphQL", () => {
  it("Policy shows its current version and endpointBudgets", async () => {
    const data = await client.ok(
      key,
      `{ policy(agentId: "auditor") { version dailyBudget endpointBudgets { match dailyBudget perCallLimit perCallLimitUnits rateLimit { calls } } } }`,
    );
    expect(data.policy).toEqual({
      version: 2,
      dailyBudget: "5.000000",
      endpointBudgets: [
        { match: "api.example.com/v1/search", dailyBudget: null, perCallLimit: "0.100000", perCallLimitUnits: "100000", rateLimit: null },
      ],
    });
  });

  it("policyHistory lists every version newest first, with who, the whole policy and its hash; pages by before", async () => {
    const data = await client.ok(key, `{ policyHistory(agentId: "auditor") { agentId version createdAt createdBy hash policy } }`);
    const versions = data.policyHistory as Array<Record<string, string | number>>;
    expect(versions.map((v) => [v.version, v.createdBy])).toEqual([
      [2, "key:7"],
      [1, "admin"],
    ]);
    expect(versions[0]!.createdAt).toBe(NOW.toISOString());
    expect(JSON.parse(String(versions[1]!.policy))).toMatchObject({ dailyBudgetUnits: "5000000", endpointBudgets: [] });
    expect(JSON.parse(String(versions[0]!.policy)).endpointBudgets).toEqual([
      { match: "api.example.com/v1/search", dailyBudgetUnits: null, perCallLimitUnits: "100000", rateLimit: null },
    ]);
    expect(versions[0]!.hash).toMatch(/^[0-9a-f]{64}$/);
    expect(versions[0]!.hash).not.toBe(versions[1]!.hash);
    const older = await client.ok(key, `{ policyHistory(agentId: "auditor", first: 1, before: 2) { version } }`);
    expect(older.policyHistory).toEqual([{ version: 1 }]);
  });

  it("refuses bad arguments with BAD_USER_INPUT; another account's agent is not found", async () => {
    for (const args of ["first: 0", "first: 101", "before: 0"]) {
      const bad = await client.gql(key, `{ policyHistory(agentId: "auditor", ${args}) { version } }`);
      expect(bad.errors?.[0]?.extensions?.code, args).toBe("BAD_USER_INPUT");
    }
    expect(await client.codes(foreignKey, `{ policyHistory(agentId: "auditor") { version } }`)).toEqual(["NOT_FOUND"]);
  });

  it("a transaction names the version it was decided under", async () => {
    const data = await client.ok(
      key,
      `{ transactions(agentId: "auditor", status: rejected) { nodes { status rejectionCode rejectionReason policyVersion } } }`,
    );
    expect(data.transactions.nodes).toEqual([
      {
        status: "rejected",
        rejectionCode: "per_call_limit_exceeded",
        rejectionReason: "per_call_limit_exceeded: requested 0.2 usdc, limit is 0.1 usdc (endpointBudgets api.example.com/v1/search)",
        policyVersion: 2,
      },
    ]);
  });
});
