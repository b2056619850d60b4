/**
 * `npm run bench:capacity`: the reservation path's capacity. With 200 callers on 2 cores latency is
 * mostly queueing, so it reports:
 * 1. reservations/s sustained, closed loop, by many agents (goal ≥ 5,000/s) and by one hot agent
 *    (goal ≥ 1,000/s; serialized by design: each check sees every earlier reservation);
 * 2. latency at 1,000 reservations/s offered, open loop over 500 agents (goal p99 < 5 ms);
 * 3. the usage read under the agent's lock as the period grows: the running total (`spend_periods`)
 *    against the sum over reservations it replaced, at 0, 10,000 and 100,000 reservations.
 * Each reservation is `reserveInTransaction` in its own READ COMMITTED transaction, as the
 * authorize route runs it, on `--pool` connections. No agent may sum above its budget (exit 1).
 *
 *   npm run bench:capacity [-- --seconds 10 --pool 8 --workers 32]
 *
 * Uses a throwaway database (DATABASE_URL's server, else its own embedded one), dropped at the end.
 */
import { availableParallelism, loadavg } from "node:os";
import { parseArgs } from "node:util";
import type pg from "pg";
import { getPolicy, type PaymentRequest, putPolicy, readUsage } from "../../api/shared/policy/index.js";
import { reserveInTransaction } from "../../api/gateway/reservations/store.js";
import { createFreshDatabase } from "../../test/indexer/fresh-database.js";
import { stats } from "./latency.js";
import { benchPool } from "./reservations.js";

const { values: flags } = parseArgs({
  options: {
    seconds: { type: "string", default: "10" },
    pool: { type: "string", default: "8" },
    workers: { type: "string", default: "32" },
    rate: { type: "string", default: "1000" },
  },
});
const SECONDS = Number(flags.seconds);
const POOL = Number(flags.pool);
const WORKERS = Number(flags.workers);
const RATE = Number(flags.rate);
const SPREAD_AGENTS = 500;
const AMOUNT_UNITS = 1_000n;
const BUDGET_UNITS = 1_000_000_000_000n;

const request = (): PaymentRequest => ({
  endpoint: "https://api.example.com/v1/data",
  amountUnits: AMOUNT_UNITS,
  protocol: "x402",
  offeredProtocols: ["x402"],
});

async function reserveOnce(pool: pg.Pool, agentId: string): Promise<number> {
  const started = performance.now();
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    try {
      const r = await reserveInTransaction(client, agentId, request(), new Date());
      await client.query("COMMIT");
      if (r.reservationId === null) throw new Error(`${agentId}: refused (${r.decision.reasonCode}) with a budget that cannot bind`);
    } catch (error) {
      await client.query("ROLLBACK").catch(() => undefined);
      throw error;
    }
  } finally {
    client.release();
  }
  return performance.now() - started;
}

async function agents(pool: pg.Pool, prefix: string, n: number): Promise<string[]> {
  const ids = Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
  // A budget that cannot bind and no rate limit: a rate limit adds a count of the calls in its
  // window, which the limit itself bounds (refused calls are not reserved); section 3 measures it.
  for (const id of ids) await putPolicy(pool, id, { dailyBudgetUnits: BUDGET_UNITS });
  return ids;
}

/** Closed loop: `WORKERS` callers, each starting its next reservation when the last one answers. */
async function closedLoop(pool: pg.Pool, ids: readonly string[], seconds: number): Promise<{ perSecond: number; n: number }> {
  const deadline = performance.now() + seconds * 1000;
  let n = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: WORKERS }, async (_, w) => {
      let i = w;
      while (performance.now() < deadline) {
        await reserveOnce(pool, ids[i % ids.length]!);
        i += WORKERS;
        n += 1;
      }
    }),
  );
  return { perSecond: (n * 1000) / (performance.now() - started), n };
}

