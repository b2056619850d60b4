/**
 * Property test: the backtest's running-usage replay answers exactly what the engine answers when
 * each attempt is decided one at a time on usage recomputed from scratch (test/api/live-replay.ts,
 * the gateway's way), on random policies (approval rules included) and random histories: domain
 * checks of amount 0, channel deposits, attempts without a protocol, usage standing at the start.
 * Seeded, so a failure names the seed that reproduces it.
 */
import { describe, expect, it } from "vitest";
import { liveReplay } from "../../../test/api/live-replay.js";
import { mulberry32, randomScenario } from "../../../test/api/policy-reference.js";
import { backtest, type BacktestOutcome, type BacktestStart, type PaymentAttempt } from "./backtest.js";
import { EMPTY_POLICY, validatePolicy } from "./policy.js";

const START = new Date("2026-05-01T00:00:00.000Z");
const OUTCOMES: readonly BacktestOutcome[] = ["pass", "refuse", "needs_approval"];

function randomHistory(seed: number, approvals: boolean, endpoints: boolean) {
  const { policy, requests } = randomScenario(seed, 120, START, { approvals, endpoints });
  const random = mulberry32(seed * 104_729);
  const attempts: PaymentAttempt[] = requests.map(({ at, request }, i) => {
    const roll = random();
    return {
      id: `reservation:${i}`,
      at,
      endpoint: request.endpoint,
      amountUnits: roll < 0.05 ? 0n : request.amountUnits,
      protocol: roll < 0.15 ? null : random() < 0.5 ? "x402" : "mpp",
      ...(random() < 0.05 ? { exposure: true } : {}),
      recorded: OUTCOMES[Math.floor(random() * 3)]!,
    };
  });
  const hasStart = random() < 0.5;
  const start: BacktestStart = hasStart
    ? {
        windowStart: new Date(START.getTime() - Math.floor(random() * 30) * 3_600_000),
        usedUnits: BigInt(Math.floor(random() * 30)) * 100_000n,
        callTimes: Array.from({ length: Math.floor(random() * 5) }, (_, i) => new Date(START.getTime() - (5 - i) * 600_000)),
        paidDomains: random() < 0.5 ? ["example.com", "other.io"] : [],
        endpoints: new Map(
          (policy.endpointBudgets ?? []).map((rule) => [
            rule.match,
            {
              usedUnits: BigInt(Math.floor(random() * 10)) * 100_000n,
              callTimes: Array.from({ length: Math.floor(random() * 3) }, (_, i) => new Date(START.getTime() - (3 - i) * 300_000)),
            },
          ]),
        ),
      }
    : { windowStart: null, usedUnits: 0n, callTimes: [], paidDomains: [] };
  return { policy, attempts, start };
}

describe("backtest equals the engine decided payment by payment", () => {
  for (const [approvals, endpoints] of [
    [false, false],
    [true, false],
    [true, true],
  ] as const) {
    const what = `${approvals ? " with approval rules" : ""}${endpoints ? " and endpoint budgets" : ""}`;
    it(`agrees on 300 random histories of 120 attempts${what}`, () => {
      const seen = new Set<string>();
      let endpointRefusals = 0;
      for (let seed = 1; seed <= 300; seed += 1) {
        const { policy, attempts, start } = randomHistory(seed, approvals, endpoints);
        const result = backtest(policy, attempts, start);
        const expected = liveReplay(policy, attempts, start);
        for (let i = 0; i < attempts.length; i += 1) {
          const got = result.decisions[i]!;
          const want = expected[i]!;
          const context = `seed ${seed} attempt ${i} ${attempts[i]!.endpoint} ${attempts[i]!.amountUnits}`;
          expect({ outcome: got.outcome, rule: got.rule, reason: got.reason, domain: got.domain }, context).toEqual({
            outcome: want.outcome,
            rule: want.rule,
            reason: want.reason,
            domain: want.domain,
          });
          seen.add(`${got.outcome}:${got.rule}`);
          if (got.outcome === "refuse" && (got.reason ?? "").includes("endpointBudgets")) endpointRefusals += 1;
        }
        const { totals } = result;
        expect(totals.passed.count + totals.refused.count + totals.needsApproval.count).toBe(attempts.length);
        expect(totals.refusedByRule.reduce((sum, entry) => sum + entry.amountUnits, 0n)).toBe(totals.refused.amountUnits);
        expect(totals.refusedByDomain.reduce((sum, entry) => sum + entry.count, 0)).toBe(totals.refused.count);
        expect(totals.changed).toBe(result.decisions.filter((d) => d.outcome !== d.attempt.recorded).length);
      }
      // Every rule was exercised, so the agreement covers each of them.
      const expectedKinds = [
        "pass:null",
        "refuse:daily_budget_exceeded",
        "refuse:domain_blocked",
        "refuse:domain_not_allowed",
        "refuse:per_call_limit_exceeded",
        "refuse:rate_limit_exceeded",
        ...(approvals ? ["needs_approval:above", "needs_approval:domains", "needs_approval:firstPaymentToDomain"] : []),
      ];
      expect([...seen].sort()).toEqual(expectedKinds.sort());
      // With endpoint budgets, their own limits refuse too (their texts name the rule).
      if (endpoints) expect(endpointRefusals).toBeGreaterThan(50);
    });
  }
});

describe("backtest", () => {
  const at = (minutes: number) => new Date(START.getTime() + minutes * 60_000);
  const attempt = (minutes: number, amountUnits: bigint, endpoint = "https://api.example.com/v1/x"): PaymentAttempt => ({
    id: `reservation:${minutes}`,
    at: at(minutes),
    endpoint,
    amountUnits,
    protocol: "x402",
    recorded: "pass",
  });

  it("counts only what the candidate lets through: a refused payment leaves room for the next", () => {
    const policy = validatePolicy({ ...EMPTY_POLICY, dailyBudgetUnits: 1_000_000n });
    const { decisions, totals } = backtest(policy, [attempt(0, 600_000n), attempt(1, 600_000n), attempt(2, 400_000n)]);
    expect(decisions.map((d) => d.outcome)).toEqual(["pass", "refuse", "refuse"]);
    // The third fits (0.6 + 0.4) but the period is exhausted by the second's refusal (spec 3).
    expect(decisions[2]!.reason).toContain("exhausted until 2026-05-02T00:00:00.000Z");
    expect(totals.refused).toEqual({ count: 2, amountUnits: 1_000_000n });
    expect(totals.refusedByRule).toEqual([{ rule: "daily_budget_exceeded", count: 2, amountUnits: 1_000_000n }]);
    expect(totals.changed).toBe(2);
  });

  it("starts from the usage standing at the window's start", () => {
    const policy = validatePolicy({ ...EMPTY_POLICY, dailyBudgetUnits: 1_000_000n, rateLimit: { calls: 2, window: "1h" } });
    const start = { windowStart: at(-60), usedUnits: 900_000n, callTimes: [at(-30)], paidDomains: [] };
    const { decisions } = backtest(policy, [attempt(0, 100_000n), attempt(1, 1n)], start);
    expect(decisions.map((d) => d.rule)).toEqual([null, "daily_budget_exceeded"]);
    const rate = backtest(policy, [attempt(0, 1n), attempt(1, 1n)], { ...start, usedUnits: 0n });
    expect(rate.decisions.map((d) => d.rule)).toEqual([null, "rate_limit_exceeded"]);
  });

  it("refuses attempts out of order", () => {
    expect(() => backtest(EMPTY_POLICY, [attempt(1, 1n), attempt(0, 1n)])).toThrow(/out of order/);
  });
});
