/**
 * Property test: random policies and request sequences, decided by `evaluatePolicy` and by the
 * naive reference model of test/api/policy-reference.ts. Seeded, so a failure names the seed that
 * reproduces it.
 */
import { describe, expect, it } from "vitest";
import { ReferenceModel, randomScenario } from "../../../test/api/policy-reference.js";
import { evaluatePolicy } from "./engine.js";

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
