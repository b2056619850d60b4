/**
 * Indexer throughput against its floor. Decode: the IDL coder (baseline) and the hand-written event
 * reader on the same bytes, then whole transactions. Ingest, at each --stored level of history:
 * - new: `ingestBatch` (COPY into staging, set-based into the event store and every projection,
 *   notify, checkpoint), partitioned event store;
 * - old: the write path before staging (test/indexer/jsonb-ingest.ts) on the schema of its time
 *   (unpartitioned event store), holding the same history;
 * - floor: PostgreSQL's own COPY of the rows the new path wrote for the batch (event store, seen
 *   transactions, payments, tree edges and closure) into the same tables of a third database
 *   holding the same history, one transaction per batch. The aggregates (spend rollups, metric
 *   buckets, invocations: a few hundred upserted rows per batch, not one per event) and the
 *   checkpoint are left out of it, so the floor is, if anything, too fast.
 * Batch by batch, the three take turns (order rotated), so the machine's noise falls on all three.
 * Then finality, a report per batch's worth of the level's events, against the plan before
 * migration 061 on the same rows. History is seeded through the new path (finality 32 slots behind
 * each batch, as live), copied row by row to the old path's database and file by file to the
 * floor's (a template copy); then a rebuild of everything at the first and last level.
 * Synthetic PaymentRecorded events encoded by the IDL coder.
 *
 *   npm run bench:indexer [-- --events 50000 --batch 2000 --stored 0,1000000 --old true --rebuild true]   (as `npm run indexer` runs: no tsx)
 *   npm run bench:indexer:10m   (--stored 0,10000000 --old false --rebuild false: the 10M row, new against floor)
 */
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { parseArgs } from "node:util";
import type pg from "pg";
import { from as copyFrom, to as copyTo } from "pg-copy-streams";
import { readEvent } from "../../indexer/decode/event-reader.js";
import { eventPayload } from "../../indexer/decode/payload.js";
import { type DecodedTransaction, decodeRawTransaction } from "../../indexer/decode/transaction.js";
import { withTransaction } from "../../indexer/db/database.js";
import { ingestBatch } from "../../indexer/store/ingest.js";
import { CLOSURE_NODE_COLUMNS, closureNodeColumnsOf, projectFinality } from "../../indexer/store/projections.js";
import { rebuildProjections } from "../../indexer/store/rebuild.js";
import { decodeEventInstructionData, EVENT_IX_TAG, PAYMENT_LEDGER_PROGRAM_ID } from "../../programs/payment_ledger/ts/index.js";
import { createFreshDatabase, type FreshDatabase } from "../../test/indexer/fresh-database.js";
import { ingestBatchJsonb, JSONB_SCHEMA } from "../../test/indexer/jsonb-ingest.js";
import { stats } from "../gateway/latency.js";
import { syntheticTransaction } from "./synthetic.js";

const { values: flags } = parseArgs({
  options: {
    events: { type: "string", default: "50000" },
    batch: { type: "string", default: "2000" },
    stored: { type: "string", default: "0,1000000" },
    old: { type: "string", default: "true" },
    rebuild: { type: "string", default: "true" },
    replicate: { type: "string", default: "false" },
    decode: { type: "string", default: "true" },
  },
});
const EVENTS = Number(flags.events);
const BATCH = Number(flags.batch);
const LEVELS = flags.stored.split(",").map(Number);
const WITH_OLD = flags.old !== "false";
/** Seeding batches: the largest ingest accepts. */
const SEED_BATCH = 5_000;
/** The goal: ingest at least this fast, and at least this share of the floor. */
const GOAL_EVENTS_PER_S = 50_000;
const GOAL_FLOOR_SHARE = 0.5;
/** How far finality trails the newest slot on a live cluster (~32 slots), for the seeded history. */
const LIVE_FINALITY_LAG = 32n;

const options = { cluster: "devnet" };
const count = (n: number): string => Math.round(n).toLocaleString("en-US");
const rate = (n: number, ms: number): string => `${count((n / ms) * 1000)} events/s`;

