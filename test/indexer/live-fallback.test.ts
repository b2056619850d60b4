/**
 * `indexer run` on a Yellowstone feed (the napi client against the Geyser TEST DOUBLE serving the
 * local ledger) with the RPC source as fallback: a server that cannot replay is caught up through
 * RPC, a dropped stream reconnects, and every payment lands exactly once — in the read models and
 * on the live-feed channel.
 */
import { Writable } from "node:stream";
import pg from "pg";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type BackfillSource, IngestPipeline } from "../../indexer/pipeline.js";
import { RpcSource } from "../../indexer/sources/rpc.js";
import type { SlotRange } from "../../indexer/sources/source.js";
import { YellowstoneSource } from "../../indexer/sources/yellowstone.js";
import { LEDGER_TRANSACTIONS_CHANNEL, readCheckpoint } from "../../indexer/store/ingest.js";
import { verifyProjections } from "../../indexer/verify.js";
import { endpointHash, PAYMENT_LEDGER_PROGRAM_ID } from "../../programs/payment_ledger/ts/index.js";
import { type AgentWallet, createAgentWallet, type LedgerAccess, ledgerAccess, recordPayment } from "../../scripts/agent-wallets.js";
import { type Localnet, startLocalnet } from "../../scripts/localnet.js";
import { GeyserDouble } from "../support/geyser-double.js";
import { createFreshDatabase, type FreshDatabase } from "./fresh-database.js";
import { pollUntil } from "../support/poll.js";

let localnet: Localnet;
let ledger: LedgerAccess;
let db: FreshDatabase;
let rpc: RpcSource;
const doubles: GeyserDouble[] = [];

beforeAll(async () => {
  localnet = await startLocalnet();
  ledger = ledgerAccess(localnet);
  db = await createFreshDatabase();
  rpc = new RpcSource({ rpcUrl: localnet.rpcUrl, programId: PAYMENT_LEDGER_PROGRAM_ID, name: "rpc-fallback", pollMs: 50 });
});

afterAll(async () => {
  for (const d of doubles) await d.stop();
  await db?.drop();
  await localnet?.stop();
});

/** Log lines the pipeline wrote, parsed. */
function capturingLogger(): { logger: pino.Logger; messages: () => string[] } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      lines.push(
        ...chunk
          .toString()
          .split("\n")
          .filter((l) => l.length > 0),
      );
      callback();
    },
  });
  return { logger: pino({ level: "info" }, sink), messages: () => lines.map((l) => (JSON.parse(l) as { msg: string }).msg) };
}

async function until<T>(what: string, probe: () => Promise<T | null>, timeoutMs = 30_000): Promise<T> {
  return (await pollUntil(probe, { timeoutMs, intervalMs: 50, what })) as T;
}

async function indexedCount(signatures: readonly string[]): Promise<number> {
  const result = await db.pool.query<{ n: string }>("SELECT count(*) AS n FROM transactions WHERE tx_hash = ANY($1)", [signatures]);
  return Number(result.rows[0]!.n);
}

const allIndexed = (signatures: readonly string[]) => async () => ((await indexedCount(signatures)) === signatures.length ? true : null);

describe.each([
  { server: "without replay (live only)", retentionSlots: 0 },
  { server: "with replay", retentionSlots: 100_000 },
])("indexer run on Yellowstone $server, RPC as fallback", ({ retentionSlots }) => {
  it("catches up history, follows live, survives a dropped stream, and lands every payment exactly once", async () => {
    const double = await GeyserDouble.start({ rpcUrl: localnet.rpcUrl, retentionSlots });
    doubles.push(double);
    const agent: AgentWallet = await createAgentWallet(ledger, { usdcUnits: 1_000_000n });
    const service = await createAgentWallet(ledger);
    let paymentId = 0n;
    const pay = (): Promise<string> => {
      paymentId += 1n;
      return recordPayment(ledger, agent, service, {
        paymentId,
        amountUnits: 1_000n + paymentId,
        protocol: "x402",
        rail: "stablecoin",
        endpointHash: endpointHash("api.example.com/v1/quote"),
      });
    };

    const notified: string[] = [];
    const listener = new pg.Client({ connectionString: db.url });
    await listener.connect();
    listener.on("notification", (n) => {
      const payload = JSON.parse(n.payload ?? "{}") as { txHash: string; agent: string };
      if (payload.agent === agent.publicKey.toBase58()) notified.push(payload.txHash);
    });
    await listener.query(`LISTEN ${LEDGER_TRANSACTIONS_CHANNEL}`);

    // History the live feed will not have (or, with replay, has from the checkpoint on).
    const signatures = [await pay(), await pay(), await pay()];

    const { logger, messages } = capturingLogger();
    const live = new YellowstoneSource({ endpoint: double.endpoint, programId: PAYMENT_LEDGER_PROGRAM_ID.toBase58() });
    const pipeline = new IngestPipeline({ pool: db.pool, programId: PAYMENT_LEDGER_PROGRAM_ID, cluster: localnet.rpcUrl, logger });
    const controller = new AbortController();
    const running = pipeline.run(live, controller.signal, undefined, { fallback: rpc, reconnect: { initialMs: 100, maxMs: 400 } });
    try {
      await until("history", allIndexed(signatures));
      signatures.push(await pay());
      await until("a live payment", allIndexed(signatures));

      // The stream drops; the ledger goes on while the indexer reconnects.
      double.dropStreams();
      signatures.push(await pay(), await pay());
      await until("payments made while disconnected", allIndexed(signatures));
      signatures.push(await pay());
      await until("a payment after the reconnect", allIndexed(signatures));
      await until("notifications", async () => (notified.length >= signatures.length ? true : null));
    } finally {
      controller.abort();
      await running;
      await listener.end();
    }

    // Exactly once: one row per payment in the event store, the projection and the live feed.
    const events = await db.pool.query<{ signature: string; n: string }>(
      "SELECT signature, count(*) AS n FROM chain_events WHERE signature = ANY($1) AND event_name = 'PaymentRecorded' GROUP BY signature",
      [signatures],
    );
    expect(new Map(events.rows.map((r) => [r.signature, Number(r.n)]))).toEqual(new Map(signatures.map((s) => [s, 1])));
    expect(await indexedCount(signatures)).toBe(signatures.length);
    expect([...notified].sort()).toEqual([...signatures].sort());
    expect(await verifyProjections(db.pool, { cluster: localnet.rpcUrl })).toEqual([]);

    expect(messages()).toContain("live source failed; reconnecting");
    if (retentionSlots === 0) {
      // Only the fallback can have read the history.
      expect(messages()).toContain("live source cannot replay from the checkpoint; backfilling the gap");
    }
  });
});

