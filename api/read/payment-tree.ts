/**
 * Spec 1.6 / 4.7 getChain / 4.8 `transactions tree`: the payments under a root transaction as a
 * flat list (txHash, parentTxHash, depth from the root), resolved by ONE recursive query over
 * payment_edges -> transactions, bounded by `maxDepth` and `nodeLimit` (GraphQL cannot recurse,
 * so clients rebuild the tree from parent links).
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

interface TreeRow {
  tx_hash: string;
  parent_tx_hash: string | null;
  depth: number;
  agent_id: string;
  wallet_address: string;
  amount_units: string;
  protocol: "x402" | "mpp";
  endpoint_hash: string;
  timestamp: Date;
  explorer_url: string;
  status: string;
  cut_below: boolean;
}

// A transaction may record several payments (one row each); only its first row walks on to the
// children, so a child is reached once.
const FIRST_OF_TX = (alias: string): string =>
  `NOT EXISTS (SELECT 1 FROM transactions o WHERE o.tx_hash = ${alias}.tx_hash AND o.event_id < ${alias}.event_id)`;

// Postgres evaluates a recursive CTE level by level and a CTE scan on demand, so the inner
// LIMIT stops the walk once nodeLimit + 1 rows exist: neither depth nor breadth is unbounded.
const TREE_SQL = `
WITH RECURSIVE tree AS (
  SELECT t.event_id, t.tx_hash, NULL::text AS parent_tx_hash, 0 AS depth, a.agent_id, t.agent AS wallet_address,
         t.amount_units, t.protocol, t.endpoint_hash, t."timestamp", t.explorer_url, t.status,
         ${FIRST_OF_TX("t")} AS expands
  FROM transactions t JOIN agents a ON a.wallet_address = t.agent AND a.account_id = $1
  WHERE t.tx_hash = $2
  UNION ALL
  SELECT c.event_id, c.tx_hash, e.parent_tx_hash, p.depth + 1, a.agent_id, c.agent,
         c.amount_units, c.protocol, c.endpoint_hash, c."timestamp", c.explorer_url, c.status,
         ${FIRST_OF_TX("c")}
  FROM tree p
  JOIN payment_edges e ON e.parent_tx_hash = p.tx_hash
  JOIN transactions c ON c.event_id = e.child_event_id
  JOIN agents a ON a.wallet_address = c.agent AND a.account_id = $1
  WHERE p.expands AND p.depth < $3
),
bounded AS (SELECT * FROM tree LIMIT $4::int + 1)
SELECT b.tx_hash, b.parent_tx_hash, b.depth, b.agent_id, b.wallet_address, b.amount_units::text AS amount_units,
       b.protocol, b.endpoint_hash, b."timestamp", b.explorer_url, b.status,
       (b.depth = $3 AND EXISTS (SELECT 1 FROM payment_edges x WHERE x.parent_tx_hash = b.tx_hash)) AS cut_below
FROM bounded b
ORDER BY b.depth, b."timestamp", b.event_id`;

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
  const result = await pool.query<TreeRow>(TREE_SQL, [accountId, rootTxHash, bounds.maxDepth, bounds.nodeLimit]);
  if (result.rows.length === 0) return null;
  const overLimit = result.rows.length > bounds.nodeLimit;
  const rows = overLimit ? result.rows.slice(0, bounds.nodeLimit) : result.rows;
  const nodes = rows.map(
    (row): TreeNode => ({
      txHash: row.tx_hash,
      parentTxHash: row.parent_tx_hash,
      depth: row.depth,
      agentId: row.agent_id,
      walletAddress: row.wallet_address,
      amountUnits: BigInt(row.amount_units),
      protocol: row.protocol,
      endpointHash: row.endpoint_hash,
      timestamp: row.timestamp,
      explorerUrl: row.explorer_url,
      status: row.status,
    }),
  );
  const totals: TreeTotals = {
    amountUnits: nodes.reduce((sum, node) => sum + node.amountUnits, 0n),
    transactionCount: new Set(nodes.map((node) => node.txHash)).size,
    agentCount: new Set(nodes.map((node) => node.agentId)).size,
  };
  return { nodes, totals, truncated: overLimit || rows.some((row) => row.cut_below) };
}