/** Tables whose rows are one per event (or per payment): copied for the floor and to sync history. */
const PER_EVENT: readonly { table: string; columns: string; key: string }[] = [
  {
    table: "chain_events",
    columns:
      "id, signature, instruction_index, inner_index, event_ordinal, slot, block_time, commitment, finalized, event_name, payload, raw, source, ingested_at",
    key: "id",
  },
  { table: "chain_transactions_seen", columns: "signature, slot, outcome, event_count, detail, seen_at", key: "slot" },
  {
    table: "transactions",
    columns:
      'event_id, tx_hash, instruction_index, agent, payee, mint, payment_id, protocol, rail, amount_units, endpoint_hash, policy_check, parent_tx_hash, invocation, atomic, settlement_reference, settlement_status, explorer_url, "timestamp", slot, status',
    key: "event_id",
  },
  {
    table: "payment_edges",
    columns: "child_event_id, parent_tx_hash, child_tx_hash, invocation, child_payer, depth",
    key: "child_event_id",
  },
  {
    table: "payment_closure",
    columns: `ancestor_tx_hash, distance, descendant_event_id, ${CLOSURE_NODE_COLUMNS}`,
    key: "descendant_event_id",
  },
];
/** Aggregates: replaced whole when history is synced (small), not part of the floor. */
const AGGREGATES = ["spend_rollups", "metric_buckets", "invocations", "checkpoints"];

/** Rows of `table` past `after` (by its key column) from `from`, as COPY text. */
async function copyOut(from: pg.Pool, sql: string): Promise<Buffer> {
  const client = await from.connect();
  try {
    const chunks: Buffer[] = [];
    const stream = client.query(copyTo(`COPY (${sql}) TO STDOUT`));
    for await (const chunk of stream) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  } finally {
    client.release();
  }
}

async function copyInto(client: pg.ClientBase, target: string, data: Buffer): Promise<void> {
  if (data.length === 0) return;
  await pipeline(Readable.from([data]), client.query(copyFrom(`COPY ${target} FROM STDIN`)));
}

/** The partitions of slots low..high in a partitioned database (the floor's: not timed). */
async function ensureSlots(pool: pg.Pool, low: bigint, high: bigint): Promise<void> {
  await pool.query("SELECT event_store_ensure_partitions(array(SELECT generate_series($1::bigint, $2::bigint, 50000)) || $2::bigint)", [
    low.toString(),
    high.toString(),
  ]);
}

interface Mark {
  readonly id: string;
  readonly slot: string;
}

async function mark(pool: pg.Pool): Promise<Mark> {
  const result = await pool.query<{ id: string; slot: string }>(
    "SELECT coalesce(max(id), 0)::text AS id, coalesce(max(slot), -1)::text AS slot FROM chain_events",
  );
  return result.rows[0]!;
}

/** Copies what `source` holds past `since` to the old path's `target` (per-event tables), its aggregates whole. */
async function syncHistory(source: pg.Pool, target: FreshDatabase, since: Mark): Promise<void> {
  const now = await mark(source);
  for (const { table, columns, key } of PER_EVENT) {
    const after = key === "slot" ? since.slot : since.id;
    const client = await target.pool.connect();
    const sourceClient = await source.connect();
    try {
      await pipeline(
        sourceClient.query(copyTo(`COPY (SELECT ${columns} FROM ${table} WHERE ${key} > ${after} ORDER BY ${key}) TO STDOUT`)),
        client.query(copyFrom(`COPY ${table} (${columns}) FROM STDIN`)),
      );
    } finally {
      client.release();
      sourceClient.release();
    }
  }
  for (const table of AGGREGATES) {
    const data = await copyOut(source, `SELECT * FROM ${table}`);
    await withTransaction(target.pool, async (client) => {
      await client.query(`TRUNCATE ${table}`);
      await copyInto(client, table, data);
    });
  }
  await target.pool.query("SELECT setval('chain_events_id_seq', $1::bigint)", [now.id]);
}

/** One floor batch: the rows the new path wrote for `batch`, COPYed into the floor database. */
async function floorRows(source: pg.Pool, after: string, batch: readonly DecodedTransaction[]): Promise<Buffer[]> {
  const signatures = `ARRAY[${batch.map((t) => `'${t.signature}'`).join(",")}]`;
  const rows: Buffer[] = [];
  for (const { table, columns, key } of PER_EVENT) {
    const where = key === "slot" ? `signature = ANY(${signatures})` : `${key} > ${after}`;
    rows.push(await copyOut(source, `SELECT ${columns} FROM ${table} WHERE ${where} ORDER BY ${key === "slot" ? "slot" : key}`));
  }
  return rows;
}