/** Open loop: arrivals every 1000/rate ms for `seconds`, each on the next agent, however slow the answers. */
async function openLoop(pool: pg.Pool, ids: readonly string[], rate: number, seconds: number): Promise<number[]> {
  const total = Math.round(rate * seconds);
  const interval = 1000 / rate;
  const started = performance.now();
  const pending: Promise<number>[] = [];
  for (let k = 0; k < total; k += 1) {
    const due = started + k * interval;
    const wait = due - performance.now();
    // Timers fire at ≥ 1 ms granularity: arrivals due within the same millisecond go together.
    if (wait >= 1) await new Promise((resolve) => setTimeout(resolve, wait));
    pending.push(reserveOnce(pool, ids[k % ids.length]!));
  }
  return Promise.all(pending);
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

async function timeReads(samples: number, read: () => Promise<unknown>): Promise<ReturnType<typeof stats>> {
  const times: number[] = [];
  for (let i = 0; i < samples; i += 1) {
    const started = performance.now();
    await read();
    times.push(performance.now() - started);
  }
  return stats(times);
}

const f = (x: number): string => x.toFixed(2);
const verdict = (met: boolean): string => (met ? "met" : "NOT MET");

async function run(): Promise<void> {
  const db = await createFreshDatabase();
  const pool = benchPool(db.url, POOL);
  const problems: string[] = [];
  try {
    console.log(
      `capacity bench on ${availableParallelism()} cores, load ${loadavg()
        .map((x) => x.toFixed(1))
        .join(" / ")}; pool ${POOL}, ${WORKERS} closed-loop workers, ${SECONDS} s per run`,
    );
    const spread = await agents(pool, "spread", SPREAD_AGENTS);
    const [hot] = await agents(pool, "hot", 1);
    await closedLoop(pool, spread, 2); // warm-up

    const many = await closedLoop(pool, spread, SECONDS);
    const one = await closedLoop(pool, [hot!], SECONDS);
    const open = stats(await openLoop(pool, spread, RATE, SECONDS));

    // The usage read as the period grows: one agent's period filled by bulk inserts (the trigger
    // keeps its total), both reads timed at each size.
    const growth: { size: number; total: ReturnType<typeof stats>; rated: ReturnType<typeof stats>; summed: ReturnType<typeof stats> }[] =
      [];
    const grown = "grown";
    await putPolicy(pool, grown, { dailyBudgetUnits: BUDGET_UNITS });
    const budgetOnly = (await getPolicy(pool, grown))!;
    // The same agent as if it also had a 24 h rate limit: its calls are counted over the sliding
    // window (an index range scan), which does grow with the calls in the window.
    const withRate = { ...budgetOnly, rateLimit: { calls: 1_000_000, window: "24h" as const } };
    let size = 0;
    for (const target of [0, 10_000, 100_000]) {
      if (target > size) {
        await pool.query(
          `INSERT INTO spend_reservations (agent_id, amount_units, endpoint, domain, protocol, created_at, budget_window_start)
           SELECT $1, $2, 'https://api.example.com/v1/data', 'api.example.com', 'x402', now(), date_trunc('second', now())
           FROM generate_series(1, $3)`,
          [grown, AMOUNT_UNITS.toString(), target - size],
        );
        size = target;
        await pool.query("ANALYZE spend_reservations");
      }
      const viaTotal = await readUsage(pool, grown, budgetOnly, new Date());
      const viaSum = await summedUsage(pool, grown);
      if (viaTotal.usedTodayUnits !== viaSum) problems.push(`at ${size}: running total ${viaTotal.usedTodayUnits} ≠ sum ${viaSum}`);
      growth.push({
        size,
        total: await timeReads(200, () => readUsage(pool, grown, budgetOnly, new Date())),
        rated: await timeReads(size >= 100_000 ? 20 : 200, () => readUsage(pool, grown, withRate, new Date())),
        summed: await timeReads(size >= 100_000 ? 20 : 200, () => summedUsage(pool, grown)),
      });
    }

    // No overspend anywhere (the budgets cannot bind, so every reservation counted and none was lost).
    const { rows } = await pool.query<{ agent_id: string; units: string; used: string }>(
      `SELECT r.agent_id, sum(r.amount_units)::text AS units, max(p.used_units)::text AS used
       FROM spend_reservations r JOIN spend_periods p ON p.agent_id = r.agent_id AND p.window_start = r.budget_window_start
       WHERE r.status <> 'released' GROUP BY r.agent_id, r.budget_window_start`,
    );
    for (const r of rows) if (r.units !== r.used) problems.push(`${r.agent_id}: reservations sum ${r.units}, running total ${r.used}`);

    console.log("\nreservation capacity (policy check + reservation, one READ COMMITTED transaction each)");
    console.log(
      `  many agents (${SPREAD_AGENTS}), closed loop      ${Math.round(many.perSecond).toString().padStart(7)} reservations/s   goal ≥ 5,000: ${verdict(many.perSecond >= 5000)}`,
    );
    console.log(
      `  one hot agent, closed loop          ${Math.round(one.perSecond).toString().padStart(7)} reservations/s   goal ≥ 1,000: ${verdict(one.perSecond >= 1000)}`,
    );
    console.log(
      `  offered ${RATE}/s over ${SPREAD_AGENTS} agents (open loop) p50 ${f(open.p50)} ms, p99 ${f(open.p99)} ms, max ${f(open.max)} ms   goal p99 < 5 ms: ${verdict(open.p99 < 5)}`,
    );
    console.log("\nusage read of one agent as its period grows (p50 / p99 ms)");
    console.log("  reservations in period   running total (now)     + 24 h rate-limit count   sum over reservations (baseline)");
    for (const g of growth) {
      console.log(
        `  ${String(g.size).padStart(20)}   ${`${f(g.total.p50)} / ${f(g.total.p99)}`.padEnd(22)}  ${`${f(g.rated.p50)} / ${f(g.rated.p99)}`.padEnd(24)}  ${f(g.summed.p50)} / ${f(g.summed.p99)}`,
      );
    }
    const flat = growth.at(-1)!.total.p50 <= growth[0]!.total.p50 * 1.5 + 0.1;
    console.log(`  running total flat from 0 to ${growth.at(-1)!.size} reservations: ${verdict(flat)}`);
  } finally {
    await pool.end();
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
