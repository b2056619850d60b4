/**
 * The ingest loop: source -> decoder -> one Postgres transaction per batch (events, projections,
 * checkpoint). Decoding never throws; a batch either commits whole or not at all, so a crash
 * anywhere resumes from the last checkpoint and re-ingests idempotently.
 */
import type { PublicKey } from "@solana/web3.js";
import type pg from "pg";
import type { Logger } from "pino";
import { decodeSettlementTransfer, type SettlementTransfer } from "./decode/settlement.js";
import { type DecodedTransaction, decodeRawTransaction } from "./decode/transaction.js";
import { type IngestResult, ingestBatch, readCheckpoint } from "./store/ingest.js";
import type { ProjectionOptions } from "./store/projections.js";
import type { ChainSource, RawTransaction, SlotRange } from "./sources/source.js";

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
      if (tx.outcome !== "indexed" && tx.outcome !== "no_events") {
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
  ): Promise<Progress> {
    const batchSize = this.options.batchSize ?? DEFAULT_BATCH_SIZE;
    let batch: RawTransaction[] = [];
    const progress = { transactions: 0, events: 0, slot: range.fromSlot };
    const flush = async (): Promise<void> => {
      if (batch.length === 0) return;
      const slot = batch.at(-1)!.slot;
      const result = await this.ingest(batch, { source: source.name, slot });
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
    return progress;
  }

  /**
   * Follows the source live from its checkpoint until `signal` aborts. Transactions are
   * committed at each slot update (or when a batch fills), together with the checkpoint.
   */
  async run(source: ChainSource, signal: AbortSignal, onProgress?: (progress: Progress) => void): Promise<Progress> {
    // Exactly one writer per program: a standby blocks here until the active one goes away.
    const lockKey = `indexer:${this.options.programId.toBase58()}`;
    const lock = await this.options.pool.connect();
    try {
      const deadline = this.options.writerLockWaitMs === undefined ? Infinity : Date.now() + this.options.writerLockWaitMs;
      for (;;) {
        const got = await lock.query<{ ok: boolean }>("SELECT pg_try_advisory_lock(hashtext($1)) AS ok", [lockKey]);
        if (got.rows[0]?.ok === true) break;
        if (signal.aborted || Date.now() >= deadline) throw new WriterLockedError(this.options.programId.toBase58());
        await new Promise((resolve) => setTimeout(resolve, LOCK_POLL_MS));
      }
      try {
        return await this.follow(source, signal, onProgress);
      } finally {
        await lock.query("SELECT pg_advisory_unlock(hashtext($1))", [lockKey]);
      }
    } finally {
      lock.release();
    }
  }

  private async follow(source: ChainSource, signal: AbortSignal, onProgress?: (progress: Progress) => void): Promise<Progress> {
    const batchSize = this.options.batchSize ?? DEFAULT_BATCH_SIZE;
    const checkpoint = await readCheckpoint(this.options.pool, source.name);
    const fromSlot = checkpoint?.slot ?? 0n;
    this.options.logger?.info({ source: source.name, fromSlot: fromSlot.toString() }, "following");
    const progress = { transactions: 0, events: 0, slot: fromSlot };
    let batch: RawTransaction[] = [];
    for await (const update of source.follow(fromSlot, signal)) {
      if (update.kind === "transaction") {
        batch.push(update.transaction);
        if (batch.length < batchSize) continue;
      }
      const status = update.kind === "slot" ? update.slot.status : null;
      const slot = update.kind === "slot" ? update.slot.slot : batch.at(-1)!.slot;
      const finalized = status === "finalized" ? slot : undefined;
      const dead = status === "dead" ? [slot] : undefined;
      // The checkpoint is the newest slot whose transactions are all in this commit.
      const checkpointSlot = status === "confirmed" ? slot : batch.at(-1)?.slot ?? progress.slot;
      const result = await this.ingest(batch, { source: source.name, slot: checkpointSlot }, finalized, dead);
      if (result.eventsRolledBack > 0) {
        this.options.logger?.warn({ slot: slot.toString(), events: result.eventsRolledBack }, "dead slot rolled back");
      }
      progress.transactions += batch.length;
      progress.events += result.eventsInserted;
      progress.slot = checkpointSlot;
      if (batch.length > 0) onProgress?.({ ...progress });
      batch = [];
    }
    return progress;
  }
}
