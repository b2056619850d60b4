/**
 * Spend policies (spec 2.1, 4.1): `PUT /v1/policies/{agentId}` (omitted fields keep their values,
 * `null` removes a limit), `GET` (with `usedToday` and the rate usage), `DELETE` (policies.clear).
 * PUT and DELETE are idempotent by their semantics; they take no Idempotency-Key.
 */
import {
  approvalJson,
  budgetState,
  clearPolicy,
  EMPTY_POLICY,
  getPolicy,
  parsePolicyPatch,
  putPolicy,
  readUsage,
} from "../../../shared/policy/index.js";
import { InvalidPolicyError } from "../../../shared/policy/errors.js";
import { MAX_RATE_LIMIT_CALLS } from "../../../shared/policy/policy.js";
import { isRecord, JsonNumber, type JsonValue } from "../../../shared/http/json.js";
import type { AgentRow } from "../../../shared/rows.js";
import { objectBody, plainJson, requireAgent } from "../../../shared/http/input.js";
import { parseMoneyObject, parseUsdcNumber } from "../../../shared/http/money.js";
import { formatUsdcShort, usdcJson, usdcJsonOrNull } from "../../../shared/money.js";
import { json, NO_CONTENT } from "../../../shared/http/router.js";
import type { Route, RouteContext } from "../deps.js";
import type { RouteResponse } from "../../../shared/http/idempotency.js";

const POLICY_FIELDS = [
  "dailyBudget",
  "perCallLimit",
  "allowedDomains",
  "blockedDomains",
  "rateLimit",
  "protocolPreference",
  "approval",
] as const;
const MONEY_FIELDS = ["dailyBudget", "perCallLimit"] as const;

async function policyView(context: RouteContext, agent: AgentRow): Promise<Record<string, unknown>> {
  const stored = await getPolicy(context.deps.pool, agent.agent_id);
  const policy = stored ?? EMPTY_POLICY;
  const usage = await readUsage(context.deps.pool, agent.agent_id, policy, context.now);
  return {
    agentId: agent.public_id,
    dailyBudget: usdcJsonOrNull(policy.dailyBudgetUnits),
    perCallLimit: usdcJsonOrNull(policy.perCallLimitUnits),
    allowedDomains: policy.allowedDomains,
    blockedDomains: policy.blockedDomains,
    rateLimit: policy.rateLimit,
    protocolPreference: policy.protocolPreference,
    usedToday: usdcJson(usage.usedTodayUnits),
    budgetState: budgetState(policy.dailyBudgetUnits, usage.usedTodayUnits, usage.budgetExhausted),
    windowStart: usage.windowStart,
    windowResetsAt: usage.windowResetsAt,
    rateUsage: { calls: usage.rateCalls, limit: policy.rateLimit?.calls ?? null, window: usage.rateWindow },
    approval: policy.approval == null ? null : approvalJson(policy.approval),
    updatedAt: stored?.updatedAt ?? null,
  };
}

async function getRoute(context: RouteContext): Promise<RouteResponse> {
  const agent = await requireAgent(context, context.params.agentId!);
  return json(200, await policyView(context, agent));
}

async function putRoute(context: RouteContext): Promise<RouteResponse> {
  const agent = await requireAgent(context, context.params.agentId!);
  const body = objectBody(context.body, [], POLICY_FIELDS);
  checkRateLimitCalls(body.rateLimit);
  // Money comes from the raw number token (exact); the policy module reads it as a decimal string.
  const wire: Record<string, unknown> = plainJson(body) as Record<string, unknown>;
  for (const field of MONEY_FIELDS) {
    if (!(field in body) || body[field] === null) continue;
    wire[field] = { usdc: formatUsdcShort(parseMoneyObject(body[field], field)) };
  }
  // The approval threshold too (docs/policy.md "Approvals"), exact from its token.
  const approval = body.approval;
  if (isRecord(approval) && isRecord(approval.above) && approval.above.usdc instanceof JsonNumber) {
    const above = { usdc: formatUsdcShort(parseUsdcNumber(approval.above.usdc, "approval.above.usdc", true)) };
    wire.approval = { ...(wire.approval as Record<string, unknown>), above };
  }
  const patch = parsePolicyPatch(wire);
  await putPolicy(context.deps.pool, agent.agent_id, patch, context.now);
  return json(200, await policyView(context, agent));
}

/**
 * `rateLimit.calls` is a count: only a plain JSON integer token is one. `1e2` and `1.0` would turn
 * into 100 and 1 on the way to a JS number, so they are refused here, on the token as sent.
 */
function checkRateLimitCalls(rateLimit: JsonValue | undefined): void {
  if (!isRecord(rateLimit) || !("calls" in rateLimit)) return;
  const calls = rateLimit.calls;
  if (calls instanceof JsonNumber && !/^-?(?:0|[1-9]\d*)$/.test(calls.text)) {
    throw new InvalidPolicyError(
      "invalid_rate_limit",
      "rateLimit.calls",
      `must be a plain integer from 1 to ${MAX_RATE_LIMIT_CALLS} (no fraction, no exponent), got ${calls.text}`,
    );
  }
}

async function deleteRoute(context: RouteContext): Promise<RouteResponse> {
  const agent = await requireAgent(context, context.params.agentId!);
  await clearPolicy(context.deps.pool, agent.agent_id);
  return NO_CONTENT;
}

export const policyRoutes: readonly Route[] = [
  { method: "GET", path: "/v1/policies/:agentId", scope: "read", handler: getRoute },
  { method: "PUT", path: "/v1/policies/:agentId", scope: "admin", handler: putRoute },
  { method: "DELETE", path: "/v1/policies/:agentId", scope: "admin", handler: deleteRoute },
];
