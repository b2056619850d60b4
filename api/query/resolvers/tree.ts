/** Query.paymentTree (spec 4.7 transactions.getChain, 4.8 transactions tree). */
import type { ApiContext } from "../context.js";
import { formatUsdcFixed } from "../../shared/money.js";
import { loadPaymentTree, type TreeNode } from "../read/payment-tree.js";
import {
  parseIntInRange,
  parseTxHash,
  TREE_DEPTH_DEFAULT,
  TREE_DEPTH_MAX,
  TREE_NODE_LIMIT_DEFAULT,
  TREE_NODE_LIMIT_MAX,
} from "../../shared/validation.js";

export async function paymentTree(
  _: unknown,
  args: { rootTxHash: string; maxDepth?: number | null; nodeLimit?: number | null },
  context: ApiContext,
): Promise<unknown> {
  const rootTxHash = parseTxHash("rootTxHash", args.rootTxHash);
  const maxDepth = parseIntInRange("maxDepth", args.maxDepth, TREE_DEPTH_DEFAULT, 0, TREE_DEPTH_MAX);
  const nodeLimit = parseIntInRange("nodeLimit", args.nodeLimit, TREE_NODE_LIMIT_DEFAULT, 1, TREE_NODE_LIMIT_MAX);
  const tree = await loadPaymentTree(context.deps.pool, context.caller.accountId, rootTxHash, { maxDepth, nodeLimit });
  if (tree === null) return null;
  return {
    rootTxHash,
    nodes: tree.nodes.map(toNode),
    totals: {
      amount: formatUsdcFixed(tree.totals.amountUnits),
      amountUnits: tree.totals.amountUnits.toString(),
      transactionCount: tree.totals.transactionCount,
      agentCount: tree.totals.agentCount,
    },
    truncated: tree.truncated,
  };
}

function toNode(node: TreeNode): Record<string, unknown> {
  return {
    txHash: node.txHash,
    parentTxHash: node.parentTxHash,
    depth: node.depth,
    agentId: node.agentId,
    amount: formatUsdcFixed(node.amountUnits),
    amountUnits: node.amountUnits.toString(),
    protocol: node.protocol,
    endpointHash: node.endpointHash,
    timestamp: node.timestamp.toISOString(),
    solanaExplorer: node.explorerUrl,
    status: node.status,
  };
}

/** PaymentTreeNode.endpoint: the gateway's text for the hash (batched), else the hash. */
export async function nodeEndpoint(node: { endpointHash: string }, _args: unknown, context: ApiContext): Promise<string> {
  const known = await context.loaders.endpointByHash.load(node.endpointHash);
  return known?.endpoint ?? node.endpointHash;
}
