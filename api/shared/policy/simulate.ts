/**
 * `simulatePolicy(agentId, policy, window)`: the backtest use case both REST
 * (`POST /v1/policies/{agentId}/backtest`) and GraphQL (`Query.simulatePolicy`) call. It parses the
 * candidate policy (the `PUT /v1/policies/{agentId}` body's form, validated as a whole policy:
 * refusals name the field, as `policies.set` does) and the window (`30d`: 1h to 90d back from
 * now), reads the agent's attempts and the usage standing at the window's start
 * (./attempts.ts), and replays them (./backtest.ts). Reads only: nothing moves, no counter changes.
 */
import type { Db } from "../../../indexer/db/database.js";
import { badRequest } from "../errors.js";
import { formatUsdcFixed } from "../money.js";
import { readAttempts, readStartUsage } from "./attempts.js";
import { type AmountCount, backtest, type BacktestDecision, type BacktestTotals, MAX_BACKTEST_ATTEMPTS } from "./backtest.js";
import { applyPatch, EMPTY_POLICY, parsePolicyPatch, type Policy } from "./policy.js";
import { RATE_WINDOW_MS } from "./windows.js";

export const MIN_BACKTEST_WINDOW_MS = 3_600_000;
export const MAX_BACKTEST_WINDOW_MS = 90 * 86_400_000;
/** Per-payment decisions one answer lists at most (the totals always cover every attempt). */
export const BACKTEST_PAYMENTS_DEFAULT = 1_000;
export const BACKTEST_PAYMENTS_MAX = 10_000;

const WINDOW = /^([1-9]\d{0,4})([mhd])$/;
const UNIT_MS = { m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** `"30d"` → milliseconds, 1h to 90d; BAD_USER_INPUT naming `window` otherwise. */
export function parseBacktestWindow(text: unknown): number {
  const match = typeof text === "string" ? WINDOW.exec(text) : null;
  const ms = match === null ? null : Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS];
  if (ms === null || ms < MIN_BACKTEST_WINDOW_MS || ms > MAX_BACKTEST_WINDOW_MS) {
    throw badRequest("window", `must be a duration from 1h to 90d such as 24h or 30d, got ${JSON.stringify(text)}`);
  }
  return ms;
}

/**
 * The candidate, in the form of a `PUT /v1/policies/{agentId}` body (money as `{ usdc }`), taken as
 * a whole policy: an omitted field is no limit. InvalidPolicyError (BAD_USER_INPUT, `field`) when
 * a field is invalid.
 */
export function parseCandidatePolicy(body: unknown): Policy {
  return applyPatch(EMPTY_POLICY, parsePolicyPatch(body));
}

/** How many decisions to list; BAD_USER_INPUT naming `limit` outside 0..BACKTEST_PAYMENTS_MAX. */
export function parseBacktestLimit(value: unknown): number {
  if (value === undefined || value === null) return BACKTEST_PAYMENTS_DEFAULT;
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0 || value > BACKTEST_PAYMENTS_MAX) {
    throw badRequest("limit", `must be an integer from 0 to ${BACKTEST_PAYMENTS_MAX}`);
  }
  return value;
}

export interface Simulation {
  readonly from: Date;
  readonly to: Date;
  readonly totals: BacktestTotals;
  /** The first `limit` decisions, oldest first. */
  readonly decisions: readonly BacktestDecision[];
  /** The window held more than MAX_BACKTEST_ATTEMPTS attempts: the oldest that many were replayed. */
  readonly truncated: boolean;
}

/** Replays the agent's attempts of the `windowMs` before `now` under `policy` (validated). */
export async function simulatePolicy(
  db: Db,
  agentId: string,
  policy: Policy,
  windowMs: number,
  now: Date,
  limit: number,
): Promise<Simulation> {
  const from = new Date(now.getTime() - windowMs);
  const recorded = await readAttempts(db, agentId, from, now, MAX_BACKTEST_ATTEMPTS);
  const start = await readStartUsage(db, agentId, from, {
    rateCalls: policy.rateLimit?.calls ?? 0,
    rateWindowMs: policy.rateLimit === null ? 0 : RATE_WINDOW_MS[policy.rateLimit.window],
    domains: policy.approval?.firstPaymentToDomain === true ? recorded.domains : null,
    endpointBudgets: policy.endpointBudgets,
  });
  const result = backtest(policy, recorded.attempts, start);
  return { from, to: now, totals: result.totals, decisions: result.decisions.slice(0, limit), truncated: recorded.truncated };
}

/** Money as every surface prints it here: the decimal string and the base units. */
export function amountView(units: bigint): { readonly amount: string; readonly amountUnits: string } {
  return { amount: formatUsdcFixed(units), amountUnits: units.toString() };
}

const countView = (entry: AmountCount) => ({ count: entry.count, ...amountView(entry.amountUnits) });

/**
 * The answer REST and GraphQL share (GraphQL `PolicySimulation`): money as decimal strings with
 * their base units, times ISO 8601, the agent by its public id.
 */
export function simulationView(publicAgentId: string, window: string, simulation: Simulation): Record<string, unknown> {
  const { totals } = simulation;
  return {
    agentId: publicAgentId,
    window,
    from: simulation.from.toISOString(),
    to: simulation.to.toISOString(),
    truncated: simulation.truncated,
    totals: {
      attempts: totals.attempts,
      passed: countView(totals.passed),
      refused: countView(totals.refused),
      needsApproval: countView(totals.needsApproval),
      changed: totals.changed,
      refusedByRule: totals.refusedByRule.map((entry) => ({ rule: entry.rule, ...countView(entry) })),
      refusedByDomain: totals.refusedByDomain.map((entry) => ({ domain: entry.domain, ...countView(entry) })),
      needsApprovalByRule: totals.needsApprovalByRule.map((entry) => ({ rule: entry.rule, ...countView(entry) })),
    },
    payments: simulation.decisions.map(({ attempt, outcome, rule, reason, domain }) => ({
      id: attempt.id,
      at: attempt.at.toISOString(),
      endpoint: attempt.endpoint,
      domain,
      ...amountView(attempt.amountUnits),
      protocol: attempt.protocol,
      recorded: attempt.recorded,
      outcome,
      rule,
      reason,
    })),
  };
}
