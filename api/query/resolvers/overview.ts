/**
 * The dashboard's reads at scale (many agents): a page of agents by search, daily-budget use
 * ranked by share, rejections by reason, failing webhook deliveries, the indexer's progress, and
 * runs with their totals. Each is one bounded, account-scoped query (api/query/read/overview.ts).
 */
import type { ApiContext } from "../context.js";
import { searchAgents } from "../read/agents.js";
import {
  type BudgetOrder,
  type BudgetStateName,
  budgetUse as readBudgetUse,
  indexerCheckpoint,
  listRuns,
  type RunOrder,
  rejectionsByReason,
  webhookFailures,
} from "../read/overview.js";
import { badInput } from "../../shared/errors.js";
import { formatUsdcFixed } from "../../shared/money.js";
import type { AgentRow } from "../../shared/rows.js";
import { parseIntInRange, parseSince } from "../../shared/validation.js";
import { requireAgent } from "./common.js";

export const PAGE_FIRST_DEFAULT = 50;
export const PAGE_FIRST_MAX = 100;
/** Offsets are bounded: deeper pages are reached by narrowing (search, state, agent). */
export const PAGE_OFFSET_MAX = 100_000;
const SEARCH_MAX_CHARS = 128;

function page(args: { first?: number | null; offset?: number | null }): { limit: number; offset: number } {
  return {
    limit: parseIntInRange("first", args.first, PAGE_FIRST_DEFAULT, 1, PAGE_FIRST_MAX),
    offset: parseIntInRange("offset", args.offset, 0, 0, PAGE_OFFSET_MAX),
  };
}

function since(argument: string, value: string | null | undefined, fallback: string, context: ApiContext): Date {
  return parseSince(argument, value ?? fallback, context.now);
}

const money = (units: string | null): string | null => (units === null ? null : formatUsdcFixed(BigInt(units)));

export async function agentList(
  _: unknown,
  args: { search?: string | null; includeArchived?: boolean | null; first?: number | null; offset?: number | null },
  context: ApiContext,
): Promise<{ nodes: AgentRow[]; totalCount: number }> {
  const search = args.search?.trim() ?? "";
  if (search.length > SEARCH_MAX_CHARS) throw badInput("search", `must be at most ${SEARCH_MAX_CHARS} characters`);
  const { rows, totalCount } = await searchAgents(context.deps.pool, context.caller.accountId, {
    search: search === "" ? undefined : search,
    includeArchived: args.includeArchived === true,
    ...page(args),
  });
  return { nodes: rows, totalCount };
}

export async function budgetUse(
  _: unknown,
  args: { state?: BudgetStateName | null; order?: BudgetOrder | null; first?: number | null; offset?: number | null },
  context: ApiContext,
): Promise<Record<string, unknown>> {
  // Usage from the primary, as Query.policy reads it: what the gateway enforces.
  const result = await readBudgetUse(context.deps.primary, context.caller.accountId, context.now, {
    state: args.state ?? undefined,
    order: args.order ?? "use",
    ...page(args),
  });
  return {
    totalCount: result.totalCount,
    warningCount: result.warningCount,
    exhaustedCount: result.exhaustedCount,
    nodes: result.rows.map((row) => ({
      agentId: row.agent_id,
      dailyBudget: money(row.daily_budget_units),
      dailyBudgetUnits: row.daily_budget_units,
      usedToday: money(row.used_units),
      usedTodayUnits: row.used_units,
      percent: (Number(row.basis_points) / 100).toFixed(2),
      budgetState: row.state,
      windowResetsAt: row.window_resets_at?.toISOString() ?? null,
    })),
  };
}

export async function rejectionCounts(
  _: unknown,
  args: { since?: string | null },
  context: ApiContext,
): Promise<{ reasonCode: string; count: number }[]> {
  const rows = await rejectionsByReason(context.deps.pool, context.caller.accountId, since("since", args.since, "1h", context));
  return rows.map((row) => ({ reasonCode: row.reason_code, count: Number(row.n) }));
}

export async function webhookHealth(_: unknown, args: { since?: string | null }, context: ApiContext): Promise<Record<string, unknown>> {
  const from = since("since", args.since, "24h", context);
  const result = await webhookFailures(context.deps.pool, context.caller.accountId, from);
  return {
    since: from.toISOString(),
    failed: result.failed,
    retrying: result.retrying,
    lastError: result.lastError,
  };
}

export async function indexerStatus(_: unknown, _args: unknown, context: ApiContext): Promise<Record<string, unknown> | null> {
  const row = await indexerCheckpoint(context.deps.pool);
  if (row === null) return null;
  return {
    slot: row.slot,
    checkpointAt: row.updated_at.toISOString(),
    secondsSinceCheckpoint: Math.max(0, Math.floor((context.now.getTime() - row.updated_at.getTime()) / 1000)),
    latestPaymentAt: row.latest_block_time?.toISOString() ?? null,
  };
}

export async function runs(
  _: unknown,
  args: { agentId?: string | null; order?: RunOrder | null; first?: number | null; offset?: number | null },
  context: ApiContext,
): Promise<Record<string, unknown>> {
  const agentKey =
    args.agentId === null || args.agentId === undefined ? undefined : (await requireAgent(context, "agentId", args.agentId)).agent_id;
  const { rows, totalCount } = await listRuns(context.deps.pool, context.caller.accountId, {
    agentKey,
    order: args.order ?? "recent",
    ...page(args),
  });
  return {
    totalCount,
    nodes: rows.map((row) => ({
      rootTxHash: row.root_tx_hash,
      agentId: row.agent_id,
      timestamp: row.timestamp.toISOString(),
      total: money(row.total_units),
      totalUnits: row.total_units,
      paymentCount: Number(row.payment_count),
      agentCount: Number(row.agent_count),
      budget: money(row.budget_units),
      budgetUnits: row.budget_units,
      budgetSpent: money(row.budget_spent_units),
      budgetSpentUnits: row.budget_spent_units,
    })),
  };
}
