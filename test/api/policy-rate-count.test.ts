/**
 * The rate-limit count from running counts (`spend_rate_calls`, migrations/057) against the count
 * it replaced: on random histories of one agent (reservations made, held, released, settled,
 * landed after a release, re-dated by an approval, deleted; times on and around hour and minute
 * edges, some with microseconds), `readUsage`'s `rateCalls` must equal
 * `count(*) WHERE status <> 'released' AND created_at > now - window` for every window and many
 * instants, so every rate-limit decision stays the same. Also: the migration's backfill of rows
 * that predate it.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MIGRATIONS_DIR, migrate } from "../../indexer/db/migrate.js";
import { getPolicy, putPolicy, readUsage } from "../../api/shared/policy/index.js";
import { RATE_WINDOW_MS, RATE_WINDOWS, type RateWindow } from "../../api/shared/policy/windows.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { mulberry32 } from "../support/random.js";

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
/** An hour edge, so that instants on hour and minute edges are easy to make. */
const T0 = Date.parse("2026-03-01T12:00:00.000Z");

let db: FreshDatabase;

beforeAll(async () => {
  db = await createFreshDatabase();
});

afterAll(async () => {
  await db?.drop();
});

/** The count the running counts replaced (the reservations' share of `rateCalls`). */
async function countedDirectly(pool: pg.Pool, agentId: string, windowStart: Date): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM spend_reservations WHERE agent_id = $1 AND status <> 'released' AND created_at > $2",
    [agentId, windowStart],
  );
  return rows[0]!.n;
}

/** Instants that stress the buckets: on an hour or minute edge, a millisecond either side, or anywhere. */
function instant(random: () => number, anchors: readonly number[]): number {
  const kind = Math.floor(random() * 6);
  const hour = T0 + Math.floor(random() * 30 - 3) * HOUR;
  const minute = hour + Math.floor(random() * 60) * MINUTE;
  if (kind === 0) return hour;
  if (kind === 1) return minute;
  if (kind === 2) return minute + (random() < 0.5 ? -1 : 1);
  if (kind === 3 && anchors.length > 0) return anchors[Math.floor(random() * anchors.length)]!;
  return T0 + Math.floor((random() * 30 - 3) * HOUR);
}

/** Inserts one reservation at `ms` (plus `micros` microseconds), reserved or held. */
async function insert(pool: pg.Pool, agentId: string, ms: number, micros: number, held: boolean): Promise<string> {
  const { rows } = await pool.query<{ id: string }>(
    `INSERT INTO spend_reservations (agent_id, amount_units, endpoint, domain, protocol, created_at, budget_window_start, status)
     VALUES ($1, 1000, 'https://api.example.com/v1/data', 'api.example.com', 'x402', $2::timestamptz + $3 * interval '1 microsecond', $2, $4)
     RETURNING id`,
    [agentId, new Date(ms), micros, held ? "pending_approval" : "reserved"],
  );
  return rows[0]!.id;
}

/** Compares the running count with the direct count for every window at `checks` instants. */
async function compare(pool: pg.Pool, agentId: string, random: () => number, anchors: readonly number[], checks: number): Promise<number> {
  const stored = (await getPolicy(pool, agentId))!;
  let compared = 0;
  for (let c = 0; c < checks; c += 1) {
    const window: RateWindow = RATE_WINDOWS[Math.floor(random() * RATE_WINDOWS.length)]!;
    // The window's start is the instant that matters: put it on the edges (or on a row's time).
    const start = instant(random, anchors);
    const now = new Date(start + RATE_WINDOW_MS[window]);
    const policy = { ...stored, rateLimit: { calls: 1_000_000, window } };
    const usage = await readUsage(pool, agentId, policy, now);
    expect({ window, now: now.toISOString(), calls: usage.rateCalls }).toEqual({
      window,
      now: now.toISOString(),
      calls: await countedDirectly(pool, agentId, new Date(start)),
    });
    compared += 1;
  }
  return compared;
}

