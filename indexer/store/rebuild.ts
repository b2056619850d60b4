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

/** Runs inside the caller's transaction. */
export async function rebuildProjections(
  client: pg.ClientBase,
  options: ProjectionOptions,
  onProgress?: (progress: RebuildProgress) => void,
): Promise<number> {
  await client.query(`TRUNCATE ${PROJECTION_TABLES.join(", ")}`);
  const total = Number((await client.query<{ n: string }>("SELECT count(*) AS n FROM chain_events")).rows[0]!.n);
  let after = "0";
  let replayed = 0;
  for (;;) {
    const chunk = await client.query<{ id: string }>(
      "SELECT id FROM chain_events WHERE id > $1 ORDER BY id LIMIT $2",
      [after, REBUILD_CHUNK_EVENTS],
    );
    if (chunk.rows.length === 0) break;
    const ids = chunk.rows.map((r) => r.id);
    await projectEvents(client, ids, options);
    replayed += ids.length;
    after = ids.at(-1)!;
    onProgress?.({ eventsReplayed: replayed, eventsTotal: total });
  }
  return replayed;
}
