/**
 * Property test: random policies and request sequences, decided by `evaluatePolicy` and by the
 * naive reference model of test/api/policy-reference.ts. Seeded, so a failure names the seed that
 * reproduces it.
 */
import { describe, expect, it } from "vitest";
import { mulberry32, ReferenceModel, randomScenario } from "../../../test/api/policy-reference.js";
import { evaluatePayment, evaluatePolicy, type PolicyUsage } from "./engine.js";

const START = new Date("2026-05-01T00:00:00.000Z");

describe("evaluatePolicy against the reference model", () => {
  it("agrees on 300 random scenarios of 80 requests each", () => {
    let allowed = 0;
    let exhaustedRefusals = 0;
    const reasons = new Set<string>();
    for (let seed = 1; seed <= 300; seed += 1) {
      const { policy, requests } = randomScenario(seed, 80, START);
      const model = new ReferenceModel(policy);
      for (const { at, host, request } of requests) {
        const now = at.getTime();
        // The usage handed over may be stale (a reset period): the engine must notice by itself.
        const usage = {
          usedTodayUnits: model.usedInPeriod(now) || model.usedInPeriod(model.lastPeriodStart()?.getTime() ?? now),
          windowStart: model.lastPeriodStart(),
          rateCalls: model.callsInRateWindow(now),
          budgetExhausted: model.lastPeriodExhausted(),
        };
        const expected = model.decide(host, request.amountUnits, now);
        const decision = evaluatePolicy(policy, usage, request, at);
        const context = `seed ${seed} at ${at.toISOString()} ${request.endpoint} ${request.amountUnits}`;
        expect(decision.reasonCode, context).toBe(expected.reasonCode);
        expect(decision.warnings.length === 1, context).toBe(expected.warning);
        if (decision.decision === "allow") {
          expect(decision.budget.usedUnits, context).toBe(model.usedInPeriod(now) + request.amountUnits);
          model.accept(request.amountUnits, now);
          allowed += 1;
        } else {
          // Refused although the amount fits what is left: only the exhausted state (spec 3) refuses it.
          const fits = policy.dailyBudgetUnits !== null && model.usedInPeriod(now) + request.amountUnits <= policy.dailyBudgetUnits;
          if (decision.reasonCode === "daily_budget_exceeded" && fits) exhaustedRefusals += 1;
          model.refuse(decision.reasonCode, now);
          reasons.add(decision.reasonCode);
        }
      }
      model.assertInvariants();
    }
    expect(allowed).toBeGreaterThan(1_000);
    expect(exhaustedRefusals).toBeGreaterThan(50);
    expect([...reasons].sort()).toEqual([
      "daily_budget_exceeded",
      "domain_blocked",
      "domain_not_allowed",
      "per_call_limit_exceeded",
      "rate_limit_exceeded",
    ]);
  });
});

describe("evaluatePayment (approvals) against the reference model", () => {
  it("agrees on 300 random scenarios with approval rules; approving re-runs the limits and never overspends", () => {
    const held = new Map<string, number>();
    let approved = 0;
    let allowed = 0;
    for (let seed = 1; seed <= 300; seed += 1) {
      const { policy, requests } = randomScenario(seed, 80, START, { approvals: true });
      const model = new ReferenceModel(policy);
      const random = mulberry32(seed * 7919);
      for (const { at, host, request } of requests) {
        const now = at.getTime();
        const usage: PolicyUsage = {
          usedTodayUnits: model.usedInPeriod(now),
          windowStart: model.lastPeriodStart(),
          rateCalls: model.callsInRateWindow(now),
          budgetExhausted: model.lastPeriodExhausted(),
          domainPaidBefore: model.paidBefore(host),
        };
        const expected = model.decide(host, request.amountUnits, now);
        const decision = evaluatePayment(policy, usage, request, at);
        const context = `seed ${seed} at ${at.toISOString()} ${request.endpoint} ${request.amountUnits}`;
        expect(decision.reasonCode, context).toBe(expected.reasonCode);
        expect(decision.decision === "needs_approval" ? decision.approvalRule : null, context).toBe(expected.approval);
        if (decision.decision === "reject") {
          model.refuse(decision.reasonCode, now);
          continue;
        }
        expect(decision.budget.usedUnits, context).toBe(model.usedInPeriod(now) + request.amountUnits);
        if (decision.decision === "allow") {
          model.accept(request.amountUnits, now, host);
          allowed += 1;
          continue;
        }
        held.set(decision.approvalRule, (held.get(decision.approvalRule) ?? 0) + 1);
        // A person decides at once: deny (nothing counts) or approve, which re-runs rules 1-5 on
        // the same usage (the held reservation itself excluded) and must let it through.
        if (random() < 0.5) continue;
        const recheck = evaluatePolicy(policy, usage, request, at);
        expect(recheck.decision, context).toBe("allow");
        model.accept(request.amountUnits, now, host);
        approved += 1;
      }
      model.assertInvariants();
    }
    expect(allowed).toBeGreaterThan(500);
    expect(approved).toBeGreaterThan(200);
    expect([...held.keys()].sort()).toEqual(["above", "domains", "firstPaymentToDomain"]);
  });
});

describe("endpoint budgets against the reference model", () => {
  it("agree on 300 random scenarios with endpointBudgets: the same refusal, the same rule named, no rule ever overspent", () => {
    const byRule = new Map<string, number>();
    let allowed = 0;
    for (let seed = 1; seed <= 300; seed += 1) {
      const { policy, requests } = randomScenario(seed, 80, START, { endpoints: true });
      const model = new ReferenceModel(policy);
      for (const { at, host, path, request } of requests) {
        const now = at.getTime();
        const usage: PolicyUsage = {
          usedTodayUnits: model.usedInPeriod(now),
          windowStart: model.lastPeriodStart(),
          rateCalls: model.callsInRateWindow(now),
          budgetExhausted: model.lastPeriodExhausted(),
          endpointUsage: model.endpointUsage(now),
        };
        const expected = model.decideLimits(host, request.amountUnits, now, path);
        const decision = evaluatePolicy(policy, usage, request, at);
        const context = `seed ${seed} at ${at.toISOString()} ${request.endpoint} ${request.amountUnits}`;
        expect(decision.reasonCode, context).toBe(expected.reasonCode);
        if (decision.decision === "allow") {
          model.accept(request.amountUnits, now, host, path);
          allowed += 1;
          continue;
        }
        const rule = decision.endpointRule ?? null;
        if (decision.reasonCode !== "domain_blocked" && decision.reasonCode !== "domain_not_allowed") {
          expect(rule, context).toBe(expected.endpointRule);
        }
        if (rule !== null) {
          expect(decision.reason, context).toContain(`(endpointBudgets ${rule})`);
          byRule.set(decision.reasonCode, (byRule.get(decision.reasonCode) ?? 0) + 1);
        }
        model.refuse(decision.reasonCode, now);
      }
      model.assertInvariants();
    }
    expect(allowed).toBeGreaterThan(1_000);
    // Every kind of endpoint limit refused something on its own.
    expect([...byRule.keys()].sort()).toEqual(["daily_budget_exceeded", "per_call_limit_exceeded", "rate_limit_exceeded"]);
    for (const count of byRule.values()) expect(count).toBeGreaterThan(50);
  });
});