describe("rate-limit count from running counts", () => {
  it("equals the direct count on random histories, for every window, at edge instants", async () => {
    let compared = 0;
    for (let seed = 1; seed <= 12; seed += 1) {
      const random = mulberry32(seed);
      const agent = `rate-${seed}`;
      const neighbour = `rate-${seed}-neighbour`;
      await putPolicy(db.pool, agent, { rateLimit: { calls: 1_000_000, window: "24h" } });
      const ids: string[] = [];
      const anchors: number[] = [];
      for (let step = 0; step < 120; step += 1) {
        const op = random();
        const pick = () => ids[Math.floor(random() * ids.length)]!;
        if (op < 0.45 || ids.length === 0) {
          const ms = instant(random, anchors);
          const micros = random() < 0.3 ? Math.floor(random() * 1000) : 0;
          ids.push(await insert(db.pool, agent, ms, micros, random() < 0.2));
          if (micros === 0) anchors.push(ms);
          // Another agent's rows in the same hours must not count.
          if (random() < 0.3) await insert(db.pool, neighbour, ms, 0, false);
        } else if (op < 0.6) {
          await db.pool.query(
            "UPDATE spend_reservations SET status = 'released' WHERE id = $1 AND status IN ('reserved', 'pending_approval')",
            [pick()],
          );
        } else if (op < 0.7) {
          await db.pool.query("UPDATE spend_reservations SET status = 'settled', tx_hash = 'tx' WHERE id = $1 AND status = 'reserved'", [
            pick(),
          ]);
        } else if (op < 0.78) {
          // A released payment that lands anyway counts again.
          await db.pool.query("UPDATE spend_reservations SET status = 'settled', tx_hash = 'late' WHERE id = $1 AND status = 'released'", [
            pick(),
          ]);
        } else if (op < 0.88) {
          // An approval: the held payment is released, re-checked and counts again at its new time.
          const id = pick();
          const client = await db.pool.connect();
          try {
            await client.query("BEGIN");
            const released = await client.query(
              "UPDATE spend_reservations SET status = 'released' WHERE id = $1 AND status = 'pending_approval'",
              [id],
            );
            if (released.rowCount === 1) {
              await client.query("UPDATE spend_reservations SET status = 'reserved', created_at = $2 WHERE id = $1", [
                id,
                new Date(instant(random, anchors)),
              ]);
            }
            await client.query("COMMIT");
          } finally {
            client.release();
          }
        } else if (op < 0.92) {
          await db.pool.query("DELETE FROM spend_reservations WHERE id = $1", [pick()]);
        } else {
          compared += await compare(db.pool, agent, random, anchors, 5);
        }
      }
      compared += await compare(db.pool, agent, random, anchors, 40);
    }
    expect(compared).toBeGreaterThan(500);
  });

  it("counts nothing without a rate limit, and the agent's calls only", async () => {
    const agent = "rate-plain";
    await putPolicy(db.pool, agent, { dailyBudgetUnits: 1_000_000n });
    await insert(db.pool, agent, T0, 0, false);
    await insert(db.pool, "rate-plain-other", T0, 0, false);
    const policy = (await getPolicy(db.pool, agent))!;
    expect((await readUsage(db.pool, agent, policy, new Date(T0 + 1))).rateCalls).toBe(0);
    expect((await readUsage(db.pool, agent, { ...policy, rateLimit: { calls: 5, window: "1m" } }, new Date(T0 + 1))).rateCalls).toBe(1);
  });

  it("is read in UTC hours whatever the session's time zone", async () => {
    const agent = "rate-zone";
    await putPolicy(db.pool, agent, { rateLimit: { calls: 10, window: "1h" } });
    const zoned = new pg.Pool({ connectionString: db.url, max: 1, options: "-c timezone=Asia/Kolkata" });
    try {
      // Written at half past a UTC hour from a +05:30 session, read from an ordinary one.
      for (const offset of [29 * MINUTE, 30 * MINUTE, 31 * MINUTE, 89 * MINUTE]) {
        await zoned.query(
          `INSERT INTO spend_reservations (agent_id, amount_units, endpoint, domain, protocol, created_at, budget_window_start)
           VALUES ($1, 1, 'https://a.example/x', 'a.example', 'x402', $2, $2)`,
          [agent, new Date(T0 + offset)],
        );
      }
      const policy = (await getPolicy(db.pool, agent))!;
      for (const start of [T0, T0 + 29 * MINUTE + 30_000, T0 + 30 * MINUTE, T0 + 45 * MINUTE]) {
        const now = new Date(start + HOUR);
        expect((await readUsage(zoned, agent, policy, now)).rateCalls).toBe(await countedDirectly(db.pool, agent, new Date(start)));
        expect((await readUsage(db.pool, agent, policy, now)).rateCalls).toBe(await countedDirectly(db.pool, agent, new Date(start)));
      }
    } finally {
      await zoned.end();
    }
  });
});

describe("migration 057's backfill", () => {
  it("counts the reservations made before it exactly as the trigger would", async () => {
    const before = await createFreshDatabase({ before: 57 });
    try {
      const random = mulberry32(57);
      const agent = "backfilled";
      await putPolicy(before.pool, agent, { rateLimit: { calls: 1_000_000, window: "24h" } });
      const anchors: number[] = [];
      for (let i = 0; i < 300; i += 1) {
        const ms = instant(random, anchors);
        anchors.push(ms);
        const id = await insert(before.pool, agent, ms, random() < 0.3 ? Math.floor(random() * 1000) : 0, random() < 0.2);
        if (random() < 0.25) await before.pool.query("UPDATE spend_reservations SET status = 'released' WHERE id = $1", [id]);
      }
      await migrate(before.pool, MIGRATIONS_DIR);
      const { rows } = await before.pool.query<{ calls: string }>(
        "SELECT sum(calls)::text AS calls FROM spend_rate_calls WHERE agent_id = $1",
        [agent],
      );
      expect(rows[0]!.calls).toBe(String(await countedDirectly(before.pool, agent, new Date(0))));
      expect(await compare(before.pool, agent, random, anchors, 150)).toBe(150);
    } finally {
      await before.drop();
    }
  });
});
