/**
 * The ingest loop: source -> decoder -> one Postgres transaction per batch (events, projections,
 * checkpoint). Decoding never throws; a batch either commits whole or not at all, so a crash
 * anywhere resumes from the last checkpoint and re-ingests idempotently.
 */
import { setTimeout as delay } from "node:timers/promises";
import type { PublicKey } from "@solana/web3.js";
import type pg from "pg";
import type { Logger } from "pino";
import { decodeSettlementTransfer, type SettlementTransfer } from "./decode/settlement.js";
import { type DecodedTransaction, decodeRawTransaction } from "./decode/transaction.js";
import { type IngestResult, ingestBatch, readCheckpoint } from "./store/ingest.js";
import type { ProjectionOptions } from "./store/projections.js";
import { CommitRuns, type Segment } from "./commit-runs.js";
import {
  type ChainSource,
  FROM_TIP,
  type RawTransaction,
  ReplayUnavailableError,
  type SlotRange,
  type SourceUpdate,
} from "./sources/source.js";
import { UpdateQueue } from "./update-queue.js";

/** Finds a transaction by signature (settlement references); null when unavailable. */
export type TransactionLookup = (signature: string) => Promise<RawTransaction | null>;

export interface PipelineOptions extends ProjectionOptions {
  readonly pool: pg.Pool;
  readonly programId: PublicKey;
  readonly lookup?: TransactionLookup;
  readonly logger?: Logger;
  /** Transactions per database transaction. */
  readonly batchSize?: number;
  /** How long `run` waits for the writer lock (a standby waits); undefined = until aborted. */
  readonly writerLockWaitMs?: number;
}

/** A source that can backfill and tell its newest slot (the RPC source): fills what a live feed cannot replay. */
export interface BackfillSource extends ChainSource {
  currentSlot(commitment?: "confirmed" | "finalized"): Promise<bigint>;
}

export interface RunOptions {
  /**
   * Backfills through this source when the live one cannot replay from the checkpoint
   * (`ReplayUnavailableError`), or when a stream's first confirmed slot does not chain onto the
   * checkpoint (a live-only server started past it). Progress stays under the live source's checkpoint.
   */
  readonly fallback?: BackfillSource;
  /** Reconnect delays after a dropped stream or a failed read: doubles from `initialMs` up to `maxMs`. */
  readonly reconnect?: { readonly initialMs: number; readonly maxMs: number };
}

const DEFAULT_RECONNECT = { initialMs: 250, maxMs: 10_000 };

/** Another indexer holds the writer lock of this program. */
export class WriterLockedError extends Error {
  constructor(readonly programId: string) {
    super(`another indexer is writing for program ${programId}`);
    this.name = "WriterLockedError";
  }
}

const LOCK_POLL_MS = 500;

export interface Progress {
  readonly transactions: number;
  readonly events: number;
  readonly slot: bigint;
}

export const DEFAULT_BATCH_SIZE = 500;

/** Live updates read ahead of the commits; full, the source is not read until a commit takes them. */
export const LIVE_QUEUE_UPDATES = 4_096;

export class IngestPipeline {
  constructor(private readonly options: PipelineOptions) {}

  decode(raws: readonly RawTransaction[]): DecodedTransaction[] {
    return raws.map((raw) => decodeRawTransaction(raw, this.options.programId));
  }

  /** The settlement transfers named by the batch's records, where the chain still has them. */
  private async settlements(decoded: readonly DecodedTransaction[]): Promise<SettlementTransfer[]> {
    const lookup = this.options.lookup;
    if (lookup === undefined) return [];
    const references = new Set<string>();
    for (const tx of decoded) {
      for (const event of tx.events) {
        const reference = event.payload.settlementReference;
        if (event.name === "PaymentRecorded" && typeof reference === "string") references.add(reference);
      }
    }
    const found: SettlementTransfer[] = [];
    for (const reference of references) {
      try {
        const raw = await lookup(reference);
        if (raw !== null) found.push(decodeSettlementTransfer(raw));
      } catch (error) {
        // Unavailable now: the record projects as unverified and a later ingest can settle it.
        this.options.logger?.warn({ reference, err: error }, "settlement lookup failed");
      }
    }
    return found;
  }

