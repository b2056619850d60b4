/**
 * The internal key (`agents.agent_id`) of an agent registered through the API (api/shared/agent-ids.ts).
 * Gateway tables (reservations, rejections, wallet operations, nonces, MPP payments) and internal
 * functions (putPolicy, linkedReservation, ...) reference this key, not the public id: a test that
 * queried them with the public id would match nothing and pass vacuously. Throws unless exactly
 * one agent has the id (give the account when several accounts use it).
 */
import type pg from "pg";

export async function agentKey(db: pg.Pool | pg.ClientBase, publicId: string, accountId?: string): Promise<string> {
  const { rows } = await db.query<{ agent_id: string }>(
    "SELECT agent_id FROM agents WHERE public_id = $1 AND ($2::uuid IS NULL OR account_id = $2)",
    [publicId, accountId ?? null],
  );
  if (rows.length !== 1) throw new Error(`agentKey: ${rows.length} agents have the public id ${publicId}`);
  return rows[0]!.agent_id;
}
