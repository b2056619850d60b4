/**
 * The GraphQL query service over data made by the real payment_ledger program on a local ledger
 * and projected by the real indexer. Every expectation is computed from what the test sent
 * (fixture.ts), never by running the service's SQL again.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { putPolicy } from "../../api/shared/policy/index.js";
import { reserveWithinPolicy } from "../../api/gateway/reservations/store.js";
import { rpcBalanceReader } from "../../api/shared/balances.js";
import { loadPaymentTree } from "../../api/query/read/payment-tree.js";
import { createApiServer, type ApiServer } from "../../api/query/server.js";
import { endpointHash } from "../../programs/payment_ledger/ts/index.js";
import { tokenBalanceUnits } from "../../scripts/agent-wallets.js";
import { createClient } from "./client.js";
import { buildWorld, DAY_S, DOMAINS, hex, HOUR_S, MINUTE_S, type SentPayment, type SentRejection, type World } from "./fixture.js";
import { pollUntil } from "../support/poll.js";

let world: World;
let server: ApiServer;
let client: ReturnType<typeof createClient>;

beforeAll(async () => {
  world = await buildWorld();
  server = createApiServer({
    pool: world.db.pool,
    databaseUrl: world.db.url,
    now: () => world.now,
    balances: rpcBalanceReader(world.ledger.provider.connection, world.localnet.info.mint),
    network: "solana-localnet",
    logger: pino({ level: "error" }),
  });
  const port = await server.listen(0);
  client = createClient(`http://127.0.0.1:${port}`);
}, 240_000);

afterAll(async () => {
  await server?.close();
  await world?.stop();
});

// ---- expectations from what was sent ----------------------------------------------------------

/** Real-time payments happened during setup: at most minutes before the pinned clock. */
const REAL_TIME_AGO_S = 5 * MINUTE_S;
const secondsAgo = (p: SentPayment): number => (p.atSeconds === null ? REAL_TIME_AGO_S : world.nowSeconds - p.atSeconds);
const rejectionAgo = (r: SentRejection): number => world.nowSeconds - r.atSeconds;
const sum = (values: bigint[]): bigint => values.reduce((a, b) => a + b, 0n);
const usdc = (unitsValue: bigint): string => `${unitsValue / 1_000_000n}.${(unitsValue % 1_000_000n).toString().padStart(6, "0")}`;
const domainOf = (endpoint: string): string => DOMAINS[endpoint] ?? hex(endpointHash(endpoint));
/** Percent with two decimals, half up, from integers. */
const percent = (part: bigint, whole: bigint): string => {
  if (whole === 0n) return "0.00";
  const hundredths = (part * 10_000n * 2n + whole) / (2n * whole);
  return `${hundredths / 100n}.${(hundredths % 100n).toString().padStart(2, "0")}`;
};
const accountAgents = (account: "A" | "B"): Set<string> =>
  new Set(account === "A" ? ["a-orch", "a-sub", "a-subsub", "a-spender"] : ["b-agent"]);

const WINDOWS_S: Record<string, number> = { "1h": HOUR_S, "24h": DAY_S, "7d": 7 * DAY_S, "30d": 30 * DAY_S };

/** A listing entry's identity: the txHash, or what the test knows of a rejection. */
const rejectionKey = (r: { agentId: string; reasonCode: string; atSeconds: number }): string =>
  `rejected:${r.agentId}:${r.reasonCode}:${new Date(r.atSeconds * 1000).toISOString()}`;
const listedKey = (t: { txHash: string | null; agentId: string; rejectionCode: string | null; timestamp: string }): string =>
  t.txHash ?? `rejected:${t.agentId}:${t.rejectionCode}:${t.timestamp}`;

const LIST_FIELDS = `id txHash agentId protocol amountPaid amountPaidUnits endpoint domain policyCheck parentTxHash
  solanaExplorer timestamp depth status rejectionCode rejectionReason`;

async function listAll(key: string, filter: string, pageSize = 200): Promise<any[]> {
  const all: any[] = [];
  let after: string | null = null;
  for (let page = 0; page < 50; page++) {
    const data: any = await client.ok(
      key,
      `query($after: String) { transactions(${filter}${filter === "" ? "" : ", "}limit: ${pageSize}, after: $after) {
         nodes { ${LIST_FIELDS} } pageInfo { hasNextPage endCursor } } }`,
      { after },
    );
    all.push(...data.transactions.nodes);
    if (!data.transactions.pageInfo.hasNextPage) return all;
    after = data.transactions.pageInfo.endCursor;
  }
  throw new Error("more than 50 pages");
}

function expectedKeys(
  account: "A" | "B",
  filter: { agentId?: string; protocol?: "x402" | "mpp"; domainSuffix?: string; sinceS?: number; status?: "rejected" | "chain" },
): string[] {
  const agents = accountAgents(account);
  const domainMatches = (domain: string): boolean =>
    filter.domainSuffix === undefined || domain === filter.domainSuffix || domain.endsWith(`.${filter.domainSuffix}`);
  const chain =
    filter.status === "rejected"
      ? []
      : world.payments
          .filter((p) => agents.has(p.agentId))
          .filter((p) => filter.agentId === undefined || p.agentId === filter.agentId)
          .filter((p) => filter.protocol === undefined || p.protocol === filter.protocol)
          .filter((p) => domainMatches(DOMAINS[p.endpoint] ?? ""))
          .filter((p) => filter.sinceS === undefined || secondsAgo(p) <= filter.sinceS)
          .map((p) => p.txHash);
  const rejected =
    filter.status === "chain"
      ? []
      : world.rejections
          .filter((r) => agents.has(r.agentId))
          .filter((r) => filter.agentId === undefined || r.agentId === filter.agentId)
          .filter((r) => filter.protocol === undefined || r.protocol === filter.protocol)
          .filter((r) => domainMatches(r.domain))
          .filter((r) => filter.sinceS === undefined || rejectionAgo(r) <= filter.sinceS)
          .map(rejectionKey);
  return [...chain, ...rejected].sort();
}

// ---- trees ------------------------------------------------------------------------------------

type Subscription = Awaited<ReturnType<ReturnType<typeof createClient>["subscribe"]>>;

