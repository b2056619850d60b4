/**
 * The staged write path (COPY into staging, set-based into a partitioned event store) against the
 * write path it replaced (test/indexer/jsonb-ingest.ts, on the unpartitioned schema of its time):
 * the same random histories, cut into the same random batches, with events read twice (overlaps
 * with the batch before, and the same transaction twice in one batch), finality, dead slots
 * (forks rolled back, then the slot's transactions landing again) and batches that die halfway
 * (a connection lost between two statements) and are sent again, must leave the same event store,
 * the same seen transactions and the same read models in both, equal to a rebuild too.
 */
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { withTransaction } from "../../indexer/db/database.js";
import { type DecodedTransaction, decodeRawTransaction } from "../../indexer/decode/transaction.js";
import { PAYMENT_LEDGER_PROGRAM_ID } from "../../programs/payment_ledger/ts/index.js";
import { type IngestBatch, ingestBatch } from "../../indexer/store/ingest.js";
import { FINALIZE_EVENTS_SQL } from "../../indexer/store/projections.js";
import { rebuildProjections } from "../../indexer/store/rebuild.js";
import { mulberry32 } from "../support/random.js";
import { createFreshDatabase, type FreshDatabase } from "./fresh-database.js";
import { ingestBatchJsonb, JSONB_SCHEMA } from "./jsonb-ingest.js";
import { randomHistory } from "./random-history.js";
import { eventKeys, projectionSnapshot, snapshotDifference } from "./read-models.js";

const options = { cluster: "devnet" };

interface PlanNode {
  readonly "Node Type": string;
  readonly "Index Name"?: string;
  readonly "Relation Name"?: string;
  readonly Plans?: readonly PlanNode[];
}

/** The indexes a plan scans; a scan of a table without an index appears as "seq scan of <table>". */
function planScans(node: PlanNode): string[] {
  const own =
    node["Index Name"] !== undefined
      ? [node["Index Name"]]
      : node["Node Type"] === "Seq Scan"
        ? [`seq scan of ${node["Relation Name"]}`]
        : [];
  return [...own, ...(node.Plans ?? []).flatMap(planScans)];
}

class Crash extends Error {}

/** `pool`, whose next checked-out connection fails at its `at`-th statement or the first after it (BEGIN is the first). */
function crashingPool(pool: pg.Pool, at: number): pg.Pool {
  return new Proxy(pool, {
    get(target, property, receiver) {
      if (property !== "connect") return Reflect.get(target, property, receiver);
      return async () => {
        const client = await target.connect();
        let statements = 0;
        return new Proxy(client, {
          get(c, name, r) {
            if (name !== "query") return Reflect.get(c, name, r);
            return (...args: unknown[]) => {
              statements += 1;
              // A COPY (a stream, not a promise) is let through; the statement after it fails.
              if (statements >= at && typeof args[0] === "string" && statements - at < 100) {
                statements = -1_000;
                // The connection is lost here: what the transaction wrote so far never commits.
                return c.query("ROLLBACK").then(() => {
                  throw new Crash(`lost at statement ${at}`);
                });
              }
              return (c.query as (...a: unknown[]) => unknown)(...args);
            };
          },
        });
      };
    },
  });
}

/** Both tables of the event store, without database-local ids and times. */
async function eventStore(pool: pg.Pool): Promise<{ events: string[]; seen: string[] }> {
  const events = await pool.query<{ r: string }>(
    `SELECT concat_ws('|', signature, instruction_index, inner_index, event_ordinal, slot, block_time, commitment, finalized,
                      event_name, payload::text, encode(raw, 'hex'), source) AS r FROM chain_events`,
  );
  const seen = await pool.query<{ r: string }>(
    "SELECT concat_ws('|', signature, slot, outcome, event_count, detail) AS r FROM chain_transactions_seen",
  );
  return { events: events.rows.map((x) => x.r).sort(), seen: seen.rows.map((x) => x.r).sort() };
}