  async ingest(
    raws: readonly RawTransaction[],
    checkpoint?: { source: string; slot: bigint; blockhash?: string | null },
    finalizedSlot?: bigint,
    deadSlots?: readonly bigint[],
  ): Promise<IngestResult & { decoded: DecodedTransaction[] }> {
    const decoded = this.decode(raws);
    const settlements = await this.settlements(decoded);
    const result = await ingestBatch(
      this.options.pool,
      {
        transactions: decoded,
        settlements,
        ...(checkpoint === undefined ? {} : { checkpoint: { ...checkpoint, blockhash: checkpoint.blockhash ?? null } }),
        ...(finalizedSlot === undefined ? {} : { finalizedSlot }),
        ...(deadSlots === undefined ? {} : { deadSlots }),
      },
      this.options,
    );
    for (const tx of decoded) {
      if (tx.outcome === "unresolved") {
        // Stored as such and reported by `verify` until a later read resolves its keys.
        this.options.logger?.warn({ signature: tx.signature, detail: tx.detail }, "transaction keys unresolved");
      } else if (tx.outcome !== "indexed" && tx.outcome !== "no_events") {
        this.options.logger?.debug({ signature: tx.signature, outcome: tx.outcome, detail: tx.detail }, "transaction skipped");
      }
    }
    return { ...result, decoded };
  }

  /** Ingests a finite slot range, checkpointing each batch. */
  async backfill(
    source: ChainSource,
    range: SlotRange,
    onProgress?: (progress: Progress) => void,
    signal?: AbortSignal,
    checkpointAs: string = source.name,
  ): Promise<Progress> {
    const batchSize = this.options.batchSize ?? DEFAULT_BATCH_SIZE;
    let batch: RawTransaction[] = [];
    const progress = { transactions: 0, events: 0, slot: range.fromSlot };
    const flush = async (): Promise<void> => {
      if (batch.length === 0) return;
      const slot = batch.at(-1)!.slot;
      const result = await this.ingest(batch, { source: checkpointAs, slot });
      progress.transactions += batch.length;
      progress.events += result.eventsInserted;
      progress.slot = slot;
      batch = [];
      onProgress?.({ ...progress });
    };
    for await (const raw of source.backfill(range, signal)) {
      batch.push(raw);
      if (batch.length >= batchSize) await flush();
    }
    await flush();
    // The whole range is in: the checkpoint moves to its end even when its last slots were empty.
    if (range.toSlot !== undefined && !(signal?.aborted ?? false)) {
      await this.ingest([], { source: checkpointAs, slot: range.toSlot });
      progress.slot = range.toSlot;
    }
    return progress;
  }

  /**
   * Follows the source live from its checkpoint until `signal` aborts. Transactions are
   * committed at the slot updates (or when a batch fills), together with the checkpoint; the
   * updates that arrive while a commit is in flight share the next one.
   */
  async run(
    source: ChainSource,
    signal: AbortSignal,
    onProgress?: (progress: Progress) => void,
    options: RunOptions = {},
  ): Promise<Progress> {
    // Exactly one writer per program: a standby blocks here until the active one goes away. The
    // lock lives on one connection; when the database drops it (a restart), the lock is gone too:
    // following stops, and the lock is taken again on a new connection once the database is back.
    const lockKey = `indexer:${this.options.programId.toBase58()}`;
    const deadline = this.options.writerLockWaitMs === undefined ? Infinity : Date.now() + this.options.writerLockWaitMs;
    const total = { transactions: 0, events: 0, slot: 0n };
    while (!signal.aborted) {
      const lock = await this.options.pool.connect().catch((error: unknown) => {
        this.options.logger?.warn({ err: error }, "indexer: database unreachable; retrying");
        return null;
      });
      if (lock === null) {
        await delay(LOCK_POLL_MS);
        continue;
      }
      const lost = new AbortController();
      const onAbort = (): void => lost.abort();
      signal.addEventListener("abort", onAbort, { once: true });
      let broken: Error | undefined;
      lock.on("error", (error) => {
        broken = error;
        lost.abort();
      });
      try {
        for (;;) {
          const got = await lock.query<{ ok: boolean }>("SELECT pg_try_advisory_lock(hashtext($1)) AS ok", [lockKey]);
          if (got.rows[0]?.ok === true) break;
          if (signal.aborted || Date.now() >= deadline) throw new WriterLockedError(this.options.programId.toBase58());
          await delay(LOCK_POLL_MS);
        }
        const progress = await this.followResilient(source, lost.signal, onProgress, options);
        total.transactions += progress.transactions;
        total.events += progress.events;
        if (progress.slot > 0n) total.slot = progress.slot;
        if (broken === undefined) await lock.query("SELECT pg_advisory_unlock(hashtext($1))", [lockKey]);
      } catch (error) {
        if (error instanceof WriterLockedError || broken === undefined) throw error;
      } finally {
        signal.removeEventListener("abort", onAbort);
        lock.release(broken);
      }
      if (broken !== undefined) {
        this.options.logger?.warn({ err: broken }, "indexer: lost the database connection holding the writer lock; taking it again");
        await delay(LOCK_POLL_MS);
      }
    }
    return total;
  }

