/**
 * Which live updates commit together. Taken one by one, updates commit at every slot status and
 * at every full batch: a `Segment` is what one such commit holds (the transactions since the
 * previous one, and the status that closed it). Consecutive segments form one commit, a run, when
 * that stores exactly what committing them one by one stores. A commit rolls its dead slots back
 * first, then inserts, then marks finality, so a run is cut:
 * - before a dead status: its rollback must not reach transactions queued before it;
 * - before transactions of a slot the run already marks finalized, or of a signature it already
 *   holds: one by one, they were inserted after that mark, or after the first copy;
 * - before the first confirmed status of a stream that still has to be chained onto the
 *   checkpoint (the chain check backfills the gap before that segment commits);
 * - where the transactions would exceed a batch.
 */
import type { RawTransaction, SlotUpdate, SourceUpdate } from "./sources/source.js";

export interface Segment {
  /** In stream order. */
  readonly transactions: readonly RawTransaction[];
  /** The slot status that closed it; null when a full batch did. */
  readonly status: SlotUpdate | null;
}

export class CommitRuns {
  #open: RawTransaction[] = [];
  #closed: Segment[] = [];

  constructor(private readonly batchSize: number) {
    if (!Number.isInteger(batchSize) || batchSize < 1) throw new RangeError(`batch size ${batchSize} is not a positive integer`);
  }

  /** Adds an update; transactions wait for the status (or the full batch) that closes their segment. */
  push(update: SourceUpdate): void {
    if (update.kind === "transaction") {
      this.#open.push(update.transaction);
      if (this.#open.length >= this.batchSize) this.#close(null);
    } else {
      this.#close(update.slot);
    }
  }

  /**
   * Takes the oldest closed segments that commit together; empty when none is closed. `chained`:
   * the stream is known to chain onto the checkpoint (else its first confirmed status is checked).
   */
  next(chained: boolean): Segment[] {
    const first = this.#closed[0];
    if (first === undefined) return [];
    const run = [first];
    // The chain check runs on the first segment when it is the first confirmed one.
    const checked = chained || first.status?.status === "confirmed";
    let transactions = first.transactions.length;
    let finalized = first.status?.status === "finalized" ? first.status.slot : -1n;
    const signatures = new Set(first.transactions.map((tx) => tx.signature));
    for (let i = 1; i < this.#closed.length; i += 1) {
      const segment = this.#closed[i]!;
      const status = segment.status?.status;
      if (status === "dead" || (!checked && status === "confirmed")) break;
      if (transactions + segment.transactions.length > this.batchSize) break;
      if (segment.transactions.some((tx) => tx.slot <= finalized || signatures.has(tx.signature))) break;
      run.push(segment);
      transactions += segment.transactions.length;
      if (status === "finalized" && segment.status!.slot > finalized) finalized = segment.status!.slot;
      for (const tx of segment.transactions) signatures.add(tx.signature);
    }
    this.#closed.splice(0, run.length);
    return run;
  }

  #close(status: SlotUpdate | null): void {
    this.#closed.push({ transactions: this.#open, status });
    this.#open = [];
  }
}