async function floorBatch(floor: pg.Pool, rows: readonly Buffer[]): Promise<number> {
  const start = performance.now();
  await withTransaction(floor, async (client) => {
    for (const [i, { table, columns }] of PER_EVENT.entries()) await copyInto(client, `${table} (${columns})`, rows[i]!);
  });
  return performance.now() - start;
}

interface Databases {
  readonly fresh: FreshDatabase;
  readonly old: FreshDatabase | null;
  /** Replaced by a copy of `fresh` whenever history grows. */
  floor: FreshDatabase;
}

/**
 * History past what ingest wrote, in SQL: copies of the first `block` events (ids 1..block, all
 * that ingest wrote before the first level past 0) and of every row derived from them, appended
 * after the newest (ids, slots and times shifted past it, signatures suffixed), until `to` events
 * are stored. The same rows, the same index shapes (random signatures, ordered ids, slots and
 * times), in minutes instead of the hour ingest takes for 10M on this machine.
 */
async function replicate(pool: pg.Pool, block: number, to: number): Promise<void> {
  const blockSlot = (await pool.query<{ s: string }>("SELECT max(slot)::text AS s FROM chain_events WHERE id <= $1", [block])).rows[0]!.s;
  const blockEnd = (await pool.query<{ t: Date }>('SELECT max("timestamp") AS t FROM transactions WHERE event_id <= $1', [block])).rows[0]!
    .t;
  for (let copy = 1; ; copy += 1) {
    const now = await mark(pool);
    if (Number(now.id) >= to) break;
    // Shifted past the newest: ids, slots, times (50 events a second), signatures suffixed.
    const [ids, slots, seconds, suffix] = [now.id, now.slot, String(Number(now.id) / 50), `~${copy}`];
    await ensureSlots(pool, BigInt(now.slot) + 1n, BigInt(now.slot) + BigInt(blockSlot));
    const statements: [string, unknown[]][] = [
      [
        `INSERT INTO chain_events (id, signature, instruction_index, inner_index, event_ordinal, slot, block_time, commitment,
                                   finalized, event_name, payload, raw, source, ingested_at)
         SELECT id + $1, signature || $4, instruction_index, inner_index, event_ordinal, slot + $2,
                block_time + make_interval(secs => $3::float8), commitment, finalized, event_name, payload, raw, source, ingested_at
         FROM chain_events WHERE id <= $5::bigint ORDER BY id`,
        [ids, slots, seconds, suffix, block],
      ],
      [
        `INSERT INTO chain_transactions_seen (signature, slot, outcome, event_count, detail, seen_at)
         SELECT signature || $1, slot + $2, outcome, event_count, detail, seen_at FROM chain_transactions_seen WHERE slot <= $3::bigint`,
        [suffix, slots, blockSlot],
      ],
      [
        `INSERT INTO transactions (event_id, tx_hash, instruction_index, agent, payee, mint, payment_id, protocol, rail, amount_units,
                                   endpoint_hash, policy_check, parent_tx_hash, invocation, atomic, settlement_reference,
                                   settlement_status, explorer_url, "timestamp", slot, status)
         SELECT event_id + $1, tx_hash || $4, instruction_index, agent, payee, mint, payment_id, protocol, rail, amount_units,
                endpoint_hash, policy_check, parent_tx_hash, invocation, atomic, settlement_reference, settlement_status,
                explorer_url || $4, "timestamp" + make_interval(secs => $3::float8), slot + $2, status
         FROM transactions WHERE event_id <= $5::bigint ORDER BY event_id`,
        [ids, slots, seconds, suffix, block],
      ],
      [
        `INSERT INTO payment_edges (child_event_id, parent_tx_hash, child_tx_hash, invocation, child_payer, depth)
         SELECT child_event_id + $1, parent_tx_hash, child_tx_hash || $2, invocation, child_payer, depth
         FROM payment_edges WHERE child_event_id <= $3::bigint`,
        [ids, suffix, block],
      ],
      [
        `INSERT INTO payment_closure (ancestor_tx_hash, distance, descendant_event_id, ${CLOSURE_NODE_COLUMNS})
         SELECT c.ancestor_tx_hash, c.distance, c.descendant_event_id + $1, ${closureNodeColumnsOf("t")}
         FROM payment_closure c JOIN transactions t ON t.event_id = c.descendant_event_id + $1
         WHERE c.descendant_event_id <= $2::bigint`,
        [ids, block],
      ],
      [
        `INSERT INTO spend_rollups (agent, bucket_start, protocol, endpoint_hash, amount_units, tx_count)
         SELECT agent, date_trunc('minute', bucket_start + make_interval(secs => $1::float8)), protocol, endpoint_hash,
                sum(amount_units), sum(tx_count)
         FROM spend_rollups WHERE bucket_start <= $2::timestamptz GROUP BY 1, 2, 3, 4
         ON CONFLICT (agent, bucket_start, protocol, endpoint_hash) DO UPDATE
           SET amount_units = spend_rollups.amount_units + excluded.amount_units, tx_count = spend_rollups.tx_count + excluded.tx_count`,
        [seconds, blockEnd],
      ],
      [
        `INSERT INTO metric_buckets (agent, bucket_start, spend_units, tx_count, x402_spend_units, x402_count, mpp_spend_units, mpp_count)
         SELECT agent, date_trunc('minute', bucket_start + make_interval(secs => $1::float8)), sum(spend_units), sum(tx_count),
                sum(x402_spend_units), sum(x402_count), sum(mpp_spend_units), sum(mpp_count)
         FROM metric_buckets WHERE bucket_start <= $2::timestamptz GROUP BY 1, 2
         ON CONFLICT (agent, bucket_start) DO UPDATE
           SET spend_units = metric_buckets.spend_units + excluded.spend_units, tx_count = metric_buckets.tx_count + excluded.tx_count,
               x402_spend_units = metric_buckets.x402_spend_units + excluded.x402_spend_units,
               x402_count = metric_buckets.x402_count + excluded.x402_count,
               mpp_spend_units = metric_buckets.mpp_spend_units + excluded.mpp_spend_units,
               mpp_count = metric_buckets.mpp_count + excluded.mpp_count`,
        [seconds, blockEnd],
      ],
    ];
    await withTransaction(pool, async (client) => {
      for (const [sql, params] of statements) await client.query(sql, params);
      await client.query("SELECT setval('chain_events_id_seq', (SELECT max(id) FROM chain_events))");
    });
    process.stderr.write(`replicated to ${count(Number(now.id) + block)} events\n`);
  }
}

