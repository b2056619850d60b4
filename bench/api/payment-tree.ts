/**
 * paymentTree latency: `loadPaymentTree` (the closure table's pages, narrow rows) on a 10,000-node tree of
 * depth 10, against a per-level resolver baseline (one query per node for its children, no
 * recursive query, no DataLoader) in the same run, on the same database. Goals: p99 < 50 ms,
 * baseline / recursive >= 20x. Both answers are checked against the seeded tree first (same
 * nodes, parents, depths, agents, amounts and totals); a difference exits non-zero.
 * Then the same tree through GraphQL over HTTP (`createApiServer`), at the API's node limit.
 *
 * The recursive walk it replaced (`walkPaymentTree`, now its fallback) and the older closure-table
 * statement with the driver's object rows (bench/api/closure-tree.ts) are further same-run
 * baselines and must return the seeded tree too. Baselines and the measured query run
 * interleaved, so load from elsewhere on a shared machine falls on both alike; each also reports
 * its CPU time per call (this process and the database backends, ./cpu-time.ts). The loader and
 * the HTTP request then run again back to back, with no baseline's garbage collected in their calls.
 *
 *   npx tsx bench/api/payment-tree.ts [--iterations 100 --baseline-iterations 5 --warmup 3 --http-iterations 20]
 *                                     [--nodes 10000 --depth 10 --background 100000]
 */
import { availableParallelism, loadavg } from "node:os";
import { parseArgs } from "node:util";
import type pg from "pg";
import { issueApiKey } from "../../api/shared/keys.js";
import { loadPaymentTree, type PaymentTree, walkPaymentTree } from "../../api/query/read/payment-tree.js";
import { createApiServer } from "../../api/query/server.js";
import { TREE_DEPTH_DEFAULT, TREE_NODE_LIMIT_MAX } from "../../api/shared/validation.js";
import { createFreshDatabase } from "../../test/indexer/fresh-database.js";
import { CpuMeter } from "./cpu-time.js";
import { type BaselineTree, resolveTreePerLevel } from "./per-level-resolver.js";
import { closureTreeBefore } from "./closure-tree.js";
import { type Fixture, seedFixture } from "./tree-fixture.js";

const { values: flags } = parseArgs({
  options: {
    iterations: { type: "string", default: "100" },
    "baseline-iterations": { type: "string", default: "5" },
    warmup: { type: "string", default: "3" },
    "http-iterations": { type: "string", default: "100" },
    nodes: { type: "string", default: "10000" },
    depth: { type: "string", default: "10" },
    background: { type: "string", default: "100000" },
  },
});
const ITERATIONS = Number(flags.iterations);
const BASELINE_ITERATIONS = Number(flags["baseline-iterations"]);
const WARMUP = Number(flags.warmup);
const HTTP_ITERATIONS = Number(flags["http-iterations"]);
const SHAPE = {
  treeNodes: Number(flags.nodes),
  treeDepth: Number(flags.depth),
  foreignBranch: 100,
  backgroundPayments: Number(flags.background),
  accounts: 20,
  agentsPerAccount: 40,
};
const GOAL_P99_MS = 50;
const GOAL_HTTP_P99_MS = 80;
const SERVER_SIDE_RUNS = 5;
const GOAL_SPEEDUP = 20;

interface Stats {
  readonly n: number;
  readonly p50: number;
  readonly p95: number;
  readonly p99: number;
  readonly mean: number;
}

/** Nearest-rank percentiles: with few samples p99 is the slowest one. */
function stats(samples_ms: readonly number[]): Stats {
  const sorted = [...samples_ms].sort((a, b) => a - b);
  const rank = (p: number): number => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
  return {
    n: sorted.length,
    p50: rank(50),
    p95: rank(95),
    p99: rank(99),
    mean: sorted.reduce((sum, x) => sum + x, 0) / sorted.length,
  };
}

/** The SQL text and parameters `work` sends through the pool (its last query). */
async function captureStatement(
  work: (pool: pg.Pool) => Promise<unknown>,
  pool: pg.Pool,
): Promise<{ readonly text: string; readonly values: unknown[] }> {
  let captured: { text: string; values: unknown[] } | undefined;
  const recording = new Proxy(pool, {
    get(target, property, receiver) {
      if (property !== "query") return Reflect.get(target, property, receiver) as unknown;
      return (query: string | pg.QueryConfig, values?: unknown[]) => {
        captured = typeof query === "string" ? { text: query, values: values ?? [] } : { text: query.text, values: query.values ?? [] };
        return typeof query === "string" ? target.query(query, values) : target.query(query);
      };
    },
  });
  await work(recording);
  if (captured === undefined) throw new Error("the loader sent no query through the pool");
  return captured;
}

