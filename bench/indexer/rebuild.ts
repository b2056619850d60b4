/**
 * Rebuild of every projection from the event store at scale (goal: 1,000,000 events in
 * under 60 s). Seeds a fresh database with synthetic PaymentRecorded events through the real
 * ingest path (decode + event store + projections, in chunks so memory stays flat), then times
 * `rebuildProjections` and checks it reproduced the same read models (row counts and sums).
 *
 *   npm run bench:indexer:rebuild [-- --events 1000000 --batch 2000]   (as `npm run indexer` runs: no tsx)
 */
import { parseArgs } from "node:util";
import { decodeRawTransaction } from "../../indexer/decode/transaction.js";
import { withTransaction } from "../../indexer/db/database.js";
import { ingestBatch } from "../../indexer/store/ingest.js";
import { rebuildProjections } from "../../indexer/store/rebuild.js";
import { PAYMENT_LEDGER_PROGRAM_ID } from "../../programs/payment_ledger/ts/index.js";
import { createFreshDatabase } from "../../test/indexer/fresh-database.js";
import { syntheticTransaction } from "./synthetic.js";

const { values: flags } = parseArgs({
  options: {
    events: { type: "string", default: "1000000" },
    batch: { type: "string", default: "2000" },
  },
});
const EVENTS = Number(flags.events);
const BATCH = Number(flags.batch);
const options = { cluster: "devnet" };

const FINGERPRINT = `
  SELECT (SELECT count(*) FROM transactions) AS transactions,
         (SELECT coalesce(sum(amount_units), 0) FROM transactions) AS amount,
         (SELECT count(*) FROM payment_edges) AS edges,
         (SELECT count(*) || '/' || coalesce(sum(amount_units), 0) || '/' || coalesce(sum(tx_count), 0) FROM spend_rollups) AS rollups,
         (SELECT count(*) || '/' || coalesce(sum(spend_units), 0) || '/' || coalesce(sum(mpp_count), 0) FROM metric_buckets) AS metrics,
         (SELECT count(*) || '/' || coalesce(sum(spent_units), 0) FROM invocations) AS invocations`;

async function run(): Promise<void> {
  const db = await createFreshDatabase();
  try {
    const seedStart = performance.now();
    for (let start = 0; start < EVENTS; start += BATCH) {
      const end = Math.min(start + BATCH, EVENTS);
      const decoded = Array.from({ length: end - start }, (_, k) =>
        decodeRawTransaction(syntheticTransaction(start + k), PAYMENT_LEDGER_PROGRAM_ID),
      );
      await ingestBatch(
        db.pool,
        { transactions: decoded, checkpoint: { source: "bench", slot: decoded.at(-1)!.slot, blockhash: null } },
        options,
      );
      if (end % 100_000 === 0) process.stderr.write(`seeded ${end.toLocaleString("en-US")} events\n`);
    }
    const seedMs = performance.now() - seedStart;
    await db.pool.query("VACUUM ANALYZE");
    const before = (await db.pool.query(FINGERPRINT)).rows[0];

    const rebuildStart = performance.now();
    const replayed = await withTransaction(db.pool, (client) =>
      rebuildProjections(client, options, (p) => {
        if (p.eventsReplayed % 200_000 < 20_000) process.stderr.write(`rebuilt ${p.eventsReplayed.toLocaleString("en-US")} events\n`);
      }),
    );
    const rebuildMs = performance.now() - rebuildStart;
    const after = (await db.pool.query(FINGERPRINT)).rows[0];
    if (JSON.stringify(before) !== JSON.stringify(after)) {
      console.error(`rebuild changed the read models:\n  before ${JSON.stringify(before)}\n  after  ${JSON.stringify(after)}`);
      process.exitCode = 1;
    }
    const rate = (n: number, ms: number): string => `${Math.round((n / ms) * 1000).toLocaleString("en-US")} events/s`;
    console.log(
      `seed through ingest:  ${rate(EVENTS, seedMs)} (${EVENTS.toLocaleString("en-US")} events, ${(seedMs / 1000).toFixed(1)} s)`,
    );
    console.log(
      `rebuild:              ${rate(replayed, rebuildMs)} (${replayed.toLocaleString("en-US")} events, ${(rebuildMs / 1000).toFixed(1)} s)`,
    );
    console.log(
      `goal 1,000,000 events in < 60 s: ${replayed >= 1_000_000 ? (rebuildMs < 60_000 ? "met" : "NOT met") : "not measured at this size"}`,
    );
    console.log(`read models after rebuild equal those before: ${JSON.stringify(before) === JSON.stringify(after) ? "yes" : "NO"}`);
  } finally {
    await db.drop();
  }
}

run().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
