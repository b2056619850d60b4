/**
 * Property: whatever the batches the channel events arrive in and whatever slots die on the way,
 * the channel read model ingest leaves equals a rebuild from the surviving event store, and each
 * channel's settled amount and linked charges are exactly those of its surviving settlements.
 * Seeded (test/support/random.ts): a failing seed replays.
 */
import { Keypair } from "@solana/web3.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { withTransaction } from "../../indexer/db/database.js";
import type { RawTransaction } from "../../indexer/sources/source.js";
import { rebuildProjections } from "../../indexer/store/rebuild.js";
import {
  CLUSTER,
  type ChannelFacts,
  channelEvents as ev,
  ingestTransactions,
  ledgerTransaction,
  newChannel,
} from "../support/channel-events.js";
import { mulberry32 } from "../support/random.js";
import { createFreshDatabase, type FreshDatabase } from "./fresh-database.js";
import { projectionSnapshot, snapshotDifference } from "./read-models.js";

const T0 = 1_767_225_600;
const SEEDS = [1, 2, 3, 4, 5, 6];
const CHANNELS_PER_SEED = 4;

let db: FreshDatabase;
/** Slots killed over all seeds: the property is only shown if some die. */
let slotsKilled = 0;
beforeAll(async () => {
  db = await createFreshDatabase();
});
afterAll(async () => {
  await db?.drop();
});

interface Step {
  readonly channel: ChannelFacts;
  readonly tx: RawTransaction;
  /** For a settlement: its cumulative and charge count. */
  readonly settled?: { cumulative: bigint; charges: number };
}

/** One channel's life as ledger transactions, in order; slots are assigned later. */
function life(random: () => number, c: ChannelFacts): ((slot: bigint) => Step)[] {
  const steps: ((slot: bigint) => Step)[] = [];
  let deposit = 1_000_000n;
  let cumulative = 0n;
  let sequence = 0n;
  let paymentId = 1n;
  const at = (slot: bigint): number => T0 + Number(slot);
  const initial = deposit;
  steps.push((slot) => ({
    channel: c,
    tx: ledgerTransaction(slot, at(slot), [[ev.opened(c, initial, at(slot), at(slot) + 3_600, slot)]]),
  }));
  if (random() < 0.5) {
    deposit += 250_000n;
    const total = deposit;
    steps.push((slot) => ({ channel: c, tx: ledgerTransaction(slot, at(slot), [[ev.toppedUp(c, 250_000n, total, slot)]]) }));
  }
  const settlements = 1 + Math.floor(random() * 4);
  for (let i = 0; i < settlements; i += 1) {
    const amounts = Array.from({ length: 1 + Math.floor(random() * 3) }, () => BigInt(1 + Math.floor(random() * 5_000)));
    const ids = amounts.map(() => paymentId++);
    const delta = amounts.reduce((a, b) => a + b, 0n);
    cumulative += delta;
    sequence += BigInt(amounts.length);
    const settled = { cumulative, delta, sequence, charges: amounts.length };
    steps.push((slot) => ({
      channel: c,
      settled: { cumulative: settled.cumulative, charges: settled.charges },
      tx: ledgerTransaction(slot, at(slot), [
        [ev.settled(c, settled, slot), ...amounts.map((amount, k) => ev.charge(c, ids[k]!, amount, "api.example.com/x", at(slot), slot))],
      ]),
    }));
  }
  const ending = random();
  const totals = { deposit, settled: cumulative, sequence };
  if (ending < 0.4) {
    steps.push((slot) => ({
      channel: c,
      tx: ledgerTransaction(slot, at(slot), [[ev.closeRequested(c, c.payee, at(slot), slot)], [ev.closed(c, totals, slot)]]),
    }));
  } else if (ending < 0.6) {
    steps.push((slot) => ({ channel: c, tx: ledgerTransaction(slot, at(slot), [[ev.closed(c, { ...totals, forced: true }, slot)]]) }));
  } else if (ending < 0.8) {
    steps.push((slot) => ({ channel: c, tx: ledgerTransaction(slot, at(slot), [[ev.closeRequested(c, c.payer, at(slot), slot)]]) }));
  }
  return steps;
}

describe("channel read model under random batches and dead slots", () => {
  it.each(SEEDS)("seed %i: ingest equals a rebuild, and each channel holds exactly its surviving settlements", async (seed) => {
    const random = mulberry32(seed);
    const lives = Array.from({ length: CHANNELS_PER_SEED }, () =>
      life(random, newChannel(Keypair.generate().publicKey, Keypair.generate().publicKey)),
    );
    // Interleave the lives (each in its own order), one slot per transaction.
    const steps: Step[] = [];
    let slot = BigInt(seed) * 1_000n;
    while (lives.some((l) => l.length > 0)) {
      const open = lives.filter((l) => l.length > 0);
      const next = open[Math.floor(random() * open.length)]!.shift()!;
      slot += 1n;
      steps.push(next(slot));
    }

    const dead = new Set<bigint>();
    let index = 0;
    while (index < steps.length) {
      const size = 1 + Math.floor(random() * 4);
      const batch = steps.slice(index, index + size);
      index += size;
      // Sometimes a slot ingested earlier dies with this batch.
      const ingested = steps.slice(0, index - size).filter((s) => !dead.has(s.tx.slot));
      const dying = ingested.length > 0 && random() < 0.3 ? ingested[Math.floor(random() * ingested.length)]!.tx.slot : undefined;
      if (dying !== undefined) dead.add(dying);
      if (dying !== undefined) slotsKilled += 1;
      await ingestTransactions(
        db.pool,
        batch.map((s) => s.tx),
        dying === undefined ? {} : { deadSlots: [dying] },
      );
    }

    for (const c of new Set(steps.map((s) => s.channel))) {
      const surviving = steps.filter((s) => s.channel === c && s.settled !== undefined && !dead.has(s.tx.slot));
      const settlements = await db.pool.query<{ n: number; max: string | null }>(
        "SELECT count(*)::int AS n, max(cumulative_units)::text AS max FROM channel_settlements WHERE channel = $1",
        [c.channel.toBase58()],
      );
      expect(settlements.rows[0]).toEqual({
        n: surviving.length,
        max:
          surviving.length === 0
            ? null
            : surviving
                .map((s) => s.settled!.cumulative)
                .reduce((a, b) => (a > b ? a : b))
                .toString(),
      });
      const linked = await db.pool.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM channel_payments p JOIN transactions t USING (event_id) WHERE p.channel = $1",
        [c.channel.toBase58()],
      );
      expect(linked.rows[0]!.n).toBe(surviving.reduce((sum, s) => sum + s.settled!.charges, 0));
      const opened = steps.find((s) => s.channel === c)!;
      const row = await db.pool.query("SELECT count(*)::int AS n FROM channels WHERE address = $1", [c.channel.toBase58()]);
      expect(row.rows[0].n, `a channel has a row iff its opening survived`).toBe(dead.has(opened.tx.slot) ? 0 : 1);
    }

    const projected = await projectionSnapshot(db.pool);
    await withTransaction(db.pool, (client) => rebuildProjections(client, { cluster: CLUSTER }));
    expect(snapshotDifference(await projectionSnapshot(db.pool), projected), `seed ${seed}`).toEqual({});
  });

  it("the seeds above killed slots (else they proved nothing about rollback)", () => {
    expect(slotsKilled).toBeGreaterThan(SEEDS.length);
  });
});