/** Seeds history through the new path (from `next` to `to`), then syncs the other two; returns how many are stored. */
async function seed(dbs: Databases, next: number, to: number): Promise<number> {
  const since = await mark(dbs.fresh.pool);
  const seedStart = performance.now();
  const block = flags.replicate === "false" ? Number.POSITIVE_INFINITY : Number(flags.replicate);
  if (next >= block) {
    await replicate(dbs.fresh.pool, block, to);
    const replicated = Number((await mark(dbs.fresh.pool)).id);
    const ms = performance.now() - seedStart;
    console.log(
      `seeding (SQL copies of the first ${count(block)} events): ${count(replicated - next)} events in ${(ms / 1000).toFixed(1)} s`,
    );
    next = replicated;
    to = replicated;
  }
  for (let at = next; at < to; at += SEED_BATCH) {
    const chunk = Array.from({ length: Math.min(SEED_BATCH, to - at) }, (_, k) =>
      decodeRawTransaction(syntheticTransaction(at + k), PAYMENT_LEDGER_PROGRAM_ID),
    );
    // As on a live cluster: each run finalizes what lies 32 slots behind its newest.
    const last = chunk.at(-1)!.slot;
    await ingestBatch(
      dbs.fresh.pool,
      { transactions: chunk, checkpoint: { source: "bench", slot: last, blockhash: null }, finalizedSlot: last - LIVE_FINALITY_LAG },
      options,
    );
    if ((at + SEED_BATCH) % 500_000 < SEED_BATCH) process.stderr.write(`seeded ${count(at + SEED_BATCH)} events\n`);
  }
  if (to > next) {
    const seedMs = performance.now() - seedStart;
    console.log(
      `seeding (generate + decode + new ingest, batches of ${SEED_BATCH}): ${rate(to - next, seedMs)} (${count(to - next)} events, ${(seedMs / 1000).toFixed(1)} s)`,
    );
  }
  const syncStart = performance.now();
  await dbs.fresh.pool.query("ANALYZE");
  if (dbs.old !== null) {
    await syncHistory(dbs.fresh.pool, dbs.old, since);
    await dbs.old.pool.query("ANALYZE");
  }
  // The floor's database: a file copy of the new path's, same rows, same statistics.
  await dbs.floor.drop();
  dbs.floor = await createFreshDatabase({ copyOf: dbs.fresh });
  process.stderr.write(`history copied to the other databases in ${((performance.now() - syncStart) / 1000).toFixed(1)} s\n`);
  return to;
}

