/**
 * Group commit (indexer/db/group-commit.ts) against a real Postgres: who shares a transaction,
 * what a failing member undoes, what a failed group answers, and the reservation ledger's
 * guarantees when one agent's reservations are grouped (no budget or rate limit exceeded, the
 * running totals equal to the rows, every answer matching what committed).
 */
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runDatabaseEffect } from "../../api/shared/http/idempotency.js";
import { isServiceError } from "../../api/shared/errors.js";
import { putPolicy } from "../../api/shared/policy/index.js";
import { reserveInTransaction } from "../../api/gateway/reservations/store.js";
import { createPool, siblingPool, TransactionAborted, withTransaction } from "../../indexer/db/database.js";
import { GROUP_MAX, GroupCommit } from "../../indexer/db/group-commit.js";
import { createFreshDatabase, type FreshDatabase } from "./fresh-database.js";

let db: FreshDatabase;
let pool: pg.Pool;
/** The same server and options with pg's pipeline mode, as `groupCommitFor` makes the group's connections. */
let pipelined: pg.Pool;

beforeAll(async () => {
  db = await createFreshDatabase();
  // The pool that ignores a lost idle connection, as the services' do.
  pool = createPool(db.url);
  pipelined = siblingPool(pool, { pipeline: true });
  await db.pool.query("CREATE TABLE grouped (key text NOT NULL, n int NOT NULL, UNIQUE (key, n) DEFERRABLE INITIALLY DEFERRED)");
  // Checked at each INSERT, so that an INSERT waits for an uncommitted equal row.
  await db.pool.query("CREATE TABLE cycle_rows (n int PRIMARY KEY)");
});

afterAll(async () => {
  await pipelined?.end();
  await pool?.end();
  await db?.drop();
});

const rows = async (key: string): Promise<number[]> =>
  (await db.pool.query<{ n: number }>("SELECT n FROM grouped WHERE key = $1 ORDER BY n", [key])).rows.map((r) => r.n);

/** A member that inserts `n` and answers its transaction id and what it saw of its key before. */
const insert =
  (key: string, n: number) =>
  async (client: pg.PoolClient): Promise<{ xid: string; saw: number[] }> => {
    const saw = (await client.query<{ n: number }>("SELECT n FROM grouped WHERE key = $1 ORDER BY n", [key])).rows.map((r) => r.n);
    await client.query("INSERT INTO grouped (key, n) VALUES ($1, $2)", [key, n]);
    const xid = (await client.query<{ xid: string }>("SELECT pg_current_xact_id()::text AS xid")).rows[0]!.xid;
    return { xid, saw };
  };

/** Every guarantee holds on connections that answer one statement at a time and on pipelined ones. */
const MODES = [
  ["one statement at a time", () => pool],
  ["pipelined", () => pipelined],
] as const;

