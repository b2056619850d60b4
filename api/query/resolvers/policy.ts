/**
 * Query.policy (spec 2.1 read view: limits, usedToday, rate usage), Query.checkPolicy (the dry
 * run: what the gateway would decide for this payment now; records nothing) and
 * Query.simulatePolicy (the backtest: a candidate policy over the agent's recorded attempts). All
 * delegate to the policy engine in api/shared/policy/ so they and the gateway's hot path are the same code.
 */
import {
  approvalView,
  budgetState,
  checkPolicy as decide,
  EMPTY_POLICY,
  getVersionedPolicy,
  InvalidEndpointError,
  isPolicyInputError,
  MAX_HISTORY_PAGE,
  policyHistory as readHistory,
  readUsage,
} from "../../shared/policy/index.js";
import {
  parseBacktestLimit,
  parseBacktestWindow,
  parseCandidatePolicy,
  simulatePolicy as simulate,
  simulationView,
} from "../../shared/policy/simulate.js";
import type { ApiContext } from "../context.js";
import { badInput, isServiceError } from "../../shared/errors.js";
import { formatUsdcFixed } from "../../shared/money.js";
import { parseAmount } from "../../shared/validation.js";
import { listAgents } from "../../shared/agents.js";
import type { AgentRow } from "../../shared/rows.js";
import { requireAgent } from "./common.js";

const ENDPOINT_MAX_CHARS = 2048;

function money(prefix: string, value: bigint | null): Record<string, string | null> {
  return { [prefix]: value === null ? null : formatUsdcFixed(value), [`${prefix}Units`]: value === null ? null : value.toString() };
}

export async function policy(_: unknown, args: { agentId: string }, context: ApiContext): Promise<Record<string, unknown>> {
  return policyView(context, await requireAgent(context, "agentId", args.agentId));
}

/** Agents one `policies` answer covers at most (each is two small queries). */
export const POLICIES_MAX = 200;

/** Query.policies: the read view of the account's agents, first POLICIES_MAX by id (the dashboard's policies tab). */
export async function policies(
  _: unknown,
  args: { includeArchived?: boolean | null },
  context: ApiContext,
): Promise<Record<string, unknown>[]> {
  const agents = await listAgents(context.deps.pool, context.caller.accountId, args.includeArchived === true);
  return Promise.all(agents.slice(0, POLICIES_MAX).map((agent) => policyView(context, agent)));
}

async function policyView(context: ApiContext, agent: AgentRow): Promise<Record<string, unknown>> {
  // Policies and usage from the primary: what the gateway enforces, never a replica's lagging copy.
  const { policy: current, version } = await getVersionedPolicy(context.deps.primary, agent.agent_id);
  const stored = current === EMPTY_POLICY ? null : (current as typeof current & { updatedAt: Date });
  const usage = await readUsage(context.deps.primary, agent.agent_id, current, context.now);
  return {
    agentId: agent.public_id,
    ...money("dailyBudget", current.dailyBudgetUnits),
    ...money("perCallLimit", current.perCallLimitUnits),
    allowedDomains: current.allowedDomains,
    blockedDomains: current.blockedDomains,
    rateLimit: current.rateLimit,
    protocolPreference: current.protocolPreference,
    ...money("usedToday", usage.usedTodayUnits),
    budgetState: budgetState(current.dailyBudgetUnits, usage.usedTodayUnits, usage.budgetExhausted),
    windowStart: usage.windowStart?.toISOString() ?? null,
    windowResetsAt: usage.windowResetsAt?.toISOString() ?? null,
    rateUsage: { calls: usage.rateCalls, limit: current.rateLimit?.calls ?? null, window: usage.rateWindow },
    approval: approvalObject(current),
    endpointBudgets: (current.endpointBudgets ?? []).map((rule) => ({
      match: rule.match,
      ...money("dailyBudget", rule.dailyBudgetUnits),
      ...money("perCallLimit", rule.perCallLimitUnits),
      rateLimit: rule.rateLimit,
    })),
    version,
    updatedAt: stored?.updatedAt.toISOString() ?? null,
  };
}

