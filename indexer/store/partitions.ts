/**
 * The slot-range partitions of the event store (migrations/052_event_store_partitions.sql): before
 * a batch writes, the partitions holding its slots, and the next one ahead, must exist. Creating
 * one is a catalog change, so it is asked of the database only when a batch reaches a range this
 * process has not seen covered; the ranges known to exist are remembered per pool, and only once
 * the transaction that made them sure has committed.
 */
import type pg from "pg";

interface Known {
  readonly width: bigint;
  readonly starts: Set<bigint>;
}

const known = new WeakMap<pg.Pool, Known>();
const NOTHING = (): void => undefined;

/**
 * Makes sure the partitions of `slots` exist, in the caller's transaction. Returns what to call
 * once that transaction committed, so later batches skip the question.
 */
export async function ensurePartitions(pool: pg.Pool, client: pg.ClientBase, slots: readonly bigint[]): Promise<() => void> {
  if (slots.length === 0) return NOTHING;
  let state = known.get(pool);
  if (state === undefined) {
    // The width is fixed by the migration: remembered at once.
    const result = await client.query<{ width: string }>("SELECT event_store_partition_width()::text AS width");
    state = { width: BigInt(result.rows[0]!.width), starts: new Set() };
    known.set(pool, state);
  }
  const { width, starts } = state;
  const needed = new Set<bigint>();
  let high = slots[0]!;
  for (const slot of slots) {
    needed.add(slot - (slot % width));
    if (slot > high) high = slot;
  }
  needed.add(high - (high % width) + width);
  const absent = [...needed].filter((start) => !starts.has(start));
  if (absent.length === 0) return NOTHING;
  await client.query("SELECT event_store_ensure_partitions($1::bigint[])", [absent.map(String)]);
  return () => {
    for (const start of absent) starts.add(start);
  };
}
