/**
 * Live updates that arrive while a commit is in flight share the next commit (scripted sources,
 * no ledger). A live source sends two or three slot statuses per slot; committed one by one, a
 * loaded indexer fell behind the stream until the server hung up on it. The database is made slow
 * by holding a lock on `checkpoints` (every commit writes its checkpoint there) until the source
 * has delivered everything; commits are counted by a trigger on the same table. Whatever the
 * grouping, the store ends as committing each update alone leaves it.
 */
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_BATCH_SIZE, IngestPipeline } from "../../indexer/pipeline.js";
import type { ChainSource, RawTransaction, SlotStatus, SourceUpdate } from "../../indexer/sources/source.js";
import { readCheckpoint } from "../../indexer/store/ingest.js";
import { verifyProjections } from "../../indexer/verify.js";
import { PAYMENT_LEDGER_PROGRAM_ID } from "../../programs/payment_ledger/ts/index.js";
import { pollUntil } from "../support/poll.js";
import { mulberry32 } from "../support/random.js";
import { createFreshDatabase, type FreshDatabase } from "./fresh-database.js";
import { randomHistory } from "./random-history.js";
import { eventKeys, projectionSnapshot, snapshotDifference } from "./read-models.js";

const CLUSTER = "localnet";
/** Without the grouping the source cannot deliver everything while the first commit waits: the lock goes after this. */
const GATE_FALLBACK_MS = 10_000;

let live: FreshDatabase;
let reference: FreshDatabase;

beforeAll(async () => {
  [live, reference] = [await createFreshDatabase(), await createFreshDatabase()];
  // Every commit of the live path writes its checkpoint: one row here per commit.
  await live.pool.query(`
    CREATE TABLE test_checkpoint_writes (source text NOT NULL, slot bigint NOT NULL);
    CREATE FUNCTION test_count_checkpoint_write() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN INSERT INTO test_checkpoint_writes VALUES (NEW.source, NEW.slot); RETURN NEW; END $$;
    CREATE TRIGGER test_count_checkpoint_writes AFTER INSERT OR UPDATE ON checkpoints
      FOR EACH ROW EXECUTE FUNCTION test_count_checkpoint_write();`);
});

afterAll(async () => {
  await live?.drop();
  await reference?.drop();
});

const tx = (transaction: RawTransaction): SourceUpdate => ({ kind: "transaction", transaction });
const status = (slot: bigint, s: SlotStatus): SourceUpdate => ({ kind: "slot", slot: { slot, parent: slot - 1n, status: s } });
const at = (transaction: RawTransaction, slot: bigint): RawTransaction => ({ ...transaction, slot });

/** A live source that sends `updates` at once, says so through `delivered`, then stays open until aborted. */
function scriptedSource(name: string, updates: readonly SourceUpdate[]): ChainSource & { delivered: Promise<void> } {
  let markDelivered = (): void => undefined;
  const delivered = new Promise<void>((resolve) => {
    markDelivered = resolve;
  });
  return {
    name,
    delivered,
    // biome-ignore lint/correctness/useYield: a live feed has no history
    async *backfill(): AsyncIterable<RawTransaction> {
      throw new Error("no history");
    },
    async *follow(_fromSlot: bigint, signal: AbortSignal): AsyncIterable<SourceUpdate> {
      yield* updates;
      markDelivered();
      if (!signal.aborted) await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
    },
  };
}

/**
 * Holds commits back (their checkpoint write waits on the lock) until `until` settles. Resolves
 * once the lock is held, with the lock's release.
 */
async function slowCommitsUntil(pool: pg.Pool, until: Promise<void>): Promise<{ released: Promise<void> }> {
  const client = await pool.connect();
  await client.query("BEGIN");
  await client.query("LOCK TABLE checkpoints IN EXCLUSIVE MODE");
  const released = Promise.race([until, new Promise((resolve) => setTimeout(resolve, GATE_FALLBACK_MS))])
    .then(() => client.query("COMMIT"))
    .then(() => undefined)
    .finally(() => client.release());
  // Wrapped: an async function returning a promise would wait for it.
  return { released };
}

/** Runs the live pipeline over `source` with commits held back until it delivered everything; stops once its checkpoint reaches `slot`. */
async function followUntil(source: ReturnType<typeof scriptedSource>, slot: bigint, batchSize: number): Promise<void> {
  const { released } = await slowCommitsUntil(live.pool, source.delivered);
  const pipeline = new IngestPipeline({ pool: live.pool, programId: PAYMENT_LEDGER_PROGRAM_ID, cluster: CLUSTER, batchSize });
  const controller = new AbortController();
  const running = pipeline.run(source, controller.signal);
  try {
    await pollUntil(async () => ((await readCheckpoint(live.pool, source.name))?.slot ?? -1n) >= slot, {
      timeoutMs: 30_000,
      intervalMs: 20,
      what: `the checkpoint of ${source.name} to reach slot ${slot}`,
    });
  } finally {
    controller.abort();
    await running;
    await released;
  }
}

