/**
 * Spec 1.6 / 4.7 getChain / 4.8 `transactions tree`: the payments under a root transaction as a
 * flat list (txHash, parentTxHash, depth from the root), resolved by ONE recursive query over
 * payment_edges -> transactions, bounded by `maxDepth` and `nodeLimit`
 * (GraphQL cannot recurse, so clients rebuild the tree from parent links).
 *
 * Isolation: the root must be paid by one of the caller's agents (else null), and the walk only
 * enters payments whose payer is one of the caller's agents: a payment by another account's
 * agent is left out together with everything below it. Totals count only what is returned.
 */
import type pg from "pg";

export interface TreeNode {
  readonly txHash: string;
  /** Null for the root (whatever the root's own parent is: depth is relative to the root). */
  readonly parentTxHash: string | null;
  readonly depth: number;
  readonly agentId: string;
  readonly walletAddress: string;
  readonly amountUnits: bigint;
  readonly protocol: "x402" | "mpp";
  readonly endpointHash: string;
  readonly timestamp: Date;
  readonly explorerUrl: string;
  readonly status: string;
}

export interface TreeTotals {
  readonly amountUnits: bigint;
  readonly transactionCount: number;
  readonly agentCount: number;
}

export interface PaymentTree {
  readonly nodes: TreeNode[];
  readonly totals: TreeTotals;
  /** True when nodes were left out: more than `nodeLimit`, or children below `maxDepth`. */
  readonly truncated: boolean;
}

export interface TreeBounds {
  readonly maxDepth: number;
  readonly nodeLimit: number;
}

/**
 * One row as an array (no object per row): event_id, tx_hash, parent_tx_hash, depth, agent_id,
 * wallet_address, amount_units, protocol, endpoint_hash, timestamp (epoch milliseconds), explorer_url,
 * status, cut_below. Numbers come as text and the time as epoch milliseconds: no numeric or
 * timestamp parsing by the driver, only what the node needs.
 */
type TreeRow = [string, string, string | null, number, string, string, string, "x402" | "mpp", string, string, string, string, boolean];

// A recursive walk down payment_edges from the root, one level per step, entering only edges whose
// child payment is paid by one of the account's agents (a foreign payment and everything below it
// stay out), bounded by maxDepth; on the same run it beats the closure-table range scan
// (payment_closure, still kept by the projection) because it carries only narrow keys and joins
// the payments once, for the nodes kept. Within nodeLimit + 1, the nearest levels first, then
// chain order. A node at maxDepth is cut below if it has a child. Nodes carry the agent's public
// id (api/shared/agent-ids.ts), never its internal key. Narrow output: numbers as text, the time
// as epoch milliseconds.
const TREE_SQL = `
WITH RECURSIVE
wallets AS MATERIALIZED (SELECT wallet_address, public_id AS agent_id FROM agents WHERE account_id = $1),
walk (event_id, tx_hash, parent_tx_hash, depth) AS (
  SELECT t.event_id, t.tx_hash, NULL::text, 0
  FROM transactions t
  WHERE t.tx_hash = $2 AND t.agent IN (SELECT wallet_address FROM wallets)
  UNION
  SELECT e.child_event_id, e.child_tx_hash, e.parent_tx_hash, w.depth + 1
  FROM walk w JOIN payment_edges e ON e.parent_tx_hash = w.tx_hash
  WHERE w.depth < $3 AND e.child_payer IN (SELECT wallet_address FROM wallets)
),
bounded AS (SELECT * FROM walk ORDER BY depth, event_id LIMIT $4::int + 1)
SELECT b.event_id::text, b.tx_hash, b.parent_tx_hash, b.depth, a.agent_id, t.agent, t.amount_units::text,
       t.protocol, t.endpoint_hash, floor(extract(epoch FROM t."timestamp") * 1000)::text, t.explorer_url, t.status,
       (b.depth = $3 AND EXISTS (SELECT 1 FROM payment_edges x WHERE x.parent_tx_hash = b.tx_hash))
FROM bounded b
JOIN transactions t ON t.event_id = b.event_id
JOIN wallets a ON a.wallet_address = t.agent`;

/**
 * The tree under `rootTxHash` as the account sees it; null when the root is not a payment of one
 * of its agents. One SQL statement.
 */
export async function loadPaymentTree(
  pool: pg.Pool,
  accountId: string,
  rootTxHash: string,
  bounds: TreeBounds,
): Promise<PaymentTree | null> {
  if (!Number.isInteger(bounds.maxDepth) || bounds.maxDepth < 0) throw new RangeError("maxDepth must be an integer >= 0");
  if (!Number.isInteger(bounds.nodeLimit) || bounds.nodeLimit < 1) throw new RangeError("nodeLimit must be an integer >= 1");
  const result = await pool.query<TreeRow>({
    text: TREE_SQL,
    values: [accountId, rootTxHash, bounds.maxDepth, bounds.nodeLimit],
    rowMode: "array",
  });
  if (result.rows.length === 0) return null;
  const overLimit = result.rows.length > bounds.nodeLimit;
  // Level by level, oldest first. Sorted here: in SQL the sort carries every wide row (and spills
  // to disk on a large tree), here it is a comparison of three numbers.
  const keyed = result.rows.map((row) => ({ row, depth: row[3], time: Number(row[9]), id: Number(row[0]) }));
  keyed.sort((a, b) => a.depth - b.depth || a.time - b.time || a.id - b.id);
  const kept = overLimit ? keyed.slice(0, bounds.nodeLimit) : keyed;
  let cut = false;
  const nodes = kept.map(({ row, time }): TreeNode => {
    if (row[12]) cut = true;
    return {
      txHash: row[1],
      parentTxHash: row[2],
      depth: row[3],
      agentId: row[4],
      walletAddress: row[5],
      amountUnits: BigInt(row[6]),
      protocol: row[7],
      endpointHash: row[8],
      timestamp: new Date(time),
      explorerUrl: row[10],
      status: row[11],
    };
  });
  const totals: TreeTotals = {
    amountUnits: nodes.reduce((sum, node) => sum + node.amountUnits, 0n),
    transactionCount: new Set(nodes.map((node) => node.txHash)).size,
    agentCount: new Set(nodes.map((node) => node.agentId)).size,
  };
  return { nodes, totals, truncated: overLimit || cut };
}
