/**
 * spendSummary, metrics and transactions (filtered, paginated) on a large store: goals p99 < 20 ms
 * each over GraphQL/HTTP, and >= 2,000 requests/s with 32 concurrent clients on `transactions`.
 * The store is seeded through the real ingest path (synthetic transactions, decodeRawTransaction,
 * ingestBatch): --payments payments over --agents payers, round-robin over --accounts accounts.
 *
 * Each query is measured for one account next to same-run baselines that show where the time goes:
 * the read function alone (no GraphQL, no HTTP), its statement inside Postgres (EXPLAIN ANALYZE),
 * the same request at its smallest (a one-minute window, `limit: 1`), and the read function before
 * its rewrite (test/api/read-reference.ts). Throughput: 32 in-process clients, each sending its next
 * request when the last answered, for --seconds, against `limit: 1` and `{ __typename }` baselines.
 *
 *   npm run bench:queries [-- --payments 1000000 --agents 1000 --accounts 50 --iterations 300 --seconds 5 --clients 32]
 *   (under the Node options `npm run query` starts the service with; no tsx)
 */
import { availableParallelism, loadavg } from "node:os";
import { parseArgs } from "node:util";
import type pg from "pg";
import { readMetricBuckets, readSpendCells } from "../../api/query/read/spend.js";
import { listTransactions } from "../../api/query/read/transactions.js";
import { createApiServer } from "../../api/query/server.js";
import { createAccount, issueApiKey } from "../../api/shared/keys.js";
import { parseCursor } from "../../api/shared/validation.js";
import { decodeRawTransaction } from "../../indexer/decode/transaction.js";
import { ingestBatch } from "../../indexer/store/ingest.js";
import { PAYMENT_LEDGER_PROGRAM_ID } from "../../programs/payment_ledger/ts/index.js";
import { listTransactionsBefore, readMetricBucketsBefore, readSpendCellsBefore } from "../../test/api/read-reference.js";
import { createFreshDatabase } from "../../test/indexer/fresh-database.js";
import { SYNTHETIC_BASE_TIME, SYNTHETIC_ENDPOINTS, syntheticPayers, syntheticTransaction } from "../indexer/synthetic.js";

const { values: flags } = parseArgs({
  options: {
    payments: { type: "string", default: "1000000" },
    agents: { type: "string", default: "1000" },
    accounts: { type: "string", default: "50" },
    iterations: { type: "string", default: "300" },
    warmup: { type: "string", default: "20" },
    seconds: { type: "string", default: "5" },
    clients: { type: "string", default: "32" },
  },
});
const PAYMENTS = Number(flags.payments);
const AGENTS = Number(flags.agents);
const ACCOUNTS = Number(flags.accounts);
const ITERATIONS = Number(flags.iterations);
const WARMUP = Number(flags.warmup);
const SECONDS = Number(flags.seconds);
const CLIENTS = Number(flags.clients);
/** Seeding batches: the largest ingest accepts. */
const SEED_BATCH = 5_000;
const PAGE = 50;
const GOAL_P99_MS = 20;
const GOAL_RPS = 2_000;

const count = (n: number): string => Math.round(n).toLocaleString("en-US");

function percentiles(samples: readonly number[]): { p50: number; p99: number; n: number } {
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = (p: number): number => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
  return { p50: rank(50), p99: rank(99), n: sorted.length };
}

async function sequential(work: () => Promise<unknown>): Promise<{ p50: number; p99: number; n: number }> {
  for (let i = 0; i < WARMUP; i += 1) await work();
  const samples: number[] = [];
  for (let i = 0; i < ITERATIONS; i += 1) {
    const started = performance.now();
    await work();
    samples.push(performance.now() - started);
  }
  return percentiles(samples);
}

/** CLIENTS loops, each sending its next request when the last one answered, for SECONDS. */
async function throughput(work: () => Promise<unknown>): Promise<{ rps: number; p99: number }> {
  const until = performance.now() + SECONDS * 1000;
  const samples: number[] = [];
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (performance.now() < until) {
        const t = performance.now();
        await work();
        samples.push(performance.now() - t);
      }
    }),
  );
  const elapsed = performance.now() - started;
  return { rps: (samples.length / elapsed) * 1000, p99: percentiles(samples).p99 };
}