/** Query.policyHistory: the agent's versions, newest first, from the primary (what the gateway wrote). */
export async function policyHistory(
  _: unknown,
  args: { agentId: string; first?: number | null; before?: number | null },
  context: ApiContext,
): Promise<Record<string, unknown>[]> {
  const agent = await requireAgent(context, "agentId", args.agentId);
  const first = args.first ?? 20;
  if (!Number.isInteger(first) || first < 1 || first > MAX_HISTORY_PAGE) throw badInput("first", `must be from 1 to ${MAX_HISTORY_PAGE}`);
  if (args.before != null && args.before < 1) throw badInput("before", "must be a version number (1 or more)");
  const versions = await readHistory(context.deps.primary, agent.agent_id, { limit: first, before: args.before ?? null });
  return versions.map((v) => ({
    agentId: agent.public_id,
    version: v.version,
    createdAt: v.createdAt.toISOString(),
    createdBy: v.createdBy,
    hash: v.hash,
    policy: JSON.stringify(v.policy),
  }));
}

function approvalObject(policy: { readonly approval?: Parameters<typeof approvalView>[0] | null }): Record<string, unknown> | null {
  if (policy.approval == null) return null;
  const { aboveUnits, ...view } = approvalView(policy.approval);
  return { ...view, ...money("above", aboveUnits) };
}

export async function checkPolicy(
  _: unknown,
  args: { agentId: string; endpoint: string; amount: string; protocol?: "auto" | "x402" | "mpp" | null },
  context: ApiContext,
): Promise<Record<string, unknown>> {
  const agent = await requireAgent(context, "agentId", args.agentId);
  const amountUnits = parseAmount("amount", args.amount);
  if (args.endpoint.length === 0 || args.endpoint.length > ENDPOINT_MAX_CHARS) {
    throw badInput("endpoint", `must be 1 to ${ENDPOINT_MAX_CHARS} characters`);
  }
  let decision;
  try {
    decision = await decide(
      context.deps.primary,
      agent.agent_id,
      {
        endpoint: args.endpoint,
        amountUnits,
        ...(args.protocol === null || args.protocol === undefined ? {} : { protocol: args.protocol }),
      },
      context.now,
    );
  } catch (error) {
    // The policy module's input errors (bad endpoint, amount) are the caller's, named by argument.
    if (isPolicyInputError(error)) throw badInput(error instanceof InvalidEndpointError ? "endpoint" : "amount", error.message);
    throw error;
  }
  return {
    agentId: agent.public_id,
    allowed: decision.decision === "allow",
    decision: decision.decision,
    reasonCode: decision.reasonCode,
    reason: decision.reason,
    errorClass: decision.errorClass,
    endpointRule: decision.decision === "reject" ? (decision.endpointRule ?? null) : null,
    domain: decision.domain,
    protocol: decision.protocol,
    budgetState: decision.budget.state,
    ...money("budgetUsed", decision.budget.usedUnits),
    ...money("budgetLimit", decision.budget.limitUnits),
    warnings: decision.warnings,
  };
}

/** Candidate policy JSON text at most this long (1,000 domains of 253 characters fit). */
const POLICY_TEXT_MAX_CHARS = 600_000;

export async function simulatePolicy(
  _: unknown,
  args: { agentId: string; policy: string; window: string; limit?: number | null },
  context: ApiContext,
): Promise<Record<string, unknown>> {
  const agent = await requireAgent(context, "agentId", args.agentId);
  try {
    if (args.policy.length > POLICY_TEXT_MAX_CHARS) throw badInput("policy", `is longer than ${POLICY_TEXT_MAX_CHARS} characters`);
    let body: unknown;
    try {
      body = JSON.parse(args.policy);
    } catch {
      throw badInput("policy", "must be JSON text: the policy to try, as PUT /v1/policies/{agentId} takes it");
    }
    const policy = parseCandidatePolicy(body);
    const windowMs = parseBacktestWindow(args.window);
    const limit = parseBacktestLimit(args.limit);
    // From the primary, as the policy read view: the attempts the gateway recorded, not a replica's copy.
    const simulation = await simulate(context.deps.primary, agent.agent_id, policy, windowMs, context.now, limit);
    return simulationView(agent.public_id, args.window, simulation);
  } catch (error) {
    if (isServiceError(error)) throw error.toGraphQLError();
    throw error;
  }
}