describe("the staged write path leaves what the jsonb one left", () => {
  let staged: FreshDatabase;
  let jsonb: FreshDatabase;
  beforeAll(async () => {
    [staged, jsonb] = await Promise.all([createFreshDatabase(), createFreshDatabase(JSONB_SCHEMA)]);
  });
  afterAll(async () => {
    await Promise.all([staged?.drop(), jsonb?.drop()]);
  });

  for (const seed of [11, 12, 13, 14]) {
    it(`random history (seed ${seed}): duplicates, forks, finality and batches lost halfway`, async () => {
      for (const db of [staged, jsonb]) {
        await db.pool.query("TRUNCATE chain_events, chain_transactions_seen, settlement_transfers, checkpoints");
        await withTransaction(db.pool, (client) => rebuildProjections(client, options));
      }
      const history = randomHistory(seed, 500);
      const decoded = history.transactions.map((tx) => decodeRawTransaction(tx, PAYMENT_LEDGER_PROGRAM_ID));
      const random = mulberry32(seed * 13);
      // The jsonb path cannot take one transaction twice in a batch (an invocation opened twice
      // is one upsert touching its row twice, an error; a payment under an invocation is counted
      // twice in its consumption): it gets the batch without the repeat.
      const both = async (batch: IngestBatch, repeated: readonly DecodedTransaction[] = []): Promise<void> => {
        await ingestBatch(staged.pool, { ...batch, transactions: [...batch.transactions, ...repeated] }, options);
        await ingestBatchJsonb(jsonb.pool, batch, options);
      };
      await both({ transactions: [], settlements: history.settlements });
      let crashes = 0;
      let forks = 0;
      for (let start = 0, round = 0; start < decoded.length; round += 1) {
        const size = 1 + Math.floor(random() * 80);
        const chunk = decoded.slice(start, start + size);
        // Read again: the tail of the batch before (a resumed source) ...
        const overlap = start > 0 && random() < 0.3 ? decoded.slice(Math.max(0, start - 5), start) : [];
        // ... and one transaction of this batch twice in it, apart from its first copy.
        const twice: DecodedTransaction[] = random() < 0.3 ? [chunk[Math.floor(random() * chunk.length)]!] : [];
        const deadSlots: bigint[] = [];
        if (start > 0 && round % 3 === 2) {
          // Every third batch, a fork: a recent slot dies; its transactions land again in this batch (same slot here).
          const dead = decoded[start - 1]!.slot;
          deadSlots.push(dead);
          overlap.push(...decoded.slice(0, start).filter((t) => t.slot === dead && !overlap.includes(t)));
          forks += 1;
        }
        const batch: IngestBatch = {
          transactions: [...overlap, ...chunk],
          finalizedSlot: chunk[0]!.slot - 4n,
          deadSlots,
          checkpoint: { source: "test", slot: chunk.at(-1)!.slot, blockhash: null },
        };
        if (random() < 0.4) {
          // Lost between two statements of the staged path (BEGIN is 1): nothing of it may stay.
          const at = 2 + Math.floor(random() * 8);
          const lost = await ingestBatch(
            crashingPool(staged.pool, at),
            { ...batch, transactions: [...batch.transactions, ...twice] },
            options,
          ).then(
            () => null,
            (error: unknown) => error,
          );
          if (lost !== null) {
            expect(lost).toBeInstanceOf(Crash);
            crashes += 1;
          }
        }
        await both(batch, twice);
        start += size;
      }
      expect(crashes).toBeGreaterThan(0);
      expect(forks).toBeGreaterThan(0);

      // Each equals a rebuild from its own event store, and the two hold the same.
      for (const db of [staged, jsonb]) {
        const before = await projectionSnapshot(db.pool);
        await withTransaction(db.pool, (client) => rebuildProjections(client, options));
        expect(snapshotDifference(await projectionSnapshot(db.pool), before), db === staged ? "staged" : "jsonb").toEqual({});
      }
      expect(await eventStore(staged.pool)).toEqual(await eventStore(jsonb.pool));
      expect(await eventKeys(staged.pool)).toEqual(await eventKeys(jsonb.pool));
      const stagedModels = await projectionSnapshot(staged.pool, { portable: true });
      expect(snapshotDifference(stagedModels, await projectionSnapshot(jsonb.pool, { portable: true }))).toEqual({});
      expect(stagedModels.transactions!.length).toBeGreaterThan(history.payments * 0.8);
      expect(stagedModels.payment_closure!.length).toBeGreaterThan(0);
    });
  }

  it("partitions: a batch far past every partition creates its own and the next, and keys include the slot", async () => {
    const history = randomHistory(21, 6);
    const far = history.transactions.map((tx) => decodeRawTransaction({ ...tx, slot: tx.slot + 987_654_321n }, PAYMENT_LEDGER_PROGRAM_ID));
    await ingestBatch(staged.pool, { transactions: far }, options);
    const partitions = await staged.pool.query<{ name: string }>(
      `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
       WHERE i.inhparent = 'chain_events'::regclass AND c.relname IN ('chain_events_987600000', 'chain_events_987700000')`,
    );
    expect(partitions.rows.map((r) => r.name).sort()).toEqual(["chain_events_987600000", "chain_events_987700000"]);
    const stored = await staged.pool.query<{ n: string }>("SELECT count(*)::text AS n FROM chain_events_987600000");
    expect(Number(stored.rows[0]!.n)).toBe(far.reduce((n, t) => n + t.events.length, 0));
    // Read again: nothing new.
    const again = await ingestBatch(staged.pool, { transactions: far }, options);
    expect(again.eventsInserted).toBe(0);
  });

  it("finality reads the events not yet finalized from their own index, on every partition", async () => {
    // Unfinalized events in two partitions at least: the far batch's and this history's own.
    const history = randomHistory(22, 6);
    const far = history.transactions.map((tx) =>
      decodeRawTransaction({ ...tx, slot: tx.slot + 1_987_654_321n }, PAYMENT_LEDGER_PROGRAM_ID),
    );
    const near = history.transactions.map((tx) => decodeRawTransaction(tx, PAYMENT_LEDGER_PROGRAM_ID));
    await ingestBatch(staged.pool, { transactions: [...near, ...far] }, options);
    const client = await staged.pool.connect();
    try {
      await client.query("BEGIN");
      // Tiny tables are read whole by choice; what is asserted is that an index can answer it.
      await client.query("SET LOCAL enable_seqscan = off");
      const explained = await client.query<{ "QUERY PLAN": [{ Plan: PlanNode }] }>(`EXPLAIN (FORMAT JSON) ${FINALIZE_EVENTS_SQL}`, [
        (far.at(-1)!.slot + 1n).toString(),
      ]);
      const scans = planScans(explained.rows[0]!["QUERY PLAN"][0].Plan);
      expect(scans.filter((scan) => scan.startsWith("seq scan of"))).toEqual([]);
      expect(scans.length).toBeGreaterThanOrEqual(2);
      const parents = await client.query<{ parent: string }>(
        `SELECT i.inhparent::regclass::text AS parent FROM unnest($1::text[]) AS s(name)
         LEFT JOIN pg_inherits i ON i.inhrelid = s.name::regclass`,
        [scans],
      );
      expect(new Set(parents.rows.map((r) => r.parent))).toEqual(new Set(["chain_events_unfinalized"]));
    } finally {
      await client.query("ROLLBACK");
      client.release();
    }
  });
});
