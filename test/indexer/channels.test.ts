/**
 * The channel read model (indexer/store/channels.ts) on real Postgres, fed through the real decoder
 * and ingest with transactions shaped as the program emits them (test/support/channel-events.ts).
 */
import { Keypair } from "@solana/web3.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { withTransaction } from "../../indexer/db/database.js";
import { rebuildProjections } from "../../indexer/store/rebuild.js";
import { verifyProjections } from "../../indexer/verify.js";
import {
  CLUSTER,
  type ChannelFacts,
  channelEvents as ev,
  ingestTransactions,
  ledgerTransaction,
  newChannel,
} from "../support/channel-events.js";
import { createFreshDatabase, type FreshDatabase } from "./fresh-database.js";
import { projectionSnapshot, snapshotDifference } from "./read-models.js";

const T0 = 1_767_225_600;
const ENDPOINT = "api.example.com/v1/quote";

let db: FreshDatabase;
beforeAll(async () => {
  db = await createFreshDatabase();
});
afterAll(async () => {
  await db?.drop();
});

interface ChannelRow {
  status: string;
  deposit_units: string;
  settled_units: string;
  sequence: string;
  settlement_count: number;
  refunded_units: string | null;
  forced: boolean;
  open_tx: string;
  close_tx: string | null;
  close_requested_tx: string | null;
  expires_at: Date;
  opened_at: Date;
}

async function channelRow(c: ChannelFacts): Promise<ChannelRow | undefined> {
  const { rows } = await db.pool.query<ChannelRow>(
    `SELECT status, deposit_units::text, settled_units::text, sequence::text, settlement_count, refunded_units::text, forced,
            open_tx, close_tx, close_requested_tx, expires_at, opened_at
     FROM channels WHERE address = $1`,
    [c.channel.toBase58()],
  );
  return rows[0];
}

/** The channel's charges as payment rows, with the settlement each came in. */
async function chargeRows(
  c: ChannelFacts,
): Promise<{ payment_id: string; amount_units: string; settlement_tx: string; tx_hash: string }[]> {
  const { rows } = await db.pool.query(
    `SELECT p.payment_id::text, t.amount_units::text, p.settlement_tx, t.tx_hash
     FROM channel_payments p JOIN transactions t USING (event_id)
     WHERE p.channel = $1 ORDER BY p.payment_id`,
    [c.channel.toBase58()],
  );
  return rows;
}

/** open 1.0, top up 0.5, settle 2 charges, settle 1, cooperative close with a final charge. */
function channelLife(c: ChannelFacts, firstSlot: bigint) {
  const s = firstSlot;
  const open = ledgerTransaction(s, T0, [[ev.opened(c, 1_000_000n, T0, T0 + 3_600, s)]]);
  const topUp = ledgerTransaction(s + 1n, T0 + 10, [[ev.toppedUp(c, 500_000n, 1_500_000n, s + 1n)]]);
  const settle1 = ledgerTransaction(s + 2n, T0 + 20, [
    [
      ev.settled(c, { cumulative: 300n, delta: 300n, sequence: 2n, charges: 2 }, s + 2n),
      ev.charge(c, 11n, 100n, ENDPOINT, T0 + 20, s + 2n),
      ev.charge(c, 12n, 200n, ENDPOINT, T0 + 20, s + 2n),
    ],
  ]);
  const settle2 = ledgerTransaction(s + 3n, T0 + 30, [
    [
      ev.settled(c, { cumulative: 700n, delta: 400n, sequence: 3n, charges: 1 }, s + 3n),
      ev.charge(c, 13n, 400n, ENDPOINT, T0 + 30, s + 3n),
    ],
  ]);
  const close = ledgerTransaction(s + 4n, T0 + 40, [
    [
      ev.settled(c, { cumulative: 750n, delta: 50n, sequence: 4n, charges: 1 }, s + 4n),
      ev.charge(c, 14n, 50n, ENDPOINT, T0 + 40, s + 4n),
      ev.closeRequested(c, c.payee, T0 + 40, s + 4n),
    ],
    [ev.closed(c, { deposit: 1_500_000n, settled: 750n, sequence: 4n }, s + 4n)],
  ]);
  return { open, topUp, settle1, settle2, close };
}