/** One level: EVENTS new events in batches, the three paths taking turns; returns each batch's newest slot. */
async function measure(dbs: Databases, first: number, stored: number): Promise<bigint[]> {
  const decoded = Array.from({ length: EVENTS }, (_, k) =>
    decodeRawTransaction(syntheticTransaction(first + k), PAYMENT_LEDGER_PROGRAM_ID),
  );
  await ensureSlots(dbs.floor.pool, decoded[0]!.slot, decoded.at(-1)!.slot);
  const ms = { new: 0, old: 0, floor: 0 };
  const newest: bigint[] = [];
  for (let at = 0, turn = 0; at < decoded.length; at += BATCH, turn += 1) {
    const batch = decoded.slice(at, at + BATCH);
    const checkpoint = { source: "bench", slot: batch.at(-1)!.slot, blockhash: null };
    newest.push(checkpoint.slot);
    const before = await mark(dbs.fresh.pool);
    const runs: (() => Promise<void>)[] = [
      async () => {
        const start = performance.now();
        await ingestBatch(dbs.fresh.pool, { transactions: batch, checkpoint }, options);
        ms.new += performance.now() - start;
        // The floor copies what the new path just wrote (read back untimed, then timed in).
        ms.floor += await floorBatch(dbs.floor.pool, await floorRows(dbs.fresh.pool, before.id, batch));
      },
    ];
    if (dbs.old !== null) {
      const old = dbs.old;
      runs.push(async () => {
        const start = performance.now();
        await ingestBatchJsonb(old.pool, { transactions: batch, checkpoint }, options);
        ms.old += performance.now() - start;
      });
    }
    for (let k = 0; k < runs.length; k += 1) await runs[(turn + k) % runs.length]!();
  }
  const n = decoded.length;
  const newRate = (n / ms.new) * 1000;
  const floorRate = (n / ms.floor) * 1000;
  const share = newRate / floorRate;
  const where = `${count(stored)} stored`;
  console.log(`ingest, new (COPY + staging), batch ${BATCH}: ${rate(n, ms.new)} (${count(n)} events, ${Math.round(ms.new)} ms, ${where})`);
  if (dbs.old !== null) {
    console.log(
      `ingest, old (jsonb), batch ${BATCH}:           ${rate(n, ms.old)} (${Math.round(ms.old)} ms; new / old ${(ms.old / ms.new).toFixed(2)}x)`,
    );
  }
  console.log(`floor, COPY of the same rows:          ${rate(n, ms.floor)} (${Math.round(ms.floor)} ms)`);
  console.log(
    `new / floor: ${(share * 100).toFixed(0)} % | goal >= ${count(GOAL_EVENTS_PER_S)} events/s and >= ${GOAL_FLOOR_SHARE * 100} % of the floor: ${
      newRate >= GOAL_EVENTS_PER_S && share >= GOAL_FLOOR_SHARE ? "met" : "NOT met"
    } (${count(newRate)} events/s, ${(share * 100).toFixed(0)} %)`,
  );
  return newest;
}

