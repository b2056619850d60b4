/**
 * `npm run bench:capacity`: the reservation path's capacity, next to its floor from the same run.
 * The floor is pgbench (bench/gateway/reservation.pgbench.sql) running the same SQL transaction
 * (lock, policy, usage read, INSERT with its running totals) on as many connections as
 * the gateway path has callers: what PostgreSQL on this machine allows without Node or `pg`.
 * 1. reservations/s and p50/p99, closed loop, over many agents and over one hot agent (serialized
 *    by its lock: each check sees every earlier reservation), gateway path against pgbench (goals:
 *    ≥ 70 % of the floor over many agents, ≥ 1,000/s for the hot agent);
 * 2. latency at an offered 1,000/s, open loop over the agents, gateway path and pgbench `-R`
 *    (goal p99 < 5 ms);
 * 3. the usage read under the agent's lock as the period grows, at 0, 10,000 and 100,000
 *    reservations spread over the last 24 h: running total, with the 24 h rate-limit count from
 *    running counts (`spend_rate_calls`), against the old count(*) of the window and the old sum;
 * 4. after a quiet spell longer than the pools' idle timeout: a short burst's latency on the
 *    services' pool (`createPool` with `keepWarm`) against the same pool without it, interleaved.
 * Each gateway reservation is `reserveInTransaction` (no savepoint) in a READ COMMITTED transaction
 * of the agent's group commit (indexer/db/group-commit.ts), as the authorize route runs it. `--baseline <dir>` adds the same calls to the store of another checkout
 * (`git worktree add <dir> <commit>`, or `git archive <commit> api indexer | tar -x -C <dir>` with
 * a node_modules link), interleaved with this tree's, so a change is measured against the code
 * before it in the same run (and its usage read in section 3). Every agent
 * has a budget and a 24 h rate limit that cannot bind; no agent may sum above its budget and every
 * running count must equal the reservations (exit 1 otherwise).
 *
 *   npm run bench:capacity [-- --seconds 8 --pool 8 --workers 8 --rounds 2 --rate 1000]
 *
 * Uses a throwaway database (DATABASE_URL's server, else its own embedded one), dropped at the end.
 * Needs `pgbench` on PATH (or PGBENCH=/path/to/pgbench).
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import type pg from "pg";
import { getPolicy, type PaymentRequest, putPolicy, readUsage } from "../../api/shared/policy/index.js";
import { reserveInTransaction } from "../../api/gateway/reservations/store.js";
import { createPool, POOL_MAX, withTransaction } from "../../indexer/db/database.js";
import { groupCommitFor } from "../../indexer/db/group-commit.js";
import { createFreshDatabase } from "../../test/indexer/fresh-database.js";
import { type Stats, stats } from "./latency.js";
import { benchPool } from "./reservations.js";

const { values: flags } = parseArgs({
  options: {
    seconds: { type: "string", default: "8" },
    pool: { type: "string", default: "8" },
    workers: { type: "string" },
    rate: { type: "string", default: "1000" },
    rounds: { type: "string", default: "2" },
    baseline: { type: "string" },
  },
});
const SECONDS = Number(flags.seconds);
const POOL = Number(flags.pool);
/** Callers of the gateway path; the pool's size unless given, so both sides have the same concurrency. */
const WORKERS = Number(flags.workers ?? flags.pool);
const RATE = Number(flags.rate);
const ROUNDS = Number(flags.rounds);
const SPREAD_AGENTS = 500;
/** Section 4: idle longer than pg-pool's 10 s timeout, then bursts of QUIET_BURST_S at QUIET_RATE/s. */
const QUIET_MS = 11_000;
const QUIET_RATE = 300;
const QUIET_BURST_S = 0.5;
const QUIET_ROUNDS = 3;
const AMOUNT_UNITS = 1_000n;
const BUDGET_UNITS = 1_000_000_000_000n;
const PGBENCH = process.env.PGBENCH ?? "pgbench";
const SCRIPT = join(import.meta.dirname, "reservation.pgbench.sql");

const request = (): PaymentRequest => ({
  endpoint: "https://api.example.com/v1/data",
  amountUnits: AMOUNT_UNITS,
  protocol: "x402",
  offeredProtocols: ["x402"],
});

/** A READ COMMITTED transaction of the agent's, as the authorize route opens it. */
type Transact = <T>(pool: pg.Pool, agentId: string, work: (client: pg.PoolClient) => Promise<T>) => Promise<T>;

