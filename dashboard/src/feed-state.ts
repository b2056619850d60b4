/**
 * The live feed's rows: payments from the subscription and from re-reads after a (re)connect,
 * merged into one list, newest first, each payment once, at most FEED_MAX rows.
 *
 * Order: by block time, newest first; payments of the same second keep the order they reached
 * the dashboard (a later arrival above an earlier one), and a re-read page (newest first) is taken
 * in as if its oldest row arrived first. A payment seen again (a re-read after a reconnect, or the
 * stream and a re-read racing) keeps its place and takes the newer copy of its fields (a status
 * that moved from confirmed to finalized).
 */
import type { TransactionRow } from "./graphql/queries";

export const FEED_MAX = 200;

export interface FeedRow {
  readonly tx: TransactionRow;
  /** Arrival order: higher = later. */
  readonly seq: number;
  /** Arrived through the subscription (not a re-read). */
  readonly live: boolean;
}

export interface FeedState {
  readonly rows: readonly FeedRow[];
  readonly nextSeq: number;
}

export const EMPTY_FEED: FeedState = { rows: [], nextSeq: 0 };

function key(tx: TransactionRow): string {
  return tx.txHash ?? tx.id;
}

function newerFirst(a: FeedRow, b: FeedRow): number {
  const byTime = Date.parse(b.tx.timestamp) - Date.parse(a.tx.timestamp);
  return byTime !== 0 ? byTime : b.seq - a.seq;
}

/**
 * Adds payments to the feed. `incoming` is in arrival order for the stream (one at a time) or
 * newest first for a re-read (`reread`); rejected payments (not on the ledger) are not feed rows.
 */
export function mergeFeed(state: FeedState, incoming: readonly TransactionRow[], options: { reread: boolean }): FeedState {
  const byKey = new Map(state.rows.map((row) => [key(row.tx), row]));
  let seq = state.nextSeq;
  const ordered = options.reread ? [...incoming].reverse() : incoming;
  for (const tx of ordered) {
    if (tx.status === "rejected" || tx.txHash === null) continue;
    const existing = byKey.get(key(tx));
    if (existing !== undefined) {
      byKey.set(key(tx), { ...existing, tx });
      continue;
    }
    byKey.set(key(tx), { tx, seq, live: !options.reread });
    seq += 1;
  }
  const rows = [...byKey.values()].sort(newerFirst).slice(0, FEED_MAX);
  return { rows, nextSeq: seq };
}
