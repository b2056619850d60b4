/**
 * The query service's reads for a dashboard of many agents (agentList, budgetUse, rejectionCounts,
 * webhookHealth, indexerStatus, runs, transactions(reason)) against independent references: the
 * per-agent `policy` read (the engine's own usage), `paymentTree` totals and the `transactions`
 * listing of the same database; each scoped to its account. Data: two accounts seeded through
 * the indexer's decode + ingest, the gateway's rejection writer and the policy store
 * (bench/dashboard/seed.ts).
 */
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServer, createApiServer } from "../../api/query/server.js";
import { createAccount, issueApiKey } from "../../api/shared/keys.js";
import { LONG_ENDPOINT, type Seeded, seedScale } from "../../bench/dashboard/seed.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { createClient } from "./client.js";

let db: FreshDatabase;
let server: ApiServer;
let api: ReturnType<typeof createClient>;
let keyA = "";
let keyB = "";
let seededA: Seeded;
let seededB: Seeded;

beforeAll(async () => {
  db = await createFreshDatabase();
  const a = await createAccount(db.pool, "A");
  const b = await createAccount(db.pool, "B");
  keyA = (await issueApiKey(db.pool, a)).apiKey;
  keyB = (await issueApiKey(db.pool, b)).apiKey;
  seededA = await seedScale(db.pool, a, { payments: 1_200, agents: 40, longIds: 3, rejections: 120, budgets: 12, days: 2 });
  seededB = await seedScale(db.pool, b, { payments: 300, agents: 5, rejections: 10, budgets: 3, days: 2 });
  server = createApiServer({ pool: db.pool, databaseUrl: db.url, logger: pino({ level: "error" }) });
  api = createClient(`http://127.0.0.1:${await server.listen(0)}`);
}, 120_000);

afterAll(async () => {
  await server?.close();
  await db?.drop();
});

describe("agentList", () => {
  it("pages through every agent of the account once, with its total, and finds by part of an id", async () => {
    const seen: string[] = [];
    for (let offset = 0; ; offset += 15) {
      const { agentList } = await api.ok(keyA, "query($o: Int) { agentList(first: 15, offset: $o) { nodes { agentId } totalCount } }", {
        o: offset,
      });
      expect(agentList.totalCount).toBe(40);
      if (agentList.nodes.length === 0) break;
      seen.push(...agentList.nodes.map((n: { agentId: string }) => n.agentId));
    }
    expect([...seen].sort()).toEqual([...seededA.agentIds].sort());
    const { agentList } = await api.ok(keyA, '{ agentList(search: "-0001") { nodes { agentId } totalCount } }');
    expect(agentList.nodes.map((n: { agentId: string }) => n.agentId)).toEqual([seededA.longAgentIds[1]]);
    // LIKE wildcards are matched literally; another account's agents are never found.
    expect((await api.ok(keyA, '{ agentList(search: "%") { totalCount } }')).agentList.totalCount).toBe(0);
    expect((await api.ok(keyB, '{ agentList(search: "orchestrator") { totalCount } }')).agentList.totalCount).toBe(0);
    expect(await api.codes(keyA, "{ agentList(first: 101) { totalCount } }")).toEqual(["BAD_USER_INPUT"]);
  });
});

describe("budgetUse", () => {
  it("ranks each budgeted agent by use with the state and usage Query.policy reports, and counts every state", async () => {
    const { budgetUse } = await api.ok(
      keyA,
      "{ budgetUse(first: 100) { nodes { agentId usedTodayUnits dailyBudgetUnits percent budgetState } totalCount warningCount exhaustedCount } }",
    );
    expect(budgetUse.totalCount).toBe(12);
    expect(budgetUse.nodes).toHaveLength(12);
    const states: Record<string, number> = { open: 0, warning: 0, exhausted: 0 };
    for (const row of budgetUse.nodes) {
      const { policy } = await api.ok(keyA, "query($id: ID!) { policy(agentId: $id) { usedTodayUnits dailyBudgetUnits budgetState } }", {
        id: row.agentId,
      });
      expect({ used: row.usedTodayUnits, budget: row.dailyBudgetUnits, state: row.budgetState }).toEqual({
        used: policy.usedTodayUnits,
        budget: policy.dailyBudgetUnits,
        state: policy.budgetState,
      });
      states[row.budgetState]! += 1;
    }
    expect(states).toEqual({ open: 4, warning: 4, exhausted: 4 });
    expect(budgetUse.warningCount).toBe(4);
    expect(budgetUse.exhaustedCount).toBe(4);
    const percents = budgetUse.nodes.map((n: { percent: string }) => Number(n.percent));
    expect(percents).toEqual([...percents].sort((x, y) => y - x));
    const warning = await api.ok(keyA, "{ budgetUse(state: warning) { nodes { budgetState percent } totalCount } }");
    expect(warning.budgetUse.nodes.map((n: { budgetState: string }) => n.budgetState)).toEqual([
      "warning",
      "warning",
      "warning",
      "warning",
    ]);
    expect(warning.budgetUse.nodes[0].percent).toBe("90.00");
    expect((await api.ok(keyB, "{ budgetUse { totalCount } }")).budgetUse.totalCount).toBe(3);
  });
});