  /**
   * `follow`, kept going: a live source that cannot replay from the checkpoint is caught up through
   * the fallback; a dropped stream or failed read reconnects after a growing delay (reset once
   * updates flow again). Ends when `signal` aborts.
   */
  private async followResilient(
    source: ChainSource,
    signal: AbortSignal,
    onProgress: ((progress: Progress) => void) | undefined,
    options: RunOptions,
  ): Promise<Progress> {
    const reconnect = options.reconnect ?? DEFAULT_RECONNECT;
    const total = { transactions: 0, events: 0, slot: 0n };
    const add = (p: Progress): void => {
      total.transactions += p.transactions;
      total.events += p.events;
      total.slot = p.slot;
    };
    let delayMs = reconnect.initialMs;
    // After a catch-up the live source is asked for its tip on: it cannot replay, and the chain
    // check in `follow` fills whatever landed between the catch-up and the stream's first slot.
    let fromTip = false;
    while (!signal.aborted) {
      const attempt = { transactions: 0, events: 0, slot: 0n };
      try {
        add(await this.follow(source, signal, onProgress, options.fallback, attempt, fromTip));
        return total;
      } catch (error) {
        add(attempt);
        if (signal.aborted) break;
        let failure = error;
        if (error instanceof ReplayUnavailableError && options.fallback !== undefined && !fromTip) {
          try {
            add(await this.catchUp(source, options.fallback, signal, onProgress, error));
            delayMs = reconnect.initialMs;
            fromTip = true;
            continue;
          } catch (catchUpError) {
            // A failed read of the fallback: retried from the checkpoint like a dropped stream.
            if (signal.aborted) break;
            failure = catchUpError;
          }
        }
        fromTip = false;
        if (attempt.transactions > 0 || attempt.slot > 0n) delayMs = reconnect.initialMs;
        this.options.logger?.warn({ source: source.name, err: failure, retryInMs: delayMs }, "live source failed; reconnecting");
        // An abort ends the wait early (the promise rejects, only then); the loop's check stops it.
        await delay(delayMs, undefined, { signal }).catch(() => undefined);
        delayMs = Math.min(delayMs * 2, reconnect.maxMs);
      }
    }
    return total;
  }

  /**
   * Backfills through `fallback` from the live source's checkpoint slot (inclusive: see `follow`)
   * to the fallback's confirmed tip.
   */
  private async catchUp(
    live: ChainSource,
    fallback: BackfillSource,
    signal: AbortSignal,
    onProgress: ((progress: Progress) => void) | undefined,
    cause: ReplayUnavailableError,
  ): Promise<Progress> {
    const checkpoint = await readCheckpoint(this.options.pool, live.name);
    const fromSlot = checkpoint?.slot ?? 0n;
    const toSlot = await fallback.currentSlot("confirmed");
    this.options.logger?.warn(
      { source: live.name, fallback: fallback.name, fromSlot: fromSlot.toString(), toSlot: toSlot.toString(), reason: cause.message },
      "live source cannot replay from the checkpoint; backfilling the gap",
    );
    if (toSlot < fromSlot) return { transactions: 0, events: 0, slot: checkpoint?.slot ?? 0n };
    return this.backfill(fallback, { fromSlot, toSlot }, onProgress, signal, live.name);
  }

