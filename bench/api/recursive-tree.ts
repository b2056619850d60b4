/**
 * The recursive query `loadPaymentTree` ran before the closure table, verbatim, and the same
 * shaping of its rows (less the payer's wallet, which nodes no longer carry): the reference
 * test/api/payment-tree-closure.test.ts compares the closure answer with, and the same-run
 * baseline of bench/api/payment-tree.ts.
 */
import type pg from "pg";
import type { PaymentTree, TreeBounds } from "../../api/query/read/payment-tree.js";

const RECURSIVE_TREE_SQL = `
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
bounded AS (SELECT * FROM walk LIMIT $4::int + 1)
SELECT b.event_id, b.tx_hash, b.parent_tx_hash, b.depth, a.agent_id, t.agent AS wallet_address, t.amount_units::text AS amount_units,
       t.protocol, t.endpoint_hash, t."timestamp", t.explorer_url, t.status,
       (b.depth = $3 AND EXISTS (SELECT 1 FROM payment_edges x WHERE x.parent_tx_hash = b.tx_hash)) AS cut_below
FROM bounded b
JOIN transactions t ON t.event_id = b.event_id
JOIN wallets a ON a.wallet_address = t.agent`;

interface ReferenceRow {
  event_id: string;
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

/** The old loadPaymentTree: the recursive query and the same shaping of its rows. */
export async function recursiveTree(pool: pg.Pool, accountId: string, root: string, bounds: TreeBounds): Promise<PaymentTree | null> {
  const result = await pool.query<ReferenceRow>(RECURSIVE_TREE_SQL, [accountId, root, bounds.maxDepth, bounds.nodeLimit]);
  if (result.rows.length === 0) return null;
  const overLimit = result.rows.length > bounds.nodeLimit;
  const sorted = [...result.rows].sort(
    (a, b) => a.depth - b.depth || a.timestamp.getTime() - b.timestamp.getTime() || Number(a.event_id) - Number(b.event_id),
  );
  const rows = overLimit ? sorted.slice(0, bounds.nodeLimit) : sorted;
  const nodes = rows.map((row) => ({
    txHash: row.tx_hash,
    parentTxHash: row.parent_tx_hash,
    depth: row.depth,
    agentId: row.agent_id,
    amountUnits: BigInt(row.amount_units),
    protocol: row.protocol,
    endpointHash: row.endpoint_hash,
    timestamp: row.timestamp,
    explorerUrl: row.explorer_url,
    status: row.status,
  }));
  return {
    nodes,
    totals: {
      amountUnits: nodes.reduce((sum, node) => sum + node.amountUnits, 0n),
      transactionCount: new Set(nodes.map((node) => node.txHash)).size,
      agentCount: new Set(nodes.map((node) => node.agentId)).size,
    },
    truncated: overLimit || rows.some((row) => row.cut_below),
  };
}