describe("rejections", () => {
  it("counts the last hour's rejections by reason as the rejected listing has them, and filters the listing by reason", async () => {
    const { rejectionCounts } = await api.ok(keyA, '{ rejectionCounts(since: "1h") { reasonCode count } }');
    const listed = await api.ok(keyA, '{ transactions(status: rejected, since: "1h", limit: 200) { nodes { rejectionCode endpoint } } }');
    const expected = new Map<string, number>();
    for (const node of listed.transactions.nodes) expected.set(node.rejectionCode, (expected.get(node.rejectionCode) ?? 0) + 1);
    expect(listed.transactions.nodes.length).toBe(15);
    expect(expected.size).toBe(5);
    expect(new Map(rejectionCounts.map((r: { reasonCode: string; count: number }) => [r.reasonCode, r.count]))).toEqual(expected);
    const byReason = await api.ok(keyA, '{ transactions(reason: "domain_blocked", limit: 200) { nodes { status rejectionCode } } }');
    expect(byReason.transactions.nodes.length).toBe(24);
    expect(new Set(byReason.transactions.nodes.map((n: { rejectionCode: string }) => n.rejectionCode))).toEqual(
      new Set(["domain_blocked"]),
    );
    const all = await api.ok(keyA, "{ transactions(status: rejected, limit: 200) { nodes { endpoint } } }");
    expect(all.transactions.nodes.some((n: { endpoint: string }) => n.endpoint === LONG_ENDPOINT)).toBe(true);
    expect(await api.codes(keyA, '{ transactions(reason: "DROP TABLE") { nodes { id } } }')).toEqual(["BAD_USER_INPUT"]);
    expect(
      (await api.ok(keyB, '{ rejectionCounts(since: "24h") { count } }')).rejectionCounts.reduce(
        (s: number, r: { count: number }) => s + r.count,
        0,
      ),
    ).toBe(10);
  });
});

describe("webhookHealth and indexerStatus", () => {
  it("counts the account's failed and retrying webhook deliveries, and reports the indexer's checkpoint", async () => {
    const { webhookHealth } = await api.ok(keyA, "{ webhookHealth { failed retrying lastError } }");
    expect(webhookHealth).toEqual({ failed: 2, retrying: 1, lastError: "HTTP 503 from the receiver" });
    const { rows } = await db.pool.query<{ slot: string }>("SELECT slot::text FROM checkpoints ORDER BY updated_at DESC LIMIT 1");
    const { indexerStatus } = await api.ok(keyA, "{ indexerStatus { slot secondsSinceCheckpoint latestPaymentAt } }");
    expect(indexerStatus.slot).toBe(rows[0]!.slot);
    expect(indexerStatus.secondsSinceCheckpoint).toBeGreaterThanOrEqual(0);
    expect(indexerStatus.latestPaymentAt).not.toBeNull();
  });
});

describe("runs", () => {
  it("lists every run with the totals paymentTree gives it, and sorts by cost", async () => {
    const { runs } = await api.ok(
      keyA,
      "{ runs(first: 100) { nodes { rootTxHash totalUnits paymentCount agentCount budgetUnits budgetSpentUnits timestamp } totalCount } }",
    );
    expect(runs.totalCount).toBe(seededA.runRoots);
    expect(runs.nodes).toHaveLength(seededA.runRoots);
    for (const run of runs.nodes.slice(0, 4)) {
      const { paymentTree } = await api.ok(
        keyA,
        "query($h: String!) { paymentTree(rootTxHash: $h) { nodes { amountUnits } totals { amountUnits transactionCount agentCount } } }",
        { h: run.rootTxHash },
      );
      expect({ total: run.totalUnits, payments: run.paymentCount, agents: run.agentCount }).toEqual({
        total: paymentTree.totals.amountUnits,
        payments: paymentTree.totals.transactionCount,
        agents: paymentTree.totals.agentCount,
      });
      const children = paymentTree.nodes.slice(1).reduce((sum: bigint, n: { amountUnits: string }) => sum + BigInt(n.amountUnits), 0n);
      expect({ budget: run.budgetUnits, spent: run.budgetSpentUnits }).toEqual({ budget: "1500000", spent: children.toString() });
    }
    const times = runs.nodes.map((r: { timestamp: string }) => r.timestamp);
    expect(times).toEqual([...times].sort().reverse());
    const byCost = await api.ok(keyA, "{ runs(order: cost, first: 100) { nodes { totalUnits } } }");
    const costs = byCost.runs.nodes.map((r: { totalUnits: string }) => BigInt(r.totalUnits));
    expect(costs).toEqual([...costs].sort((x, y) => (x === y ? 0 : x > y ? -1 : 1)));
    const paged = await api.ok(keyA, "{ runs(order: cost, first: 3, offset: 3) { nodes { totalUnits } totalCount } }");
    expect(paged.runs.nodes.map((r: { totalUnits: string }) => BigInt(r.totalUnits))).toEqual(costs.slice(3, 6));
    expect(paged.runs.totalCount).toBe(seededA.runRoots);
    expect((await api.ok(keyB, "{ runs { totalCount } }")).runs.totalCount).toBe(seededB.runRoots);
  });
});