  /**
   * Reading and committing run side by side: the source is drained into a bounded queue while a
   * commit is in flight, and everything queued meanwhile commits in as few transactions as store
   * exactly what committing each update would (`commit-runs.ts`). A live source sends two or three
   * slot statuses per slot; one commit each made a loaded indexer fall behind the stream.
   */
  private async follow(
    source: ChainSource,
    signal: AbortSignal,
    onProgress: ((progress: Progress) => void) | undefined,
    fallback: BackfillSource | undefined,
    progress: { transactions: number; events: number; slot: bigint },
    fromTip = false,
  ): Promise<Progress> {
    const checkpoint = await readCheckpoint(this.options.pool, source.name);
    // Resumption re-reads the checkpoint slot (the overlap is absorbed by the event key): it may be
    // incomplete, when a catch-up read it from a node whose confirmed slot was still open or a
    // full batch ended inside it. A source that can only start past it is caught by the chain check.
    const fromSlot = checkpoint?.slot ?? 0n;
    this.options.logger?.info({ source: source.name, fromSlot: fromSlot.toString() }, "following");
    progress.slot = fromSlot;
    let chained = checkpoint === null || fallback === undefined;
    // Stops the reading when committing stops (an abort, a failed commit): the source's stream closes.
    const reading = new AbortController();
    const stopReading = (): void => reading.abort();
    signal.addEventListener("abort", stopReading, { once: true });
    if (signal.aborted) reading.abort();
    const queue = new UpdateQueue<SourceUpdate>(LIVE_QUEUE_UPDATES, reading.signal);
    const filling = queue.fill(() => source.follow(fromTip ? FROM_TIP : fromSlot, reading.signal));
    const runs = new CommitRuns(this.options.batchSize ?? DEFAULT_BATCH_SIZE);
    try {
      for (;;) {
        const updates = await queue.take();
        if (signal.aborted) return progress;
        for (const update of updates) runs.push(update);
        for (let run = runs.next(chained); run.length > 0; run = runs.next(chained)) {
          const first = run[0]!;
          if (!chained && first.status?.status === "confirmed") {
            chained = true;
            run[0] = await this.chainOnto(source, fallback!, fromSlot, first, progress, onProgress, signal);
          }
          await this.commit(source.name, run, progress, onProgress);
          if (signal.aborted) return progress;
        }
        // Empty: the source ended. Transactions no status closed yet are left to the next read
        // (the checkpoint is not past them).
        if (updates.length === 0) break;
      }
      // A dropped stream surfaces after everything it delivered before is committed.
      if (queue.failure !== undefined) throw queue.failure.error;
      return progress;
    } finally {
      reading.abort();
      signal.removeEventListener("abort", stopReading);
      await filling;
    }
  }

  /**
   * The chain check on a stream's first confirmed slot: its parent must be before the checkpoint
   * slot; otherwise the stream started past it (a live-only stream opens at the server's tip) and
   * did not deliver the checkpoint slot nor anything up to the parent: read them first. Returns the
   * segment without what the backfill covered.
   */
  private async chainOnto(
    source: ChainSource,
    fallback: BackfillSource,
    fromSlot: bigint,
    segment: Segment,
    progress: { transactions: number; events: number; slot: bigint },
    onProgress: ((progress: Progress) => void) | undefined,
    signal: AbortSignal,
  ): Promise<Segment> {
    const parent = segment.status?.parent ?? null;
    if (parent === null || parent < fromSlot) return segment;
    this.options.logger?.warn(
      { source: source.name, fallback: fallback.name, fromSlot: fromSlot.toString(), toSlot: parent.toString() },
      "stream started past the checkpoint; backfilling the gap",
    );
    const filled = await this.backfill(fallback, { fromSlot, toSlot: parent }, onProgress, signal, source.name);
    progress.transactions += filled.transactions;
    progress.events += filled.events;
    return { ...segment, transactions: segment.transactions.filter((tx) => tx.slot > parent) };
  }

  /** Commits a run of segments in one transaction, with the newest checkpoint and finalized slot they reached. */
  private async commit(
    sourceName: string,
    run: readonly Segment[],
    progress: { transactions: number; events: number; slot: bigint },
    onProgress: ((progress: Progress) => void) | undefined,
  ): Promise<void> {
    const transactions = run.flatMap((segment) => segment.transactions);
    let checkpointSlot = progress.slot;
    let newest: bigint | undefined;
    let finalized: bigint | undefined;
    const dead: bigint[] = [];
    for (const { transactions: txs, status } of run) {
      // The newest slot a segment reached: whole at a confirmed status; a full batch may end inside it.
      checkpointSlot = status?.status === "confirmed" ? status.slot : (txs.at(-1)?.slot ?? checkpointSlot);
      if (newest === undefined || checkpointSlot > newest) newest = checkpointSlot;
      if (status?.status === "finalized" && (finalized === undefined || status.slot > finalized)) finalized = status.slot;
      if (status?.status === "dead") dead.push(status.slot);
    }
    // One by one, the checkpoint only ever advanced: the newest of the run is where they left it.
    const result = await this.ingest(
      transactions,
      { source: sourceName, slot: newest ?? checkpointSlot },
      finalized,
      dead.length > 0 ? dead : undefined,
    );
    if (result.eventsRolledBack > 0) {
      this.options.logger?.warn({ slot: dead.join(","), events: result.eventsRolledBack }, "dead slot rolled back");
    }
    progress.transactions += transactions.length;
    progress.events += result.eventsInserted;
    progress.slot = checkpointSlot;
    if (transactions.length > 0) onProgress?.({ ...progress });
  }
}
