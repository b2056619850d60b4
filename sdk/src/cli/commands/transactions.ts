/**
 * `cli transactions list|inspect|tree|explorer` (spec 4.8) over `GET /v1/transactions`,
 * `GET /v1/transactions/{txHash}` and `GET /v1/transactions/{txHash}/chain`.
 */
import { ServiceError } from "../../errors.js";
import type { CommandContext } from "../context.js";
import { openInBrowser } from "../explorer.js";
import { endpointText, formatUnits, list, record, text, unitsOf } from "../format.js";
import { durationOption, integerOption, oneOf } from "../input.js";
import { formatFields, formatTable, type Column } from "../table.js";

const PROTOCOLS = ["x402", "mpp"] as const;
export const LIST_LIMIT_MAX = 200;
export const TREE_DEPTH_MAX = 64;

function txPath(txHash: string, suffix = ""): string {
  return `/v1/transactions/${encodeURIComponent(txHash)}${suffix}`;
}

export async function transactionsList(context: CommandContext): Promise<void> {
  const { options } = context;
  const query = {
    agentId: options.agent,
    limit: options.limit === undefined ? undefined : integerOption(options.limit, "limit", 1, LIST_LIMIT_MAX),
    protocol: options.protocol === undefined ? undefined : oneOf(options.protocol, "protocol", PROTOCOLS),
    since: options.since === undefined ? undefined : durationOption(options.since, "since"),
    domain: options.domain,
    after: options.after,
  };
  const answer = await context.transport.request<unknown>("GET", "/v1/transactions", { query });
  if (options.json === true) return context.json(answer);
  const page = record(answer, "answer");
  const rows = list(page.transactions, "transactions");
  if (rows.length === 0) return context.out("No transactions.");
  context.out(renderTransactionList(rows));
  const pageInfo = (page.pageInfo ?? {}) as { hasNextPage?: unknown; endCursor?: unknown };
  if (pageInfo.hasNextPage === true && typeof pageInfo.endCursor === "string") {
    context.out(`More: add --after ${pageInfo.endCursor}`);
  }
}

/**
 * Spec 4.8 columns: transaction hash, protocol, amount, endpoint, time; a STATUS column is added
 * when a rejected payment (spec 2.2) is among the rows. Amounts are bigint base units.
 */
export function renderTransactionList(rows: readonly Record<string, unknown>[]): string {
  const withStatus = rows.some((row) => row.status === "rejected");
  const columns: Column[] = [
    { header: "TX HASH" },
    { header: "PROTOCOL" },
    { header: "AMOUNT", align: "right" },
    { header: "ENDPOINT" },
    { header: "TIME" },
    ...(withStatus ? [{ header: "STATUS" }] : []),
  ];
  const cells = rows.map((row, index) => {
    const line = [
      text(row.txHash),
      text(row.protocol),
      formatUnits(unitsOf(row.amountPaid, `transactions[${index}].amountPaid`)),
      endpointText(row.endpoint),
      text(row.timestamp),
    ];
    if (withStatus)
      line.push(row.status === "rejected" ? `rejected${row.rejectionCode ? ` (${String(row.rejectionCode)})` : ""}` : text(row.status));
    return line;
  });
  return formatTable(columns, cells);
}

export async function transactionsInspect(context: CommandContext): Promise<void> {
  const tx = await context.transport.request<unknown>("GET", txPath(context.args.txHash!));
  if (context.options.json === true) return context.json(tx);
  context.out(renderTransaction(record(tx, "transaction")));
}

export function renderTransaction(tx: Record<string, unknown>): string {
  const fields: [string, string][] = [
    ["Transaction", text(tx.txHash)],
    ["Status", text(tx.status)],
    ["Agent", text(tx.agentId)],
    ["Protocol", text(tx.protocol)],
  ];
  if (tx.rail !== null && tx.rail !== undefined) fields.push(["Rail", text(tx.rail)]);
  fields.push(
    ["Amount", formatUnits(unitsOf(tx.amountPaid, "amountPaid"))],
    ["Endpoint", endpointText(tx.endpoint)],
    ["Policy check", text(tx.policyCheck)],
  );
  if (tx.policyVersion !== null && tx.policyVersion !== undefined) fields.push(["Policy version", text(tx.policyVersion)]);
  if (tx.rejectionReason !== null && tx.rejectionReason !== undefined) fields.push(["Rejection", text(tx.rejectionReason)]);
  fields.push(
    ["Parent", tx.parentTxHash === null || tx.parentTxHash === undefined ? "none (top-level)" : text(tx.parentTxHash)],
    ["Time", text(tx.timestamp)],
    ["Explorer", text(tx.solanaExplorer)],
  );
  return formatFields(fields);
}

