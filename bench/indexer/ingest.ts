/**
 * Indexer ingest throughput: decode + event store + every projection + checkpoint, in batches of
 * --batch transactions (one Postgres transaction each), against a row-at-a-time baseline (one
 * transaction per event through the same code) in the same run; then a rebuild of everything.
 * Synthetic PaymentRecorded events encoded by the IDL coder, in a fresh database.
 *
 *   npx tsx bench/indexer/ingest.ts [--events 50000 --baseline 2000 --batch 2000]
 */
import { randomBytes } from "node:crypto";
import { parseArgs } from "node:util";
import anchor, { BorshCoder } from "@coral-xyz/anchor";
import { Keypair } from "@solana/web3.js";
import bs58 from "bs58";
import { decodeRawTransaction } from "../../indexer/decode/transaction.js";
import type { RawTransaction } from "../../indexer/sources/source.js";
import { ingestBatch, withTransaction } from "../../indexer/store/ingest.js";
import { rebuildProjections } from "../../indexer/store/rebuild.js";
import {
  EVENT_IX_TAG,
  eventAuthorityPda,
  PAYMENT_LEDGER_IDL,
  PAYMENT_LEDGER_PROGRAM_ID,
} from "../../programs/payment_ledger/ts/index.js";
import { createFreshDatabase } from "../../test/indexer/fresh-database.js";

const { values: flags } = parseArgs({
  options: {
    events: { type: "string", default: "50000" },
    baseline: { type: "string", default: "2000" },
    batch: { type: "string", default: "2000" },
  },
});
const EVENTS = Number(flags.events);
const BASELINE = Number(flags.baseline);
const BATCH = Number(flags.batch);

const { BN } = anchor;
const coder = new BorshCoder(PAYMENT_LEDGER_IDL);
const discriminator = PAYMENT_LEDGER_IDL.events!.find((e) => e.name === "PaymentRecorded")!.discriminator;
const programId = PAYMENT_LEDGER_PROGRAM_ID.toBase58();
const authority = eventAuthorityPda().address.toBase58();
const agents = Array.from({ length: 100 }, () => Keypair.generate().publicKey);
const payee = Keypair.generate().publicKey;
const mint = Keypair.generate().publicKey;
const invocation = Keypair.generate().publicKey;
const endpoints = Array.from({ length: 10 }, (_, i) => Array.from({ length: 32 }, (_, j) => (i * 31 + j) & 0xff));
const baseTime = 1_767_225_600;

function transaction(i: number): RawTransaction {
  const body = coder.types.encode("PaymentRecorded", {
    payer: agents[i % agents.length],
    payee,
    payment_id: new BN(i + 1),
    amount: new BN(1_000 + (i % 997)),
    mint,
    protocol: i % 3 === 0 ? { Mpp: {} } : { X402: {} },
    rail: { Stablecoin: {} },
    endpoint_hash: endpoints[i % endpoints.length],
    atomic: true,
    settlement_reference: null,
    parent:
      i % 10 === 0
        ? { invocation, parent_signature: Array.from(randomBytes(64)), budget: new BN(1_000_000_000), spent: new BN(1) }
        : null,
    recorded_at: new BN(baseTime + Math.floor(i / 50)),
    slot: new BN(1 + Math.floor(i / 4)),
  });
  const data = new Uint8Array([...EVENT_IX_TAG, ...discriminator, ...body]);
  return {
    signature: bs58.encode(randomBytes(64)),
    slot: BigInt(1 + Math.floor(i / 4)),
    blockTime: baseTime + Math.floor(i / 50),
    indexInBlock: i % 4,
    commitment: "confirmed",
    err: null,
    accountKeys: [agents[0]!.toBase58(), programId, authority],
    instructions: [{ programIdIndex: 1, accounts: [0], data: new Uint8Array([1]), stackHeight: 1 }],
    innerInstructions: [{ index: 0, instructions: [{ programIdIndex: 1, accounts: [2], data, stackHeight: 2 }] }],
    logs: null,
    preTokenBalances: [],
    postTokenBalances: [],
  };
}

const options = { cluster: "devnet" };

async function run(): Promise<void> {
  const raws = Array.from({ length: EVENTS + BASELINE }, (_, i) => transaction(i));
  const decodeStart = performance.now();
  const decoded = raws.map((raw) => decodeRawTransaction(raw));
  const decodeMs = performance.now() - decodeStart;
  if (decoded.some((d) => d.outcome !== "indexed")) throw new Error("synthetic transaction did not decode");

  const db = await createFreshDatabase();
  try {
    const batched = decoded.slice(0, EVENTS);
    const batchStart = performance.now();
    for (let start = 0; start < batched.length; start += BATCH) {
      const chunk = batched.slice(start, start + BATCH);
      await ingestBatch(db.pool, { transactions: chunk, checkpoint: { source: "bench", slot: chunk.at(-1)!.slot, blockhash: null } }, options);
    }
    const batchMs = performance.now() - batchStart;

    const single = decoded.slice(EVENTS);
    const singleStart = performance.now();
    for (const tx of single) {
      await ingestBatch(db.pool, { transactions: [tx], checkpoint: { source: "bench", slot: tx.slot, blockhash: null } }, options);
    }
    const singleMs = performance.now() - singleStart;

    const rebuildStart = performance.now();
    const replayed = await withTransaction(db.pool, (client) => rebuildProjections(client, options));
    const rebuildMs = performance.now() - rebuildStart;

    const rate = (n: number, ms: number): string => `${Math.round((n / ms) * 1000).toLocaleString("en-US")} events/s`;
    console.log(`decode:                ${rate(decoded.length, decodeMs)} (${decoded.length} transactions)`);
    console.log(`ingest, batch ${BATCH}:    ${rate(batched.length, batchMs)} (${batched.length} events, ${Math.round(batchMs)} ms)`);
    console.log(`ingest, row at a time: ${rate(single.length, singleMs)} (${single.length} events, ${Math.round(singleMs)} ms)`);
    console.log(`batch / row-at-a-time: ${((batched.length / batchMs) / (single.length / singleMs)).toFixed(1)}x`);
    console.log(`rebuild:               ${rate(replayed, rebuildMs)} (${replayed} events, ${Math.round(rebuildMs)} ms)`);
  } finally {
    await db.drop();
  }
}

run().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
