/**
 * Spend summary (spec 4.8 `cli spend`) and metrics (spec 4.2), shared by GraphQL and the REST
 * route so both return the same data.
 */
import type { ApiContext } from "./context.js";
import { formatUsdcFixed, ratio } from "../shared/money.js";
import { readMetricBuckets, readSpendCells, readViolationBuckets } from "./read/spend.js";
import { requireAgent } from "./resolvers/common.js";
import { parseMetricNames, parseResolution, parseWindow } from "../shared/validation.js";

const DOMAINS_MAX = 50;
const SHARE_PLACES = 6;
const PERCENT_PLACES = 2;

export interface WindowArgs {
  window?: string | null;
  range?: { from: string; to: string } | null;
}

export async function spendSummary(context: ApiContext, args: WindowArgs & { agentId?: string | null }): Promise<Record<string, unknown>> {
  const window = parseWindow(args.window, args.range, context.now);
  const agent = args.agentId === null || args.agentId === undefined ? undefined : await requireAgent(context, "agentId", args.agentId);
  const cells = await readSpendCells(context.deps.pool, { accountId: context.caller.accountId, agentId: agent?.agent_id, window });
  const total = cells.reduce((sum, cell) => sum + cell.amountUnits, 0n);
  const txCount = cells.reduce((sum, cell) => sum + cell.txCount, 0n);
  const group = (key: (cell: (typeof cells)[number]) => string): { key: string; amount: bigint; count: bigint }[] => {
    const groups = new Map<string, { key: string; amount: bigint; count: bigint }>();
    for (const cell of cells) {
      const k = key(cell);
      const entry = groups.get(k) ?? { key: k, amount: 0n, count: 0n };
      entry.amount += cell.amountUnits;
      entry.count += cell.txCount;
      groups.set(k, entry);
    }
    return [...groups.values()].sort((a, b) => (a.amount === b.amount ? a.key.localeCompare(b.key) : a.amount > b.amount ? -1 : 1));
  };
  const share = (entry: { key: string; amount: bigint; count: bigint }) => ({
    amount: formatUsdcFixed(entry.amount),
    amountUnits: entry.amount.toString(),
    percent: ratio(entry.amount, total, PERCENT_PLACES, 100n),
    txCount: Number(entry.count),
  });
  return {
    agentId: agent?.public_id ?? null,
    window: window.label,
    from: window.from.toISOString(),
    to: window.to.toISOString(),
    total: formatUsdcFixed(total),
    totalUnits: total.toString(),
    txCount: Number(txCount),
    byProtocol: group((cell) => cell.protocol).map((entry) => ({ protocol: entry.key, ...share(entry) })),
    byDomain: group((cell) => cell.domain)
      .slice(0, DOMAINS_MAX)
      .map((entry) => ({ domain: entry.key, ...share(entry) })),
    byAgent: group((cell) => cell.agentId).map((entry) => ({ agentId: entry.key, ...share(entry) })),
  };
}

export interface MetricsArgs extends WindowArgs {
  /** One agent; absent or null = every agent of the account (the dashboard's protocol tab). */
  agentId?: string | null;
  metrics?: readonly string[] | null;
  resolution?: string | null;
}

/** Spec 4.2 response body; a series not asked for is null. */
export async function agentMetrics(context: ApiContext, args: MetricsArgs): Promise<Record<string, unknown>> {
  const names = parseMetricNames(args.metrics);
  const window = parseWindow(args.window, args.range, context.now);
  const resolution = parseResolution(args.resolution, window);
  const agent = args.agentId === null || args.agentId === undefined ? undefined : await requireAgent(context, "agentId", args.agentId);
  const scope = { accountId: context.caller.accountId, agentId: agent?.agent_id, window };
  const wantsBuckets = names.some((name) => name !== "policy_violations");
  const [buckets, violations] = await Promise.all([
    wantsBuckets ? readMetricBuckets(context.deps.pool, scope, resolution.ms) : Promise.resolve([]),
    names.includes("policy_violations") ? readViolationBuckets(context.deps.pool, scope, resolution.ms) : Promise.resolve([]),
  ]);
  // Every bucket of the window, empty ones included, so a chart needs no gap filling.
  const starts: Date[] = [];
  for (let t = window.from.getTime(); t < window.to.getTime(); t += resolution.ms) starts.push(new Date(t));
  const byStart = new Map(buckets.map((bucket) => [bucket.start.getTime(), bucket]));
  const x402 = buckets.reduce((sum, b) => sum + b.x402SpendUnits, 0n);
  const mpp = buckets.reduce((sum, b) => sum + b.mppSpendUnits, 0n);
  const volume = x402 + mpp;
  return {
    agentId: agent?.public_id ?? null,
    window: window.label,
    resolution: resolution.label,
    from: window.from.toISOString(),
    to: window.to.toISOString(),
    metrics: {
      spend: names.includes("spend")
        ? starts.map((start) => {
            const bucket = byStart.get(start.getTime());
            const value = bucket?.spendUnits ?? 0n;
            // The per-protocol volume of the bucket (dashboard protocol tab), beside spec 4.2's value.
            const x402Value = bucket?.x402SpendUnits ?? 0n;
            const mppValue = bucket?.mppSpendUnits ?? 0n;
            return {
              timestamp: start.toISOString(),
              value: formatUsdcFixed(value),
              valueUnits: value.toString(),
              x402Units: x402Value.toString(),
              mppUnits: mppValue.toString(),
            };
          })
        : null,
      tx_count: names.includes("tx_count")
        ? starts.map((start) => ({ timestamp: start.toISOString(), count: Number(byStart.get(start.getTime())?.txCount ?? 0n) }))
        : null,
      policy_violations: names.includes("policy_violations")
        ? violations.map((v) => ({ timestamp: v.start.toISOString(), count: v.count, reason: v.reason }))
        : null,
      protocol_split: names.includes("protocol_split")
        ? {
            x402: ratio(x402, volume, SHARE_PLACES),
            mpp: ratio(mpp, volume, SHARE_PLACES),
            x402Units: x402.toString(),
            mppUnits: mpp.toString(),
          }
        : null,
    },
  };
}
