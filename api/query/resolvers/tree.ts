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
  // Endpoints resolved here, in one batch, so every field of a node is a plain value: graphql-js
  // then completes the list synchronously instead of awaiting one promise per node (5,000 nodes:
  // most of the time the GraphQL layer took, measured with bench/api/payment-tree.ts).
  const hashes = [...new Set(tree.nodes.map((node) => node.endpointHash))];
  const known = await context.loaders.endpointByHash.loadMany(hashes);
  const endpoints = new Map<string, string>();
  hashes.forEach((hash, i) => {
    const entry = known[i];
    endpoints.set(hash, entry !== null && entry !== undefined && !(entry instanceof Error) ? entry.endpoint : hash);
  });
  return {
    rootTxHash,
    nodes: tree.nodes.map((node) => toNode(node, endpoints.get(node.endpointHash) ?? node.endpointHash)),
    totals: {
      amount: formatUsdcFixed(tree.totals.amountUnits),
      amountUnits: tree.totals.amountUnits.toString(),
      transactionCount: tree.totals.transactionCount,
      agentCount: tree.totals.agentCount,
    },
    truncated: tree.truncated,
  };
}

function toNode(node: TreeNode, endpoint: string): Record<string, unknown> {
  return {
    endpoint,
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

/**
 * PaymentTreeNode.endpoint: the gateway's text for the hash, else the hash. Nodes built by
 * `paymentTree` carry it already (a plain value, no promise); otherwise it is batched.
 */
export function nodeEndpoint(
  node: { endpointHash: string; endpoint?: unknown },
  _args: unknown,
  context: ApiContext,
): string | Promise<string> {
  if (typeof node.endpoint === "string") return node.endpoint;
  return context.loaders.endpointByHash.load(node.endpointHash).then((known) => known?.endpoint ?? node.endpointHash);
}