/** The gateway path of one checkout: its transaction, `reserveInTransaction` and `readUsage`. */
interface Path {
  readonly transact: Transact;
  readonly reserve: typeof reserveInTransaction;
  readonly readUsage: typeof readUsage;
}

/** One transaction per reservation (the route before group commit). */
const ownTransaction: Transact = (pool, _agentId, work) => withTransaction(pool, work, { isolation: "read committed" });

/** The agent's reservations arriving together share a transaction (the route since group commit). */
const groupedBy =
  (commitsFor: typeof groupCommitFor): Transact =>
  (pool, agentId, work) =>
    commitsFor(pool).run(agentId, work);

const current: Path = {
  transact: groupedBy(groupCommitFor),
  reserve: reserveInTransaction,
  readUsage,
};

/** The store of the checkout at `dir` (its own modules, on this run's database), grouped if it groups. */
async function baselinePath(dir: string): Promise<Path> {
  const store = (await import(join(dir, "api/gateway/reservations/store.ts"))) as { reserveInTransaction: typeof reserveInTransaction };
  const policy = (await import(join(dir, "api/shared/policy/store.ts"))) as { readUsage: typeof readUsage };
  // A checkout from before group commit opens a transaction per reservation, as its route did.
  const grouping = join(dir, "indexer/db/group-commit.ts");
  const transact = existsSync(grouping)
    ? groupedBy(((await import(grouping)) as { groupCommitFor: typeof groupCommitFor }).groupCommitFor)
    : ownTransaction;
  return { transact, reserve: store.reserveInTransaction, readUsage: policy.readUsage };
}

/** One reservation's latency, from `started` (its scheduled arrival in the open loop) else from now. */
async function reserveOnce(pool: pg.Pool, agentId: string, path: Path, started = performance.now()): Promise<number> {
  await path.transact(pool, agentId, async (client) => {
    // The route sets no savepoint of its own (it rolls back whole on an error).
    const r = await path.reserve(client, agentId, request(), new Date(), { savepoint: false });
    if (r.reservationId === null) throw new Error(`${agentId}: refused (${r.decision.reasonCode}) with limits that cannot bind`);
  });
  return performance.now() - started;
}

async function agents(pool: pg.Pool, prefix: string, n: number): Promise<string[]> {
  const ids = Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
  // Limits that cannot bind but are read on every reservation: the rate limit's count is the
  // running one (flat as the window fills), so the production shape costs what it costs.
  for (const id of ids) await putPolicy(pool, id, { dailyBudgetUnits: BUDGET_UNITS, rateLimit: { calls: 1_000_000, window: "24h" } });
  return ids;
}

interface Run {
  /** Reservations committed and the wall time they took. */
  n: number;
  ms: number;
  latencies: number[];
}

const emptyRun = (): Run => ({ n: 0, ms: 0, latencies: [] });
const add = (into: Run, run: Run): void => {
  into.n += run.n;
  into.ms += run.ms;
  for (const x of run.latencies) into.latencies.push(x);
};
const perSecond = (run: Run): number => (run.n * 1000) / run.ms;

/** Closed loop: `WORKERS` callers, each starting its next reservation when the last one answers. */
async function closedLoop(pool: pg.Pool, ids: readonly string[], seconds: number, path: Path): Promise<Run> {
  const deadline = performance.now() + seconds * 1000;
  const latencies: number[] = [];
  const started = performance.now();
  await Promise.all(
    Array.from({ length: WORKERS }, async (_, w) => {
      let i = w;
      while (performance.now() < deadline) {
        latencies.push(await reserveOnce(pool, ids[i % ids.length]!, path));
        i += WORKERS;
      }
    }),
  );
  return { n: latencies.length, ms: performance.now() - started, latencies };
}

/** Open loop: arrivals every 1000/rate ms for `seconds`, each on the next agent, however slow the answers. */
async function openLoop(pool: pg.Pool, ids: readonly string[], rate: number, seconds: number, path: Path): Promise<Run> {
  const total = Math.round(rate * seconds);
  const interval = 1000 / rate;
  const started = performance.now();
  const pending: Promise<number>[] = [];
  for (let k = 0; k < total; k += 1) {
    const due = started + k * interval;
    const wait = due - performance.now();
    // Timers fire at ≥ 1 ms granularity: arrivals due within the same millisecond go together.
    if (wait >= 1) await new Promise((resolve) => setTimeout(resolve, wait));
    // Counted from its due time when sent late, as pgbench -R counts from the scheduled start (the
    // loop's lag is in), from its sending when sent early.
    pending.push(reserveOnce(pool, ids[k % ids.length]!, path, Math.min(due, performance.now())));
  }
  const latencies = await Promise.all(pending);
  return { n: latencies.length, ms: performance.now() - started, latencies };
}

