/**
 * Spend policies (spec 2.1, 4.1): `PUT /v1/policies/{agentId}` (omitted fields keep their values,
 * `null` removes a limit), `GET` (with `usedToday` and the rate usage), `DELETE` (policies.clear),
 * `GET /v1/policies/{agentId}/history` (policies.history: the versions, newest first), and
 * `POST /v1/policies/{agentId}/backtest` (`simulatePolicy`: a candidate policy replayed over the
 * agent's recorded attempts; a read, so `read` scope, and it stores nothing).
 * PUT and DELETE are idempotent by their semantics; they take no Idempotency-Key.
 */
import {
  approvalJson,
  budgetState,
  clearPolicy,
  EMPTY_POLICY,
  type EndpointBudget,
  getVersionedPolicy,
  MAX_HISTORY_PAGE,
  parsePolicyPatch,
  type PolicyVersion,
  policyHistory,
  putPolicy,
  readUsage,
} from "../../../shared/policy/index.js";
import { policyActor } from "../../../shared/auth.js";
import { httpError } from "../../../shared/errors.js";
import { InvalidPolicyError } from "../../../shared/policy/errors.js";
import { MAX_RATE_LIMIT_CALLS, POLICY_FIELDS } from "../../../shared/policy/policy.js";
import {
  parseBacktestLimit,
  parseBacktestWindow,
  parseCandidatePolicy,
  simulatePolicy,
  simulationView,
} from "../../../shared/policy/simulate.js";
import { isRecord, JsonNumber, type JsonValue } from "../../../shared/http/json.js";
import type { AgentRow } from "../../../shared/rows.js";
import { objectBody, plainJson, requireAgent } from "../../../shared/http/input.js";
import { parseMoneyObject, parseUsdcNumber } from "../../../shared/http/money.js";
import { formatUsdcShort, usdcJson, usdcJsonOrNull } from "../../../shared/money.js";
import { json, NO_CONTENT } from "../../../shared/http/router.js";
import { badRequest } from "../../../shared/errors.js";
import type { Route, RouteContext } from "../deps.js";
import type { RouteResponse } from "../../../shared/http/idempotency.js";

const MONEY_FIELDS = ["dailyBudget", "perCallLimit"] as const;

async function policyView(context: RouteContext, agent: AgentRow): Promise<Record<string, unknown>> {
  const { policy, version } = await getVersionedPolicy(context.deps.pool, agent.agent_id);
  const stored = policy === EMPTY_POLICY ? null : (policy as typeof policy & { updatedAt: Date });
  const usage = await readUsage(context.deps.pool, agent.agent_id, policy, context.now);
  return {
    agentId: agent.public_id,
    dailyBudget: usdcJsonOrNull(policy.dailyBudgetUnits),
    perCallLimit: usdcJsonOrNull(policy.perCallLimitUnits),
    allowedDomains: policy.allowedDomains,
    blockedDomains: policy.blockedDomains,
    rateLimit: policy.rateLimit,
    protocolPreference: policy.protocolPreference,
    endpointBudgets: (policy.endpointBudgets ?? []).map(endpointBudgetJson),
    version,
    usedToday: usdcJson(usage.usedTodayUnits),
    budgetState: budgetState(policy.dailyBudgetUnits, usage.usedTodayUnits, usage.budgetExhausted),
    windowStart: usage.windowStart,
    windowResetsAt: usage.windowResetsAt,
    rateUsage: { calls: usage.rateCalls, limit: policy.rateLimit?.calls ?? null, window: usage.rateWindow },
    approval: policy.approval == null ? null : approvalJson(policy.approval),
    updatedAt: stored?.updatedAt ?? null,
  };
}

function endpointBudgetJson(rule: EndpointBudget): Record<string, unknown> {
  return {
    match: rule.match,
    dailyBudget: usdcJsonOrNull(rule.dailyBudgetUnits),
    perCallLimit: usdcJsonOrNull(rule.perCallLimitUnits),
    rateLimit: rule.rateLimit,
  };
}

function versionJson(agent: AgentRow, version: PolicyVersion): Record<string, unknown> {
  return {
    agentId: agent.public_id,
    version: version.version,
    createdAt: version.createdAt,
    createdBy: version.createdBy,
    hash: version.hash,
    policy: version.policy,
  };
}

async function historyRoute(context: RouteContext): Promise<RouteResponse> {
  const agent = await requireAgent(context, context.params.agentId!);
  const limit = positiveInt(context.query.get("limit"), "limit", 20, MAX_HISTORY_PAGE);
  const before = context.query.has("before") ? positiveInt(context.query.get("before"), "before", 1, 2_147_483_647) : null;
  const versions = await policyHistory(context.deps.pool, agent.agent_id, { limit, before });
  const last = versions.at(-1);
  return json(200, {
    agentId: agent.public_id,
    versions: versions.map((version) => versionJson(agent, version)),
    nextBefore: versions.length === limit && last !== undefined && last.version > 1 ? last.version : null,
  });
}

