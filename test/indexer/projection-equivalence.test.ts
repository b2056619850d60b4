/**
 * The set-based projections against themselves by another path: random histories (payment trees
 * under invocations, invocations opened before and after their payments, several events per
 * transaction, unknown block times, settlement references verified and not, finality, a dead
 * slot) ingested in random batches from memory must leave exactly the read models a rebuild from
 * the event store produces, and the live feed must have been told of every payment once.
 * No ledger needed: transactions are encoded by the IDL coder, as the program emits them.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type pg from "pg";
import { withTransaction } from "../../indexer/db/database.js";
import { PAYMENT_LEDGER_PROGRAM_ID } from "../../programs/payment_ledger/ts/index.js";
import { decodeRawTransaction } from "../../indexer/decode/transaction.js";
import { ingestBatch, LEDGER_TRANSACTIONS_CHANNEL } from "../../indexer/store/ingest.js";
import { closureNodeColumnsOf, projectEvents } from "../../indexer/store/projections.js";
import { rebuildProjections } from "../../indexer/store/rebuild.js";
import { createFreshDatabase, type FreshDatabase } from "./fresh-database.js";
import { randomHistory } from "./random-history.js";
import { projectionSnapshot, snapshotDifference } from "./read-models.js";
import { mulberry32 } from "../support/random.js";

const options = { cluster: "devnet" };

describe("projections written from memory equal a rebuild from the event store", () => {
  let db: FreshDatabase;
  beforeAll(async () => {
    db = await createFreshDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  for (const seed of [1, 2, 3]) {
    it(`a random history (seed ${seed}) ingested in random batches leaves what a rebuild leaves`, async () => {
      await db.pool.query("TRUNCATE chain_events, chain_transactions_seen, settlement_transfers, checkpoints");
      await withTransaction(db.pool, (client) => rebuildProjections(client, options));
      const history = randomHistory(seed, 600);
      const decoded = history.transactions.map((tx) => decodeRawTransaction(tx, PAYMENT_LEDGER_PROGRAM_ID));
      expect(decoded.every((d) => d.outcome === "indexed")).toBe(true);

      const listener = await db.pool.connect();
      const notified: string[] = [];
      listener.on("notification", (message) => notified.push(JSON.parse(message.payload!).txHash));
      await listener.query(`LISTEN ${LEDGER_TRANSACTIONS_CHANNEL}`);
      try {
        const random = mulberry32(seed * 7);
        await ingestBatch(db.pool, { transactions: [], settlements: history.settlements }, options);
        for (let start = 0; start < decoded.length; ) {
          const size = 1 + Math.floor(random() * 120);
          const chunk = decoded.slice(start, start + size);
          // An overlap with the previous batch, as a resumed source re-reads: absorbed by the event key.
          const overlap = start > 0 && random() < 0.3 ? decoded.slice(Math.max(0, start - 5), start) : [];
          await ingestBatch(db.pool, { transactions: [...overlap, ...chunk], finalizedSlot: chunk[0]!.slot - 3n }, options);
          start += size;
        }
        // A slot that died after it was ingested.
        const dead = decoded.at(-2)!.slot;
        await ingestBatch(db.pool, { transactions: [], deadSlots: [dead] }, options);
        await new Promise((resolve) => setTimeout(resolve, 100));
      } finally {
        await listener.query(`UNLISTEN ${LEDGER_TRANSACTIONS_CHANNEL}`);
        listener.release();
      }

      const incremental = await projectionSnapshot(db.pool);
      const paymentsLeft = Number((await db.pool.query("SELECT count(*) AS n FROM transactions")).rows[0].n);
      const edges = Number((await db.pool.query("SELECT count(*) AS n FROM payment_edges")).rows[0].n);
      const verified = Number(
        (await db.pool.query("SELECT count(*) AS n FROM transactions WHERE settlement_status = 'verified'")).rows[0].n,
      );
      expect(paymentsLeft).toBeGreaterThan(history.payments * 0.9);
      expect(edges).toBeGreaterThan(0);
      expect(verified).toBeGreaterThan(0);
      // The closure is every (ancestor, distance, payment) a walk up the edges finds, nothing else,
      // some of it deeper than one level, and nothing of the dead slot's payments is left in it.
      expect(await closureMinusWalk(db.pool)).toEqual({ missing: "0", extra: "0", stale: "0" });
      const deep = await db.pool.query("SELECT count(*) AS n FROM payment_closure WHERE distance >= 2");
      expect(Number(deep.rows[0].n)).toBeGreaterThan(0);
      const deadLeft = await db.pool.query(
        `SELECT count(*) AS n FROM payment_closure c WHERE NOT EXISTS (SELECT 1 FROM transactions t WHERE t.event_id = c.descendant_event_id)`,
      );
      expect(deadLeft.rows[0].n).toBe("0");
      // Every payment ingested was announced once (the dead slot's too: they were live). Postgres
      // folds identical payloads of one transaction: one per transaction and payer.
      const announced = new Set(
        decoded.flatMap((d) => d.events.filter((e) => e.name === "PaymentRecorded").map((e) => `${d.signature}/${e.payload.payer}`)),
      );
      expect(notified.length).toBe(announced.size);
      expect(new Set(notified)).toEqual(new Set([...announced].map((k) => k.split("/")[0])));

      await withTransaction(db.pool, (client) => rebuildProjections(client, options));
      const rebuilt = await projectionSnapshot(db.pool);
      expect(snapshotDifference(incremental, rebuilt)).toEqual({});
    });
  }

  it("a dead slot's payments leave the closure with their edges, and their ancestors' other rows stay", async () => {
    const slot = await db.pool.query<{ slot: string; n: string }>(
      `SELECT t.slot::text AS slot, count(*) AS n FROM payment_closure c JOIN transactions t ON t.event_id = c.descendant_event_id
       JOIN chain_events e ON e.id = t.event_id WHERE NOT e.finalized GROUP BY t.slot ORDER BY t.slot DESC LIMIT 1`,
    );
    expect(slot.rows.length).toBe(1);
    const dying = slot.rows[0]!.slot;
    const before = Number((await db.pool.query("SELECT count(*) AS n FROM payment_closure")).rows[0].n);
    await ingestBatch(db.pool, { transactions: [], deadSlots: [BigInt(dying)] }, options);
    const after = Number((await db.pool.query("SELECT count(*) AS n FROM payment_closure")).rows[0].n);
    expect(before - after).toBeGreaterThanOrEqual(Number(slot.rows[0]!.n));
    const left = await db.pool.query(
      "SELECT count(*) AS n FROM payment_closure c WHERE NOT EXISTS (SELECT 1 FROM transactions t WHERE t.event_id = c.descendant_event_id)",
    );
    expect(left.rows[0].n).toBe("0");
    expect(await closureMinusWalk(db.pool)).toEqual({ missing: "0", extra: "0", stale: "0" });
  });

  it("projecting stored events by id gives the rows ingest wrote", async () => {
    const before = await projectionSnapshot(db.pool);
    const sample = await db.pool.query<{ event_id: string }>("SELECT event_id FROM transactions ORDER BY event_id DESC LIMIT 50");
    const ids = sample.rows.map((r) => r.event_id).reverse();
    expect(ids.length).toBe(50);
    const client = await db.pool.connect();
    try {
      await client.query("BEGIN");
      await client.query("CREATE TEMP TABLE kept ON COMMIT DROP AS SELECT * FROM transactions WHERE event_id = ANY($1::bigint[])", [ids]);
      await client.query("DELETE FROM payment_edges WHERE child_event_id = ANY($1::bigint[])", [ids]);
      await client.query("DELETE FROM transactions WHERE event_id = ANY($1::bigint[])", [ids]);
      await projectEvents(client, ids, options);
      const differing = await client.query<{ n: string }>(
        `SELECT count(*) AS n FROM ((TABLE kept EXCEPT SELECT * FROM transactions WHERE event_id = ANY($1::bigint[]))
                                   UNION ALL (SELECT * FROM transactions WHERE event_id = ANY($1::bigint[]) EXCEPT TABLE kept)) d`,
        [ids],
      );
      expect(differing.rows[0]!.n).toBe("0");
    } finally {
      await client.query("ROLLBACK");
      client.release();
    }
    expect(await projectionSnapshot(db.pool)).toEqual(before);
  });
});

/**
 * payment_closure against a recursive walk up payment_edges (the definition): rows only one side
 * has; and rows whose node columns are not their payment's as `transactions` holds it now.
 */