/**
 * pgbench on the same database: `clients` connections running the reservation script on
 * `<prefix>-0 … <prefix>-(agents−1)`, closed loop, or at `rate` transactions/s (`-R`: latency is
 * then counted from each transaction's scheduled start, as the open loop's is). Per-transaction
 * latencies come from its log.
 */
async function pgbench(url: string, prefix: string, agentCount: number, clients: number, seconds: number, rate?: number): Promise<Run> {
  const dir = await mkdtemp(join(tmpdir(), "apg-pgbench-"));
  try {
    const args = ["-n", "-M", "prepared", "-c", String(clients), "-j", String(Math.min(clients, availableParallelism()))];
    args.push("-T", String(seconds), "-f", SCRIPT, "-D", `prefix=${prefix}`, "-D", `agents=${agentCount}`);
    args.push("-l", `--log-prefix=${join(dir, "tx")}`, ...(rate === undefined ? [] : ["-R", String(rate)]), url);
    const output = await new Promise<string>((resolve, reject) => {
      const child = spawn(PGBENCH, args, { env: { ...process.env, PGOPTIONS: "-c jit=off" } });
      let out = "";
      child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString()));
      child.stderr.on("data", (chunk: Buffer) => (out += chunk.toString()));
      child.on("error", reject);
      child.on("close", (code) => (code === 0 ? resolve(out) : reject(new Error(`pgbench exited ${code}:\n${out}`))));
    });
    const failed = /number of failed transactions: (\d+)/.exec(output);
    if (failed !== null && failed[1] !== "0") throw new Error(`pgbench: ${failed[1]} failed transactions:\n${output}`);
    const latencies: number[] = [];
    for (const file of await readdir(dir)) {
      for (const line of (await readFile(join(dir, file), "utf8")).split("\n")) {
        const fields = line.split(" ");
        // client_id transaction_no time(µs) script_no time_epoch time_us [schedule_lag]
        if (fields.length >= 6) latencies.push(Number(fields[2]) / 1000);
      }
    }
    return { n: latencies.length, ms: seconds * 1000, latencies };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The baseline usage read: the sum over the period's reservations (the query the running total replaced). */
async function summedUsage(pool: pg.Pool, agentId: string): Promise<bigint> {
  const { rows } = await pool.query<{ used: string }>(
    `SELECT coalesce(sum(amount_units), 0)::text AS used FROM spend_reservations
     WHERE agent_id = $1 AND status <> 'released' AND budget_window_start > now() - interval '24 hours'`,
    [agentId],
  );
  return BigInt(rows[0]!.used);
}

/** The rate-limit count the running counts replaced: count(*) over the window. */
async function countedWindow(pool: pg.Pool, agentId: string, windowStart: Date): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM spend_reservations WHERE agent_id = $1 AND status <> 'released' AND created_at > $2",
    [agentId, windowStart],
  );
  return rows[0]!.n;
}

async function timeReads(samples: number, read: () => Promise<unknown>): Promise<Stats> {
  const times: number[] = [];
  for (let i = 0; i < samples; i += 1) {
    const started = performance.now();
    await read();
    times.push(performance.now() - started);
  }
  return stats(times);
}

/**
 * The reservation tables vacuumed and analyzed before each measured run, as autovacuum keeps them
 * on a server in service. Without it (a server with autovacuum off, or the first minute of a fresh
 * database) every session keeps the plans it made while the tables were empty: the usage read's
 * partial-minute count then walks all of the agent's reservations by the wrong index, and a hot
 * agent's rate fell from ~420 to ~120/s within 40 s here, on pgbench and the gateway alike. The
 * analyze also makes pgbench (new sessions each run) and the gateway's pool (long-lived sessions)
 * plan on the same statistics.
 */
async function analyzed(pool: pg.Pool): Promise<void> {
  await pool.query("VACUUM ANALYZE spend_reservations, spend_periods, spend_rate_calls, spend_period_endpoints, policies");
}

