/**
 * Query.approvals and Query.approval over real HTTP against a real Postgres: the account's held
 * payments (rows written with the approvals store, as the gateway writes them), their paging and
 * filters, and the scopes: approver and admin keys read the queue, an agent key reads its own
 * agent's approval by id and nothing else, another account sees none.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServer, createApiServer } from "../../api/query/server.js";
import type { Approval } from "../../api/shared/approvals/approval.js";
import { createApproval, decideApproval } from "../../api/shared/approvals/store.js";
import { createAccount, issueApiKey, registerAgent } from "../../api/shared/keys.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { createClient } from "./client.js";

const NOW = new Date("2026-03-01T12:00:00.000Z");
const MINUTE = 60_000;

let db: FreshDatabase;
let server: ApiServer;
let client: ReturnType<typeof createClient>;
const keys = { admin: "", approver: "", own: "", other: "", foreign: "" };
let account = "";
const held: Approval[] = [];

async function hold(agentKey: string, minutes: number, amountUnits: bigint): Promise<Approval> {
  const requestedAt = new Date(NOW.getTime() - minutes * MINUTE);
  const { rows } = await db.pool.query<{ id: string }>(
    `INSERT INTO spend_reservations (agent_id, amount_units, endpoint, domain, protocol, status, created_at, budget_window_start)
     VALUES ($1, $2, 'https://api.example.com/v1/report', 'api.example.com', 'x402', 'pending_approval', $3, $3) RETURNING id::text AS id`,
    [agentKey, amountUnits.toString(), requestedAt],
  );
  return createApproval(db.pool, {
    accountId: account,
    agentKey,
    reservationId: rows[0]!.id,
    idempotencyKey: null,
    amountUnits,
    endpoint: "https://api.example.com/v1/report",
    domain: "api.example.com",
    rule: "above",
    reason: "approval_required: held",
    requestedAt,
    timeoutMs: 60 * MINUTE,
    linkTokenHash: null,
  });
}

beforeAll(async () => {
  db = await createFreshDatabase();
  account = await createAccount(db.pool, "approvals");
  const foreign = await createAccount(db.pool, "foreign");
  await registerAgent(db.pool, account, { agentId: `${account}/researcher`, walletAddress: randomBytes(16).toString("hex") });
  await registerAgent(db.pool, account, { agentId: `${account}/scout`, walletAddress: randomBytes(16).toString("hex") });
  keys.admin = (await issueApiKey(db.pool, account)).apiKey;
  keys.approver = (await issueApiKey(db.pool, account, { kind: "approver" })).apiKey;
  keys.own = (await issueApiKey(db.pool, account, { kind: "agent", agentId: "researcher" })).apiKey;
  keys.other = (await issueApiKey(db.pool, account, { kind: "agent", agentId: "scout" })).apiKey;
  keys.foreign = (await issueApiKey(db.pool, foreign)).apiKey;
  held.push(await hold(`${account}/researcher`, 5, 6_000_000n));
  held.push(await hold(`${account}/researcher`, 4, 1_500_000n));
  held.push(await hold(`${account}/scout`, 3, 7_000_001n));
  await decideApproval(db.pool, { accountId: account, approvalId: held[1]!.id, decision: "denied", decidedBy: "1", note: "no", at: NOW });
  server = createApiServer({ pool: db.pool, now: () => NOW, liveFeed: false });
  client = createClient(`http://127.0.0.1:${await server.listen(0)}`);
});

afterAll(async () => {
  await server?.close();
  await db?.drop();
});

const FIELDS = "id agentId amount amountUnits endpoint domain rule reason status requestedAt expiresAt decidedAt decidedBy note outcome";

describe("Query.approvals", () => {
  it("lists the account's held payments newest first, with money as decimal and base units", async () => {
    const data = await client.ok(keys.approver, `{ approvals { nodes { ${FIELDS} } pageInfo { hasNextPage endCursor } } }`);
    expect(data.approvals.nodes.map((n: { id: string }) => n.id)).toEqual([held[2]!.id, held[1]!.id, held[0]!.id]);
    expect(data.approvals.nodes[0]).toMatchObject({ agentId: "scout", amount: "7.000001", amountUnits: "7000001", status: "pending" });
    expect(data.approvals.nodes[1]).toMatchObject({ status: "denied", decidedBy: "1", note: "no", decidedAt: NOW.toISOString() });
    expect(data.approvals.pageInfo).toEqual({ hasNextPage: false, endCursor: null });
  });

  it("filters by status and agent, and pages by first/after", async () => {
    const pending = await client.ok(keys.admin, `{ approvals(status: pending, agentId: "researcher") { nodes { id } } }`);
    expect(pending.approvals.nodes).toEqual([{ id: held[0]!.id }]);
    const first = await client.ok(keys.admin, "{ approvals(first: 2) { nodes { id } pageInfo { hasNextPage endCursor } } }");
    expect(first.approvals.nodes).toHaveLength(2);
    expect(first.approvals.pageInfo.hasNextPage).toBe(true);
    const next = await client.ok(
      keys.admin,
      `{ approvals(first: 2, after: ${JSON.stringify(first.approvals.pageInfo.endCursor)}) { nodes { id } } }`,
    );
    expect(next.approvals.nodes).toEqual([{ id: held[0]!.id }]);
  });

  it("refuses bad arguments with BAD_USER_INPUT naming them", async () => {
    const bad = await client.gql(keys.admin, `{ approvals(first: 0) { nodes { id } } }`);
    expect(bad.errors?.[0]?.extensions).toMatchObject({ code: "BAD_USER_INPUT", argument: "first" });
    const cursor = await client.gql(keys.admin, `{ approvals(after: "garbage") { nodes { id } } }`);
    expect(cursor.errors?.[0]?.extensions).toMatchObject({ code: "BAD_USER_INPUT", argument: "after" });
    expect(await client.codes(keys.admin, `{ approvals(status: maybe) { nodes { id } } }`)).toEqual(["GRAPHQL_VALIDATION_FAILED"]);
  });

  it("is the approvers' queue: an agent key is refused, another account sees none", async () => {
    expect(await client.codes(keys.own, "{ approvals { nodes { id } } }")).toEqual(["FORBIDDEN_SCOPE"]);
    const foreign = await client.ok(keys.foreign, "{ approvals { nodes { id } } }");
    expect(foreign.approvals.nodes).toEqual([]);
  });
});

describe("Query.approval", () => {
  it("reads one by id: admin, approver and the agent's own key; null for another agent, another account, an unknown or malformed id", async () => {
    const query = (id: string) => `{ approval(id: ${JSON.stringify(id)}) { id agentId status } }`;
    for (const key of [keys.admin, keys.approver, keys.own]) {
      expect((await client.ok(key, query(held[0]!.id))).approval).toEqual({ id: held[0]!.id, agentId: "researcher", status: "pending" });
    }
    expect((await client.ok(keys.other, query(held[0]!.id))).approval).toBeNull();
    expect((await client.ok(keys.other, query(held[2]!.id))).approval).toMatchObject({ agentId: "scout" });
    expect((await client.ok(keys.foreign, query(held[0]!.id))).approval).toBeNull();
    expect((await client.ok(keys.admin, query("6f1c0000-0000-4000-8000-000000000000"))).approval).toBeNull();
    expect((await client.ok(keys.admin, query("not-an-id"))).approval).toBeNull();
  });
});

describe("Policy.approval", () => {
  it("is null for a policy that holds nothing", async () => {
    const data = await client.ok(keys.admin, `{ policy(agentId: "researcher") { approval { timeout } } }`);
    expect(data.policy.approval).toBeNull();
  });
});
