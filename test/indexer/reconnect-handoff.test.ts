/**
 * The hand-off between the RPC catch-up and a live-only stream, with every interleaving forced
 * (scripted sources, no ledger): a live-only server cannot replay, so `indexer run` backfills from
 * the checkpoint to the fallback's confirmed slot, then opens the stream at the server's tip. On a
 * one-node ledger that confirmed slot is still open when the catch-up lists it, so a payment can
 * land in it after the listing; that slot must be read again before anything past it counts as
 * done. Every payment lands exactly once.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type BackfillSource, IngestPipeline } from "../../indexer/pipeline.js";
import {
  type ChainSource,
  type RawTransaction,
  ReplayUnavailableError,
  type SlotRange,
  type SourceUpdate,
} from "../../indexer/sources/source.js";
import { readCheckpoint } from "../../indexer/store/ingest.js";
import { PAYMENT_LEDGER_PROGRAM_ID } from "../../programs/payment_ledger/ts/index.js";
import { pollUntil } from "../support/poll.js";
import { createFreshDatabase, type FreshDatabase } from "./fresh-database.js";
import { randomHistory } from "./random-history.js";

let db: FreshDatabase;

beforeAll(async () => {
  db = await createFreshDatabase();
});

afterAll(async () => {
  await db?.drop();
});

/** A one-node chain as the local ledger runs it: transactions land in the open slot; closing it makes its block. */
class ScriptedChain {
  readonly landed: RawTransaction[] = [];

  constructor(public openSlot: bigint) {}

  land(tx: RawTransaction): void {
    this.landed.push({ ...tx, slot: this.openSlot });
  }

  close(): void {
    this.openSlot += 1n;
  }

  inRange(range: SlotRange): RawTransaction[] {
    return this.landed.filter((tx) => tx.slot >= range.fromSlot && (range.toSlot === undefined || tx.slot <= range.toSlot));
  }
}

/** The RPC fallback over the chain: its confirmed slot is the open one; a backfill lists once, then fetches. */
class ChainRpc implements BackfillSource {
  readonly name = "rpc";
  readonly ranges: SlotRange[] = [];
  /** Runs once per backfill, between its listing and its fetches (throwing fails that backfill). */
  afterListing: (() => void) | undefined;

  constructor(private readonly chain: ScriptedChain) {}

  async currentSlot(): Promise<bigint> {
    return this.chain.openSlot;
  }

  async *backfill(range: SlotRange): AsyncIterable<RawTransaction> {
    this.ranges.push(range);
    const listed = this.chain.inRange(range);
    const hook = this.afterListing;
    this.afterListing = undefined;
    hook?.();
    yield* listed;
  }

  // biome-ignore lint/correctness/useYield: the pipeline follows the live source only
  async *follow(): AsyncIterable<SourceUpdate> {
    throw new Error("the fallback is not followed");
  }
}

type Step = (fromSlot: bigint, signal: AbortSignal) => AsyncIterable<SourceUpdate>;

/** A live-only server: each `follow` call runs the next scripted step. */
class ScriptedLive implements ChainSource {
  readonly calls: bigint[] = [];

  /** `name` keys the checkpoint: one per test, so each starts without one. */
  constructor(
    readonly name: string,
    private readonly steps: Step[],
  ) {}

  // biome-ignore lint/correctness/useYield: it only refuses; backfill is the fallback's job
  async *backfill(): AsyncIterable<RawTransaction> {
    throw new Error("a live feed has no history");
  }

  follow(fromSlot: bigint, signal: AbortSignal): AsyncIterable<SourceUpdate> {
    this.calls.push(fromSlot);
    const step = this.steps.shift();
    if (step === undefined) throw new Error(`no scripted step for follow call ${this.calls.length}`);
    return step(fromSlot, signal);
  }
}

// biome-ignore lint/correctness/useYield: a step that fails before its first update
async function* failing(error: Error): AsyncIterable<SourceUpdate> {
  throw error;
}

const cannotReplay: Step = (fromSlot) => failing(new ReplayUnavailableError(fromSlot, null));

/** The stream opened at the server's tip: closes the open slot, sends it whole, then stays open until aborted. */
function liveFromTip(chain: ScriptedChain): Step {
  return async function* (_fromSlot, signal) {
    const slot = chain.openSlot;
    chain.close();
    for (const transaction of chain.inRange({ fromSlot: slot, toSlot: slot })) yield { kind: "transaction", transaction };
    yield { kind: "slot", slot: { slot, parent: slot - 1n, status: "confirmed" } };
    if (!signal.aborted) await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
  };
}