describe("indexer run on Yellowstone without replay, a payment racing the catch-up", () => {
  it("a payment landing in the catch-up's last slot after its listing is indexed after the reconnect", async () => {
    // Slots of two seconds: the catch-up lists its last slot, the ledger's open one, before it closes.
    const slow = await startLocalnet({ slotMs: 2_000 });
    const slowDb = await createFreshDatabase();
    const double = await GeyserDouble.start({ rpcUrl: slow.rpcUrl, retentionSlots: 0 });
    const controller = new AbortController();
    let running: Promise<unknown> = Promise.resolve();
    try {
      const slowLedger = ledgerAccess(slow);
      const slowRpc = new RpcSource({ rpcUrl: slow.rpcUrl, programId: PAYMENT_LEDGER_PROGRAM_ID, name: "rpc-fallback", pollMs: 50 });
      const agent = await createAgentWallet(slowLedger, { usdcUnits: 1_000_000n });
      const service = await createAgentWallet(slowLedger);
      let paymentId = 0n;
      const pay = (): Promise<string> => {
        paymentId += 1n;
        return recordPayment(slowLedger, agent, service, {
          paymentId,
          amountUnits: 1_000n + paymentId,
          protocol: "x402",
          rail: "stablecoin",
          endpointHash: endpointHash("api.example.com/v1/quote"),
        });
      };
      const indexed = async (signatures: readonly string[]): Promise<true | null> => {
        const result = await slowDb.pool.query<{ n: string }>("SELECT count(*) AS n FROM transactions WHERE tx_hash = ANY($1)", [
          signatures,
        ]);
        return Number(result.rows[0]!.n) === signatures.length ? true : null;
      };

      // Once armed: after a catch-up listed its range, a payment lands in the still-open last slot,
      // and that slot closes and reaches the server before the stream opens at the server's tip.
      let race: ((range: SlotRange) => Promise<void>) | undefined;
      let raced: { signature: string; slot: bigint; catchUpTo: bigint | undefined } | undefined;
      const fallback: BackfillSource = {
        name: slowRpc.name,
        currentSlot: (commitment) => slowRpc.currentSlot(commitment),
        follow: (fromSlot, signal) => slowRpc.follow(fromSlot, signal),
        async *backfill(range, signal) {
          yield* slowRpc.backfill(range, signal);
          const hook = race;
          race = undefined;
          await hook?.(range);
        },
      };

      const signatures = [await pay()];
      const live = new YellowstoneSource({ endpoint: double.endpoint, programId: PAYMENT_LEDGER_PROGRAM_ID.toBase58() });
      const pipeline = new IngestPipeline({ pool: slowDb.pool, programId: PAYMENT_LEDGER_PROGRAM_ID, cluster: slow.rpcUrl });
      running = pipeline.run(live, controller.signal, undefined, { fallback, reconnect: { initialMs: 100, maxMs: 400 } });
      await until("history", () => indexed(signatures));

      race = async (range) => {
        const signature = await pay();
        const slot = (await slowRpc.transaction(signature))!.slot;
        raced = { signature, slot, catchUpTo: range.toSlot };
        await double.waitForSlot(slot);
      };
      // The stream has delivered a slot: from its checkpoint the server cannot replay, so the reconnect catches up.
      await until("the live stream", async () => {
        const checkpoint = await readCheckpoint(slowDb.pool, live.name);
        return double.openStreams > 0 && checkpoint !== null && checkpoint.slot <= double.confirmedSlot() ? true : null;
      });
      double.dropStreams();
      await until("the catch-up after the drop", async () => raced ?? null);
      // The interleaving this test is about (else the ledger closed the slot before the payment).
      expect(raced!.slot).toBe(raced!.catchUpTo);
      signatures.push(raced!.signature);
      await until("the payment that raced the catch-up", () => indexed(signatures));

      const events = await slowDb.pool.query<{ signature: string; n: string }>(
        "SELECT signature, count(*) AS n FROM chain_events WHERE signature = ANY($1) AND event_name = 'PaymentRecorded' GROUP BY signature",
        [signatures],
      );
      expect(new Map(events.rows.map((r) => [r.signature, Number(r.n)]))).toEqual(new Map(signatures.map((s) => [s, 1])));
    } finally {
      controller.abort();
      await running;
      await double.stop();
      await slowDb.drop();
      await slow.stop();
    }
  });
});