async function commitsOf(source: string): Promise<number> {
  const result = await live.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM test_checkpoint_writes WHERE source = $1", [source]);
  return result.rows[0]!.n;
}

async function eventsOf(pool: pg.Pool, signatures: readonly string[]): Promise<{ signature: string; finalized: boolean }[]> {
  const result = await pool.query<{ signature: string; finalized: boolean }>(
    "SELECT DISTINCT signature, finalized FROM chain_events WHERE signature = ANY($1)",
    [signatures],
  );
  return result.rows;
}

/** The one-by-one loop: a commit at every slot status and every full batch, as the live path once did. */
async function commitOneByOne(pool: pg.Pool, name: string, updates: readonly SourceUpdate[], batchSize: number): Promise<number> {
  const pipeline = new IngestPipeline({ pool, programId: PAYMENT_LEDGER_PROGRAM_ID, cluster: CLUSTER, batchSize });
  let batch: RawTransaction[] = [];
  let checkpoint = 0n;
  let commits = 0;
  for (const update of updates) {
    if (update.kind === "transaction") {
      batch.push(update.transaction);
      if (batch.length < batchSize) continue;
    }
    const slot = update.kind === "slot" ? update.slot : null;
    checkpoint = slot?.status === "confirmed" ? slot.slot : (batch.at(-1)?.slot ?? checkpoint);
    const finalized = slot?.status === "finalized" ? slot.slot : undefined;
    const dead = slot?.status === "dead" ? [slot.slot] : undefined;
    await pipeline.ingest(batch, { source: name, slot: checkpoint }, finalized, dead);
    commits += 1;
    batch = [];
  }
  return commits;
}

/** What the event store, the seen transactions and every projection hold, comparable across databases. */
async function stored(pool: pg.Pool): Promise<Record<string, string[]>> {
  const events = await pool.query<{ k: string }>(
    "SELECT concat_ws(':', signature, instruction_index, inner_index, event_ordinal, slot, finalized) AS k FROM chain_events",
  );
  const seen = await pool.query<{ k: string }>(
    "SELECT concat_ws(':', signature, slot, outcome, event_count) AS k FROM chain_transactions_seen",
  );
  return {
    ...(await projectionSnapshot(pool, { portable: true })),
    chain_events: events.rows.map((r) => r.k).sort(),
    chain_transactions_seen: seen.rows.map((r) => r.k).sort(),
  };
}

/**
 * The live path over `source` (stopped once its checkpoint reaches `slot`), then the same updates
 * one by one in the reference database, so both databases see every case, in the same order,
 * whatever a case then asserts. Returns how many commits each took.
 */
async function followBothWays(
  source: ReturnType<typeof scriptedSource>,
  updates: readonly SourceUpdate[],
  slot: bigint,
  batchSize = DEFAULT_BATCH_SIZE,
): Promise<{ live: number; oneByOne: number }> {
  await followUntil(source, slot, batchSize);
  const oneByOne = await commitOneByOne(reference.pool, source.name, updates, batchSize);
  return { live: await commitsOf(source.name), oneByOne };
}

/** Both databases hold the same events, seen transactions, projections and checkpoint. */
async function expectSameStores(name: string): Promise<void> {
  expect(snapshotDifference(await stored(live.pool), await stored(reference.pool))).toEqual({});
  expect(await eventKeys(live.pool)).toEqual(await eventKeys(reference.pool));
  expect((await readCheckpoint(live.pool, name))?.slot).toBe((await readCheckpoint(reference.pool, name))?.slot);
  expect(await verifyProjections(live.pool, { cluster: CLUSTER })).toEqual([]);
}