const f = (x: number): string => x.toFixed(2);
const verdict = (met: boolean): string => (met ? "met" : "NOT MET");
const DAY_MS = 24 * 3_600_000;

async function run(): Promise<void> {
  const db = await createFreshDatabase();
  const pool = benchPool(db.url, POOL);
  // The baseline's connections are its own: both trees prepare statements under the same names.
  const basePool = benchPool(db.url, POOL);
  const problems: string[] = [];
  try {
    const autovacuum = (await pool.query<{ autovacuum: string }>("SHOW autovacuum")).rows[0]!.autovacuum;
    console.log(
      `capacity bench on ${availableParallelism()} cores, load ${loadavg()
        .map((x) => x.toFixed(1))
        .join(" / ")}; pool ${POOL}, ${WORKERS} closed-loop callers, pgbench -c ${POOL}; ${SECONDS} s per run, ${ROUNDS} round(s); ` +
        `server autovacuum ${autovacuum}, the bench analyzes before each run`,
    );
    const spread = await agents(pool, "spread", SPREAD_AGENTS);
    const hot = await agents(pool, "hot", 1);
    const baseline = flags.baseline === undefined ? null : await baselinePath(flags.baseline);
    await closedLoop(pool, spread, 2, current); // warm-up
    if (baseline !== null) await closedLoop(basePool, spread, 2, baseline);
    await pgbench(db.url, "spread", SPREAD_AGENTS, POOL, 2);

    // Closed loop: pgbench, this tree and the baseline interleaved, the order turned each round.
    const shapes = [
      { label: `many agents (${SPREAD_AGENTS})`, prefix: "spread", ids: spread },
      { label: "one hot agent", prefix: "hot", ids: hot },
    ];
    type Which = "current" | "floor" | "baseline";
    const closed = shapes.map(() => ({ current: emptyRun(), baseline: emptyRun(), floor: emptyRun() }));
    for (let round = 0; round < ROUNDS; round += 1) {
      for (const [k, shape] of shapes.entries()) {
        const all: Which[] = round % 2 === 0 ? ["current", "floor", "baseline"] : ["baseline", "floor", "current"];
        for (const which of all) {
          if (which === "baseline" && baseline === null) continue;
          await analyzed(pool);
          const run =
            which === "floor"
              ? await pgbench(db.url, shape.prefix, shape.ids.length, POOL, SECONDS)
              : which === "current"
                ? await closedLoop(pool, shape.ids, SECONDS, current)
                : await closedLoop(basePool, shape.ids, SECONDS, baseline!);
          add(closed[k]![which], run);
        }
      }
    }
    // One agent's reservations run one at a time, each holding the lock through its commit's WAL
    // flush: one connection alone shows that service time, which bounds the hot agent.
    await analyzed(pool);
    const single = await pgbench(db.url, "hot", 1, 1, SECONDS);
    const open = { current: emptyRun(), baseline: emptyRun(), floor: emptyRun() };
    // Each open loop after a second of its own, not counted: the pool's idle connections have
    // closed during the sections before, and a new connection's first statements (prepared, the
    // catalog read) took 40-55 ms, which was the first ~130 arrivals and so the p99. pgbench
    // likewise connects its clients before its clock starts.
    await analyzed(pool);
    await openLoop(pool, spread, RATE, 1, current);
    add(open.current, await openLoop(pool, spread, RATE, SECONDS, current));
    await analyzed(pool);
    add(open.floor, await pgbench(db.url, "spread", SPREAD_AGENTS, POOL, SECONDS, RATE));
    if (baseline !== null) {
      await analyzed(pool);
      await openLoop(basePool, spread, RATE, 1, baseline);
      add(open.baseline, await openLoop(basePool, spread, RATE, SECONDS, baseline));
    }

    // After a quiet spell: the services' pool kept warm and one that is not, each opened by a
    // burst, then both idle past pg-pool's 10 s timeout before a burst each (order turned each round).
    const quietPools = { warm: createPool(db.url, { keepWarm: true }), cold: createPool(db.url) };
    const afterQuiet = { warm: emptyRun(), cold: emptyRun() };
    try {
      for (const quietPool of Object.values(quietPools)) await openLoop(quietPool, spread, QUIET_RATE, QUIET_BURST_S, current);
      for (let round = 0; round < QUIET_ROUNDS; round += 1) {
        await new Promise((resolve) => setTimeout(resolve, QUIET_MS));
        for (const which of round % 2 === 0 ? (["cold", "warm"] as const) : (["warm", "cold"] as const)) {
          add(afterQuiet[which], await openLoop(quietPools[which], spread, QUIET_RATE, QUIET_BURST_S, current));
        }
      }
    } finally {
      await Promise.all(Object.values(quietPools).map((quietPool) => quietPool.end()));
    }

    // The usage read as the period grows: one agent's period filled by bulk inserts spread over
    // the last 24 h (the triggers keep its total and its rate counts), each read timed at each size.
    const growth: { size: number; total: Stats; rated: Stats; baselineRated: Stats | null; counted: Stats; summed: Stats }[] = [];
    const grown = "grown";
    await putPolicy(pool, grown, { dailyBudgetUnits: BUDGET_UNITS });
    const budgetOnly = (await getPolicy(pool, grown))!;
    const withRate = { ...budgetOnly, rateLimit: { calls: 1_000_000, window: "24h" as const } };
    let size = 0;
    for (const target of [0, 10_000, 100_000]) {
      if (target > size) {
        // In statements of 1,000 rows: within one statement every insert's trigger updates the same
        // few running-count rows, whose versions cannot be pruned before it ends (the lookups grow
        // with them); the gateway's reservations are one-row transactions.
        for (let from = size; from < target; from += 1_000) {
          await pool.query(
            `INSERT INTO spend_reservations (agent_id, amount_units, endpoint, domain, protocol, created_at, budget_window_start)
             SELECT $1, $2, 'https://api.example.com/v1/data', 'api.example.com', 'x402',
                    now() - (g * 86399.0 / $4) * interval '1 second', date_trunc('second', now())
             FROM generate_series($3::int + 1, $3::int + 1000) AS g`,
            [grown, AMOUNT_UNITS.toString(), from, 100_000],
          );
        }
        size = target;
        // Dead versions of the running-count rows vacuumed, as autovacuum does over a day.
        await pool.query("VACUUM ANALYZE spend_reservations, spend_periods, spend_rate_calls");
      }
      const viaTotal = await readUsage(pool, grown, budgetOnly, new Date());
      const viaSum = await summedUsage(pool, grown);
      if (viaTotal.usedTodayUnits !== viaSum) problems.push(`at ${size}: running total ${viaTotal.usedTodayUnits} ≠ sum ${viaSum}`);
      const now = new Date();
      const rated = (await readUsage(pool, grown, withRate, now)).rateCalls;
      const counted = await countedWindow(pool, grown, new Date(now.getTime() - DAY_MS));
      if (rated !== counted) problems.push(`at ${size}: running rate count ${rated} ≠ count(*) ${counted}`);
      const samples = size >= 100_000 ? 40 : 200;
      growth.push({
        size,
        total: await timeReads(200, () => readUsage(pool, grown, budgetOnly, new Date())),
        rated: await timeReads(200, () => readUsage(pool, grown, withRate, new Date())),
        baselineRated: baseline === null ? null : await timeReads(samples, () => baseline.readUsage(basePool, grown, withRate, new Date())),
        counted: await timeReads(samples, () => countedWindow(pool, grown, new Date(Date.now() - DAY_MS))),
        summed: await timeReads(samples, () => summedUsage(pool, grown)),
      });
    }

    // No overspend anywhere (the budgets cannot bind, so every reservation counted and none was lost),
    // and the running counts equal the reservations they count.
    const { rows } = await pool.query<{ agent_id: string; units: string; used: string }>(
      `SELECT r.agent_id, sum(r.amount_units)::text AS units, max(p.used_units)::text AS used
       FROM spend_reservations r JOIN spend_periods p ON p.agent_id = r.agent_id AND p.window_start = r.budget_window_start
       WHERE r.status <> 'released' GROUP BY r.agent_id, r.budget_window_start`,
    );
    for (const r of rows) if (r.units !== r.used) problems.push(`${r.agent_id}: reservations sum ${r.units}, running total ${r.used}`);
    const counts = await pool.query<{ agent_id: string; n: string; calls: string | null }>(
      `SELECT r.agent_id, count(*)::text AS n, (SELECT sum(calls)::text FROM spend_rate_calls c WHERE c.agent_id = r.agent_id) AS calls
       FROM spend_reservations r WHERE r.status <> 'released' GROUP BY r.agent_id`,
    );
    for (const r of counts.rows) if (r.n !== r.calls) problems.push(`${r.agent_id}: ${r.n} reservations, running count ${r.calls}`);

    const line = (label: string, run: Run, floor?: Run): string => {
      const s = stats(run.latencies);
      const ratio = floor === undefined ? "" : `   ${((100 * perSecond(run)) / perSecond(floor)).toFixed(0).padStart(3)} % of floor`;
      return `    ${label.padEnd(30)} ${Math.round(perSecond(run)).toString().padStart(6)}/s   p50 ${f(s.p50).padStart(6)} ms   p99 ${f(s.p99).padStart(6)} ms${ratio}`;
    };
    console.log(
      "\nreservation capacity, closed loop (policy check + reservation, READ COMMITTED; the gateway path groups one agent's callers into shared transactions, its baseline as its own code does)",
    );
    for (const [k, shape] of shapes.entries()) {
      const c = closed[k]!;
      console.log(`  ${shape.label}`);
      console.log(line("pgbench, same SQL (floor)", c.floor));
      console.log(line("gateway path", c.current, c.floor));
      if (baseline !== null) console.log(line("gateway path, baseline tree", c.baseline, c.floor));
    }
    console.log(line("pgbench, hot agent, 1 connection", single));
    const manyShare = perSecond(closed[0]!.current) / perSecond(closed[0]!.floor);
    console.log(
      `  goal many agents ≥ 70 % of the floor: ${verdict(manyShare >= 0.7)}; one hot agent ≥ 1,000/s: ${verdict(perSecond(closed[1]!.current) >= 1000)}`,
    );
    console.log(`\noffered ${RATE}/s over ${SPREAD_AGENTS} agents (open loop; pgbench -R, latency from the scheduled start)`);
    console.log(line("pgbench, same SQL (floor)", open.floor));
    console.log(line("gateway path", open.current));
    if (baseline !== null) console.log(line("gateway path, baseline tree", open.baseline));
    const openP99 = stats(open.current.latencies).p99;
    console.log(`  goal p99 < 5 ms: ${verdict(openP99 < 5)}`);
    console.log(
      `\nafter ${QUIET_MS / 1000} s idle: ${QUIET_RATE}/s offered for ${QUIET_BURST_S} s, ${QUIET_ROUNDS} rounds (the services' pool, ${POOL_MAX} connections; open loop)`,
    );
    const quietLine = (label: string, run: Run): string => {
      const s = stats(run.latencies);
      return `    ${label.padEnd(30)} p50 ${f(s.p50).padStart(6)} ms   p99 ${f(s.p99).padStart(6)} ms   max ${f(s.max).padStart(6)} ms`;
    };
    console.log(quietLine("kept warm (keepWarm)", afterQuiet.warm));
    console.log(quietLine("not kept warm (before)", afterQuiet.cold));
    console.log("\nusage read of one agent as its period grows, reservations spread over the last 24 h (p50 / p99 ms)");
    console.log(
      `  reservations   usage, no rate limit   usage + 24 h rate count   ${baseline === null ? "" : "baseline tree's usage + rate   "}count(*) of the window alone   sum over the period alone`,
    );
    for (const g of growth) {
      const cell = (s: Stats, w: number): string => `${f(s.p50)} / ${f(s.p99)}`.padEnd(w);
      const base = g.baselineRated === null ? "" : `${cell(g.baselineRated, 30)}  `;
      console.log(
        `  ${String(g.size).padStart(12)}   ${cell(g.total, 21)}  ${cell(g.rated, 24)}  ${base}${cell(g.counted, 28)}  ${cell(g.summed, 0)}`,
      );
    }
    const flat = (pick: (g: (typeof growth)[number]) => Stats): boolean => pick(growth.at(-1)!).p50 <= pick(growth[0]!).p50 * 1.5 + 0.1;
    console.log(
      `  flat from 0 to ${growth.at(-1)!.size}: running total ${verdict(flat((g) => g.total))}, with the rate count ${verdict(flat((g) => g.rated))}`,
    );
  } finally {
    await pool.end();
    await basePool.end();
    await db.drop();
  }
  if (problems.length > 0) {
    console.error(`\nWRONG ANSWERS:\n${problems.join("\n")}`);
    process.exit(1);
  }
}

run().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