export async function transactionsTree(context: CommandContext): Promise<void> {
  const maxDepth =
    context.options["max-depth"] === undefined ? undefined : integerOption(context.options["max-depth"], "max-depth", 0, TREE_DEPTH_MAX);
  const tree = await context.transport.request<unknown>("GET", txPath(context.args.rootTxHash!, "/chain"), { query: { maxDepth } });
  if (context.options.json === true) return context.json(tree);
  context.out(renderTree(record(tree, "tree")));
}

export interface TreeTotals {
  readonly amountUnits: bigint;
  readonly transactionCount: number;
  readonly agentCount: number;
}

/** The total line's numbers, summed here in base units over the nodes shown. */
export function treeTotals(nodes: readonly Record<string, unknown>[]): TreeTotals {
  return {
    amountUnits: nodes.reduce((sum, node, index) => sum + unitsOf(node.amountPaid, `transactions[${index}].amountPaid`), 0n),
    transactionCount: new Set(nodes.map((node) => node.txHash)).size,
    agentCount: new Set(nodes.map((node) => node.agentId ?? null)).size,
  };
}

export function totalLine(totals: TreeTotals): string {
  const plural = (count: number, word: string) => `${count} ${word}${count === 1 ? "" : "s"}`;
  return `Total: ${formatUnits(totals.amountUnits)} in ${plural(totals.transactionCount, "transaction")} by ${plural(totals.agentCount, "agent")}`;
}

/**
 * The chain (flat, by depth) as an indented tree: each payment under the one that invoked it,
 * then the total line.
 */
export function renderTree(tree: Record<string, unknown>): string {
  const nodes = list(tree.transactions, "transactions");
  const present = new Set(nodes.map((node) => node.txHash));
  const children = new Map<unknown, Record<string, unknown>[]>();
  const roots: Record<string, unknown>[] = [];
  for (const node of nodes) {
    const parent = node.parentTxHash;
    if (node.depth === 0 || parent === null || parent === undefined || !present.has(parent)) roots.push(node);
    else children.set(parent, [...(children.get(parent) ?? []), node]);
  }
  const rows: string[][] = [];
  const seen = new Set<unknown>();
  const walk = (node: Record<string, unknown>, prefix: string, branch: string) => {
    // The chain is a tree by construction; a repeated hash is not walked twice.
    if (seen.has(node.txHash)) return;
    seen.add(node.txHash);
    rows.push([
      `${prefix}${branch}${text(node.txHash)}`,
      text(node.agentId),
      text(node.protocol),
      formatUnits(unitsOf(node.amountPaid, "amountPaid")),
      endpointText(node.endpoint),
      text(node.timestamp),
    ]);
    const kids = children.get(node.txHash) ?? [];
    const childPrefix = prefix + (branch === "" ? "" : branch === "└─ " ? "   " : "│  ");
    kids.forEach((kid, index) => {
      walk(kid, childPrefix, index === kids.length - 1 ? "└─ " : "├─ ");
    });
  };
  for (const root of roots) walk(root, "", "");
  const columns: Column[] = [
    { header: "TRANSACTION" },
    { header: "AGENT" },
    { header: "PROTOCOL" },
    { header: "AMOUNT", align: "right" },
    { header: "ENDPOINT" },
    { header: "TIME" },
  ];
  const lines = [formatTable(columns, rows)];
  if (tree.truncated === true) lines.push("(truncated: deeper or further payments are not shown; the total covers the rows above)");
  lines.push(totalLine(treeTotals(nodes)));
  return lines.join("\n");
}

export async function transactionsExplorer(context: CommandContext): Promise<void> {
  const tx = record(await context.transport.request<unknown>("GET", txPath(context.args.txHash!)), "transaction");
  const url = tx.solanaExplorer;
  if (typeof url !== "string" || !/^https?:\/\//i.test(url)) {
    throw new ServiceError(`transaction ${context.args.txHash} has no explorer link`);
  }
  if (context.options.print !== true && (await openInBrowser(url, context.env))) {
    context.out(`Opened ${url}`);
    return;
  }
  context.out(url);
}
