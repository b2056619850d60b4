/**
 * Bench (a): the policy check + reservation at 200 concurrent callers. Each reservation is
 * `reserveInTransaction` in a transaction of its own (BEGIN READ COMMITTED … COMMIT), on a pool
 * shared by all callers, against the baseline `reserveSerializable` (no lock; SERIALIZABLE,
 * retried). Two shapes:
 *
 * - hot: every caller pays for the same agent, so the agent's lock serializes them;
 * - spread: each caller has its own agent (200 agents), so no two reservations wait on each other.
 *
 * Two times per reservation: `txn` from BEGIN to COMMIT on a connection in hand (lock waits and
 * retries included), `caller` from asking the pool for a connection to COMMIT (pool queueing too).
 * The answer is checked: the budgets are set so that a known number of reservations must be
 * refused, and the reservations that committed must be exactly the allowed ones.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { type PaymentRequest, putPolicy } from "../../api/shared/policy/index.js";
import { reserveInTransaction } from "../../api/gateway/reservations/store.js";
import { type Stats, stats } from "./latency.js";
import { reserveSerializable } from "./naive-reservation.js";

const AMOUNT_UNITS = 10_000n;
const ENDPOINT = "https://api.example.com/v1/data";
/** The hot agent's budget leaves this many reservations refused (the check must refuse exactly these). */
const HOT_REFUSED = 100;
/** Of each spread agent's reservations, this many are refused. */
const SPREAD_REFUSED_PER_AGENT = 5;

export type Variant = "advisory lock" | "serializable";
export type Shape = "hot" | "spread";

export interface ReservationRun {
  readonly variant: Variant;
  readonly shape: Shape;
  readonly txn: Stats;
  readonly caller: Stats;
  readonly accepted: number;
  readonly refused: number;
  /** Serializable attempts that were aborted and retried (0 for the lock). */
  readonly retries: number;
  readonly wall_ms: number;
  /** Differences from the expected answer (empty = correct). */
  readonly problems: readonly string[];
}

export interface ReservationBenchOptions {
  readonly databaseUrl: string;
  readonly callers: number;
  readonly reservations: number;
  readonly poolSize: number;
}

const request = (): PaymentRequest => ({ endpoint: ENDPOINT, amountUnits: AMOUNT_UNITS, protocol: "x402", offeredProtocols: ["x402"] });

interface Sample {
  readonly txn_ms: number;
  readonly caller_ms: number;
  readonly accepted: boolean;
  readonly attempts: number;
}

async function reserveOnce(pool: pg.Pool, variant: Variant, agentId: string): Promise<Sample> {
  const asked = performance.now();
  const client = await pool.connect();
  const begun = performance.now();
  try {
    if (variant === "serializable") {
      const r = await reserveSerializable(client, agentId, request(), new Date());
      const done = performance.now();
      return { txn_ms: done - begun, caller_ms: done - asked, accepted: r.reservationId !== null, attempts: r.attempts };
    }
    await client.query("BEGIN");
    try {
      const r = await reserveInTransaction(client, agentId, request(), new Date());
      await client.query("COMMIT");
      const done = performance.now();
      return { txn_ms: done - begun, caller_ms: done - asked, accepted: r.reservationId !== null, attempts: 1 };
    } catch (error) {
      await client.query("ROLLBACK").catch(() => undefined);
      throw error;
    }
  } finally {
    client.release();
  }
}

/** One run on fresh agents (a warm-up is simply a smaller run). */
export async function runReservations(
  pool: pg.Pool,
  options: ReservationBenchOptions,
  variant: Variant,
  shape: Shape,
): Promise<ReservationRun> {
  const { callers, reservations } = options;
  const prefix = `bench-${shape}-${variant === "serializable" ? "ssi" : "lock"}-${randomBytes(4).toString("hex")}`;
  const perAgent = Math.floor(reservations / callers);
  const agents = shape === "hot" ? [`${prefix}-hot`] : Array.from({ length: callers }, (_, i) => `${prefix}-${i}`);
  const allowedPerAgent = shape === "hot" ? reservations - HOT_REFUSED : perAgent - SPREAD_REFUSED_PER_AGENT;
  for (const agentId of agents) {
    await putPolicy(pool, agentId, {
      dailyBudgetUnits: BigInt(allowedPerAgent) * AMOUNT_UNITS,
      // Never binding, but the usage query counts the window as it does in production.
      rateLimit: { calls: 1_000_000, window: "24h" },
    });
  }

  const samples: Sample[] = [];
  let issued = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: callers }, async (_, caller) => {
      const agentId = shape === "hot" ? agents[0]! : agents[caller]!;
      if (shape === "spread") {
        for (let i = 0; i < perAgent; i += 1) samples.push(await reserveOnce(pool, variant, agentId));
        return;
      }
      // Hot: the callers share one counter, so every caller keeps a request in flight until the end.
      while (issued < reservations) {
        issued += 1;
        samples.push(await reserveOnce(pool, variant, agentId));
      }
    }),
  );
  const wall_ms = performance.now() - started;

  const problems: string[] = [];
  const { rows } = await pool.query<{ agent_id: string; n: number; units: string }>(
    "SELECT agent_id, count(*)::int AS n, sum(amount_units)::text AS units FROM spend_reservations WHERE agent_id LIKE $1 || '-%' GROUP BY agent_id",
    [prefix],
  );
  const byAgent = new Map(rows.map((r) => [r.agent_id, r]));
  for (const agentId of agents) {
    const got = byAgent.get(agentId);
    const budget = BigInt(allowedPerAgent) * AMOUNT_UNITS;
    if (got === undefined || got.n !== allowedPerAgent)
      problems.push(`${agentId}: ${got?.n ?? 0} reservations committed, expected ${allowedPerAgent}`);
    if (got !== undefined && BigInt(got.units) > budget)
      problems.push(`${agentId}: reserved ${got.units} units over a budget of ${budget}`);
  }
  const accepted = samples.filter((s) => s.accepted).length;
  if (accepted !== allowedPerAgent * agents.length)
    problems.push(`${accepted} accepted answers, expected ${allowedPerAgent * agents.length}`);
  return {
    variant,
    shape,
    txn: stats(samples.map((s) => s.txn_ms)),
    caller: stats(samples.map((s) => s.caller_ms)),
    accepted,
    refused: samples.length - accepted,
    retries: samples.reduce((sum, s) => sum + s.attempts - 1, 0),
    wall_ms,
    problems,
  };
}

export function benchPool(databaseUrl: string, size: number): pg.Pool {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: size, options: "-c jit=off" });
  pool.on("error", () => undefined);
  return pool;
}
