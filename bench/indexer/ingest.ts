/**
 * Indexer throughput. Decode: the IDL coder (baseline) and the hand-written event reader on the
 * same bytes, then whole transactions. Ingest: decode + event store + every projection + notify
 * + checkpoint, in batches of --batch transactions (one Postgres transaction each), against a
 * row-at-a-time baseline (one transaction per event through the same code) in the same run; a
 * rebuild of everything; then the same batched ingest again once --stored events are in the
 * store (seeded through the same ingest path), to show whether cost per event grows with history.
 * Synthetic PaymentRecorded events encoded by the IDL coder, in a fresh database.
 *
 *   npx tsx bench/indexer/ingest.ts [--events 50000 --baseline 2000 --batch 2000 --stored 1000000]
 */
import { parseArgs } from "node:util";
import { readEvent } from "../../indexer/decode/event-reader.js";
import { eventPayload } from "../../indexer/decode/payload.js";
import { type DecodedTransaction, decodeRawTransaction } from "../../indexer/decode/transaction.js";
import { withTransaction } from "../../indexer/db/database.js";
import { ingestBatch } from "../../indexer/store/ingest.js";
import { rebuildProjections } from "../../indexer/store/rebuild.js";
import { decodeEventInstructionData, EVENT_IX_TAG, PAYMENT_LEDGER_PROGRAM_ID } from "../../programs/payment_ledger/ts/index.js";
import { createFreshDatabase } from "../../test/indexer/fresh-database.js";
import { syntheticTransaction } from "./synthetic.js";

const { values: flags } = parseArgs({
  options: {
    events: { type: "string", default: "50000" },
    baseline: { type: "string", default: "2000" },
    batch: { type: "string", default: "2000" },
    stored: { type: "string", default: "1000000" },
  },
});
const EVENTS = Number(flags.events);
const BASELINE = Number(flags.baseline);
const BATCH = Number(flags.batch);
const STORED = Number(flags.stored);
/** Seeding batches: the largest ingest accepts. */
const SEED_BATCH = 5_000;

const options = { cluster: "devnet" };

async function run(): Promise<void> {
  const raws = Array.from({ length: EVENTS + BASELINE }, (_, i) => syntheticTransaction(i));
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

  const rate = (n: number, ms: number): string => `${Math.round((n / ms) * 1000).toLocaleString("en-US")} events/s`;
  console.log(`decode, IDL coder:     ${rate(bodies.length, idlMs)} (baseline: BorshCoder + eventPayload)`);
  console.log(`decode, event reader:  ${rate(bodies.length, readerMs)} (${(idlMs / readerMs).toFixed(1)}x the IDL coder)`);
  console.log(`decode, transactions:  ${rate(decoded.length, decodeMs)} (decodeRawTransaction, ${decoded.length} transactions)`);

  const db = await createFreshDatabase();
  const ingestBatched = async (transactions: readonly DecodedTransaction[], size: number): Promise<number> => {
    const start = performance.now();
    for (let at = 0; at < transactions.length; at += size) {
      const chunk = transactions.slice(at, at + size);
      await ingestBatch(
        db.pool,
        { transactions: chunk, checkpoint: { source: "bench", slot: chunk.at(-1)!.slot, blockhash: null } },
        options,
      );
    }
    return performance.now() - start;
  };
  try {
    const batched = decoded.slice(0, EVENTS);
    const batchMs = await ingestBatched(batched, BATCH);
    console.log(
      `ingest, batch ${BATCH}:    ${rate(batched.length, batchMs)} (${batched.length} events, ${Math.round(batchMs)} ms, empty store)`,
    );

    const single = decoded.slice(EVENTS);
    const singleStart = performance.now();
    for (const tx of single) {
      await ingestBatch(db.pool, { transactions: [tx], checkpoint: { source: "bench", slot: tx.slot, blockhash: null } }, options);
    }
    const singleMs = performance.now() - singleStart;
    console.log(`ingest, row at a time: ${rate(single.length, singleMs)} (${single.length} events, ${Math.round(singleMs)} ms)`);
    console.log(`batch / row-at-a-time: ${(batched.length / batchMs / (single.length / singleMs)).toFixed(1)}x`);

    const rebuildStart = performance.now();
    const replayed = await withTransaction(db.pool, (client) => rebuildProjections(client, options));
    const rebuildMs = performance.now() - rebuildStart;
    console.log(`rebuild:               ${rate(replayed, rebuildMs)} (${replayed} events, ${Math.round(rebuildMs)} ms)`);

    if (STORED > 0) {
      // Grow the history to STORED events through the same ingest path, then measure again.
      let next = decoded.length;
      const seedStart = performance.now();
      while (next < STORED) {
        const count = Math.min(SEED_BATCH, STORED - next);
        const seed = Array.from({ length: count }, (_, k) =>
          decodeRawTransaction(syntheticTransaction(next + k), PAYMENT_LEDGER_PROGRAM_ID),
        );
        await ingestBatched(seed, SEED_BATCH);
        next += count;
        if (next % 100_000 < SEED_BATCH) process.stderr.write(`seeded ${next.toLocaleString("en-US")} events\n`);
      }
      const seedMs = performance.now() - seedStart;
      console.log(
        `seeding, batch ${SEED_BATCH}:  ${rate(next - decoded.length, seedMs)} (to ${next.toLocaleString("en-US")} events, ${(seedMs / 1000).toFixed(1)} s)`,
      );
      const later = Array.from({ length: EVENTS }, (_, k) =>
        decodeRawTransaction(syntheticTransaction(next + k), PAYMENT_LEDGER_PROGRAM_ID),
      );
      const laterMs = await ingestBatched(later, BATCH);
      const ratio = later.length / laterMs / (batched.length / batchMs);
      console.log(
        `ingest, batch ${BATCH}:    ${rate(later.length, laterMs)} (${later.length} events, ${Math.round(laterMs)} ms, ${next.toLocaleString("en-US")} stored: ${(ratio * 100).toFixed(0)} % of the empty-store rate)`,
      );
      const bigRebuildStart = performance.now();
      const bigReplayed = await withTransaction(db.pool, (client) => rebuildProjections(client, options));
      const bigRebuildMs = performance.now() - bigRebuildStart;
      console.log(
        `rebuild:               ${rate(bigReplayed, bigRebuildMs)} (${bigReplayed.toLocaleString("en-US")} events, ${(bigRebuildMs / 1000).toFixed(1)} s)`,
      );
    }
  } finally {
    await db.drop();
  }
}

run().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