const goal = (p99: number, goalMs: number): string => `${p99 < goalMs ? "met" : "NOT met"} (${p99.toFixed(1)} ms)`;

async function timed<T>(work: () => Promise<T>): Promise<[number, T]> {
  const started = performance.now();
  const result = await work();
  return [performance.now() - started, result];
}

type Answer = Pick<PaymentTree, "totals" | "truncated"> & { readonly nodes: readonly BaselineTree["nodes"][number][] };

/** Differences between an answer and the seeded tree, as readable lines (empty = identical). */
function differences(answer: Answer | null, fixture: Fixture): string[] {
  if (answer === null) return ["no tree (null): the root is not visible to the account"];
  const problems: string[] = [];
  const seen = new Set<string>();
  for (const node of answer.nodes) {
    const want = fixture.expected.get(node.txHash);
    if (want === undefined) {
      problems.push(`unexpected node ${node.txHash} at depth ${node.depth}`);
    } else if (
      want.parentTxHash !== node.parentTxHash ||
      want.depth !== node.depth ||
      want.agentId !== node.agentId ||
      want.amountUnits !== node.amountUnits
    ) {
      problems.push(`node ${node.txHash}: got ${JSON.stringify({ ...node, amountUnits: String(node.amountUnits) })}`);
    }
    if (seen.has(node.txHash)) problems.push(`node ${node.txHash} twice`);
    seen.add(node.txHash);
  }
  const missing = [...fixture.expected.keys()].filter((txHash) => !seen.has(txHash));
  if (missing.length > 0) problems.push(`${missing.length} nodes missing, e.g. ${missing.slice(0, 3).join(", ")}`);
  const want = fixture.expectedTotals;
  const got = answer.totals;
  if (got.amountUnits !== want.amountUnits || got.transactionCount !== want.transactionCount || got.agentCount !== want.agentCount) {
    problems.push(
      `totals ${got.amountUnits} units / ${got.transactionCount} tx / ${got.agentCount} agents, ` +
        `expected ${want.amountUnits} / ${want.transactionCount} / ${want.agentCount}`,
    );
  }
  if (answer.truncated) problems.push("truncated, expected the whole tree");
  return problems;
}

const ms = (value: number): string => `${value.toFixed(1)} ms`.padStart(10);
const row = (label: string, s: Stats): string =>
  `${label.padEnd(44)}${String(s.n).padStart(5)}${ms(s.p50)}${ms(s.p95)}${ms(s.p99)}${ms(s.mean)}`;
const ratio = (a: number, b: number): string => `${(a / b).toFixed(1)}x`;
const count = (n: number): string => n.toLocaleString("en-US");

const TREE_QUERY = `
  query Tree($root: String!, $nodeLimit: Int) {
    paymentTree(rootTxHash: $root, nodeLimit: $nodeLimit) {
      nodes { txHash parentTxHash depth agentId amount amountUnits protocol endpoint timestamp solanaExplorer status }
      totals { amount amountUnits transactionCount agentCount }
      truncated
    }
  }`;

