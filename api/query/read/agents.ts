/**
 * One page of the account's agents, optionally those whose id or name contains a text (the
 * dashboard's agent picker and Agents view at thousands of agents), with how many match.
 */
import type pg from "pg";
import type { AgentRow } from "../../shared/rows.js";

export async function searchAgents(
  pool: pg.Pool,
  accountId: string,
  options: { search?: string | undefined; includeArchived: boolean; limit: number; offset: number },
): Promise<{ rows: AgentRow[]; totalCount: number }> {
  // The text is matched literally: LIKE's wildcards and escape in it are escaped.
  const pattern = options.search === undefined ? null : `%${options.search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  const { rows } = await pool.query<AgentRow & { total: string }>(
    `SELECT agent_id, public_id, account_id, name, wallet_address, created_at, archived_at, count(*) OVER ()::text AS total
     FROM agents
     WHERE account_id = $1 AND ($2 OR archived_at IS NULL)
       AND ($3::text IS NULL OR public_id ILIKE $3 OR name ILIKE $3)
     ORDER BY (archived_at IS NOT NULL), public_id LIMIT $4 OFFSET $5`,
    [accountId, options.includeArchived, pattern, options.limit, options.offset],
  );
  let totalCount = rows[0] === undefined ? 0 : Number(rows[0].total);
  if (rows[0] === undefined && options.offset > 0)
    totalCount = (await searchAgents(pool, accountId, { ...options, limit: 1, offset: 0 })).totalCount;
  return { rows: rows.map(({ total: _total, ...row }) => row), totalCount };
}
