/**
 * The problem answers of a payment the spend policy refused, as every route that reserves money
 * gives them (a payment's authorize, a channel's open): spec 7's error classes with the refusal's
 * reason text, amounts and the recorded rejection's id.
 */
import type { RouteResponse } from "../../shared/http/idempotency.js";
import { httpError, problemResponse } from "../../shared/http/problem.js";
import { formatUsdcShort } from "../../shared/money.js";
import type { PolicyRejected } from "../../shared/policy/engine.js";
import type { ReservationRefusal } from "../reservations/store.js";

/**
 * 403 POLICY_VIOLATION: the agent's spend policy refused the payment. `endpointRule` names the
 * endpointBudgets rule that refused (null: the agent's own limit); `budget` is the agent's daily
 * budget, given when that is what refused; `policyVersion` the version it was decided under.
 */
export function policyViolationAnswer(decision: PolicyRejected, rejectionId: string, policyVersion?: number): RouteResponse {
  return problemResponse(
    httpError("POLICY_VIOLATION", decision.reason, {
      errorClass: decision.errorClass,
      reason: decision.reason,
      reasonCode: decision.reasonCode,
      domain: decision.domain,
      requested: decision.requested,
      limit: decision.limit,
      unit: decision.unit,
      ...(decision.matchedEntry === undefined ? {} : { matchedEntry: decision.matchedEntry }),
      ...(decision.endpointRule === undefined ? {} : { endpointRule: decision.endpointRule }),
      ...(decision.reasonCode === "daily_budget_exceeded" && decision.endpointRule == null ? { budget: budgetFigures(decision) } : {}),
      ...(policyVersion === undefined ? {} : { policyVersion }),
      rejectionId,
    }),
  );
}

/** 422 BUDGET_EXCEEDED: the invocation under `parentTxHash` has not enough budget left. */
export function budgetExceededAnswer(
  refusal: ReservationRefusal,
  context: { readonly parentTxHash: string | null; readonly invocation?: string | null; readonly rejectionId: string },
): RouteResponse {
  return problemResponse(
    httpError("BUDGET_EXCEEDED", refusal.reason, {
      errorClass: "BudgetExceededError",
      reason: refusal.reason,
      reasonCode: refusal.reasonCode,
      requested: refusal.requested,
      limit: refusal.limit,
      unit: refusal.unit,
      parentTxHash: context.parentTxHash,
      ...(context.invocation === undefined ? {} : { invocation: context.invocation }),
      rejectionId: context.rejectionId,
    }),
  );
}

/** The daily budget behind a daily_budget_exceeded refusal, as its text states it. */
function budgetFigures(decision: PolicyRejected): Record<string, unknown> {
  const { limitUnits, usedUnits, state, resetsAt } = decision.budget;
  const left = limitUnits === null || usedUnits >= limitUnits ? 0n : limitUnits - usedUnits;
  return {
    limit: limitUnits === null ? null : formatUsdcShort(limitUnits),
    used: formatUsdcShort(usedUnits),
    left: formatUsdcShort(left),
    state,
    resetsAt: resetsAt?.toISOString() ?? null,
  };
}