/** Execution time inside Postgres of the last statement `work` sends, median of 5 EXPLAIN ANALYZE runs. */
async function insidePostgres(pool: pg.Pool, work: (pool: pg.Pool) => Promise<unknown>): Promise<{ ms: number; plan: string }> {
  let captured: { text: string; values: unknown[] } | undefined;
  const recording = new Proxy(pool, {
    get(target, property, receiver) {
      if (property !== "query") return Reflect.get(target, property, receiver) as unknown;
      // A statement as text and values, or as a config (the listing runs named statements).
      return (query: string | pg.QueryConfig, values?: unknown[]) => {
        captured = typeof query === "string" ? { text: query, values: values ?? [] } : { text: query.text, values: query.values ?? [] };
        return typeof query === "string" ? target.query(query, values) : target.query(query);
      };
    },
  });
  await work(recording);
  if (captured === undefined) throw new Error("no statement captured");
  const runs: number[] = [];
  let plan = "";
  for (let i = 0; i < 5; i += 1) {
    const result = await pool.query<{ "QUERY PLAN": string }>(`EXPLAIN (ANALYZE, TIMING OFF, COSTS OFF) ${captured.text}`, captured.values);
    const lines = result.rows.map((r) => r["QUERY PLAN"]);
    runs.push(Number(/Execution Time: ([\d.]+)/.exec(lines.at(-1) ?? "")?.[1] ?? Number.NaN));
    plan = lines.join("\n");
  }
  return { ms: percentiles(runs).p50, plan };
}

const SPEND = `query S($range: TimeRangeInput) { spendSummary(range: $range) {
  total totalUnits txCount byProtocol { protocol amountUnits percent txCount } byDomain { domain amountUnits percent txCount }
  byAgent { agentId amountUnits percent txCount } } }`;
const METRICS = `query M($range: TimeRangeInput, $resolution: String) { metrics(range: $range, resolution: $resolution) {
  resolution metrics { spend { timestamp valueUnits x402Units mppUnits } tx_count { timestamp count }
  policy_violations { timestamp count reason } protocol_split { x402 mpp } } } }`;
const TRANSACTIONS = `query T($limit: Int, $protocol: Protocol, $after: String) {
  transactions(limit: $limit, protocol: $protocol, after: $after) {
    nodes { id txHash agentId protocol amountPaidUnits endpoint domain timestamp depth status }
    pageInfo { hasNextPage endCursor } } }`;

