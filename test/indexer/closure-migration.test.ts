/**
 * Migration 060 gives every stored closure row its payment's node columns: on a database migrated
 * up to 059 holding a random history's payments, edges and closure, migrating must leave exactly
 * the closure rows the projection writes today for the same history (ingested into a current
 * database, some of it finalized, some not).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MIGRATIONS_DIR, migrate } from "../../indexer/db/migrate.js";
import { decodeRawTransaction } from "../../indexer/decode/transaction.js";
import { ingestBatch } from "../../indexer/store/ingest.js";
import { PAYMENT_LEDGER_PROGRAM_ID } from "../../programs/payment_ledger/ts/index.js";
import { createFreshDatabase, type FreshDatabase } from "./fresh-database.js";
import { randomHistory } from "./random-history.js";

const options = { cluster: "devnet" };
const CLOSURE_ROW = "row_to_json(c)::text";

describe("migration 060", () => {
  let current: FreshDatabase;
  let older: FreshDatabase;
  beforeAll(async () => {
    [current, older] = await Promise.all([createFreshDatabase(), createFreshDatabase({ before: 60 })]);
  });
  afterAll(async () => {
    await Promise.all([current?.drop(), older?.drop()]);
  });

  it("fills the closure rows' node columns with what the projection writes", async () => {
    const history = randomHistory(60, 400);
    const decoded = history.transactions.map((tx) => decodeRawTransaction(tx, PAYMENT_LEDGER_PROGRAM_ID));
    for (let start = 0; start < decoded.length; start += 50) {
      const chunk = decoded.slice(start, start + 50);
      // Some payments finalized after they were stored, some only confirmed.
      await ingestBatch(current.pool, { transactions: chunk, finalizedSlot: chunk[0]!.slot - 3n }, options);
    }
    // The older database holds the same payments and the closure as it was: keys only.
    for (const [table, columns] of [
      ["transactions", "*"],
      ["payment_edges", "*"],
      ["payment_closure", "ancestor_tx_hash, distance, descendant_event_id"],
    ] as const) {
      const rows = await current.pool.query<{ r: unknown }>(`SELECT row_to_json(x) AS r FROM (SELECT ${columns} FROM ${table}) x`);
      await older.pool.query(`INSERT INTO ${table} SELECT * FROM json_populate_recordset(NULL::${table}, $1::json)`, [
        JSON.stringify(rows.rows.map((x) => x.r)),
      ]);
    }
    await migrate(older.pool, MIGRATIONS_DIR);

    const closure = async (db: FreshDatabase): Promise<string[]> =>
      (await db.pool.query<{ r: string }>(`SELECT ${CLOSURE_ROW} AS r FROM payment_closure c ORDER BY 1`)).rows.map((x) => x.r);
    const expected = await closure(current);
    expect(expected.length).toBeGreaterThan(100);
    expect(await closure(older)).toEqual(expected);
    // The table keeps its keys: the primary key and the index rollback deletes by; the payments
    // not yet finalized have theirs (the tree reads a node's status from it).
    const indexes = await older.pool.query<{ indexname: string }>(
      "SELECT indexname FROM pg_indexes WHERE tablename IN ('payment_closure', 'transactions') ORDER BY 1",
    );
    expect(indexes.rows.map((x) => x.indexname)).toEqual(
      expect.arrayContaining(["payment_closure_descendant", "payment_closure_pkey", "transactions_confirmed"]),
    );
    const confirmed = async (db: FreshDatabase): Promise<string> =>
      (await db.pool.query<{ n: string }>("SELECT count(*) AS n FROM transactions WHERE status = 'confirmed'")).rows[0]!.n;
    expect(Number(await confirmed(current))).toBeGreaterThan(0);
    expect(await confirmed(older)).toBe(await confirmed(current));
  });
});