describe.each(MODES)("group commit, connections answering %s", (_, groupPool) => {
  beforeAll(async () => {
    await db.pool.query("TRUNCATE grouped");
  });
  it("a transaction alone commits as its own; those arriving meanwhile share the next, in arrival order, each seeing the ones before", async () => {
    const commits = new GroupCommit(groupPool());
    const results = await Promise.all(Array.from({ length: 6 }, (_, i) => commits.run("a", insert("a", i))));
    expect(await rows("a")).toEqual([0, 1, 2, 3, 4, 5]);
    // The first ran at once, alone; the five behind it formed one group.
    expect(new Set(results.slice(1).map((r) => r.xid)).size).toBe(1);
    expect(results[1]!.xid).not.toBe(results[0]!.xid);
    for (const [i, r] of results.entries()) expect(r.saw).toEqual(Array.from({ length: i }, (_, k) => k));
  });

  it("different keys never share a transaction and run side by side", async () => {
    const commits = new GroupCommit(groupPool());
    // Each key's first member waits until the other key's has started: they can only both finish
    // if the two keys run at the same time.
    const started = { b: false, c: false };
    const waitFor = async (other: "b" | "c") => {
      for (let i = 0; i < 200 && !started[other]; i += 1) await new Promise((r) => setTimeout(r, 5));
      return started[other];
    };
    const member = (key: "b" | "c", other: "b" | "c") => async (client: pg.PoolClient) => {
      started[key] = true;
      const both = await waitFor(other);
      return { both, ...(await insert(key, 1)(client)) };
    };
    const [b, c] = await Promise.all([commits.run("b", member("b", "c")), commits.run("c", member("c", "b"))]);
    expect(b.both && c.both).toBe(true);
    expect(b.xid).not.toBe(c.xid);
  });

  it("a member that throws has its writes undone and gets its own error; the others of its group commit", async () => {
    const commits = new GroupCommit(groupPool());
    const blocker = commits.run("d", insert("d", 0));
    const failing = commits.run("d", async (client) => {
      await client.query("INSERT INTO grouped (key, n) VALUES ('d', 1)");
      throw new Error("refused after writing");
    });
    // A statement error aborts the transaction; the member's savepoint restores it for the next.
    const sqlError = commits.run("d", async (client) => {
      await client.query("INSERT INTO grouped (key, n) VALUES ('d', 2)");
      await client.query("SELECT 1 / 0");
    });
    const after = commits.run("d", insert("d", 3));
    await blocker;
    await expect(failing).rejects.toThrow("refused after writing");
    await expect(sqlError).rejects.toThrow(/division by zero/);
    expect((await after).saw).toEqual([0]);
    expect(await rows("d")).toEqual([0, 3]);
  });

  it("a member alone that throws rolls its transaction back", async () => {
    const commits = new GroupCommit(groupPool());
    await expect(
      commits.run("e", async (client) => {
        await client.query("INSERT INTO grouped (key, n) VALUES ('e', 1)");
        throw new Error("no");
      }),
    ).rejects.toThrow("no");
    expect(await rows("e")).toEqual([]);
  });

  it("a COMMIT refused fails every member of the group and writes nothing of it", async () => {
    const commits = new GroupCommit(groupPool());
    const blocker = commits.run("f", insert("f", 0));
    // The deferred unique check runs at COMMIT: two members' equal rows fail the group's commit.
    const group = [commits.run("f", insert("f", 1)), commits.run("f", insert("f", 1)), commits.run("f", insert("f", 2))];
    await blocker;
    for (const member of group) await expect(member).rejects.toThrow(/duplicate key/);
    expect(await rows("f")).toEqual([0]);
    // The key is free again: the next transaction runs.
    await commits.run("f", insert("f", 5));
    expect(await rows("f")).toEqual([0, 5]);
  });

  it("a connection lost in the middle of a group fails the whole group, nothing written; the next runs on a new connection", async () => {
    const commits = new GroupCommit(groupPool());
    const blocker = commits.run("g", insert("g", 0));
    const first = commits.run("g", insert("g", 1));
    const killed = commits.run("g", async (client) => {
      const pid = (await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]!.pid;
      await db.pool.query("SELECT pg_terminate_backend($1)", [pid]);
      await client.query("INSERT INTO grouped (key, n) VALUES ('g', 2)");
    });
    const last = commits.run("g", insert("g", 3));
    await blocker;
    for (const member of [first, killed, last]) await expect(member).rejects.toThrow();
    expect(await rows("g")).toEqual([0]);
    await commits.run("g", insert("g", 4));
    expect(await rows("g")).toEqual([0, 4]);
  });

  it("a member that swallows its statement's error leaves the transaction aborted: its whole group fails, nothing written, wherever it stands", async () => {
    const commits = new GroupCommit(groupPool());
    const swallow = async (client: pg.PoolClient) => {
      await client.query("INSERT INTO grouped (key, n) VALUES ('i', 100)");
      await client.query("SELECT 1 / 0").catch(() => undefined);
      return { xid: "", saw: [] };
    };
    // In the middle: the next member's savepoint is refused. Last: the COMMIT is answered ROLLBACK.
    const key = "i";
    for (const at of [1, 2]) {
      const blocker = commits.run(key, insert(key, 0));
      const group = [0, 1, 2].map((i) => commits.run(key, i === at ? swallow : insert(key, 10 * at + i + 1)));
      await blocker;
      for (const member of group) await expect(member).rejects.toThrow();
      if (at === 2) await expect(group[2]).rejects.toBeInstanceOf(TransactionAborted);
      expect(await rows(key)).toEqual([0]);
      await db.pool.query("DELETE FROM grouped WHERE key = $1", [key]);
    }
  });

  it(`a group holds at most ${GROUP_MAX} members; the rest form the next`, async () => {
    const commits = new GroupCommit(groupPool());
    const count = 2 * GROUP_MAX + 1;
    const results = await Promise.all(Array.from({ length: count }, (_, i) => commits.run("h", insert("h", i))));
    const sizes = new Map<string, number>();
    for (const r of results) sizes.set(r.xid, (sizes.get(r.xid) ?? 0) + 1);
    expect([...sizes.values()]).toEqual([1, GROUP_MAX, GROUP_MAX]);
    expect(await rows("h")).toHaveLength(count);
  });
});