describe("channel read model", () => {
  it("a channel's life shows its deposit, settlements, charges and close as the chain recorded them", async () => {
    const c = newChannel(Keypair.generate().publicKey, Keypair.generate().publicKey);
    const life = channelLife(c, 100n);

    await ingestTransactions(db.pool, [life.open]);
    expect(await channelRow(c)).toMatchObject({
      status: "open",
      deposit_units: "1000000",
      settled_units: "0",
      sequence: "0",
      settlement_count: 0,
      refunded_units: null,
      open_tx: life.open.signature,
      close_tx: null,
      expires_at: new Date((T0 + 3_600) * 1000),
      opened_at: new Date(T0 * 1000),
    });

    await ingestTransactions(db.pool, [life.topUp, life.settle1]);
    expect(await channelRow(c)).toMatchObject({ deposit_units: "1500000", settled_units: "300", sequence: "2", settlement_count: 1 });
    expect(await chargeRows(c)).toEqual([
      { payment_id: "11", amount_units: "100", settlement_tx: life.settle1.signature, tx_hash: life.settle1.signature },
      { payment_id: "12", amount_units: "200", settlement_tx: life.settle1.signature, tx_hash: life.settle1.signature },
    ]);

    await ingestTransactions(db.pool, [life.settle2, life.close]);
    expect(await channelRow(c)).toMatchObject({
      status: "closed",
      deposit_units: "1500000",
      settled_units: "750",
      sequence: "4",
      settlement_count: 3,
      refunded_units: "1499250",
      forced: false,
      close_tx: life.close.signature,
      close_requested_tx: life.close.signature,
    });
    expect((await chargeRows(c)).map((r) => [r.payment_id, r.settlement_tx])).toEqual([
      ["11", life.settle1.signature],
      ["12", life.settle1.signature],
      ["13", life.settle2.signature],
      ["14", life.close.signature],
    ]);
    const settlements = await db.pool.query(
      "SELECT tx_hash, cumulative_units::text, delta_units::text, sequence::text, charge_count FROM channel_settlements WHERE channel = $1 ORDER BY sequence",
      [c.channel.toBase58()],
    );
    expect(settlements.rows).toEqual([
      { tx_hash: life.settle1.signature, cumulative_units: "300", delta_units: "300", sequence: "2", charge_count: 2 },
      { tx_hash: life.settle2.signature, cumulative_units: "700", delta_units: "400", sequence: "3", charge_count: 1 },
      { tx_hash: life.close.signature, cumulative_units: "750", delta_units: "50", sequence: "4", charge_count: 1 },
    ]);
  });

  it("a close request shows the channel closing until its refund, and a forced close is flagged", async () => {
    const c = newChannel(Keypair.generate().publicKey, Keypair.generate().publicKey, "x402");
    await ingestTransactions(db.pool, [
      ledgerTransaction(200n, T0, [[ev.opened(c, 5_000n, T0, T0 + 60, 200n)]]),
      ledgerTransaction(201n, T0 + 5, [[ev.closeRequested(c, c.payer, T0 + 5, 201n)]]),
    ]);
    expect(await channelRow(c)).toMatchObject({ status: "closing", refunded_units: null, close_tx: null });

    const forced = newChannel(Keypair.generate().publicKey, Keypair.generate().publicKey);
    await ingestTransactions(db.pool, [
      ledgerTransaction(202n, T0, [[ev.opened(forced, 5_000n, T0, T0 + 60, 202n)]]),
      ledgerTransaction(203n, T0 + 61, [[ev.closed(forced, { deposit: 5_000n, settled: 0n, sequence: 0n, forced: true }, 203n)]]),
    ]);
    expect(await channelRow(forced)).toMatchObject({ status: "closed", forced: true, refunded_units: "5000", settled_units: "0" });
  });

  it("a dead slot takes its settlement out of the channel and its charges out of the payments", async () => {
    const c = newChannel(Keypair.generate().publicKey, Keypair.generate().publicKey);
    const life = channelLife(c, 300n);
    await ingestTransactions(db.pool, [life.open, life.topUp, life.settle1, life.settle2]);
    expect(await channelRow(c)).toMatchObject({ settled_units: "700", sequence: "3", settlement_count: 2 });

    await ingestTransactions(db.pool, [], { deadSlots: [303n] });
    expect(await channelRow(c)).toMatchObject({ status: "open", settled_units: "300", sequence: "2", settlement_count: 1 });
    expect((await chargeRows(c)).map((r) => r.payment_id)).toEqual(["11", "12"]);
    const dead = await db.pool.query("SELECT count(*)::int AS n FROM transactions WHERE tx_hash = $1", [life.settle2.signature]);
    expect(dead.rows[0].n).toBe(0);

    await ingestTransactions(db.pool, [], { deadSlots: [300n] });
    expect(await channelRow(c)).toBeUndefined();
    // Its settlement (slot 302) survives: the chain recorded it, the opening is what died.
    const left = await db.pool.query("SELECT count(*)::int AS n FROM channel_settlements WHERE channel = $1", [c.channel.toBase58()]);
    expect(left.rows[0].n).toBe(1);
  });

  it("a channel reopened at the same address shows its latest incarnation only", async () => {
    const c = newChannel(Keypair.generate().publicKey, Keypair.generate().publicKey);
    const life = channelLife(c, 400n);
    await ingestTransactions(db.pool, Object.values(life));
    const reopen = ledgerTransaction(410n, T0 + 100, [[ev.opened(c, 2_000n, T0 + 100, T0 + 200, 410n)]]);
    await ingestTransactions(db.pool, [reopen]);
    expect(await channelRow(c)).toMatchObject({
      status: "open",
      deposit_units: "2000",
      settled_units: "0",
      settlement_count: 0,
      open_tx: reopen.signature,
      close_tx: null,
    });
    expect(await chargeRows(c)).toEqual([]);
  });

  it("the projection equals a rebuild of the event store, and verify finds no difference", async () => {
    const projected = await projectionSnapshot(db.pool);
    expect(projected.channels!.length).toBeGreaterThanOrEqual(4);
    expect(projected.channel_payments!.length).toBeGreaterThan(0);
    await withTransaction(db.pool, (client) => rebuildProjections(client, { cluster: CLUSTER }));
    expect(snapshotDifference(await projectionSnapshot(db.pool), projected)).toEqual({});
    expect(await verifyProjections(db.pool, { cluster: CLUSTER })).toEqual([]);
  });
});
