/**
 * Spec 1.6 / 4.7 getChain / 4.8 `transactions tree`: the payments under a root transaction as a
 * flat list (txHash, parentTxHash, depth from the root), bounded by `maxDepth` and `nodeLimit`
 * (GraphQL cannot recurse, so clients rebuild the tree from parent links). Read from the closure
 * table (payment_closure: one range scan, its rows carrying the nodes' columns), with a recursive
 * walk over payment_edges as the fallback; both give the same answer
 * (test/api/payment-tree-closure.test.ts).
 *
 * Isolation: the root must be paid by one of the caller's agents (else null), and the tree only
 * enters payments whose payer is one of the caller's agents: a payment by another account's
 * agent is left out together with everything below it. Totals count only what is returned.
 */
import type pg from "pg";
import { CLOSURE_NODE_COLUMNS } from "../../../indexer/store/projections.js";

export interface TreeNode {
  readonly txHash: string;
  /** Null for the root (whatever the root's own parent is: depth is relative to the root). */
  readonly parentTxHash: string | null;
  readonly depth: number;
  readonly agentId: string;
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
 * One row as an array (no object per row): event_id, tx_hash, parent_tx_hash, depth, agent_id
 * (null for another account's payer), amount_units, protocol, endpoint_hash, timestamp (epoch
 * milliseconds), explorer_url, status, cut_below. Numbers come as text and the time as epoch
 * milliseconds: no numeric or timestamp parsing by the driver, only what the node needs.
 */
type TreeRow = [string, string, string | null, number, string | null, string, "x402" | "mpp", string, string, string, string, boolean];

// A node's narrow columns, after its depth and agent: `t` the payment or its closure row.
const NODE_COLUMNS = `t.amount_units::text, t.protocol, t.endpoint_hash,
       floor(extract(epoch FROM t."timestamp") * 1000)::text, t.explorer_url`;

/** The page of the root's closure after the page key ($4, $5), at most $6 rows, read while `gate` holds. */
const closurePage = (columns: string, gate: string): string => `
  SELECT ${columns} FROM payment_closure
  WHERE ancestor_tx_hash = $2 AND distance <= $3 AND (distance, descendant_event_id) > ($4::int, $5::bigint) AND ${gate}
  ORDER BY distance, descendant_event_id LIMIT $6`;

// The descendants of the root, a page at a time: one range scan of payment_closure's primary key
// (ancestor, distance, descendant), kept by the projection, in (depth, payment) order after the
// page key ($4, $5), each row carrying its payment's node columns (no lookup per node); its status
// from the payments not yet finalized (`transactions_confirmed`, the newest ~32 slots on a live
// cluster), read whole and hashed (a probe per node costs more) while they are at most $7; past
// that (finality not reported for a while), only the page's are probed, so a tree read does not
// grow with every tenant's unfinalized payments (docs/performance.md); the root's own payments
// (depth 0) on the first page. Rows of every payer: which ones the account sees is decided in
// `loadPaymentTree`, from the parent links. A node at maxDepth is cut below if it has a child,
// probed per node only when the closure holds some payment one level deeper (`below`: one probe
// instead of one per node of the deepest level, most often the largest).
const CLOSURE_SQL = `
WITH
wallets AS MATERIALIZED (SELECT wallet_address, public_id FROM agents WHERE account_id = $1),
unfinalized AS MATERIALIZED (SELECT event_id FROM transactions WHERE status = 'confirmed' LIMIT $7::int + 1),
many AS MATERIALIZED (SELECT count(*) > $7::int AS probed FROM unfinalized),
confirmed AS MATERIALIZED (
  SELECT event_id FROM unfinalized WHERE NOT (SELECT probed FROM many)
  UNION ALL
  SELECT x.event_id FROM (${closurePage("descendant_event_id", "(SELECT probed FROM many)")}) c
  JOIN transactions x ON x.event_id = c.descendant_event_id AND x.status = 'confirmed'),
root AS MATERIALIZED (
  SELECT t.event_id, a.public_id FROM transactions t JOIN wallets a ON a.wallet_address = t.agent WHERE t.tx_hash = $2),
below AS MATERIALIZED (
  SELECT EXISTS (SELECT 1 FROM payment_closure WHERE ancestor_tx_hash = $2 AND distance = $3 + 1) AS deeper)
SELECT t.event_id::text, t.tx_hash, NULL::text, 0, r.public_id, ${NODE_COLUMNS}, t.status,
       ($3 = 0 AND EXISTS (SELECT 1 FROM payment_edges x WHERE x.parent_tx_hash = t.tx_hash))
FROM root r JOIN transactions t ON t.event_id = r.event_id WHERE $4::int = 0
UNION ALL
SELECT t.descendant_event_id::text, t.tx_hash, t.parent_tx_hash, t.distance, a.public_id, ${NODE_COLUMNS},
       CASE WHEN p.event_id IS NULL THEN 'finalized' ELSE 'confirmed' END,
       (t.distance = $3 AND (SELECT deeper FROM below)
        AND EXISTS (SELECT 1 FROM payment_edges x WHERE x.parent_tx_hash = t.tx_hash))
FROM (${closurePage(`distance, descendant_event_id, ${CLOSURE_NODE_COLUMNS}`, "EXISTS (SELECT 1 FROM root)")}) t
LEFT JOIN wallets a ON a.wallet_address = t.agent
LEFT JOIN confirmed p ON p.event_id = t.descendant_event_id`;

// A recursive walk down payment_edges from the root, one level per step, entering only edges whose
// child payment is paid by one of the account's agents (a foreign payment and everything below it
// stay out), bounded by maxDepth, carrying narrow keys and joining each kept node's payment once.
// Within nodeLimit + 1, the nearest levels first, then chain order. What `loadPaymentTree` falls
// back to when the closure's pages are mostly other accounts' payments. Same row shape.
const WALK_SQL = `
WITH RECURSIVE
wallets AS MATERIALIZED (SELECT wallet_address, public_id FROM agents WHERE account_id = $1),
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
SELECT b.event_id::text, b.tx_hash, b.parent_tx_hash, b.depth, a.public_id, ${NODE_COLUMNS}, t.status,
       (b.depth = $3 AND EXISTS (SELECT 1 FROM payment_edges x WHERE x.parent_tx_hash = b.tx_hash))
FROM bounded b
JOIN transactions t ON t.event_id = b.event_id
JOIN wallets a ON a.wallet_address = t.agent`;

/**
 * Closure rows read for a tree before falling back to the walk: beyond this many per node asked
 * (and a few pages more), the pages are mostly payments the account does not see (another
 * account's subtrees below its tree), which the walk leaves out at their top instead of reading them.
 */
export const closureReadBound = (nodes: number): number => 4 * nodes + 1_024;

/**
 * Payments not yet finalized that a tree read hashes whole; past this many it probes them per node.
 * On a live cluster they are the newest ~32 slots' payments, far fewer.
 */
export const UNFINALIZED_HASHED_MAX = 4_096;

/**
 * The nodes the account sees, nearest levels first then chain order, at most `limit`, from the
 * closure's pages: a payment is seen when one of the account's agents paid it and its parent
 * transaction was seen one level up (the root's at depth 0), as the walk enters it. Null when the
 * pages hold more than `maxRows` rows (the caller walks instead).
 */
async function closureNodes(
  pool: pg.Pool,
  accountId: string,
  rootTxHash: string,
  maxDepth: number,
  limit: number,
  maxRows: number,
  unfinalizedHashedMax: number,
): Promise<TreeRow[] | null> {
  const kept: TreeRow[] = [];
  // The transactions seen at the level being read and at the one above it.
  let above = new Set<string>();
  let level = new Set<string>();
  let depth = 0;
  let after: [number, string] = [0, "0"];
  let read = 0;
  for (;;) {
    // What is still wanted, and a sixteenth more for the payments left out.
    const want = limit - kept.length;
    const pageSize = want + Math.max(64, Math.ceil(want / 16));
    const { rows } = await pool.query<TreeRow>({
      text: CLOSURE_SQL,
      values: [accountId, rootTxHash, maxDepth, after[0], after[1], pageSize, unfinalizedHashedMax],
      rowMode: "array",
    });
    // No root (not the account's payment), or the last page ended the closure exactly.
    if (rows.length === 0) return kept;
    read += rows.length;
    // Level by level (a parent's level is decided before its children's), each in payment order.
    const levels = byLevel(rows);
    for (const levelRows of levels) {
      const rowDepth = levelRows[0]![3];
      if (rowDepth !== depth) {
        above = rowDepth === depth + 1 ? level : new Set();
        level = new Set();
        depth = rowDepth;
      }
      for (const row of levelRows) {
        // The root's own payments (depth 0) need no parent; the others one kept a level up.
        if (row[4] !== null && (depth === 0 || above.has(row[2]!))) {
          level.add(row[1]);
          kept.push(row);
          if (kept.length === limit) return kept;
        }
      }
    }
    // A page shorter than asked (the root's rows aside) ends the closure.
    let closureRows = 0;
    for (const row of rows) if (row[3] > 0) closureRows += 1;
    if (closureRows < pageSize) return kept;
    const lastLevel = levels[levels.length - 1]!;
    const last = lastLevel[lastLevel.length - 1]!;
    if (read > maxRows) return null;
    after = [last[3], last[0]];
  }
}

/** `rows` by depth, nearest first, each level in payment order (most often already so). */
function byLevel(rows: readonly TreeRow[]): TreeRow[][] {
  const levels: TreeRow[][] = [];
  for (const row of rows) (levels[row[3]] ??= []).push(row);
  const ordered: TreeRow[][] = [];
  for (const level of levels) {
    if (level === undefined) continue;
    let sorted = true;
    for (let i = 1; i < level.length && sorted; i += 1) sorted = Number(level[i - 1]![0]) < Number(level[i]![0]);
    if (!sorted) level.sort((a, b) => Number(a[0]) - Number(b[0]));
    ordered.push(level);
  }
  return ordered;
}

/**
 * The tree under `rootTxHash` as the account sees it; null when the root is not a payment of one
 * of its agents. Read from the closure's pages (one statement unless payments the account does not
 * see fill them), else by the walk. `unfinalizedHashedMax`: see UNFINALIZED_HASHED_MAX (tests
 * lower it to read statuses by probe on a small forest).
 */
export async function loadPaymentTree(
  pool: pg.Pool,
  accountId: string,
  rootTxHash: string,
  bounds: TreeBounds,
  unfinalizedHashedMax = UNFINALIZED_HASHED_MAX,
): Promise<PaymentTree | null> {
  checkBounds(bounds);
  const wanted = bounds.nodeLimit + 1;
  const rows =
    (await closureNodes(pool, accountId, rootTxHash, bounds.maxDepth, wanted, closureReadBound(wanted), unfinalizedHashedMax)) ??
    (await walkRows(pool, accountId, rootTxHash, bounds));
  return treeOf(rows, bounds);
}

/** The same tree by the recursive walk alone (one statement): the loader's fallback, and its reference. */
export async function walkPaymentTree(
  pool: pg.Pool,
  accountId: string,
  rootTxHash: string,
  bounds: TreeBounds,
): Promise<PaymentTree | null> {
  checkBounds(bounds);
  return treeOf(await walkRows(pool, accountId, rootTxHash, bounds), bounds);
}

function checkBounds(bounds: TreeBounds): void {
  if (!Number.isInteger(bounds.maxDepth) || bounds.maxDepth < 0) throw new RangeError("maxDepth must be an integer >= 0");
  if (!Number.isInteger(bounds.nodeLimit) || bounds.nodeLimit < 1) throw new RangeError("nodeLimit must be an integer >= 1");
}

async function walkRows(pool: pg.Pool, accountId: string, rootTxHash: string, bounds: TreeBounds): Promise<TreeRow[]> {
  const values = [accountId, rootTxHash, bounds.maxDepth, bounds.nodeLimit];
  return (await pool.query<TreeRow>({ text: WALK_SQL, values, rowMode: "array" })).rows;
}

/** The tree of the account's rows (at most nodeLimit + 1, the nearest levels first, then chain order). */
function treeOf(rows: readonly TreeRow[], bounds: TreeBounds): PaymentTree | null {
  if (rows.length === 0) return null;
  const overLimit = rows.length > bounds.nodeLimit;
  // Level by level, oldest first. Sorted here: in SQL the sort carries every wide row (and spills
  // to disk on a large tree), here it is a comparison of three numbers.
  const keyed = rows.map((row) => ({ row, depth: row[3], time: Number(row[8]), id: Number(row[0]) }));
  keyed.sort((a, b) => a.depth - b.depth || a.time - b.time || a.id - b.id);
  const kept = overLimit ? keyed.slice(0, bounds.nodeLimit) : keyed;
  let cut = false;
  const nodes = kept.map(({ row, time }): TreeNode => {
    if (row[11]) cut = true;
    return {
      txHash: row[1],
      parentTxHash: row[2],
      depth: row[3],
      agentId: row[4]!,
      amountUnits: BigInt(row[5]),
      protocol: row[6],
      endpointHash: row[7],
      timestamp: new Date(time),
      explorerUrl: row[9],
      status: row[10],
    };
  });
  const totals: TreeTotals = {
    amountUnits: nodes.reduce((sum, node) => sum + node.amountUnits, 0n),
    transactionCount: new Set(nodes.map((node) => node.txHash)).size,
    agentCount: new Set(nodes.map((node) => node.agentId)).size,
  };
  return { nodes, totals, truncated: overLimit || cut };
}