describe("live commits: updates queued behind a commit share the next one", () => {
  it("two hundred slot statuses sent at once commit in at most two commits, with the newest checkpoint and finalized slot", async () => {
    const [first, second] = randomHistory(11, 2).transactions.map((t, i) => at(t, i === 0 ? 100n : 150n));
    const updates: SourceUpdate[] = [tx(first!), status(100n, "confirmed")];
    for (let slot = 101n; slot <= 200n; slot += 1n) {
      if (slot === 150n) updates.push(tx(second!));
      updates.push(status(slot, "confirmed"));
      if (slot - 32n >= 100n) updates.push(status(slot - 32n, "finalized"));
    }
    const source = scriptedSource("live-statuses", updates);

    const commits = await followBothWays(source, updates, 200n);

    // One commit may start before the rest arrives; everything queued behind it shares the next.
    expect(commits.oneByOne).toBe(updates.length - 2);
    expect(commits.live).toBeLessThanOrEqual(2);
    expect((await readCheckpoint(live.pool, source.name))?.slot).toBe(200n);
    // Finalized through slot 168: both transactions' events.
    const events = await eventsOf(live.pool, [first!.signature, second!.signature]);
    expect(new Map(events.map((e) => [e.signature, e.finalized]))).toEqual(new Map([first!, second!].map((t) => [t.signature, true])));
    await expectSameStores(source.name);
  });

  it("a dead slot among queued updates rolls back exactly its slot's events, not what came after it", async () => {
    const [a, b, c, d] = randomHistory(12, 4).transactions;
    const updates: SourceUpdate[] = [
      status(1_009n, "confirmed"),
      tx(at(a!, 1_010n)),
      tx(at(b!, 1_011n)),
      status(1_010n, "confirmed"),
      status(1_011n, "confirmed"),
      tx(at(c!, 1_012n)),
      status(1_011n, "dead"),
      tx(at(d!, 1_013n)),
      status(1_012n, "confirmed"),
      status(1_013n, "confirmed"),
    ];
    const source = scriptedSource("live-dead", updates);

    const commits = await followBothWays(source, updates, 1_013n);

    const kept = await eventsOf(
      live.pool,
      [a!, b!, c!, d!].map((t) => t.signature),
    );
    expect(kept.map((e) => e.signature).sort()).toEqual([a!, c!, d!].map((t) => t.signature).sort());
    expect(commits.live).toBeLessThan(commits.oneByOne);
    await expectSameStores(source.name);
  });

  it.each([
    { seed: 21, batchSize: 4 },
    { seed: 22, batchSize: 500 },
    { seed: 23, batchSize: 7 },
  ])(
    "interleaved transactions, confirmed, finalized and dead slots store what one commit per update stores (seed $seed, batch $batchSize)",
    async ({ seed, batchSize }) => {
      // Slots of their own per case: a dead slot must not reach another case's events.
      const base = BigInt(seed) * 1_000n;
      const random = mulberry32(seed);
      const history = randomHistory(seed, 60).transactions.map((t) => at(t, base + t.slot));
      const updates: SourceUpdate[] = [];
      const last = history.at(-1)!.slot;
      for (let slot = base + 1n; slot <= last; slot += 1n) {
        for (const t of history.filter((h) => h.slot === slot)) updates.push(tx(t));
        updates.push(status(slot, random() < 0.2 ? "dead" : "confirmed"));
        if (random() < 0.3 && slot - 5n > base) updates.push(status(slot - 5n, "finalized"));
      }
      // The end: a slot of its own, so its checkpoint says everything before it is committed.
      updates.push(status(last + 1n, "confirmed"));
      const source = scriptedSource(`live-equivalence-${seed}`, updates);

      const commits = await followBothWays(source, updates, last + 1n, batchSize);

      expect(commits.live).toBeLessThan(commits.oneByOne);
      await expectSameStores(source.name);
    },
  );

  it("a dropped stream surfaces after what it delivered is committed: the reconnect resumes from there", async () => {
    const [a, b] = randomHistory(13, 2).transactions.map((t, i) => at(t, 3_000n + 2n * BigInt(i)));
    const calls: bigint[] = [];
    const before: SourceUpdate[] = [tx(a!), status(3_000n, "confirmed"), status(3_001n, "confirmed")];
    const after: SourceUpdate[] = [tx(b!), status(3_002n, "confirmed")];
    const source: ChainSource = {
      name: "live-dropped",
      // biome-ignore lint/correctness/useYield: a live feed has no history
      async *backfill(): AsyncIterable<RawTransaction> {
        throw new Error("no history");
      },
      async *follow(fromSlot: bigint, signal: AbortSignal): AsyncIterable<SourceUpdate> {
        calls.push(fromSlot);
        if (calls.length === 1) {
          yield* before;
          // Not closed by a status before the drop: delivered again after it.
          yield tx(b!);
          throw new Error("stream dropped");
        }
        yield* after;
        if (!signal.aborted) await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
      },
    };
    const pipeline = new IngestPipeline({ pool: live.pool, programId: PAYMENT_LEDGER_PROGRAM_ID, cluster: CLUSTER });
    const controller = new AbortController();
    const running = pipeline.run(source, controller.signal, undefined, { reconnect: { initialMs: 1, maxMs: 2 } });
    try {
      await pollUntil(async () => ((await readCheckpoint(live.pool, source.name))?.slot ?? -1n) >= 3_002n, {
        timeoutMs: 30_000,
        intervalMs: 20,
        what: "the checkpoint to reach slot 3002",
      });
    } finally {
      controller.abort();
      await running;
    }
    await commitOneByOne(reference.pool, source.name, [...before, ...after], DEFAULT_BATCH_SIZE);

    expect(calls).toEqual([0n, 3_001n]);
    await expectSameStores(source.name);
  });
});
