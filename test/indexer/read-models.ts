/**
 * Comparable dumps of the indexer's tables, for tests that assert two databases (or one database
 * before and after a rebuild) hold the same read models.
 */
import type pg from "pg";
import { PROJECTION_TABLES } from "../../indexer/store/projections.js";

/** Columns holding `chain_events.id`: a database-local insertion number, not chain data. */
const SURROGATE_ID_COLUMNS = new Set(["event_id", "child_event_id", "descendant_event_id"]);

/**
 * Every row of every projection as sorted JSON text, per table. Across databases, pass
 * `portable` to leave out surrogate event ids (two databases number the same events differently).
 */
export async function projectionSnapshot(pool: pg.Pool, options: { portable?: boolean } = {}): Promise<Record<string, string[]>> {
  const snapshot: Record<string, string[]> = {};
  for (const table of PROJECTION_TABLES) {
    const result = await pool.query<{ r: Record<string, unknown> }>(`SELECT row_to_json(t) AS r FROM ${table} t`);
    snapshot[table] = result.rows
      .map(({ r }) => {
        const entries = Object.entries(r).filter(([column]) => !(options.portable && SURROGATE_ID_COLUMNS.has(column)));
        return JSON.stringify(Object.fromEntries(entries.sort(([a], [b]) => a.localeCompare(b))));
      })
      .sort();
  }
  return snapshot;
}

/** The natural keys of the event store, sorted: equal sets mean no missing and no extra event. */
export async function eventKeys(pool: pg.Pool): Promise<string[]> {
  const result = await pool.query<{ k: string }>(
    `SELECT concat_ws(':', signature, instruction_index, inner_index, event_ordinal) AS k FROM chain_events`,
  );
  return result.rows.map((x) => x.k).sort();
}

/** The rows only one side has, per table (first few), for a readable failure message. */
export function snapshotDifference(
  left: Record<string, string[]>,
  right: Record<string, string[]>,
  limit = 2,
): Record<string, { onlyLeft: string[]; onlyRight: string[] }> {
  const difference: Record<string, { onlyLeft: string[]; onlyRight: string[] }> = {};
  for (const table of new Set([...Object.keys(left), ...Object.keys(right)])) {
    const [l, r] = [left[table] ?? [], right[table] ?? []];
    const [inLeft, inRight] = [new Set(l), new Set(r)];
    const onlyLeft = l.filter((row) => !inRight.has(row));
    const onlyRight = r.filter((row) => !inLeft.has(row));
    if (onlyLeft.length > 0 || onlyRight.length > 0) {
      difference[table] = { onlyLeft: onlyLeft.slice(0, limit), onlyRight: onlyRight.slice(0, limit) };
    }
  }
  return difference;
}
