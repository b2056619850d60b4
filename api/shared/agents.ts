/**
 * Agents of an account (spec 2.5). Every lookup is scoped by account id. The read side of table
 * `agents`: lookups by public id and wallet, and the listings (the gateway writes agents through
 * api/gateway/wallets and archives them in api/gateway/payments/agent-archive.ts).
 */
import type pg from "pg";
import type { AgentRow } from "./rows.js";

/** `agent_id` is the internal key, `public_id` the id callers see (api/shared/agent-ids.ts). */
export const AGENT_COLUMNS = "agent_id, public_id, account_id, name, wallet_address, created_at, archived_at";
const COLUMNS = AGENT_COLUMNS;

export interface AgentPage {
  /** At most `limit` agents, ordered by public agent id. */
  readonly rows: AgentRow[];
  /** The last listed public agent id when more follow (pass it as `after`), else null. */
  readonly nextCursor: string | null;
}

/** Keyset page of the account's agents by public id: stable while agents are added. */
export async function listAgentsPage(
  pool: pg.Pool,
  accountId: string,
  options: { readonly limit: number; readonly after?: string | null; readonly includeArchived?: boolean },
): Promise<AgentPage> {
  const result = await pool.query<AgentRow>(
    `SELECT ${COLUMNS} FROM agents
     WHERE account_id = $1 AND ($2::text IS NULL OR public_id > $2) AND ($4 OR archived_at IS NULL)
     ORDER BY public_id LIMIT $3`,
    [accountId, options.after ?? null, options.limit + 1, options.includeArchived === true],
  );
  const rows = result.rows.slice(0, options.limit);
  return { rows, nextCursor: result.rows.length > options.limit ? rows[rows.length - 1]!.public_id : null };
}

/** Archived agents only when `includeArchived` (their history is read through the other lookups). */
export async function listAgents(pool: pg.Pool, accountId: string, includeArchived = false): Promise<AgentRow[]> {
  const result = await pool.query<AgentRow>(
    `SELECT ${COLUMNS} FROM agents WHERE account_id = $1 AND ($2 OR archived_at IS NULL) ORDER BY public_id LIMIT 10000`,
    [accountId, includeArchived],
  );
  return result.rows;
}

/** The account's agent with this public id, archived or not; null when the account has none by it. */
export async function agentOfAccount(pool: pg.Pool, accountId: string, agentId: string): Promise<AgentRow | null> {
  // Named (prepared once per connection): every payment and most agent routes look the agent up.
  const { rows } = await pool.query<AgentRow>({
    name: "agent-of-account",
    text: `SELECT ${COLUMNS} FROM agents WHERE public_id = $1 AND account_id = $2`,
    values: [agentId, accountId],
  });
  return rows[0] ?? null;
}

/**
 * Batch: the account's agents with these public ids (absent ids, or ids only another account
 * holds, are null).
 */
export async function agentsByIds(pool: pg.Pool, accountId: string, agentIds: readonly string[]): Promise<(AgentRow | null)[]> {
  const result = await pool.query<AgentRow>(`SELECT ${COLUMNS} FROM agents WHERE account_id = $1 AND public_id = ANY($2::text[])`, [
    accountId,
    [...agentIds],
  ]);
  const byId = new Map(result.rows.map((row) => [row.public_id, row]));
  return agentIds.map((id) => byId.get(id) ?? null);
}

/** Batch: the account's agents paying from these wallet addresses. */
export async function agentsByWallets(pool: pg.Pool, accountId: string, wallets: readonly string[]): Promise<(AgentRow | null)[]> {
  const result = await pool.query<AgentRow>(`SELECT ${COLUMNS} FROM agents WHERE account_id = $1 AND wallet_address = ANY($2::text[])`, [
    accountId,
    [...wallets],
  ]);
  const byWallet = new Map(result.rows.map((row) => [row.wallet_address, row]));
  return wallets.map((wallet) => byWallet.get(wallet) ?? null);
}

/** Batch: endpoint text and domain the gateway knows for these hashes. */
export async function endpointsByHashes(
  pool: pg.Pool,
  hashes: readonly string[],
): Promise<({ endpoint: string; domain: string } | null)[]> {
  const result = await pool.query<{ endpoint_hash: string; endpoint: string; domain: string }>(
    "SELECT endpoint_hash, endpoint, domain FROM endpoints WHERE endpoint_hash = ANY($1::text[])",
    [[...hashes]],
  );
  const byHash = new Map(result.rows.map((row) => [row.endpoint_hash, { endpoint: row.endpoint, domain: row.domain }]));
  return hashes.map((hash) => byHash.get(hash) ?? null);
}
