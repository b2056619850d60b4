/**
 * `loadPaymentTree` before narrow rows, verbatim: the same closure statement with the driver
 * decoding every row into an object (timestamp parsed as a date, each column by name). The
 * same-run baseline of bench/api/payment-tree.ts for the decoding of 10,000 rows. It still reads
 * the payer's wallet, which nodes no longer carry (no caller used it).
 */
import type pg from "pg";
import type { PaymentTree, TreeBounds, TreeNode, TreeTotals } from "../../api/query/read/payment-tree.js";

interface TreeRow {
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

// The descendants of the root within maxDepth are one range scan of payment_closure's primary key
// (ancestor, distance, descendant), maintained by the projection (indexer/store/projections.ts),
// each joined to its payment by primary key (a lateral lookup: at 100,000 payments the planner
// would otherwise hash the whole table); no recursion, no level-by-level loop, no second join to
// payment_edges (the payment carries its parent hash and payer). The account filter of a walk that
// enters only the account's payments: a transaction reached with none of its payments by the
// account's agents is blocked, and so is everything below it (the blocked transactions' own
// closure rows, usually none to read). Within nodeLimit + 1, the nearest levels first, then chain
// order, chosen on narrow keys. A node at maxDepth is cut below only if the root has descendants
// one level further (one index probe) and the node has a child. Nodes carry the agent's public id
// (api/shared/agent-ids.ts), never its internal key.
const TREE_SQL = `
WITH
wallets AS MATERIALIZED (SELECT wallet_address, public_id AS agent_id FROM agents WHERE account_id = $1),
root AS MATERIALIZED (
  SELECT t.event_id, t.tx_hash, NULL::text AS parent_tx_hash, 0 AS depth, t.agent, t.amount_units, t.protocol, t.endpoint_hash,
         t."timestamp", t.explorer_url, t.status
  FROM transactions t
  WHERE t.tx_hash = $2 AND t.agent IN (SELECT wallet_address FROM wallets)),
below AS MATERIALIZED (
  SELECT t.event_id, t.tx_hash, t.parent_tx_hash, c.distance AS depth, t.agent, t.amount_units, t.protocol, t.endpoint_hash,
         t."timestamp", t.explorer_url, t.status, t.agent IN (SELECT wallet_address FROM wallets) AS own
  FROM payment_closure c
  CROSS JOIN LATERAL (SELECT * FROM transactions t WHERE t.event_id = c.descendant_event_id OFFSET 0) t
  WHERE c.ancestor_tx_hash = $2 AND c.distance <= $3 AND EXISTS (SELECT 1 FROM root)),
blocked AS (SELECT tx_hash FROM below GROUP BY tx_hash HAVING NOT bool_or(own)),
excluded AS MATERIALIZED (
  SELECT x.descendant_event_id FROM payment_closure x WHERE x.ancestor_tx_hash IN (SELECT tx_hash FROM blocked)),
walk AS (
  SELECT event_id, tx_hash, parent_tx_hash, depth, agent, amount_units, protocol, endpoint_hash, "timestamp", explorer_url, status FROM root
  UNION ALL
  SELECT event_id, tx_hash, parent_tx_hash, depth, agent, amount_units, protocol, endpoint_hash, "timestamp", explorer_url, status FROM below
  WHERE own AND event_id NOT IN (SELECT descendant_event_id FROM excluded)),
bounded AS MATERIALIZED (SELECT event_id, depth FROM walk ORDER BY depth, event_id LIMIT $4::int + 1),
deeper AS MATERIALIZED (
  SELECT EXISTS (SELECT 1 FROM payment_closure d WHERE d.ancestor_tx_hash = $2 AND d.distance = $3 + 1) AS found)
SELECT w.event_id, w.tx_hash, w.parent_tx_hash, w.depth, a.agent_id, w.agent AS wallet_address, w.amount_units::text AS amount_units,
       w.protocol, w.endpoint_hash, w."timestamp", w.explorer_url, w.status,
       (w.depth = $3 AND (SELECT found FROM deeper) AND EXISTS (SELECT 1 FROM payment_edges x WHERE x.parent_tx_hash = w.tx_hash)) AS cut_below
FROM walk w
JOIN bounded k ON k.event_id = w.event_id AND k.depth = w.depth
JOIN wallets a ON a.wallet_address = w.agent`;

/** The closure loader before narrow rows: same statement, rows decoded as objects by the driver. */
export async function closureTreeBefore(
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
  // Level by level, oldest first. Sorted here: in SQL the sort carries every wide row (and spills
  // to disk on a large tree), here it is a comparison of three fields.
  const sorted = result.rows
    .map((row) => ({ row, time: row.timestamp.getTime(), id: Number(row.event_id) }))
    .sort((a, b) => a.row.depth - b.row.depth || a.time - b.time || a.id - b.id)
    .map(({ row }) => row);
  const rows = overLimit ? sorted.slice(0, bounds.nodeLimit) : sorted;
  const nodes = rows.map(
    (row): TreeNode => ({
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
    }),
  );
  const totals: TreeTotals = {
    amountUnits: nodes.reduce((sum, node) => sum + node.amountUnits, 0n),
    transactionCount: new Set(nodes.map((node) => node.txHash)).size,
    agentCount: new Set(nodes.map((node) => node.agentId)).size,
  };
  return { nodes, totals, truncated: overLimit || rows.some((row) => row.cut_below) };
}
