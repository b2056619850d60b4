/**
 * The baseline of the paymentTree bench: how a naive GraphQL schema resolves a tree. A `root`
 * resolver fetches the root; a `children` field resolver fetches one node's children, one query
 * per node, with no recursive query and no DataLoader. graphql-js runs the resolvers of one
 * list's items concurrently, so each level's queries are issued together (bounded by the pool),
 * and the next level starts when they have all answered. Totals are summed in JavaScript.
 * Same answer as `loadPaymentTree`: only payments of the account's agents, a foreign payment left
 * out with everything below it (its children are never asked for), depth relative to the root.
 */
import type pg from "pg";

export interface BaselineNode {
  readonly txHash: string;
  readonly parentTxHash: string | null;
  /** Below the root: the root is 0. */
  readonly depth: number;
  readonly agentId: string;
  readonly amountUnits: bigint;
}

export interface BaselineTree {
  readonly nodes: readonly BaselineNode[];
  readonly totals: { readonly amountUnits: bigint; readonly transactionCount: number; readonly agentCount: number };
  readonly truncated: boolean;
  readonly queries: number;
}

interface Row {
  tx_hash: string;
  parent_tx_hash: string | null;
  agent_id: string;
  amount_units: string;
}

// The node fields `loadPaymentTree` returns, so the two differ only in how they walk the tree.
const NODE = `t.tx_hash, a.agent_id, t.agent AS wallet_address, t.amount_units::text AS amount_units, t.protocol,
              t.endpoint_hash, t."timestamp", t.explorer_url, t.status`;
const ROOT = `
  SELECT ${NODE}, NULL::text AS parent_tx_hash
  FROM transactions t JOIN agents a ON a.wallet_address = t.agent AND a.account_id = $2
  WHERE t.tx_hash = $1`;
const CHILDREN = `
  SELECT ${NODE}, e.parent_tx_hash
  FROM payment_edges e
  JOIN transactions t ON t.event_id = e.child_event_id
  JOIN agents a ON a.wallet_address = t.agent AND a.account_id = $2
  WHERE e.parent_tx_hash = $1
  ORDER BY t."timestamp", t.event_id`;
const HAS_CHILDREN = "SELECT 1 FROM payment_edges WHERE parent_tx_hash = $1 LIMIT 1";

export async function resolveTreePerLevel(
  pool: pg.Pool,
  accountId: string,
  rootTxHash: string,
  limits: { readonly maxDepth: number; readonly nodeLimit: number },
): Promise<BaselineTree> {
  let queries = 1;
  const toNode = (row: Row, depth: number): BaselineNode => ({
    txHash: row.tx_hash,
    parentTxHash: row.parent_tx_hash,
    depth,
    agentId: row.agent_id,
    amountUnits: BigInt(row.amount_units),
  });
  const roots = (await pool.query<Row>(ROOT, [rootTxHash, accountId])).rows.map((row) => toNode(row, 0));
  const nodes: BaselineNode[] = [...roots];
  let level = roots;
  let truncated = false;
  for (let depth = 1; level.length > 0; depth += 1) {
    if (depth > limits.maxDepth) {
      // A node below the limit exists if any node of the last level has a child.
      truncated = (await Promise.all(level.map((node) => pool.query(HAS_CHILDREN, [node.txHash])))).some(
        (result) => result.rows.length > 0,
      );
      queries += level.length;
      break;
    }
    const children = await Promise.all(level.map((node) => pool.query<Row>(CHILDREN, [node.txHash, accountId])));
    queries += level.length;
    level = children.flatMap((result) => result.rows.map((row) => toNode(row, depth)));
    if (nodes.length + level.length > limits.nodeLimit) {
      nodes.push(...level.slice(0, limits.nodeLimit - nodes.length));
      truncated = true;
      break;
    }
    nodes.push(...level);
  }
  return {
    nodes,
    totals: {
      amountUnits: nodes.reduce((sum, node) => sum + node.amountUnits, 0n),
      transactionCount: nodes.length,
      agentCount: new Set(nodes.map((node) => node.agentId)).size,
    },
    truncated,
    queries,
  };
}