/** Sends the indexer's notification for the first recorded payment of `agentId`. */
function notifyOf(agentId: string): () => Promise<unknown> {
  const payment = world.payments.find((p) => p.agentId === agentId)!;
  return () =>
    world.db.pool.query("SELECT pg_notify('ledger_transactions', $1)", [
      JSON.stringify({ txHash: payment.txHash, agent: world.wallets[agentId]!.publicKey.toBase58(), slot: "1" }),
    ]);
}

/**
 * Waits until the server has the subscriptions in place: the server gives no sign of it, so
 * `notify` (a notification each of them receives) is sent until each has an event. The feed drops
 * a notification nobody listens to, so one is sent again only after a second without it, far
 * beyond a delivery's time: no late copy arrives afterwards. The events are then cleared, unless
 * `keep`.
 */
async function untilSubscribed(
  feeds: readonly Subscription[],
  notify: () => Promise<unknown>,
  options: { keep?: boolean; timeoutMs?: number } = {},
): Promise<void> {
  let sentAt = 0;
  await pollUntil(
    async () => {
      if (feeds.every((feed) => feed.events.length > 0)) return true;
      if (Date.now() - sentAt >= 1_000) {
        sentAt = Date.now();
        await notify();
      }
      return false;
    },
    { timeoutMs: options.timeoutMs ?? 10_000, intervalMs: 50, what: "the subscriptions to receive a notification" },
  );
  if (options.keep !== true) for (const feed of feeds) feed.events.splice(0);
}

describe("paymentTree: one recursive query, depth from the root, totals", () => {
  const TREE = `query($root: String!, $maxDepth: Int, $nodeLimit: Int) {
    paymentTree(rootTxHash: $root, maxDepth: $maxDepth, nodeLimit: $nodeLimit) {
      rootTxHash truncated
      nodes { txHash parentTxHash depth agentId amount amountUnits protocol endpoint timestamp solanaExplorer status agent { agentId } }
      totals { amount amountUnits transactionCount agentCount } } }`;

  it("a tree of payments by different agents resolves with each payment's depth below the root and the totals line", async () => {
    const { root, c1, c2, g1, gg1 } = world.tree;
    const data: any = await client.ok(world.keys.A, TREE, { root });
    const tree = data.paymentTree;
    const byHash = new Map(world.payments.map((p) => [p.txHash, p]));
    const expected = [
      [root, null, 0],
      [c1, root, 1],
      [c2, root, 1],
      [g1, c2, 2],
      [gg1, g1, 3],
    ] as const;
    expect(tree.nodes.map((n: any) => [n.txHash, n.parentTxHash, n.depth])).toEqual(expected);
    for (const node of tree.nodes) {
      const sent = byHash.get(node.txHash)!;
      expect(node).toMatchObject({
        agentId: sent.agentId,
        amountUnits: sent.amountUnits.toString(),
        amount: usdc(sent.amountUnits),
        protocol: sent.protocol,
        endpoint: DOMAINS[sent.endpoint] === undefined ? hex(endpointHash(sent.endpoint)) : sent.endpoint,
        agent: { agentId: sent.agentId },
      });
      expect(node.solanaExplorer).toContain(node.txHash);
    }
    const amounts = expected.map(([hash]) => byHash.get(hash)!.amountUnits);
    expect(tree.totals).toEqual({
      amount: usdc(sum(amounts)),
      amountUnits: sum(amounts).toString(),
      transactionCount: 5,
      agentCount: new Set(expected.map(([hash]) => byHash.get(hash)!.agentId)).size,
    });
    expect(tree.totals.agentCount).toBe(3);
    expect(tree.truncated).toBe(false);
  });

  it("a subtree resolves with depths relative to its own root", async () => {
    const { c2, g1, gg1 } = world.tree;
    const data: any = await client.ok(world.keys.A, TREE, { root: c2 });
    expect(data.paymentTree.nodes.map((n: any) => [n.txHash, n.depth])).toEqual([
      [c2, 0],
      [g1, 1],
      [gg1, 2],
    ]);
    expect(data.paymentTree.nodes[0].parentTxHash).toBeNull();
  });

  it("maxDepth bounds the walk and says the tree was truncated", async () => {
    const { root, c1, c2 } = world.tree;
    const data: any = await client.ok(world.keys.A, TREE, { root, maxDepth: 1 });
    expect(data.paymentTree.nodes.map((n: any) => n.txHash)).toEqual([root, c1, c2]);
    expect(data.paymentTree.truncated).toBe(true);
    expect(data.paymentTree.totals.transactionCount).toBe(3);
    const rootOnly: any = await client.ok(world.keys.A, TREE, { root, maxDepth: 0 });
    expect(rootOnly.paymentTree.nodes).toHaveLength(1);
  });

  it("nodeLimit bounds the nodes returned and says the tree was truncated", async () => {
    const data: any = await client.ok(world.keys.A, TREE, { root: world.tree.root, nodeLimit: 2 });
    expect(data.paymentTree.nodes).toHaveLength(2);
    expect(data.paymentTree.nodes[0].txHash).toBe(world.tree.root);
    expect(data.paymentTree.truncated).toBe(true);
  });

  it("loadPaymentTree (the function benchmarks import) returns nodes, totals and truncated", async () => {
    const tree = await loadPaymentTree(world.db.pool, world.accounts.A, world.tree.root, { maxDepth: 8, nodeLimit: 100 });
    expect(tree?.nodes.map((n) => n.depth)).toEqual([0, 1, 1, 2, 3]);
    expect(tree?.totals.amountUnits).toBe(2_900_000n);
    expect(tree?.truncated).toBe(false);
  });

  it("another account's agent under the root is left out of the tree, with its subtree", async () => {
    const data: any = await client.ok(world.keys.A, TREE, { root: world.tree.root });
    expect(data.paymentTree.nodes.map((n: any) => n.txHash)).not.toContain(world.tree.foreign);
    // Account B sees its own payment as a root of its own, and nothing of A's tree.
    const b: any = await client.ok(world.keys.B, TREE, { root: world.tree.foreign });
    expect(b.paymentTree.nodes.map((n: any) => [n.txHash, n.depth])).toEqual([[world.tree.foreign, 0]]);
    expect((await client.ok<any>(world.keys.B, TREE, { root: world.tree.root })).paymentTree).toBeNull();
    expect((await client.ok<any>(world.keys.B, TREE, { root: world.tree.c2 })).paymentTree).toBeNull();
  });

  it("getChain as transactions: each tree payment also lists with its depth below the very first root", async () => {
    const data: any = await client.ok(world.keys.A, `{ transaction(txHash: "${world.tree.gg1}") { txHash depth parentTxHash } }`);
    expect(data.transaction).toEqual({ txHash: world.tree.gg1, depth: 3, parentTxHash: world.tree.g1 });
  });
});