function positiveInt(text: string | null, field: string, fallback: number, max: number): number {
  if (text === null) return fallback;
  if (!/^[1-9]\d{0,9}$/.test(text) || Number(text) > max) {
    throw httpError("BAD_USER_INPUT", `${field} must be an integer from 1 to ${max}`, { field });
  }
  return Number(text);
}

async function getRoute(context: RouteContext): Promise<RouteResponse> {
  const agent = await requireAgent(context, context.params.agentId!);
  return json(200, await policyView(context, agent));
}

async function putRoute(context: RouteContext): Promise<RouteResponse> {
  const agent = await requireAgent(context, context.params.agentId!);
  const body = objectBody(context.body, [], POLICY_FIELDS);
  const patch = parsePolicyPatch(policyWire(body));
  await putPolicy(context.deps.pool, agent.agent_id, patch, context.now, policyActor(context.caller));
  return json(200, await policyView(context, agent));
}

/** A policy body as the policy module reads it: money from the raw number token (exact), as a decimal string. */
function policyWire(body: Record<string, JsonValue>): Record<string, unknown> {
  checkRateLimitCalls(body.rateLimit);
  const wire: Record<string, unknown> = plainJson(body) as Record<string, unknown>;
  for (const field of MONEY_FIELDS) {
    if (!(field in body) || body[field] === null) continue;
    wire[field] = { usdc: formatUsdcShort(parseMoneyObject(body[field], field)) };
  }
  if (Array.isArray(body.endpointBudgets) && Array.isArray(wire.endpointBudgets)) {
    const rules = wire.endpointBudgets as unknown[];
    body.endpointBudgets.forEach((rule, index) => {
      if (!isRecord(rule) || !isRecord(rules[index])) return;
      checkRateLimitCalls(rule.rateLimit, `endpointBudgets[${index}].rateLimit.calls`);
      for (const field of MONEY_FIELDS) {
        if (!(field in rule) || rule[field] === null) continue;
        const path = `endpointBudgets[${index}].${field}`;
        (rules[index] as Record<string, unknown>)[field] = { usdc: formatUsdcShort(parseMoneyObject(rule[field], path)) };
      }
    });
  }
  // The approval threshold too (docs/policy.md "Approvals"), exact from its token.
  const approval = body.approval;
  if (isRecord(approval) && isRecord(approval.above) && approval.above.usdc instanceof JsonNumber) {
    const above = { usdc: formatUsdcShort(parseUsdcNumber(approval.above.usdc, "approval.above.usdc", true)) };
    wire.approval = { ...(wire.approval as Record<string, unknown>), above };
  }
  return wire;
}

/** `{ policy, window, limit? }`: the candidate replayed over the agent's attempts of the window. Writes nothing. */
async function backtestRoute(context: RouteContext): Promise<RouteResponse> {
  const agent = await requireAgent(context, context.params.agentId!);
  const body = objectBody(context.body, ["policy", "window"], ["limit"]);
  if (!isRecord(body.policy))
    throw badRequest("policy", "must be a JSON object: the policy to try, as PUT /v1/policies/{agentId} takes it");
  const policy = parseCandidatePolicy(policyWire(body.policy));
  const windowMs = parseBacktestWindow(body.window);
  const limit = parseBacktestLimit(body.limit === undefined ? undefined : plainJson(body.limit));
  const simulation = await simulatePolicy(context.deps.primary ?? context.deps.pool, agent.agent_id, policy, windowMs, context.now, limit);
  return json(200, simulationView(agent.public_id, body.window as string, simulation));
}

/**
 * `rateLimit.calls` is a count: only a plain JSON integer token is one. `1e2` and `1.0` would turn
 * into 100 and 1 on the way to a JS number, so they are refused here, on the token as sent.
 */
function checkRateLimitCalls(rateLimit: JsonValue | undefined, field = "rateLimit.calls"): void {
  if (!isRecord(rateLimit) || !("calls" in rateLimit)) return;
  const calls = rateLimit.calls;
  if (calls instanceof JsonNumber && !/^-?(?:0|[1-9]\d*)$/.test(calls.text)) {
    throw new InvalidPolicyError(
      "invalid_rate_limit",
      field,
      `must be a plain integer from 1 to ${MAX_RATE_LIMIT_CALLS} (no fraction, no exponent), got ${calls.text}`,
    );
  }
}

async function deleteRoute(context: RouteContext): Promise<RouteResponse> {
  const agent = await requireAgent(context, context.params.agentId!);
  await clearPolicy(context.deps.pool, agent.agent_id, context.now, policyActor(context.caller));
  return NO_CONTENT;
}

export const policyRoutes: readonly Route[] = [
  { method: "GET", path: "/v1/policies/:agentId", scope: "read", handler: getRoute },
  { method: "PUT", path: "/v1/policies/:agentId", scope: "admin", handler: putRoute },
  { method: "DELETE", path: "/v1/policies/:agentId", scope: "admin", handler: deleteRoute },
  { method: "POST", path: "/v1/policies/:agentId/backtest", scope: "read", handler: backtestRoute },
  { method: "GET", path: "/v1/policies/:agentId/history", scope: "read", handler: historyRoute },
];