/**
 * Finality reports over a level's events, a batch's worth each (as the live indexer sends one per
 * committed run): `projectFinality` as it runs, against the same call with
 * `chain_events_unfinalized` dropped in a transaction rolled back (the plan before migration 061:
 * the slot index, every event stored below the slot), the old first on the same rows each time.
 */
async function finality(pool: pg.Pool, reports: readonly bigint[], stored: number): Promise<void> {
  const timed = async (slot: bigint, before: boolean): Promise<number> => {
    const client = await pool.connect();
    try {
      await client.query("BEGIN");
      if (before) await client.query("DROP INDEX chain_events_unfinalized");
      const start = performance.now();
      await projectFinality(client, slot);
      const ms = performance.now() - start;
      await client.query(before ? "ROLLBACK" : "COMMIT");
      return ms;
    } finally {
      client.release();
    }
  };
  const nowMs: number[] = [];
  const beforeMs: number[] = [];
  for (const slot of reports) {
    beforeMs.push(await timed(slot, true));
    nowMs.push(await timed(slot, false));
  }
  const [now, before] = [stats(nowMs), stats(beforeMs)];
  console.log(
    `finality report (${count(BATCH)} events each, ${reports.length} reports, ${count(stored)} stored): p50 ${now.p50.toFixed(1)} ms, max ${now.max.toFixed(1)} | before 061 (slot index): p50 ${before.p50.toFixed(1)} ms, max ${before.max.toFixed(1)} (${(before.p50 / now.p50).toFixed(1)}x)`,
  );
}

async function rebuild(db: FreshDatabase): Promise<void> {
  const start = performance.now();
  const replayed = await withTransaction(db.pool, (client) => rebuildProjections(client, options));
  const ms = performance.now() - start;
  console.log(`rebuild (new schema): ${rate(replayed, ms)} (${count(replayed)} events, ${(ms / 1000).toFixed(1)} s)`);
}

function decodeFigures(): void {
  const raws = Array.from({ length: EVENTS }, (_, i) => syntheticTransaction(i));
  // The same event bytes through the IDL coder (the baseline) and the hand-written reader.
  const bodies = raws.map((raw) => raw.innerInstructions[0]!.instructions[0]!.data);
  const idlStart = performance.now();
  for (const data of bodies) eventPayload(decodeEventInstructionData(data)!);
  const idlMs = performance.now() - idlStart;
  const readerStart = performance.now();
  for (const data of bodies) readEvent(data.subarray(EVENT_IX_TAG.length));
  const readerMs = performance.now() - readerStart;
  const decodeStart = performance.now();
  const decoded = raws.map((raw) => decodeRawTransaction(raw, PAYMENT_LEDGER_PROGRAM_ID));
  const decodeMs = performance.now() - decodeStart;
  if (decoded.some((d) => d.outcome !== "indexed")) throw new Error("synthetic transaction did not decode");
  console.log(`decode, IDL coder:     ${rate(bodies.length, idlMs)} (baseline: BorshCoder + eventPayload)`);
  console.log(`decode, event reader:  ${rate(bodies.length, readerMs)} (${(idlMs / readerMs).toFixed(1)}x the IDL coder)`);
  console.log(`decode, transactions:  ${rate(decoded.length, decodeMs)} (decodeRawTransaction, ${decoded.length} transactions)`);
}

async function run(): Promise<void> {
  if (flags.decode !== "false") decodeFigures();
  const [fresh, old, floor] = await Promise.all([
    createFreshDatabase(),
    WITH_OLD ? createFreshDatabase(JSONB_SCHEMA) : Promise.resolve(null),
    createFreshDatabase(),
  ]);
  const dbs: Databases = { fresh, old, floor };
  try {
    // Synthetic payment i sits at slot 1 + i/4: each level's events follow the history before it.
    let next = 0;
    for (const [index, stored] of LEVELS.entries()) {
      if (stored > next) next = await seed(dbs, next, stored);
      console.log(`--- ${count(next)} events stored ---`);
      await finality(dbs.fresh.pool, await measure(dbs, next, next), next);
      next += EVENTS;
      if (flags.rebuild !== "false" && (index === 0 || index === LEVELS.length - 1)) await rebuild(fresh);
    }
  } finally {
    await Promise.all([fresh.drop(), old?.drop(), dbs.floor.drop()]);
  }
}

run().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