/** Runs the pipeline until the live checkpoint reaches `slot`, then stops it. */
async function runUntilCheckpoint(live: ChainSource, fallback: BackfillSource, slot: bigint): Promise<void> {
  const pipeline = new IngestPipeline({ pool: db.pool, programId: PAYMENT_LEDGER_PROGRAM_ID, cluster: "localnet" });
  const controller = new AbortController();
  const running = pipeline.run(live, controller.signal, undefined, { fallback, reconnect: { initialMs: 1, maxMs: 2 } });
  const failed = running.then(
    () => new Error("the pipeline stopped by itself"),
    (error: unknown) => error,
  );
  try {
    await Promise.race([
      pollUntil(async () => ((await readCheckpoint(db.pool, live.name))?.slot ?? -1n) >= slot, {
        timeoutMs: 20_000,
        intervalMs: 10,
        what: `the live checkpoint to reach slot ${slot}`,
      }),
      failed.then((error) => {
        throw error;
      }),
    ]);
  } finally {
    controller.abort();
    await running.catch(() => undefined);
  }
}

/** Each transaction's events in the event store, exactly once. */
async function expectIndexedOnce(transactions: readonly RawTransaction[]): Promise<void> {
  const signatures = transactions.map((tx) => tx.signature);
  const rows = await db.pool.query<{ signature: string; n: string }>(
    "SELECT signature, count(*) AS n FROM chain_events WHERE signature = ANY($1) GROUP BY signature",
    [signatures],
  );
  const expected = new Map(transactions.map((tx) => [tx.signature, tx.innerInstructions[0]!.instructions.length]));
  expect(new Map(rows.rows.map((r) => [r.signature, Number(r.n)]))).toEqual(expected);
}

/** A chain whose slot `first` is closed with three transactions and whose slot `first + 1` is open with two. */
function chainWithHistory(seed: number, first: bigint): { chain: ScriptedChain; history: RawTransaction[] } {
  const history = randomHistory(seed, 6).transactions;
  const chain = new ScriptedChain(first);
  for (const tx of history.slice(0, 3)) chain.land(tx);
  chain.close();
  for (const tx of history.slice(3, 5)) chain.land(tx);
  return { chain, history };
}

describe("reconnect hand-off: RPC catch-up, then a live-only stream", () => {
  it("a payment landing in the catch-up's last slot after its listing is indexed once that slot closes", async () => {
    const { chain, history } = chainWithHistory(101, 10n);
    const fallback = new ChainRpc(chain);
    const openAtCatchUp = chain.openSlot;
    // After the catch-up listed its range, the last payment lands in the still-open slot, which then closes.
    fallback.afterListing = () => {
      chain.land(history[5]!);
      chain.close();
    };
    const live = new ScriptedLive("live-1", [cannotReplay, liveFromTip(chain)]);

    await runUntilCheckpoint(live, fallback, openAtCatchUp + 1n);

    await expectIndexedOnce(history);
    expect(fallback.ranges[0]).toEqual({ fromSlot: 0n, toSlot: openAtCatchUp });
    // The stream's first slot chains onto the catch-up's last one: only that slot is read again.
    expect(fallback.ranges.slice(1)).toEqual([{ fromSlot: openAtCatchUp, toSlot: openAtCatchUp }]);
  });

  it("the catch-up's last slot is read again when the stream after it fails before its first slot", async () => {
    const { chain, history } = chainWithHistory(202, 100n);
    const fallback = new ChainRpc(chain);
    const openAtCatchUp = chain.openSlot;
    fallback.afterListing = () => {
      chain.land(history[5]!);
      chain.close();
    };
    const live = new ScriptedLive("live-2", [cannotReplay, () => failing(new Error("stream refused")), cannotReplay, liveFromTip(chain)]);

    await runUntilCheckpoint(live, fallback, openAtCatchUp + 1n);

    await expectIndexedOnce(history);
    expect(fallback.ranges[1]?.fromSlot).toBe(openAtCatchUp);
  });

  it("a catch-up that fails is retried like a dropped stream, not the end of `indexer run`", async () => {
    const { chain, history } = chainWithHistory(303, 1_000n);
    chain.land(history[5]!);
    const fallback = new ChainRpc(chain);
    fallback.afterListing = () => {
      throw new Error("fetch failed");
    };
    const live = new ScriptedLive("live-3", [cannotReplay, cannotReplay, liveFromTip(chain)]);

    await runUntilCheckpoint(live, fallback, chain.openSlot);

    await expectIndexedOnce(history);
  });
});
