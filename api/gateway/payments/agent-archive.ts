/**
 * Archiving an agent (`DELETE /v1/agents/{agentId}`, docs/rest.md "Archiving an agent").
 *
 * The `agents` row is kept and marked `archived_at` (migration 016): its id is what every payment,
 * tree, rollup, rejection, reservation and wallet operation references, so deleting it would lose
 * history. An archived agent cannot authorize payments, be charged on an MPP session or be funded;
 * a withdrawal stays possible so a forced archive never strands money.
 *
 * Without `force`, archiving is refused while the agent could still move money: open spend
 * reservations (a signed payment may still land), pending wallet operations, or a non-zero
 * balance. The agent row is locked `FOR UPDATE` while these are checked; payment authorization
 * and session charges lock it `FOR SHARE` in their own transactions, so a reservation is either
 * seen here or made after the archive (and then refused).
 */
import type pg from "pg";
import { withTransaction } from "../../../indexer/db/database.js";
import { AGENT_COLUMNS } from "../../shared/agents.js";
import type { AgentRow } from "../../shared/rows.js";

/** What keeps an agent from being archived without `force`. */
export interface ArchiveBlockers {
  readonly openReservations: number;
  readonly pendingOperations: number;
  readonly balanceUnits: bigint;
}

export class AgentNotEmptyError extends Error {
  override readonly name = "AgentNotEmptyError";
  constructor(
    readonly agentId: string,
    readonly blockers: ArchiveBlockers,
  ) {
    super(
      `agent ${agentId} still has ${blockers.openReservations} open reservation(s), ${blockers.pendingOperations} pending wallet ` +
        `operation(s) and ${blockers.balanceUnits} base units in its wallet; withdraw and finish them first, or archive with force`,
    );
  }
}

export interface ArchiveRequest {
  readonly accountId: string;
  /** The public id, looked up within `accountId` (api/shared/agent-ids.ts). */
  readonly agentId: string;
  /** Archive even with funds or open payments (the funds stay withdrawable). */
  readonly force: boolean;
  /** The wallet's balance from the chain; needed unless `force`. */
  readonly balanceOf: (walletAddress: string) => Promise<bigint>;
}

/** The archived agent (`archivedNow` false when it already was), or null when the account has no such agent. */
export async function archiveAgent(pool: pg.Pool, request: ArchiveRequest): Promise<{ agent: AgentRow; archivedNow: boolean } | null> {
  return withTransaction(pool, async (client) => {
    const found = await client.query<AgentRow>(`SELECT ${AGENT_COLUMNS} FROM agents WHERE public_id = $1 AND account_id = $2 FOR UPDATE`, [
      request.agentId,
      request.accountId,
    ]);
    const agent = found.rows[0];
    if (agent === undefined || agent.archived_at !== null) return agent === undefined ? null : { agent, archivedNow: false };
    if (!request.force) {
      const counts = await client.query<{ reservations: number; operations: number }>(
        `SELECT (SELECT count(*)::int FROM spend_reservations WHERE agent_id = $1 AND status IN ('reserved', 'pending_approval')) AS reservations,
                (SELECT count(*)::int FROM wallet_operations WHERE agent_id = $1 AND status = 'pending') AS operations`,
        [agent.agent_id],
      );
      const blockers: ArchiveBlockers = {
        openReservations: counts.rows[0]!.reservations,
        pendingOperations: counts.rows[0]!.operations,
        balanceUnits: await request.balanceOf(agent.wallet_address),
      };
      if (blockers.openReservations > 0 || blockers.pendingOperations > 0 || blockers.balanceUnits > 0n) {
        throw new AgentNotEmptyError(agent.public_id, blockers);
      }
    }
    const archived = await client.query<AgentRow>(`UPDATE agents SET archived_at = now() WHERE agent_id = $1 RETURNING ${AGENT_COLUMNS}`, [
      agent.agent_id,
    ]);
    return { agent: archived.rows[0]!, archivedNow: true };
  });
}

/** In a payment's transaction: the agent's `archived_at`, the row locked against a concurrent archive. */
export async function lockAgentArchivedAt(client: pg.PoolClient, agentId: string): Promise<Date | null> {
  const { rows } = await client.query<{ archived_at: Date | null }>("SELECT archived_at FROM agents WHERE agent_id = $1 FOR SHARE", [
    agentId,
  ]);
  return rows[0]?.archived_at ?? null;
}