describe("a lock cycle through a group", () => {
  it("a member waiting on a lock whose holder waits for the group's is refused as a retryable conflict, nothing of it written; the rest commit", async () => {
    const store = { pool, now: () => new Date() };
    const ok = { status: 200, body: "{}" } as const;
    const AGENT_LOCK = 424_242;
    // Another process's transaction: it holds row 1 uncommitted, then waits for the agent's lock.
    const other = await db.pool.connect();
    await other.query("BEGIN");
    await other.query("INSERT INTO cycle_rows VALUES (1)");
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    /** The agent's effect running `sql` (with `values`) in its group. */
    const effect = (sql: string, values: unknown[] = []) =>
      runDatabaseEffect(
        store,
        null,
        async (client) => {
          await client.query(sql, values);
          return ok;
        },
        "cycle",
      );
    // A transaction of the agent running alone, so that the next three form one group.
    const alone = runDatabaseEffect(store, null, () => gate.then(() => ok), "cycle");
    // The group: its first member takes the agent's lock; the second waits on the other's row.
    const first = effect("SELECT pg_advisory_xact_lock($1)", [AGENT_LOCK]);
    const second = effect("INSERT INTO cycle_rows VALUES (1)");
    const third = effect("INSERT INTO cycle_rows VALUES (3)");
    release();
    await alone;
    // Once the second member waits on the other's row, the other asks for the agent's lock: the
    // second has waited longer, so its backend finds the cycle first and its statement is ended.
    for (let i = 0; i < 500; i += 1) {
      const waiting = await db.pool.query(
        "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO cycle_rows%'",
      );
      if (waiting.rowCount === 1) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    const otherDone = other
      .query("SELECT pg_advisory_xact_lock($1)", [AGENT_LOCK])
      .then(() => other.query("COMMIT"))
      .finally(() => other.release());
    await expect(first).resolves.toEqual(ok);
    const refused = await second.then(
      () => null,
      (error: unknown) => error,
    );
    expect(isServiceError(refused, "CONFLICT")).toBe(true);
    expect((refused as { extra?: Record<string, unknown> }).extra).toMatchObject({ retryable: true });
    await expect(third).resolves.toEqual(ok);
    await otherDone;
    // The other's row (committed after the group) and the third's; nothing of the second.
    const { rows: kept } = await db.pool.query<{ n: number }>("SELECT n FROM cycle_rows ORDER BY n");
    expect(kept.map((r) => r.n)).toEqual([1, 3]);
  });
});

describe.each(MODES)("one agent's reservations grouped, connections answering %s", (mode, groupPool) => {
  const USDC = 1_000_000n;
  const pay = (amountUnits: bigint) => ({ endpoint: "https://api.example.com/v1/data", amountUnits });

  it("200 concurrent reservations, some members failing after reserving, never exceed the budget or the rate limit; the answers, rows and totals agree", async () => {
    const agent = `grouped-agent-${mode === "pipelined" ? "p" : "s"}`;
    await putPolicy(db.pool, agent, { dailyBudgetUnits: 30n * USDC, rateLimit: { calls: 90, window: "1h" } });
    const commits = new GroupCommit(groupPool());
    const now = new Date();
    let state = 0x5eed;
    const random = (): number => {
      state = (state * 1_103_515_245 + 12_345) % 2_147_483_648;
      return state / 2_147_483_648;
    };
    const plans = Array.from({ length: 200 }, () => ({ amount: BigInt(100_000 + Math.floor(random() * 400_000)), fail: random() < 0.2 }));
    const answers = await Promise.allSettled(
      plans.map((plan) =>
        commits.run(agent, async (client) => {
          const r = await reserveInTransaction(client, agent, pay(plan.amount), now, { savepoint: false });
          // A member failing after its reservation (the route's later steps): the reservation is undone.
          if (plan.fail && r.reservationId !== null) throw new Error("later step failed");
          return r;
        }),
      ),
    );
    const kept = answers.flatMap((a, i) =>
      a.status === "fulfilled" && a.value.reservationId !== null ? [{ id: a.value.reservationId, amount: plans[i]!.amount }] : [],
    );
    const failed = answers.filter((a) => a.status === "rejected");
    expect(failed.every((a) => (a as PromiseRejectedResult).reason.message === "later step failed")).toBe(true);
    expect(failed.length).toBeGreaterThan(0);
    const { rows: stored } = await db.pool.query<{ id: string; amount_units: string }>(
      "SELECT id::text, amount_units::text FROM spend_reservations WHERE agent_id = $1 ORDER BY id",
      [agent],
    );
    // Every accepted answer is a committed row and nothing else is.
    expect(stored.map((r) => `${r.id}:${r.amount_units}`).sort()).toEqual(kept.map((k) => `${k.id}:${k.amount}`).sort());
    const total = kept.reduce((sum, k) => sum + k.amount, 0n);
    expect(total <= 30n * USDC).toBe(true);
    expect(kept.length <= 90).toBe(true);
    // Full: what was refused could not have fit (the budget or the rate limit binds).
    const smallest = plans.reduce((min, p) => (p.amount < min ? p.amount : min), plans[0]!.amount);
    expect(total + smallest > 30n * USDC || kept.length === 90).toBe(true);
    const { rows: period } = await db.pool.query<{ used: string; calls: number }>(
      "SELECT sum(used_units)::text AS used, sum(calls)::int AS calls FROM spend_periods WHERE agent_id = $1",
      [agent],
    );
    expect(period[0]).toEqual({ used: total.toString(), calls: kept.length });
  });
});

describe("withTransaction", () => {
  it("a work that swallowed a failed statement's error is answered TransactionAborted, not its result: Postgres rolled everything back", async () => {
    const outcome = withTransaction(pool, async (client) => {
      await client.query("INSERT INTO grouped (key, n) VALUES ('j', 1)");
      await client.query("SELECT 1 / 0").catch(() => undefined);
      return "done";
    });
    await expect(outcome).rejects.toBeInstanceOf(TransactionAborted);
    expect(await rows("j")).toEqual([]);
  });
});
