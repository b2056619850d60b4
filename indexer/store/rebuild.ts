/**
 * Rebuild: empty every projection and replay the event store in id order through the same
 * projection code as ingest, in one transaction (readers never see a half-built model).
 */
import type pg from "pg";
import { projectAllChannels } from "./channels.js";
import { storedEventsInput } from "./projection-input.js";
import { PROJECTION_TABLES, type ProjectionOptions, projectInput } from "./projections.js";

/** Ids per chunk: each chunk is two statements over an id range of the event store. */
export const REBUILD_CHUNK_EVENTS = 50_000;
const REBUILD_WORK_MEM = "64MB";
const REBUILD_MAINTENANCE_WORK_MEM = "256MB";

export interface RebuildProgress {
  readonly eventsReplayed: number;
  readonly eventsTotal: number;
}

/**
 * Secondary indexes of `transactions` (primary key and unique constraints stay: ON CONFLICT and
 * the projections' lookups by event id need them). Dropped for the replay and built again after
 * it: one sort per index instead of an insert into each per row. payment_edges keeps its indexes:
 * the depth of a new edge is read from its parent's edge by child_tx_hash during the replay, and
 * payment_closure keeps its own (a new payment's ancestors are read by descendant, and conflicts
 * need the primary key).
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
  // A chunk's input (~25 MB of rows) and its sorts stay in memory instead of spilling to disk at
  // the default 4 MB; the index builds after the replay sort in memory too. This transaction only.
  await client.query(`SET LOCAL work_mem = '${REBUILD_WORK_MEM}'`);
  await client.query(`SET LOCAL maintenance_work_mem = '${REBUILD_MAINTENANCE_WORK_MEM}'`);
  await client.query(`TRUNCATE ${PROJECTION_TABLES.join(", ")}`);
  const indexes = await secondaryIndexes(client);
  for (const index of indexes) await client.query(`DROP INDEX ${client.escapeIdentifier(index.name)}`);
  const bounds = await client.query<{ n: string; first: string | null; last: string | null }>(
    "SELECT count(*) AS n, min(id) AS first, max(id) AS last FROM chain_events",
  );
  const { n, first, last } = bounds.rows[0]!;
  const total = Number(n);
  let replayed = 0;
  if (first !== null && last !== null) {
    // Id ranges, not id lists: nothing travels to this process and back.
    for (let after = BigInt(first) - 1n; after < BigInt(last); after += BigInt(REBUILD_CHUNK_EVENTS)) {
      const through = after + BigInt(REBUILD_CHUNK_EVENTS);
      const input = storedEventsInput({ afterId: after.toString(), throughId: through.toString() });
      await projectInput(client, input, { ...options, notify: false });
      const counted = await client.query<{ n: string }>("SELECT count(*) AS n FROM chain_events WHERE id > $1 AND id <= $2", [
        after.toString(),
        through.toString(),
      ]);
      replayed += Number(counted.rows[0]!.n);
      onProgress?.({ eventsReplayed: replayed, eventsTotal: total });
    }
  }
  for (const index of indexes) await client.query(index.definition);
  // Channels are derived per channel from all of its events (indexer/store/channels.ts), once.
  await projectAllChannels(client);
  return replayed;
}