async function run(): Promise<void> {
  const db = await createFreshDatabase();
  try {
    // Accounts, their agents (payer k belongs to account k % ACCOUNTS) and the endpoints' text.
    const payers = syntheticPayers(AGENTS);
    const accountIds: string[] = [];
    for (let a = 0; a < ACCOUNTS; a += 1) accountIds.push(await createAccount(db.pool, `bench account ${a}`));
    await db.pool.query(
      "INSERT INTO agents (agent_id, account_id, name, wallet_address) SELECT * FROM unnest($1::text[], $2::uuid[], $3::text[], $4::text[])",
      [
        payers.map((_, k) => `bench-agent-${k}`),
        payers.map((_, k) => accountIds[k % ACCOUNTS]!),
        payers.map((_, k) => `agent ${k}`),
        payers.map((p) => p.toBase58()),
      ],
    );
    const endpointHashes = SYNTHETIC_ENDPOINTS.map((bytes) => Buffer.from(bytes).toString("hex"));
    await db.pool.query(
      "INSERT INTO endpoints (endpoint_hash, endpoint, domain) SELECT * FROM unnest($1::text[], $2::text[], $3::text[])",
      [endpointHashes, endpointHashes.map((_, i) => `api${i}.example.com/v1/data`), endpointHashes.map((_, i) => `api${i}.example.com`)],
    );

    const seedStart = performance.now();
    for (let at = 0; at < PAYMENTS; at += SEED_BATCH) {
      const n = Math.min(SEED_BATCH, PAYMENTS - at);
      const chunk = Array.from({ length: n }, (_, k) =>
        decodeRawTransaction(syntheticTransaction(at + k, payers), PAYMENT_LEDGER_PROGRAM_ID),
      );
      await ingestBatch(
        db.pool,
        { transactions: chunk, checkpoint: { source: "bench", slot: chunk.at(-1)!.slot, blockhash: null } },
        {
          cluster: "devnet",
        },
      );
      if ((at + n) % 100_000 < SEED_BATCH) process.stderr.write(`seeded ${count(at + n)} payments\n`);
    }
    const seedMs = performance.now() - seedStart;
    // A store autovacuum has visited (visibility map set), as a running deployment's would be.
    await db.pool.query("VACUUM ANALYZE");
    const stored = await db.pool.query<{ n: string }>("SELECT count(*)::text AS n FROM transactions");
    console.log(
      `store: ${count(Number(stored.rows[0]!.n))} payments, ${count(AGENTS)} agents in ${ACCOUNTS} accounts ` +
        `(seeded through ingestBatch in ${(seedMs / 1000).toFixed(1)} s: ${count((PAYMENTS / seedMs) * 1000)} payments/s)`,
    );

    // The whole history as one custom range (whole minutes), and its first minute as the small one.
    const minute = 60_000;
    const from = new Date(Math.floor((SYNTHETIC_BASE_TIME * 1000) / minute) * minute);
    const lastMs = (SYNTHETIC_BASE_TIME + Math.floor((PAYMENTS - 1) / 50)) * 1000;
    const to = new Date(Math.floor(lastMs / minute) * minute + minute);
    const whole = { from: from.toISOString(), to: to.toISOString() };
    const oneMinute = { from: from.toISOString(), to: new Date(from.getTime() + minute).toISOString() };
    const spanMinutes = (to.getTime() - from.getTime()) / minute;
    const resolution = (["1m", "5m", "15m", "1h", "6h", "1d"] as const).find(
      (r) => spanMinutes / { "1m": 1, "5m": 5, "15m": 15, "1h": 60, "6h": 360, "1d": 1440 }[r] <= 1440,
    )!;
    const resolutionMs = { "1m": 1, "5m": 5, "15m": 15, "1h": 60, "6h": 360, "1d": 1440 }[resolution] * minute;

    const accountId = accountIds[0]!;
    const { apiKey } = await issueApiKey(db.pool, accountId);
    const server = createApiServer({ pool: db.pool, liveFeed: false });
    const port = await server.listen(0);
    const graphql = async (query: string, variables: Record<string, unknown>): Promise<Record<string, unknown>> => {
      const response = await fetch(`http://127.0.0.1:${port}/graphql`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
        body: JSON.stringify({ query, variables }),
      });
      const body = (await response.json()) as { data?: Record<string, unknown>; errors?: unknown };
      if (response.status !== 200 || body.errors !== undefined || body.data === undefined) {
        throw new Error(`GraphQL failed: HTTP ${response.status} ${JSON.stringify(body).slice(0, 500)}`);
      }
      return body.data;
    };

    try {
      // Answers checked once: the account's payments are all there and a page is full.
      const summary = (await graphql(SPEND, { range: whole })).spendSummary as { txCount: number; byAgent: unknown[] };
      const expected = countForAccount(PAYMENTS, AGENTS, ACCOUNTS, 0);
      if (summary.txCount !== expected) throw new Error(`spendSummary txCount ${summary.txCount}, expected ${expected}`);
      const first = (await graphql(TRANSACTIONS, { limit: PAGE, protocol: "x402" })).transactions as {
        nodes: unknown[];
        pageInfo: { endCursor: string };
      };
      if (first.nodes.length !== Math.min(PAGE, expected)) throw new Error(`transactions returned ${first.nodes.length} rows`);
      const cursor = first.pageInfo.endCursor;
      console.log(
        `account 0: ${count(expected)} payments by ${summary.byAgent.length} agents; window ${whole.from} .. ${whole.to} ` +
          `(${count(spanMinutes)} minutes, metrics at ${resolution})`,
      );

      const scope = { accountId, window: { label: "custom", from, to } };
      const rows: [string, { p50: number; p99: number; n: number }, number | null][] = [];
      const plans: string[] = [];
      const measure = async (
        label: string,
        http: () => Promise<unknown>,
        direct: (pool: pg.Pool) => Promise<unknown>,
        before: (pool: pg.Pool) => Promise<unknown>,
        small: () => Promise<unknown>,
        smallLabel: string,
      ): Promise<void> => {
        const sql = await insidePostgres(db.pool, direct);
        const sqlBefore = await insidePostgres(db.pool, before);
        plans.push(`--- ${label}\n${sql.plan}`, `--- ${label}, before the rewrite\n${sqlBefore.plan}`);
        rows.push([`${label}: GraphQL over HTTP`, await sequential(http), null]);
        rows.push([`  read function alone (SQL + rows, no GraphQL)`, await sequential(() => direct(db.pool)), sql.ms]);
        rows.push([`  the same before the rewrite`, await sequential(() => before(db.pool)), sqlBefore.ms]);
        rows.push([`  baseline: ${smallLabel} over GraphQL/HTTP`, await sequential(small), null]);
      };
      await measure(
        "spendSummary, whole history",
        () => graphql(SPEND, { range: whole }),
        (pool) => readSpendCells(pool, scope),
        (pool) => readSpendCellsBefore(pool, scope),
        () => graphql(SPEND, { range: oneMinute }),
        "one-minute window",
      );
      await measure(
        `metrics, whole history at ${resolution}`,
        () => graphql(METRICS, { range: whole, resolution }),
        (pool) => readMetricBuckets(pool, scope, resolutionMs),
        (pool) => readMetricBucketsBefore(pool, scope, resolutionMs),
        () => graphql(METRICS, { range: oneMinute, resolution: "1m" }),
        "one-minute window",
      );
      await measure(
        `transactions x402, limit ${PAGE}, page 1`,
        () => graphql(TRANSACTIONS, { limit: PAGE, protocol: "x402" }),
        (pool) => listTransactions(pool, { accountId, protocol: "x402", limit: PAGE }),
        (pool) => listTransactionsBefore(pool, { accountId, protocol: "x402", limit: PAGE }),
        () => graphql(TRANSACTIONS, { limit: 1, protocol: "x402" }),
        "limit 1",
      );
      await measure(
        `transactions x402, limit ${PAGE}, page 2 (after)`,
        () => graphql(TRANSACTIONS, { limit: PAGE, protocol: "x402", after: cursor }),
        (pool) => listTransactions(pool, { accountId, protocol: "x402", limit: PAGE, after: parseCursor("after", cursor) }),
        (pool) => listTransactionsBefore(pool, { accountId, protocol: "x402", limit: PAGE, after: parseCursor("after", cursor) }),
        () => graphql(TRANSACTIONS, { limit: 1, protocol: "x402", after: cursor }),
        "limit 1",
      );

      const load = await throughput(() => graphql(TRANSACTIONS, { limit: PAGE, protocol: "x402" }));
      const loadSmall = await throughput(() => graphql(TRANSACTIONS, { limit: 1, protocol: "x402" }));
      // The floor of the stack: an authenticated request that reads nothing (HTTP, auth, GraphQL).
      const loadFloor = await throughput(() => graphql("{ __typename }", {}));

      const ms = (x: number): string => `${x.toFixed(2)} ms`.padStart(11);
      console.log(
        `load average (1/5/15 min) at the end, on ${availableParallelism()} cores: ${loadavg()
          .map((x) => x.toFixed(1))
          .join(" / ")}`,
      );
      console.log(`${"".padEnd(56)}${"n".padStart(5)}${"p50".padStart(11)}${"p99".padStart(11)}${"in Postgres".padStart(13)}`);
      for (const [label, s, inside] of rows) {
        console.log(
          `${label.padEnd(56)}${String(s.n).padStart(5)}${ms(s.p50)}${ms(s.p99)}${inside === null ? "" : ms(inside).padStart(13)}`,
        );
      }
      console.log(
        `transactions limit ${PAGE}, ${CLIENTS} clients, ${SECONDS} s: ${count(load.rps)} requests/s (p99 ${load.p99.toFixed(1)} ms)`,
      );
      console.log(`  baseline limit 1, same clients:             ${count(loadSmall.rps)} requests/s (p99 ${loadSmall.p99.toFixed(1)} ms)`);
      console.log(`  baseline { __typename }, same clients:      ${count(loadFloor.rps)} requests/s (p99 ${loadFloor.p99.toFixed(1)} ms)`);
      const http = rows.filter(([label]) => !label.startsWith(" "));
      for (const [label, s] of http) {
        console.log(`goal p99 < ${GOAL_P99_MS} ms, ${label}: ${s.p99 < GOAL_P99_MS ? "met" : "NOT met"} (${s.p99.toFixed(1)} ms)`);
      }
      console.log(
        `goal >= ${count(GOAL_RPS)} requests/s on transactions: ${load.rps >= GOAL_RPS ? "met" : "NOT met"} (${count(load.rps)})`,
      );
      console.log("(the bench's 32 clients share the server's Node process and the machine's cores)");
      if (process.env.BENCH_PLANS === "1") console.log(plans.join("\n"));
    } finally {
      await server.close();
    }
  } finally {
    await db.drop();
  }
}

/** Payments of account `a`: payment i is paid by payer i % agents, payer k is in account k % accounts. */
function countForAccount(payments: number, agents: number, accounts: number, a: number): number {
  let n = 0;
  for (let k = a; k < agents; k += accounts) n += Math.floor(payments / agents) + (k < payments % agents ? 1 : 0);
  return n;
}

run().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