async function run(): Promise<void> {
  const db = await createFreshDatabase();
  try {
    const fixture = await seedFixture(db.pool, SHAPE);
    console.log(
      `paymentTree: ${count(fixture.expected.size)} nodes, depth ${SHAPE.treeDepth}, ${count(fixture.expectedTotals.agentCount)} agents ` +
        `(database: ${count(fixture.payments)} payments, ${count(fixture.edges)} edges; seeded in ${(fixture.seedMs / 1000).toFixed(1)} s)`,
    );
    const bounds = { maxDepth: TREE_DEPTH_DEFAULT, nodeLimit: SHAPE.treeNodes };
    const recursive = (): Promise<PaymentTree | null> => loadPaymentTree(db.pool, fixture.accountId, fixture.rootTxHash, bounds);
    const baseline = (): Promise<BaselineTree> => resolveTreePerLevel(db.pool, fixture.accountId, fixture.rootTxHash, bounds);

    // loadPaymentTree before: the recursive walk, narrow rows (its fallback now).
    const walk = (): Promise<PaymentTree | null> => walkPaymentTree(db.pool, fixture.accountId, fixture.rootTxHash, bounds);

    // loadPaymentTree before narrow rows: the older closure-table statement, object rows.
    const before = (): Promise<PaymentTree | null> => closureTreeBefore(db.pool, fixture.accountId, fixture.rootTxHash, bounds);

    const recursiveAnswer = await recursive();
    const beforeAnswer = await before();
    const baselineAnswer = await baseline();
    const walkAnswer = await walk();
    const problems = [
      ...differences(recursiveAnswer, fixture).map((line) => `loadPaymentTree: ${line}`),
      ...differences(walkAnswer, fixture).map((line) => `recursive walk: ${line}`),
      ...differences(beforeAnswer, fixture).map((line) => `closure before narrow rows: ${line}`),
      ...differences(baselineAnswer, fixture).map((line) => `per-level resolver: ${line}`),
    ];
    if (problems.length > 0) {
      console.error(`the two resolvers do not both return the seeded tree:\n  ${problems.slice(0, 20).join("\n  ")}`);
      process.exitCode = 1;
      return;
    }

    // The checked runs above warmed both up; the recursive one gets a few more (it is the fast one).
    for (let i = 0; i < WARMUP; i += 1) await recursive();
    for (let i = 0; i < WARMUP; i += 1) await walk();
    for (let i = 0; i < WARMUP; i += 1) await before();
    const recursive_ms: number[] = [];
    const before_ms: number[] = [];
    const walk_ms: number[] = [];
    const baseline_ms: number[] = [];
    // CPU time per call beside wall time: under load, wall time follows the other processes.
    const meter = new CpuMeter(db.pool);
    const perRound = Math.ceil(ITERATIONS / BASELINE_ITERATIONS);
    for (let round = 0; round < BASELINE_ITERATIONS; round += 1) {
      baseline_ms.push((await timed(baseline))[0]);
      await meter.refresh();
      for (let i = 0; i < perRound && recursive_ms.length < ITERATIONS; i += 1) {
        recursive_ms.push((await meter.time("recursive", recursive))[0]);
        walk_ms.push((await meter.time("walk", walk))[0]);
        before_ms.push((await meter.time("before", before))[0]);
      }
    }
    while (recursive_ms.length < ITERATIONS) {
      recursive_ms.push((await meter.time("recursive", recursive))[0]);
      walk_ms.push((await meter.time("walk", walk))[0]);
      before_ms.push((await meter.time("before", before))[0]);
    }
    // The same calls back to back, nothing between them. Interleaved, each call also collects the
    // baselines' garbage (their object rows, the walk's wider rows): its CPU time and tail carry it.
    const alone_ms: number[] = [];
    for (let i = 0; i < ITERATIONS; i += 1) alone_ms.push((await meter.time("alone", recursive))[0]);

    // Where the recursive time goes: the statement's execution time inside Postgres (EXPLAIN
    // ANALYZE without per-node timing, so close to the real cost) against the time seen by the
    // caller, which adds the round trip and decoding 10,000 rows into nodes.
    const statement = await captureStatement((pool) => loadPaymentTree(pool, fixture.accountId, fixture.rootTxHash, bounds), db.pool);
    const walkStatement = await captureStatement((pool) => walkPaymentTree(pool, fixture.accountId, fixture.rootTxHash, bounds), db.pool);
    const server_ms: number[] = [];
    const walk_server_ms: number[] = [];
    const executionMs = async (captured: { text: string; values: unknown[] }): Promise<number> => {
      const plan = await db.pool.query<{ "QUERY PLAN": [{ "Execution Time": number }] }>(
        `EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) ${captured.text}`,
        captured.values,
      );
      return plan.rows[0]!["QUERY PLAN"][0]["Execution Time"];
    };
    for (let i = 0; i < SERVER_SIDE_RUNS; i += 1) {
      server_ms.push(await executionMs(statement));
      walk_server_ms.push(await executionMs(walkStatement));
    }

    // GraphQL over HTTP: the whole request (auth, validation, the loader, endpoint DataLoader,
    // JSON of every node field), at the API's node limit (a 10,000-node tree is cut at it).
    const { apiKey } = await issueApiKey(db.pool, fixture.accountId);
    const server = createApiServer({ pool: db.pool, liveFeed: false });
    const port = await server.listen(0);
    const http_ms: number[] = [];
    const capped_ms: number[] = [];
    const capped_walk_ms: number[] = [];
    const http_alone_ms: number[] = [];
    let httpNodes = 0;
    try {
      const request = async (): Promise<void> => {
        const response = await fetch(`http://127.0.0.1:${port}/graphql`, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
          body: JSON.stringify({ query: TREE_QUERY, variables: { root: fixture.rootTxHash, nodeLimit: TREE_NODE_LIMIT_MAX } }),
        });
        const body = (await response.json()) as {
          data?: { paymentTree: { nodes: unknown[]; truncated: boolean } | null };
          errors?: unknown;
        };
        const tree = body.data?.paymentTree;
        if (response.status !== 200 || body.errors !== undefined || tree === null || tree === undefined) {
          throw new Error(`GraphQL paymentTree failed: HTTP ${response.status} ${JSON.stringify(body).slice(0, 500)}`);
        }
        if (tree.nodes.length !== Math.min(TREE_NODE_LIMIT_MAX, SHAPE.treeNodes)) {
          throw new Error(`GraphQL paymentTree returned ${tree.nodes.length} nodes`);
        }
        httpNodes = tree.nodes.length;
      };
      // Interleaved with the loader alone at the same limit, which separates the query from
      // the HTTP/GraphQL layer.
      const cappedBounds = { maxDepth: TREE_DEPTH_DEFAULT, nodeLimit: TREE_NODE_LIMIT_MAX };
      const capped = (): Promise<PaymentTree | null> => loadPaymentTree(db.pool, fixture.accountId, fixture.rootTxHash, cappedBounds);
      const cappedWalk = (): Promise<PaymentTree | null> => walkPaymentTree(db.pool, fixture.accountId, fixture.rootTxHash, cappedBounds);
      for (let i = 0; i < WARMUP; i += 1) await request();
      await meter.refresh();
      for (let i = 0; i < HTTP_ITERATIONS; i += 1) {
        http_ms.push((await meter.time("http", request))[0]);
        capped_ms.push((await meter.time("capped", capped))[0]);
        capped_walk_ms.push((await meter.time("capped walk", cappedWalk))[0]);
      }
      for (let i = 0; i < HTTP_ITERATIONS; i += 1) http_alone_ms.push((await meter.time("http alone", request))[0]);
    } finally {
      await server.close();
    }

    // Read at maxDepth = the tree's depth: every node of the deepest level is asked whether
    // it has a child (none here), once the closure shows a level below it at all.
    const depthBounds = { maxDepth: SHAPE.treeDepth, nodeLimit: SHAPE.treeNodes };
    const atDepth = (): Promise<PaymentTree | null> => loadPaymentTree(db.pool, fixture.accountId, fixture.rootTxHash, depthBounds);
    const atDepthWalk = (): Promise<PaymentTree | null> => walkPaymentTree(db.pool, fixture.accountId, fixture.rootTxHash, depthBounds);
    for (const [label, answer] of [
      ["loadPaymentTree at maxDepth", await atDepth()],
      ["recursive walk at maxDepth", await atDepthWalk()],
    ] as const) {
      const problems = differences(answer, fixture);
      if (problems.length > 0 || answer?.truncated !== false) {
        console.error(`${label} ${SHAPE.treeDepth} does not return the whole seeded tree: ${problems.slice(0, 5).join("; ")}`);
        process.exitCode = 1;
        return;
      }
    }
    const at_depth_ms: number[] = [];
    const at_depth_walk_ms: number[] = [];
    for (let i = 0; i < HTTP_ITERATIONS; i += 1) {
      at_depth_ms.push((await meter.time("at depth", atDepth))[0]);
      at_depth_walk_ms.push((await meter.time("at depth walk", atDepthWalk))[0]);
    }

    const r = stats(recursive_ms);
    const b = stats(baseline_ms);
    console.log(
      `load average (1/5/15 min) at the end, on ${availableParallelism()} cores: ${loadavg()
        .map((x) => x.toFixed(1))
        .join(" / ")}`,
    );
    console.log(`both resolvers return the seeded tree: same ${count(fixture.expected.size)} nodes and totals`);
    console.log(`${"".padEnd(44)}${"n".padStart(5)}${"p50".padStart(10)}${"p95".padStart(10)}${"p99".padStart(10)}${"mean".padStart(10)}`);
    const w = stats(walk_ms);
    console.log(row("loadPaymentTree (closure pages, narrow rows)", r));
    console.log(row("  its statement inside Postgres (EXPLAIN)", stats(server_ms)));
    console.log(row("recursive walk, narrow rows (interleaved)", w));
    console.log(row("  its statement inside Postgres (EXPLAIN)", stats(walk_server_ms)));
    console.log(
      `walk (the loader before) / now:              p50 ${ratio(w.p50, r.p50)}, p99 ${ratio(w.p99, r.p99)}, mean ${ratio(w.mean, r.mean)}`,
    );
    const n = stats(before_ms);
    console.log(row("closure statement, object rows (interleaved)", n));
    console.log(
      `object-row closure / now:                    p50 ${ratio(n.p50, r.p50)}, p99 ${ratio(n.p99, r.p99)}, mean ${ratio(n.mean, r.mean)}`,
    );
    console.log(row(`per-level resolver (${count(baselineAnswer.queries)} queries)`, b));
    console.log(
      `per-level / recursive:                       p50 ${ratio(b.p50, r.p50)}, p99 ${ratio(b.p99, r.p99)}, mean ${ratio(b.mean, r.mean)}`,
    );
    const alone = stats(alone_ms);
    console.log(row("loadPaymentTree back to back (nothing between)", alone));
    console.log(`goal p99 < ${GOAL_P99_MS} ms: ${goal(r.p99, GOAL_P99_MS)} interleaved, ${goal(alone.p99, GOAL_P99_MS)} back to back`);
    console.log(`goal >= ${GOAL_SPEEDUP}x: ${b.p50 / r.p50 >= GOAL_SPEEDUP ? "met" : "NOT met"} (p50 ratio ${ratio(b.p50, r.p50)})`);
    const h = stats(http_ms);
    console.log(row(`GraphQL over HTTP, nodeLimit ${count(httpNodes)}`, h));
    console.log(row(`loadPaymentTree alone, nodeLimit ${count(TREE_NODE_LIMIT_MAX)}`, stats(capped_ms)));
    console.log(row(`recursive walk alone, nodeLimit ${count(TREE_NODE_LIMIT_MAX)}`, stats(capped_walk_ms)));
    console.log(row(`loadPaymentTree, maxDepth ${SHAPE.treeDepth} (deepest level probed)`, stats(at_depth_ms)));
    console.log(row(`recursive walk, maxDepth ${SHAPE.treeDepth}, interleaved`, stats(at_depth_walk_ms)));
    const httpAlone = stats(http_alone_ms);
    console.log(row("GraphQL over HTTP back to back (nothing between)", httpAlone));
    console.log(
      `goal over HTTP p99 < ${GOAL_HTTP_P99_MS} ms: ${goal(h.p99, GOAL_HTTP_P99_MS)} interleaved, ${goal(httpAlone.p99, GOAL_HTTP_P99_MS)} back to back`,
    );
    console.log("(nearest-rank percentiles: below 100 runs, p99 is the slowest run)");
    console.log("CPU per call (this process; the database's backends, from /proc):");
    for (const [label, name] of [
      ["recursive", "loadPaymentTree"],
      ["alone", "loadPaymentTree, back to back"],
      ["walk", "recursive walk, narrow rows (the loader before)"],
      ["before", "closure statement, object rows"],
      ["http", `GraphQL over HTTP (server and client), ${count(httpNodes)}`],
      ["http alone", `GraphQL over HTTP, ${count(httpNodes)}, back to back`],
      ["capped", `loadPaymentTree, nodeLimit ${count(TREE_NODE_LIMIT_MAX)}`],
      ["capped walk", `recursive walk, nodeLimit ${count(TREE_NODE_LIMIT_MAX)}`],
      ["at depth", `loadPaymentTree, maxDepth ${SHAPE.treeDepth}`],
      ["at depth walk", `recursive walk, maxDepth ${SHAPE.treeDepth}`],
    ] as const) {
      const cpu = meter.perCall(label);
      if (cpu === undefined) continue;
      const postgres = cpu.postgresMs === null ? "n/a" : `${cpu.postgresMs.toFixed(1)} ms`;
      console.log(`  ${name.padEnd(50)} Node ${cpu.nodeMs.toFixed(1)} ms, Postgres ${postgres} (${cpu.calls} calls)`);
    }
  } finally {
    await db.drop();
  }
}

run().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
