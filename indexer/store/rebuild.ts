/**
 * Rebuild: empty every projection and replay the event store in id order through the same
 * projection code as ingest, in one transaction (readers never see a half-built model).
 */
import type pg from "pg";
import { PROJECTION_TABLES, type ProjectionOptions, projectEvents } from "./projections.js";

export const REBUILD_CHUNK_EVENTS = 20_000;

export interface RebuildProgress {
  readonly eventsReplayed: number;
  readonly eventsTotal: number;
}

/**
 * Secondary indexes of `transactions` (primary key and unique constraints stay: ON CONFLICT and
 * the projections' lookups by event id need them). Dropped for the replay and built again after
 * it: one sort per index instead of an insert into each per row. payment_edges keeps its indexes:
 * the depth of a new edge is read from its parent's edge by child_tx_hash during the replay.
 */
async function secondaryIndexes(client: pg.ClientBase): Promise<{ name: string; definition: string }[]> {
  const result = await client.query<{ name: string; definition: string }>(
    `SELECT i.indexname AS name, i.indexdef AS definition
     FROM pg_indexes i
     WHERE i.schemaname = current_schema() AND i.tablename = ANY($1::text[])
       AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)`,
    [["transactions"]],
  );
  return result.rows;
}

/** Runs inside the caller's transaction. */
export async function rebuildProjections(
  client: pg.ClientBase,
  options: ProjectionOptions,
  onProgress?: (progress: RebuildProgress) => void,
): Promise<number> {
  await client.query(`TRUNCATE ${PROJECTION_TABLES.join(", ")}`);
  const indexes = await secondaryIndexes(client);
  for (const index of indexes) await client.query(`DROP INDEX ${client.escapeIdentifier(index.name)}`);
  const total = Number((await client.query<{ n: string }>("SELECT count(*) AS n FROM chain_events")).rows[0]!.n);
  let after = "0";
  let replayed = 0;
  for (;;) {
    const chunk = await client.query<{ id: string }>("SELECT id FROM chain_events WHERE id > $1 ORDER BY id LIMIT $2", [
      after,
      REBUILD_CHUNK_EVENTS,
    ]);
    if (chunk.rows.length === 0) break;
    const ids = chunk.rows.map((r) => r.id);
    await projectEvents(client, ids, options);
    replayed += ids.length;
    after = ids.at(-1)!;
    onProgress?.({ eventsReplayed: replayed, eventsTotal: total });
  }
  for (const index of indexes) await client.query(index.definition);
  return replayed;
}