// ---- transactions -----------------------------------------------------------------------------

describe("transactions: every filter against what was sent", () => {
  it("transaction(txHash) returns the spec 2.2 fields of a payment", async () => {
    const sent = world.payments.find((p) => p.agentId === "a-spender" && p.amountUnits === 300_000n)!;
    const data: any = await client.ok(
      world.keys.A,
      `query($h: String!) { transaction(txHash: $h) { ${LIST_FIELDS} agent { agentId name } } }`,
      {
        h: sent.txHash,
      },
    );
    expect(data.transaction).toMatchObject({
      id: sent.txHash,
      txHash: sent.txHash,
      agentId: "a-spender",
      protocol: "mpp",
      amountPaid: "0.300000",
      amountPaidUnits: "300000",
      endpoint: sent.endpoint,
      domain: "search.example.org",
      policyCheck: "passed",
      parentTxHash: null,
      timestamp: new Date(sent.atSeconds! * 1000).toISOString(),
      depth: 0,
      status: "confirmed",
      agent: { agentId: "a-spender", name: "a-spender name" },
    });
    expect(data.transaction.solanaExplorer).toMatch(/^https:\/\/explorer\.solana\.com\/tx\//);
  });

  it("with no filter: every chain payment and rejection of the account, newest first", async () => {
    const listed = await listAll(world.keys.A, "");
    expect(listed.map(listedKey).sort()).toEqual(expectedKeys("A", {}));
    const times = listed.map((t) => Date.parse(t.timestamp));
    expect(times).toEqual([...times].sort((a, b) => b - a));
  });

  it("agentId filter", async () => {
    for (const agentId of ["a-orch", "a-sub", "a-subsub", "a-spender"]) {
      const listed = await listAll(world.keys.A, `agentId: "${agentId}"`);
      expect(listed.map(listedKey).sort()).toEqual(expectedKeys("A", { agentId }));
    }
  });

  it("protocol filter", async () => {
    for (const protocol of ["x402", "mpp"] as const) {
      const listed = await listAll(world.keys.A, `protocol: ${protocol}`);
      expect(listed.map(listedKey).sort()).toEqual(expectedKeys("A", { protocol }));
    }
  });

  it("domain filter: an exact host, or a bare domain with its subdomains", async () => {
    for (const domain of ["api.example.com", "search.example.org", "example.org", "example.com", "nowhere.example"]) {
      const listed = await listAll(world.keys.A, `domain: "${domain}"`);
      expect(listed.map(listedKey).sort()).toEqual(expectedKeys("A", { domainSuffix: domain }));
    }
  });

  it("since filter, for each window", async () => {
    for (const [since, seconds] of [
      ["15m", 15 * MINUTE_S],
      ["1h", HOUR_S],
      ["24h", DAY_S],
      ["7d", 7 * DAY_S],
      ["30d", 30 * DAY_S],
      ["60d", 60 * DAY_S],
    ] as const) {
      const listed = await listAll(world.keys.A, `since: "${since}"`);
      expect(listed.map(listedKey).sort(), since).toEqual(expectedKeys("A", { sinceS: seconds }));
    }
  });

  it("status filter: rejected payments appear with status rejected; chain statuses exclude them", async () => {
    const rejected = await listAll(world.keys.A, "status: rejected");
    expect(rejected.map(listedKey).sort()).toEqual(expectedKeys("A", { status: "rejected" }));
    for (const row of rejected) {
      expect(row).toMatchObject({ status: "rejected", txHash: null, policyCheck: "failed" });
      expect(row.rejectionReason).toContain(row.rejectionCode);
    }
    const confirmed = await listAll(world.keys.A, "status: confirmed");
    const finalized = await listAll(world.keys.A, "status: finalized");
    expect([...confirmed, ...finalized].map(listedKey).sort()).toEqual(expectedKeys("A", { status: "chain" }));
  });

  it("filters combine", async () => {
    const listed = await listAll(world.keys.A, `agentId: "a-spender", protocol: x402, since: "7d", domain: "example.org"`);
    const expected = world.payments
      .filter((p) => p.agentId === "a-spender" && p.protocol === "x402" && secondsAgo(p) <= 7 * DAY_S && p.endpoint.startsWith("search."))
      .map((p) => p.txHash);
    expect(listed.map((t) => t.txHash).sort()).toEqual(expected.sort());
    expect(expected.length).toBeGreaterThan(0);
  });

  it("cursor pagination walks every row exactly once, in order", async () => {
    const whole = await listAll(world.keys.A, "");
    for (const pageSize of [1, 3, 4]) {
      const paged = await listAll(world.keys.A, "", pageSize);
      expect(paged.map((t) => t.id)).toEqual(whole.map((t) => t.id));
    }
  });
});

// ---- spend and metrics ------------------------------------------------------------------------

function expectedSpend(account: "A" | "B", agentId: string | undefined, inWindow: (p: SentPayment) => boolean) {
  const agents = accountAgents(account);
  const chosen = world.payments.filter((p) => agents.has(p.agentId) && (agentId === undefined || p.agentId === agentId) && inWindow(p));
  const total = sum(chosen.map((p) => p.amountUnits));
  const group = (key: (p: SentPayment) => string) => {
    const groups = new Map<string, SentPayment[]>();
    for (const p of chosen) groups.set(key(p), [...(groups.get(key(p)) ?? []), p]);
    return [...groups.entries()]
      .map(([k, ps]) => {
        const amount = sum(ps.map((p) => p.amountUnits));
        return { key: k, amount: usdc(amount), amountUnits: amount.toString(), percent: percent(amount, total), txCount: ps.length };
      })
      .sort((a, b) =>
        BigInt(a.amountUnits) === BigInt(b.amountUnits)
          ? a.key.localeCompare(b.key)
          : BigInt(b.amountUnits) > BigInt(a.amountUnits)
            ? 1
            : -1,
      );
  };
  return {
    total: usdc(total),
    totalUnits: total.toString(),
    txCount: chosen.length,
    byProtocol: group((p) => p.protocol).map(({ key, ...rest }) => ({ protocol: key, ...rest })),
    byDomain: group((p) => domainOf(p.endpoint)).map(({ key, ...rest }) => ({ domain: key, ...rest })),
    byAgent: group((p) => p.agentId).map(({ key, ...rest }) => ({ agentId: key, ...rest })),
  };
}

const SPEND = `query($agentId: ID, $window: String, $range: TimeRangeInput) {
  spendSummary(agentId: $agentId, window: $window, range: $range) {
    agentId window from to total totalUnits txCount
    byProtocol { protocol amount amountUnits percent txCount }
    byDomain { domain amount amountUnits percent txCount }
    byAgent { agentId amount amountUnits percent txCount } } }`;

describe("spendSummary: every window against what was sent", () => {
  it("1h, 24h, 7d, 30d for one agent and for the whole account", async () => {
    for (const [window, seconds] of Object.entries(WINDOWS_S)) {
      for (const agentId of ["a-spender", "a-sub", undefined]) {
        const data: any = await client.ok(world.keys.A, SPEND, { agentId: agentId ?? null, window });
        const { agentId: _a, window: w, from, to, ...summary } = data.spendSummary;
        expect(w).toBe(window);
        expect(Date.parse(to) - Date.parse(from)).toBe(seconds * 1000);
        expect(summary, `${window} ${agentId ?? "all"}`).toEqual(expectedSpend("A", agentId, (p) => secondsAgo(p) < seconds));
      }
    }
  });

  it("a custom range", async () => {
    const from = new Date((world.nowSeconds - 45 * DAY_S) * 1000).toISOString();
    const to = new Date((world.nowSeconds - 5 * DAY_S) * 1000).toISOString();
    const data: any = await client.ok(world.keys.A, SPEND, { agentId: "a-spender", range: { from, to } });
    const { agentId: _a, window, from: _f, to: _t, ...summary } = data.spendSummary;
    expect(window).toBe("custom");
    // The range is rounded down to minutes; no payment sits within a minute of its ends.
    expect(summary).toEqual(expectedSpend("A", "a-spender", (p) => secondsAgo(p) <= 45 * DAY_S && secondsAgo(p) > 5 * DAY_S));
    expect(summary.txCount).toBe(2);
  });

  it("the default window is 24h", async () => {
    const data: any = await client.ok(world.keys.A, SPEND, { agentId: "a-spender" });
    expect(data.spendSummary.window).toBe("24h");
  });
});

const METRICS = `query($agentId: ID!, $metrics: [String!], $window: String, $range: TimeRangeInput, $resolution: String) {
  metrics(agentId: $agentId, metrics: $metrics, window: $window, range: $range, resolution: $resolution) {
    agentId window resolution from to
    metrics { spend { timestamp value valueUnits x402Units mppUnits } tx_count { timestamp count }
              policy_violations { timestamp count reason } protocol_split { x402 mpp x402Units mppUnits } } } }`;

function expectedMetrics(agentId: string, from: number, to: number, resolutionS: number) {
  const inRange = (t: number): boolean => t >= from && t < to;
  const paymentTime = (p: SentPayment): number => (p.atSeconds === null ? world.nowSeconds - REAL_TIME_AGO_S : p.atSeconds);
  const chosen = world.payments.filter((p) => p.agentId === agentId && inRange(paymentTime(p)));
  const buckets = Math.ceil((to - from) / resolutionS);
  const spend = Array.from({ length: buckets }, (_, i) => {
    const start = from + i * resolutionS;
    const inBucket = chosen.filter((p) => paymentTime(p) >= start && paymentTime(p) < start + resolutionS);
    const amount = sum(inBucket.map((p) => p.amountUnits));
    const of = (protocol: string): string => sum(inBucket.filter((p) => p.protocol === protocol).map((p) => p.amountUnits)).toString();
    return {
      timestamp: new Date(start * 1000).toISOString(),
      value: usdc(amount),
      valueUnits: amount.toString(),
      x402Units: of("x402"),
      mppUnits: of("mpp"),
    };
  });
  const txCount = Array.from({ length: buckets }, (_, i) => {
    const start = from + i * resolutionS;
    return {
      timestamp: new Date(start * 1000).toISOString(),
      count: chosen.filter((p) => paymentTime(p) >= start && paymentTime(p) < start + resolutionS).length,
    };
  });
  const violations = new Map<string, { timestamp: string; count: number; reason: string }>();
  for (const r of world.rejections.filter((x) => x.agentId === agentId && inRange(x.atSeconds))) {
    const start = from + Math.floor((r.atSeconds - from) / resolutionS) * resolutionS;
    const key = `${start}:${r.reasonCode}`;
    const entry = violations.get(key) ?? { timestamp: new Date(start * 1000).toISOString(), count: 0, reason: r.reasonCode };
    entry.count += 1;
    violations.set(key, entry);
  }
  const x402 = sum(chosen.filter((p) => p.protocol === "x402").map((p) => p.amountUnits));
  const mpp = sum(chosen.filter((p) => p.protocol === "mpp").map((p) => p.amountUnits));
  const share = (part: bigint): string => {
    const whole = x402 + mpp;
    if (whole === 0n) return "0.000000";
    const millionths = (part * 1_000_000n * 2n + whole) / (2n * whole);
    return `${millionths / 1_000_000n}.${(millionths % 1_000_000n).toString().padStart(6, "0")}`;
  };
  return {
    spend,
    tx_count: txCount,
    policy_violations: [...violations.values()].sort((a, b) => a.timestamp.localeCompare(b.timestamp) || a.reason.localeCompare(b.reason)),
    protocol_split: { x402: share(x402), mpp: share(mpp), x402Units: x402.toString(), mppUnits: mpp.toString() },
  };
}

describe("metrics (spec 4.2): every window against what was sent; REST returns the same", () => {
  const windowEnd = (): number => Math.floor(world.nowSeconds / 60) * 60 + 60;

  for (const [window, resolution, resolutionS] of [
    ["1h", "5m", 5 * MINUTE_S],
    ["24h", "1h", HOUR_S],
    ["7d", "6h", 6 * HOUR_S],
    ["30d", "1d", DAY_S],
  ] as const) {
    it(`window ${window} at resolution ${resolution}`, async () => {
      for (const agentId of ["a-spender", "a-orch"]) {
        const data: any = await client.ok(world.keys.A, METRICS, { agentId, window, resolution });
        const to = windowEnd();
        const from = to - WINDOWS_S[window]!;
        expect(data.metrics).toMatchObject({
          agentId,
          window,
          resolution,
          from: new Date(from * 1000).toISOString(),
          to: new Date(to * 1000).toISOString(),
        });
        expect(data.metrics.metrics, `${window} ${agentId}`).toEqual(expectedMetrics(agentId, from, to, resolutionS));
      }
    });
  }

  it("a custom range, and only the metrics asked for", async () => {
    const from = Math.floor((world.nowSeconds - 12 * DAY_S) / 60) * 60;
    const to = Math.floor((world.nowSeconds - DAY_S) / 60) * 60;
    const data: any = await client.ok(world.keys.A, METRICS, {
      agentId: "a-spender",
      metrics: ["spend", "policy_violations"],
      range: { from: new Date(from * 1000).toISOString(), to: new Date(to * 1000).toISOString() },
      resolution: "1d",
    });
    const expected = expectedMetrics("a-spender", from, to, DAY_S);
    expect(data.metrics.window).toBe("custom");
    expect(data.metrics.metrics).toEqual({
      spend: expected.spend,
      policy_violations: expected.policy_violations,
      tx_count: null,
      protocol_split: null,
    });
  });

  it("GET /v1/agents/{agentId}/metrics returns the same data as the GraphQL field", async () => {
    const graph: any = await client.ok(world.keys.A, METRICS, { agentId: "a-spender", window: "24h", resolution: "1h" });
    const response = await fetch(
      `${baseUrl()}/v1/agents/a-spender/metrics?metrics=spend,tx_count,policy_violations,protocol_split&window=24h&resolution=1h`,
      { headers: { authorization: `Bearer ${world.keys.A}` } },
    );
    expect(response.status).toBe(200);
    const text = await response.text();
    // Spec 4.2: spend values and protocol shares are JSON numbers, written with the amount's exact
    // decimal digits; everything else equals the GraphQL field.
    for (const point of graph.metrics.metrics.spend) expect(text).toContain(`"value":${point.value},`);
    expect(text).toContain(`"x402":${graph.metrics.metrics.protocol_split.x402},`);
    const body = JSON.parse(text);
    for (const point of body.metrics.spend) expect(typeof point.value).toBe("number");
    expect(typeof body.metrics.protocol_split.mpp).toBe("number");
    const withSpecNumbers = (metrics: any) => ({
      ...metrics,
      metrics: {
        ...metrics.metrics,
        spend: metrics.metrics.spend.map((p: any) => ({ ...p, value: Number(p.value) })),
        protocol_split: {
          ...metrics.metrics.protocol_split,
          x402: Number(metrics.metrics.protocol_split.x402),
          mpp: Number(metrics.metrics.protocol_split.mpp),
        },
      },
    });
    expect(body).toEqual(withSpecNumbers(graph.metrics));
  });
});

function baseUrl(): string {
  const address = server.http.address();
  if (address === null || typeof address !== "object") throw new Error("not listening");
  return `http://127.0.0.1:${address.port}`;
}

// ---- agents, wallets, invocations ---------------------------------------------------------------

describe("agents, wallet and invocation budgets", () => {
  it("agents lists the account's agents with balances read from the chain", async () => {
    const data: any = await client.ok(world.keys.A, "{ agents { agentId name walletAddress balance balanceUnits } }");
    expect(data.agents.map((a: any) => a.agentId)).toEqual(["a-orch", "a-spender", "a-sub", "a-subsub"]);
    for (const agent of data.agents) {
      const onChain = await tokenBalanceUnits(world.ledger.provider, world.wallets[agent.agentId]!.tokenAccount);
      expect(agent).toMatchObject({
        walletAddress: world.wallets[agent.agentId]!.publicKey.toBase58(),
        balanceUnits: onChain.toString(),
        balance: usdc(onChain),
      });
    }
  });

  it("wallet(agentId) gives address, balance and network", async () => {
    const data: any = await client.ok(world.keys.A, `{ wallet(agentId: "a-spender") { agentId address balance balanceUnits network } }`);
    const onChain = await tokenBalanceUnits(world.ledger.provider, world.wallets["a-spender"]!.tokenAccount);
    expect(data.wallet).toEqual({
      agentId: "a-spender",
      address: world.wallets["a-spender"]!.publicKey.toBase58(),
      balance: usdc(onChain),
      balanceUnits: onChain.toString(),
      network: "solana-localnet",
    });
  });

  it("invocation(txHash) gives the budgets opened under a transaction and their consumption", async () => {
    const data: any = await client.ok(
      world.keys.A,
      `query($h: String!) { invocation(txHash: $h) { parentTxHash budgetUnits spentUnits remainingUnits paymentCount
         subAgents { invocation invokerAgentId subAgentId budgetUnits spentUnits remaining paymentCount } } }`,
      { h: world.tree.root },
    );
    const first = world.invocations.first.toBase58();
    const foreign = world.invocations.foreign.toBase58();
    const sub = data.invocation.subAgents.sort((a: any, b: any) => (a.budgetUnits > b.budgetUnits ? -1 : 1));
    expect(sub).toEqual(
      [
        {
          invocation: first,
          invokerAgentId: "a-orch",
          subAgentId: "a-sub",
          budgetUnits: "3000000",
          spentUnits: "2500000",
          remaining: "0.500000",
          paymentCount: 2,
        },
        // B's agent was invoked by A's orchestrator: A sees the budget, not B's agent id.
        {
          invocation: foreign,
          invokerAgentId: "a-orch",
          subAgentId: null,
          budgetUnits: "1000000",
          spentUnits: "300000",
          remaining: "0.700000",
          paymentCount: 1,
        },
      ].sort((a, b) => (a.budgetUnits > b.budgetUnits ? -1 : 1)),
    );
    expect(data.invocation).toMatchObject({
      parentTxHash: world.tree.root,
      budgetUnits: "4000000",
      spentUnits: "2800000",
      remainingUnits: "1200000",
      paymentCount: 3,
    });
  });
});

// ---- policy (delegated to api/shared/policy) -----------------------------------------------------------

describe("policy and checkPolicy: the policy engine's read view and dry run", () => {
  const POLICY = `query($agentId: ID!) { policy(agentId: $agentId) {
    agentId dailyBudget dailyBudgetUnits perCallLimit perCallLimitUnits allowedDomains blockedDomains
    rateLimit { calls window } protocolPreference usedToday usedTodayUnits budgetState windowStart windowResetsAt
    rateUsage { calls limit window } updatedAt } }`;
  const CHECK = `query($agentId: ID!, $endpoint: String!, $amount: String!) {
    checkPolicy(agentId: $agentId, endpoint: $endpoint, amount: $amount) {
      allowed decision reasonCode reason errorClass endpointRule domain protocol budgetState budgetUsedUnits budgetLimitUnits warnings } }`;

  beforeAll(async () => {
    await putPolicy(
      world.db.pool,
      "a-spender",
      {
        dailyBudgetUnits: 10_000_000n,
        perCallLimitUnits: 3_000_000n,
        allowedDomains: ["example.com"],
        rateLimit: { calls: 5, window: "1h" },
        endpointBudgets: [{ match: "api.example.com/v2", dailyBudgetUnits: null, perCallLimitUnits: 1_000_000n, rateLimit: null }],
      },
      world.now,
    );
    // Two payments the gateway let through: 8 of 10 USDC used, the 80 % warning reached.
    for (const amountUnits of [2_500_000n, 2_500_000n, 3_000_000n]) {
      const reserved = await reserveWithinPolicy(
        world.db.pool,
        "a-spender",
        { endpoint: "api.example.com/v1/quote", amountUnits },
        new Date(world.now.getTime() - 60_000),
      );
      expect(reserved.decision.decision).toBe("allow");
    }
  });

  it("policy(agentId) shows the limits, usedToday, the budget state and the rate usage", async () => {
    const data: any = await client.ok(world.keys.A, POLICY, { agentId: "a-spender" });
    expect(data.policy).toMatchObject({
      agentId: "a-spender",
      dailyBudget: "10.000000",
      perCallLimitUnits: "3000000",
      allowedDomains: ["example.com"],
      blockedDomains: [],
      rateLimit: { calls: 5, window: "1h" },
      protocolPreference: "auto",
      usedToday: "8.000000",
      usedTodayUnits: "8000000",
      budgetState: "warning",
      rateUsage: { calls: 3, limit: 5, window: "1h" },
    });
    expect(Date.parse(data.policy.windowResetsAt) - Date.parse(data.policy.windowStart)).toBe(DAY_S * 1000);
  });

  it("an agent without a stored policy has no limits and nothing used", async () => {
    const data: any = await client.ok(world.keys.A, POLICY, { agentId: "a-orch" });
    expect(data.policy).toMatchObject({
      dailyBudget: null,
      perCallLimit: null,
      allowedDomains: null,
      usedToday: "0.000000",
      budgetState: "open",
      updatedAt: null,
    });
  });

  it("checkPolicy answers each rule's breach, and allows what fits, recording nothing", async () => {
    const cases = [
      ["api.example.com/v1/quote", "3.5", "per_call_limit_exceeded"],
      ["api.example.com/v1/quote", "2.5", "daily_budget_exceeded"],
      ["search.example.org/v2/find", "0.1", "domain_not_allowed"],
      ["api.example.com/v1/quote", "2", null],
    ] as const;
    for (const [endpoint, amount, reasonCode] of cases) {
      const data: any = await client.ok(world.keys.A, CHECK, { agentId: "a-spender", endpoint, amount });
      expect(data.checkPolicy.reasonCode, `${endpoint} ${amount}`).toBe(reasonCode);
      expect(data.checkPolicy.allowed).toBe(reasonCode === null);
      // Spec 7's form where a limit exists; a domain refusal names the host and the rule instead.
      if (reasonCode === "domain_not_allowed") {
        expect(data.checkPolicy.reason).toBe("domain_not_allowed: search.example.org is not on the policy's allowedDomains");
      } else if (reasonCode !== null) {
        expect(data.checkPolicy.reason).toMatch(new RegExp(`^${reasonCode}: requested `));
      }
    }
    const after: any = await client.ok(world.keys.A, POLICY, { agentId: "a-spender" });
    expect(after.policy.usedTodayUnits).toBe("8000000");
  });

  it("checkPolicy names the endpointBudgets rule that refuses, and no rule when the agent's own limit does", async () => {
    const check = async (endpoint: string, amount: string) =>
      ((await client.ok(world.keys.A, CHECK, { agentId: "a-spender", endpoint, amount })) as any).checkPolicy;
    expect(await check("api.example.com/v2/search", "1.5")).toMatchObject({
      reasonCode: "per_call_limit_exceeded",
      endpointRule: "api.example.com/v2",
    });
    expect(await check("api.example.com/v1/quote", "3.5")).toMatchObject({ reasonCode: "per_call_limit_exceeded", endpointRule: null });
    expect(await check("api.example.com/v2/search", "0.5")).toMatchObject({ allowed: true, endpointRule: null });
  });

  it("bad amounts and endpoints are BAD_USER_INPUT; another account's agent is NOT_FOUND", async () => {
    for (const [endpoint, amount] of [
      ["api.example.com/x", "-1"],
      ["api.example.com/x", "1.1234567"],
      ["api.example.com/x", "abc"],
      ["", "1"],
      ["ftp://x.example.com/", "1"],
    ]) {
      expect(await client.codes(world.keys.A, CHECK, { agentId: "a-spender", endpoint, amount }), `${endpoint} ${amount}`).toEqual([
        "BAD_USER_INPUT",
      ]);
    }
    expect(await client.codes(world.keys.B, CHECK, { agentId: "a-spender", endpoint: "api.example.com/x", amount: "1" })).toEqual([
      "NOT_FOUND",
    ]);
    expect(await client.codes(world.keys.B, POLICY, { agentId: "a-spender" })).toEqual(["NOT_FOUND"]);
  });
});

// ---- isolation --------------------------------------------------------------------------------

describe("isolation: a key of one account never sees another account's data", () => {
  const aHashes = (): Set<string> => new Set(world.payments.filter((p) => p.account === "A").map((p) => p.txHash));

  it("B's listings, with every filter, hold only B's payments and rejections", async () => {
    for (const filter of [
      "",
      "protocol: x402",
      "protocol: mpp",
      `domain: "example.org"`,
      `since: "30d"`,
      "status: rejected",
      "status: confirmed",
    ]) {
      const listed = await listAll(world.keys.B, filter);
      for (const row of listed) expect(row.agentId).toBe("b-agent");
      for (const row of listed) if (row.txHash !== null) expect(aHashes().has(row.txHash)).toBe(false);
    }
    expect((await listAll(world.keys.B, "")).map(listedKey).sort()).toEqual(expectedKeys("B", {}));
  });

  it("B gets null for A's transactions, trees and invocations, and NOT_FOUND for A's agents everywhere", async () => {
    for (const hash of aHashes()) {
      expect((await client.ok<any>(world.keys.B, `{ transaction(txHash: "${hash}") { txHash } }`)).transaction).toBeNull();
      expect((await client.ok<any>(world.keys.B, `{ paymentTree(rootTxHash: "${hash}") { truncated } }`)).paymentTree).toBeNull();
    }
    expect((await client.ok<any>(world.keys.B, `{ invocation(txHash: "${world.tree.c2}") { budgetUnits } }`)).invocation).toBeNull();
    // B's own agent's budget under A's root: only B's part is shown.
    const foreign: any = await client.ok(
      world.keys.B,
      `{ invocation(txHash: "${world.tree.root}") { budgetUnits subAgents { subAgentId invokerAgentId } } }`,
    );
    expect(foreign.invocation).toEqual({ budgetUnits: "1000000", subAgents: [{ subAgentId: "b-agent", invokerAgentId: null }] });
    for (const query of [
      `{ transactions(agentId: "a-spender") { nodes { id } } }`,
      `{ spendSummary(agentId: "a-spender", window: "30d") { total } }`,
      `{ metrics(agentId: "a-spender", window: "24h") { agentId } }`,
      `{ wallet(agentId: "a-spender") { address } }`,
      `{ metrics(agentId: "no-such-agent", window: "24h") { agentId } }`,
    ]) {
      expect(await client.codes(world.keys.B, query), query).toEqual(["NOT_FOUND"]);
    }
    const agents: any = await client.ok(world.keys.B, "{ agents { agentId } }");
    expect(agents.agents).toEqual([{ agentId: "b-agent" }]);
    const rest = await fetch(`${baseUrl()}/v1/agents/a-spender/metrics?window=24h`, {
      headers: { authorization: `Bearer ${world.keys.B}` },
    });
    expect(rest.status).toBe(404);
    expect(await rest.json()).toMatchObject({ code: "NOT_FOUND" });
  });

  it("B's account-wide spend counts only B's payments", async () => {
    for (const [window, seconds] of Object.entries(WINDOWS_S)) {
      const data: any = await client.ok(world.keys.B, SPEND, { window });
      const { agentId: _a, window: _w, from: _f, to: _t, ...summary } = data.spendSummary;
      expect(summary).toEqual(expectedSpend("B", undefined, (p) => secondsAgo(p) < seconds));
    }
  });

  it("the live feed delivers a new transaction to its account's subscribers only", async () => {
    const query = "subscription { transactionRecorded { txHash agentId amountPaidUnits } }";
    const a = await client.subscribe(world.keys.A, query);
    const aOneAgent = await client.subscribe(world.keys.A, `subscription { transactionRecorded(agentId: "a-spender") { txHash } }`);
    const b = await client.subscribe(world.keys.B, query);
    const waitFor = async (done: () => boolean): Promise<void> => {
      await pollUntil(done, { timeoutMs: 10_000, intervalMs: 50, what: "the feed's events" });
    };
    try {
      // A notification of a-spender's payment reaches a and aOneAgent, one of b-agent's reaches b.
      await untilSubscribed([a, aOneAgent], notifyOf("a-spender"));
      await untilSubscribed([b], notifyOf("b-agent"));
      // Real payments through the ledger, projected by the indexer, whose commit notifies the feed.
      const fromA = await world.pay("a-sub", 12_345n, "x402", "api.example.com/v1/live");
      const fromB = await world.pay("b-agent", 54_321n, "mpp", "api.example.com/v1/live");
      await world.ingestNew();
      await waitFor(() => a.events.length >= 1 && b.events.length >= 1);
      await sleep(300); // a window for a second (wrong) event to arrive
      expect(a.events.map((e) => e.data.transactionRecorded)).toEqual([{ txHash: fromA, agentId: "a-sub", amountPaidUnits: "12345" }]);
      expect(b.events.map((e) => e.data.transactionRecorded)).toEqual([{ txHash: fromB, agentId: "b-agent", amountPaidUnits: "54321" }]);
      expect(aOneAgent.events).toEqual([]);
      // A notification as the indexer sends it for one agent reaches that agent's filtered feed.
      const spender = world.payments.find((p) => p.agentId === "a-spender")!;
      await notifyOf("a-spender")();
      await waitFor(() => aOneAgent.events.length >= 1);
      expect(aOneAgent.events.map((e) => e.data.transactionRecorded.txHash)).toEqual([spender.txHash]);
      expect(b.events).toHaveLength(1);
    } finally {
      a.close();
      aOneAgent.close();
      b.close();
    }
  });

  it("the live feed reconnects when its LISTEN connection is lost", async () => {
    const listeners = async (): Promise<string[]> =>
      (
        await world.db.pool.query<{ pid: string }>(
          "SELECT pid::text FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN ledger_transactions'",
        )
      ).rows.map((r) => r.pid);
    const [pid] = await listeners();
    expect(pid).toBeDefined();
    await world.db.pool.query("SELECT pg_terminate_backend($1::int)", [pid]);
    const deadline = Date.now() + 10_000;
    await pollUntil(async () => (await listeners()).some((p) => p !== pid), {
      timeoutMs: 10_000,
      intervalMs: 100,
      what: "a new LISTEN connection",
    });
    const feed = await client.subscribe(world.keys.A, `subscription { transactionRecorded(agentId: "a-orch") { txHash } }`);
    try {
      // The root payment's notification, sent again until the new subscription is in place to get it.
      const notifyRoot = () =>
        world.db.pool.query("SELECT pg_notify('ledger_transactions', $1)", [
          JSON.stringify({ txHash: world.tree.root, agent: world.wallets["a-orch"]!.publicKey.toBase58(), slot: "1" }),
        ]);
      await untilSubscribed([feed], notifyRoot, { keep: true, timeoutMs: deadline + 5_000 - Date.now() });
      expect(feed.events.map((e) => e.data.transactionRecorded.txHash)).toEqual([world.tree.root]);
    } finally {
      feed.close();
    }
  });
});

// ---- authentication and bad input -------------------------------------------------------------

describe("authentication and bad input get clear coded errors", () => {
  it("a missing, malformed, unknown or revoked key is AUTHENTICATION_ERROR, not an empty result", async () => {
    const query = "{ agents { agentId } }";
    const revoked = (await import("../../api/shared/keys.js")).issueApiKey(world.db.pool, world.accounts.A);
    const { apiKey } = await revoked;
    await (await import("../../api/shared/keys.js")).revokeApiKey(world.db.pool, apiKey);
    for (const key of [null, "", "not-a-key", `apg_${"x".repeat(43)}`, apiKey]) {
      const result = await client.gql(key, query);
      expect(result.status, String(key)).toBe(401);
      expect(result.errors?.map((e) => e.extensions?.code)).toEqual(["AUTHENTICATION_ERROR"]);
      expect(result.data ?? null).toBeNull();
    }
    const rest = await fetch(`${baseUrl()}/v1/agents/a-spender/metrics`);
    expect(rest.status).toBe(401);
  });

  it.each([
    ["a malformed hash", `{ transaction(txHash: "0xdeadbeef") { txHash } }`],
    ["a hash of the wrong length", `{ paymentTree(rootTxHash: "${"1".repeat(40)}") { truncated } }`],
    ["a negative limit", `{ transactions(limit: -1) { nodes { id } } }`],
    ["a zero limit", `{ transactions(limit: 0) { nodes { id } } }`],
    ["an oversized limit", `{ transactions(limit: 100000) { nodes { id } } }`],
    ["an unknown since window", `{ transactions(since: "yesterday") { nodes { id } } }`],
    ["a forged cursor", `{ transactions(after: "bm9wZQ") { nodes { id } } }`],
    ["a bad domain", `{ transactions(domain: "not a domain!") { nodes { id } } }`],
    ["an unknown spend window", `{ spendSummary(window: "2h") { total } }`],
    ["an unknown metrics window", `{ metrics(agentId: "a-spender", window: "90d") { agentId } }`],
    ["an unknown metric", `{ metrics(agentId: "a-spender", metrics: ["latency"]) { agentId } }`],
    ["an unknown resolution", `{ metrics(agentId: "a-spender", resolution: "7s") { agentId } }`],
    ["too many buckets", `{ metrics(agentId: "a-spender", window: "30d", resolution: "1m") { agentId } }`],
    ["a reversed custom range", `{ spendSummary(range: { from: "2026-01-02T00:00:00Z", to: "2026-01-01T00:00:00Z" }) { total } }`],
    ["a zone-less date", `{ spendSummary(range: { from: "2026-01-01T00:00:00", to: "2026-01-02T00:00:00Z" }) { total } }`],
    ["a negative tree depth", `{ paymentTree(rootTxHash: "${"1".repeat(88)}", maxDepth: -1) { truncated } }`],
    ["an oversized node limit", `{ paymentTree(rootTxHash: "${"1".repeat(88)}", nodeLimit: 1000000) { truncated } }`],
    ["a malformed agent id", `{ wallet(agentId: "../etc") { address } }`],
  ])("%s is BAD_USER_INPUT", async (_name, query) => {
    expect(await client.codes(world.keys.A, query)).toEqual(["BAD_USER_INPUT"]);
  });

  it("a query nested too deep is QUERY_TOO_DEEP, counted through fragments", async () => {
    const h = world.tree.gg1;
    const atLimit = `{ transaction(txHash: "${h}") { parent { parent { parent { parent { txHash } } } } } }`;
    const data: any = await client.ok(world.keys.A, atLimit);
    expect(data.transaction.parent.parent.parent.parent).toBeNull(); // the root has no parent
    expect(
      (await client.ok<any>(world.keys.A, `{ transaction(txHash: "${h}") { parent { parent { txHash } } } }`)).transaction.parent.parent
        .txHash,
    ).toBe(world.tree.c2);
    const tooDeep = `{ transaction(txHash: "${h}") { parent { parent { parent { parent { parent { parent { txHash } } } } } } } }`;
    expect(await client.codes(world.keys.A, tooDeep)).toEqual(["QUERY_TOO_DEEP"]);
    const viaFragments = `fragment P on Transaction { parent { parent { ...Q } } } fragment Q on Transaction { parent { parent { txHash } } }
      { transaction(txHash: "${h}") { parent { ...P } } }`;
    expect(await client.codes(world.keys.A, viaFragments)).toEqual(["QUERY_TOO_DEEP"]);
  });

  it("an oversized query is QUERY_TOO_COSTLY, before anything runs", async () => {
    const tree = `paymentTree(rootTxHash: "${world.tree.root}", nodeLimit: 5000) { nodes { txHash parentTxHash depth agentId amount amountUnits protocol endpoint timestamp status agent { agentId name } } }`;
    const query = `{ ${Array.from({ length: 5 }, (_, i) => `t${i}: ${tree}`).join(" ")} }`;
    expect(await client.codes(world.keys.A, query)).toEqual(["QUERY_TOO_COSTLY"]);
    // With a variable the worst case (the maximum) is assumed.
    const viaVariable = `query($n: Int) { ${Array.from({ length: 2 }, (_, i) => `t${i}: transactions(limit: $n) { nodes { agent { balance } } }`).join(" ")} }`;
    expect(await client.codes(world.keys.A, viaVariable, { n: 1 })).toEqual([]);
  });

  it("a document with too many tokens, or that does not parse, is GRAPHQL_PARSE_FAILED", async () => {
    const query = `{ ${Array.from({ length: 3000 }, (_, i) => `a${i}: agents { agentId }`).join(" ")} }`;
    const result = await client.gql(world.keys.A, query);
    expect(result.errors?.map((e) => e.extensions?.code)).toEqual(["GRAPHQL_PARSE_FAILED"]);
    expect(result.errors?.[0]?.message).toContain("4000 tokens");
    expect(result.data ?? null).toBeNull();
    expect(await client.codes(world.keys.A, "{ agents { agentId ")).toEqual(["GRAPHQL_PARSE_FAILED"]);
  });
});
