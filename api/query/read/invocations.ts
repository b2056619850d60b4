/**
 * agents.invoke budgets (spec 2.6, 4.7) and their consumption, from the `invocations` projection.
 * An invocation is visible to an account when its invoker or its sub-agent is one of its agents.
 */
import type pg from "pg";

export interface InvocationRow {
  readonly invocation: string;
  readonly parent_tx_hash: string;
  readonly invoker: string | null;
  readonly invoker_agent_id: string | null;
  readonly sub_agent: string;
  readonly sub_agent_id: string | null;
  readonly budget_units: string;
  readonly spent_units: string;
  readonly payment_count: string;
}

/**
 * The invocations opened under the transaction `parentTxHash` (one per sub-agent). Agents are
 * named by public id, and only the account's own.
 */
export async function invocationsByParent(pool: pg.Pool, accountId: string, parentTxHash: string): Promise<InvocationRow[]> {
  const result = await pool.query<InvocationRow>(
    `SELECT i.invocation, i.parent_tx_hash, i.invoker, ai.public_id AS invoker_agent_id, i.sub_agent,
            asub.public_id AS sub_agent_id, i.budget_units::text AS budget_units, i.spent_units::text AS spent_units,
            i.payment_count::text AS payment_count
     FROM invocations i
     LEFT JOIN agents ai ON ai.wallet_address = i.invoker AND ai.account_id = $1
     LEFT JOIN agents asub ON asub.wallet_address = i.sub_agent AND asub.account_id = $1
     WHERE i.parent_tx_hash = $2 AND (ai.agent_id IS NOT NULL OR asub.agent_id IS NOT NULL)
     ORDER BY i.invocation
     LIMIT 1000`,
    [accountId, parentTxHash],
  );
  return result.rows;
}

/** invocationsByParent for several invoking transactions at once (one query). */
export async function invocationsByParents(pool: pg.Pool, accountId: string, parentTxHashes: readonly string[]): Promise<InvocationRow[]> {
  const result = await pool.query<InvocationRow>(
    `SELECT i.invocation, i.parent_tx_hash, i.invoker, ai.public_id AS invoker_agent_id, i.sub_agent,
            asub.public_id AS sub_agent_id, i.budget_units::text AS budget_units, i.spent_units::text AS spent_units,
            i.payment_count::text AS payment_count
     FROM invocations i
     LEFT JOIN agents ai ON ai.wallet_address = i.invoker AND ai.account_id = $1
     LEFT JOIN agents asub ON asub.wallet_address = i.sub_agent AND asub.account_id = $1
     WHERE i.parent_tx_hash = ANY($2::text[]) AND (ai.agent_id IS NOT NULL OR asub.agent_id IS NOT NULL)
     ORDER BY i.parent_tx_hash, i.invocation
     LIMIT 10000`,
    [accountId, [...parentTxHashes]],
  );
  return result.rows;
}
