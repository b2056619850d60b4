/**
 * Runs (spec 4.7: "Costs are aggregated in the dashboard under the orchestrator's run ID"): a run
 * is a payment tree, named by its root transaction. These reads place one payment in its run:
 * how many payments were made under it, and which payment its run starts from. Both see only the
 * account's payments, as `paymentTree` does (api/query/read/payment-tree.ts): a child paid by
 * another account's agent is not counted, and the walk up stops below a parent it may not see.
 */
import type pg from "pg";

/** Upward walks stop after this many levels (the tree's own maxDepth limit). */
const MAX_RUN_DEPTH = 64;

/** Per transaction hash, the number of payments made under it by the account's agents. */
export async function childCountsByHashes(pool: pg.Pool, accountId: string, txHashes: readonly string[]): Promise<number[]> {
  const { rows } = await pool.query<{ parent_tx_hash: string; n: string }>(
    `SELECT pe.parent_tx_hash, count(DISTINCT pe.child_tx_hash)::text AS n
     FROM payment_edges pe
     WHERE pe.parent_tx_hash = ANY($2::text[])
       AND pe.child_payer IN (SELECT wallet_address FROM agents WHERE account_id = $1)
     GROUP BY pe.parent_tx_hash`,
    [accountId, [...txHashes]],
  );
  const counts = new Map(rows.map((row) => [row.parent_tx_hash, Number(row.n)]));
  return txHashes.map((hash) => counts.get(hash) ?? 0);
}

/**
 * The root of the run each of `txHashes` belongs to: its parent's parent's ... as long as each is
 * a payment of the account's agents; the hash itself for a top-level payment. One walk for all.
 */
export async function runRootsOf(pool: pg.Pool, accountId: string, txHashes: readonly string[]): Promise<string[]> {
  const { rows } = await pool.query<{ origin: string; tx_hash: string }>(
    `WITH RECURSIVE mine AS (SELECT wallet_address FROM agents WHERE account_id = $1),
     up (origin, tx_hash, level) AS (
       SELECT h, h, 0 FROM unnest($2::text[]) AS h
       UNION
       SELECT up.origin, pe.parent_tx_hash, up.level + 1
       FROM up JOIN payment_edges pe ON pe.child_tx_hash = up.tx_hash
       WHERE up.level < $3
         AND EXISTS (SELECT 1 FROM transactions t JOIN mine ON mine.wallet_address = t.agent WHERE t.tx_hash = pe.parent_tx_hash))
     SELECT DISTINCT ON (origin) origin, tx_hash FROM up ORDER BY origin, level DESC`,
    [accountId, [...txHashes], MAX_RUN_DEPTH],
  );
  const roots = new Map(rows.map((row) => [row.origin, row.tx_hash]));
  return txHashes.map((hash) => roots.get(hash) ?? hash);
}