async function closureMinusWalk(pool: pg.Pool): Promise<{ missing: string; extra: string; stale: string }> {
  const result = await pool.query<{ missing: string; extra: string; stale: string }>(
    `WITH RECURSIVE up (descendant_event_id, ancestor_tx_hash, distance) AS (
       SELECT child_event_id, parent_tx_hash, 1 FROM payment_edges
       UNION
       SELECT u.descendant_event_id, e.parent_tx_hash, u.distance + 1
       FROM up u JOIN payment_edges e ON e.child_tx_hash = u.ancestor_tx_hash WHERE u.distance < 1024),
     walked AS (SELECT ancestor_tx_hash, distance, descendant_event_id FROM up),
     closure AS (SELECT ancestor_tx_hash, distance, descendant_event_id FROM payment_closure)
     SELECT (SELECT count(*) FROM (TABLE walked EXCEPT TABLE closure) m)::text AS missing,
            (SELECT count(*) FROM (TABLE closure EXCEPT TABLE walked) x)::text AS extra,
            (SELECT count(*) FROM payment_closure c JOIN transactions t ON t.event_id = c.descendant_event_id
             WHERE (${closureNodeColumnsOf("c")}) IS DISTINCT FROM (${closureNodeColumnsOf("t")}))::text AS stale`,
  );
  return result.rows[0]!;
}
