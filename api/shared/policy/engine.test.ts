import { describe, expect, it } from "vitest";
import { evaluatePolicy, chooseProtocol, type PaymentRequest, type PolicyUsage } from "./engine.js";
import { isPolicyInputError } from "./errors.js";
import { EMPTY_POLICY, type Policy, validatePolicy } from "./policy.js";

const T0 = new Date("2026-03-01T12:00:00.000Z");
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const USDC = 1_000_000n;

function policy(fields: Partial<Policy>): Policy {
  return validatePolicy({ ...EMPTY_POLICY, ...fields });
}

const NO_USAGE: PolicyUsage = { usedTodayUnits: 0n, windowStart: null, rateCalls: 0 };

function usage(usedTodayUnits: bigint, windowStart: Date | null = T0, rateCalls = 0): PolicyUsage {
  return { usedTodayUnits, windowStart, rateCalls };
}

function pay(amountUnits: bigint, endpoint = "https://api.example.com/v1/data"): PaymentRequest {
  return { endpoint, amountUnits };
}

const at = (ms: number) => new Date(T0.getTime() + ms);

describe("per-call limit", () => {
  const limited = policy({ perCallLimitUnits: 1n * USDC });

  it("allows a payment at the limit and one unit below it", () => {
    expect(evaluatePolicy(limited, NO_USAGE, pay(USDC), T0).decision).toBe("allow");
    expect(evaluatePolicy(limited, NO_USAGE, pay(USDC - 1n), T0).decision).toBe("allow");
  });

  it("rejects one unit above the limit with the spec's reason text and PolicyViolationError", () => {
    const decision = evaluatePolicy(limited, NO_USAGE, pay(USDC + 1n), T0);
    expect(decision).toMatchObject({
      decision: "reject",
      reasonCode: "per_call_limit_exceeded",
      reason: "per_call_limit_exceeded: requested 1.000001 usdc, limit is 1 usdc",
      errorClass: "PolicyViolationError",
      requested: "1.000001",
      limit: "1",
      unit: "usdc",
    });
  });

  it("is a hard cap independent of the daily budget", () => {
    const both = policy({ perCallLimitUnits: USDC, dailyBudgetUnits: 100n * USDC });
    expect(evaluatePolicy(both, NO_USAGE, pay(2n * USDC), T0).reasonCode).toBe("per_call_limit_exceeded");
  });

  it("is checked before the daily budget", () => {
    const both = policy({ perCallLimitUnits: USDC, dailyBudgetUnits: USDC });
    expect(evaluatePolicy(both, usage(USDC), pay(2n * USDC), T0).reasonCode).toBe("per_call_limit_exceeded");
  });
});

describe("daily budget", () => {
  const budget = policy({ dailyBudgetUnits: 10n * USDC });

  it("allows a payment that brings consumption to exactly 100 %, and the window is then exhausted", () => {
    const decision = evaluatePolicy(budget, usage(9n * USDC), pay(USDC), at(HOUR));
    expect(decision.decision).toBe("allow");
    expect(decision.budget).toMatchObject({ state: "exhausted", usedUnits: 10n * USDC, windowStart: T0, resetsAt: at(DAY) });
  });

  it("allows one unit below the budget and rejects one unit above it", () => {
    expect(evaluatePolicy(budget, usage(9n * USDC), pay(USDC - 1n), at(HOUR)).decision).toBe("allow");
    const over = evaluatePolicy(budget, usage(9n * USDC), pay(USDC + 1n), at(HOUR));
    expect(over).toMatchObject({
      decision: "reject",
      reasonCode: "daily_budget_exceeded",
      reason: "daily_budget_exceeded: requested 1.000001 usdc, limit is 10 usdc (used 9 usdc, left 1 usdc)",
      errorClass: "DailyBudgetExceededError",
      limit: "10",
    });
  });

  it("once a payment was refused for the budget, says the period is exhausted until it resets, whatever is left", () => {
    const refusedBefore = { ...usage(9n * USDC), budgetExhausted: true };
    expect(evaluatePolicy(budget, refusedBefore, pay(USDC / 2n), at(HOUR)).reason).toBe(
      "daily_budget_exceeded: requested 0.5 usdc, limit is 10 usdc (used 9 usdc, exhausted until 2026-03-02T12:00:00.000Z)",
    );
  });

  it("rejects every payment at 100 % until the window resets", () => {
    const exhausted = usage(10n * USDC);
    for (const ms of [0, HOUR, DAY - 1]) {
      const decision = evaluatePolicy(budget, exhausted, pay(1n), at(ms));
      expect(decision.reason).toBe(
        "daily_budget_exceeded: requested 0.000001 usdc, limit is 10 usdc (used 10 usdc, exhausted until 2026-03-02T12:00:00.000Z)",
      );
    }
  });

  it("resets exactly 24 h after the first payment of the period", () => {
    const exhausted = usage(10n * USDC);
    expect(evaluatePolicy(budget, exhausted, pay(USDC), at(DAY - 1)).decision).toBe("reject");
    const after = evaluatePolicy(budget, exhausted, pay(USDC), at(DAY));
    expect(after.decision).toBe("allow");
    expect(after.budget).toMatchObject({ usedUnits: USDC, windowStart: at(DAY), resetsAt: at(2 * DAY), state: "open" });
  });

  it("opens a period at the first payment when none is open", () => {
    const decision = evaluatePolicy(budget, NO_USAGE, pay(USDC), T0);
    expect(decision.budget).toMatchObject({ windowStart: T0, resetsAt: at(DAY), usedUnits: USDC });
  });

  it("names the budget as the limit and what is used, when a lowered budget is already overspent", () => {
    const lowered = policy({ dailyBudgetUnits: 5n * USDC });
    expect(evaluatePolicy(lowered, usage(7n * USDC), pay(USDC), at(HOUR)).reason).toBe(
      "daily_budget_exceeded: requested 1 usdc, limit is 5 usdc (used 7 usdc, exhausted until 2026-03-02T12:00:00.000Z)",
    );
  });

  it("a rejection leaves the budget as it was", () => {
    const decision = evaluatePolicy(budget, usage(9n * USDC), pay(2n * USDC), at(HOUR));
    expect(decision.budget).toMatchObject({ usedUnits: 9n * USDC, state: "warning" });
  });

  it("has no budget state beyond open when no budget is set", () => {
    const decision = evaluatePolicy(EMPTY_POLICY, usage(1_000n * USDC), pay(USDC), at(HOUR));
    expect(decision).toMatchObject({ decision: "allow", warnings: [], budget: { state: "open", limitUnits: null } });
  });
});

describe("80 % warning", () => {
  const budget = policy({ dailyBudgetUnits: 10n * USDC });

  it("is reported by the payment that reaches exactly 80 %", () => {
    const decision = evaluatePolicy(budget, usage(7n * USDC), pay(USDC), at(HOUR));
    expect(decision.warnings).toEqual(["budget.warning"]);
    expect(decision.budget.state).toBe("warning");
  });

  it("is not reported one unit below 80 %", () => {
    const decision = evaluatePolicy(budget, usage(7n * USDC), pay(USDC - 1n), at(HOUR));
    expect(decision.warnings).toEqual([]);
    expect(decision.budget.state).toBe("open");
  });

  it("is reported once: not again by later payments in the same window", () => {
    expect(evaluatePolicy(budget, usage(8n * USDC), pay(1n), at(HOUR)).warnings).toEqual([]);
    expect(evaluatePolicy(budget, usage(8n * USDC + 1n), pay(USDC), at(HOUR)).warnings).toEqual([]);
  });

  it("is reported by a payment that jumps from below 80 % straight to 100 %", () => {
    const decision = evaluatePolicy(budget, usage(USDC), pay(9n * USDC), at(HOUR));
    expect(decision).toMatchObject({ warnings: ["budget.warning"], budget: { state: "exhausted" } });
  });

  it("is reported again in the next window", () => {
    const decision = evaluatePolicy(budget, usage(9n * USDC), pay(8n * USDC), at(DAY));
    expect(decision.warnings).toEqual(["budget.warning"]);
  });

  it("is never reported by a rejected payment", () => {
    expect(evaluatePolicy(budget, usage(7n * USDC), pay(4n * USDC), at(HOUR)).warnings).toEqual([]);
  });
});

describe("domains", () => {
  const cases: Array<[allowed: string[], endpoint: string, allowedResult: boolean]> = [
    [["example.com"], "https://example.com/x", true],
    [["example.com"], "https://api.example.com/x", true],
    [["example.com"], "https://a.b.example.com/x", true],
    [["example.com"], "https://evil-example.com/x", false],
    [["example.com"], "https://notexample.com/x", false],
    [["example.com"], "https://example.com.evil.com/x", false],
    [["example.com"], "https://example.org/x", false],
    [["example.com"], "HTTPS://API.EXAMPLE.COM/X", true],
    [["example.com"], "https://example.com./x", true],
    [["example.com"], "https://example.com:8443/x", true],
    [["example.com"], "api.example.com/v1/data", true],
    [["example.com"], "api.example.com:8080", true],
    [["example.com"], "https://example.com@evil.com/", false],
    [["example.com"], "https://evil.com/?next=example.com", false],
    [["Example.COM."], "https://shop.example.com", true],
    [["api.example.com"], "https://api.example.com/x", true],
    [["api.example.com"], "https://API.Example.Com./x", true],
    [["api.example.com"], "https://example.com/x", false],
    [["api.example.com"], "https://v2.api.example.com/x", false],
    [["api.example.com"], "https://web.example.com/x", false],
    [["example.co.uk"], "https://api.example.co.uk/x", true],
    [["api.example.co.uk"], "https://x.api.example.co.uk/x", false],
    [["xn--bcher-kva.de"], "https://xn--bcher-kva.de/x", true],
    [["xn--bcher-kva.de"], "https://shop.xn--bcher-kva.de/x", true],
    [["xn--bcher-kva.de"], "https://bücher.de/x", true],
    [["bücher.de"], "https://xn--bcher-kva.de/x", true],
    [["xn--bcher-kva.de"], "https://bucher.de/x", false],
    [["localhost"], "http://localhost:3000/x", true],
    [["localhost"], "http://api.localhost/x", false],
    [["127.0.0.1"], "http://127.0.0.1:8080/x", true],
    [[], "https://example.com/x", false],
  ];

  it.each(cases)("allowedDomains %j, endpoint %s → allowed %s", (allowed, endpoint, expected) => {
    const decision = evaluatePolicy(policy({ allowedDomains: allowed }), NO_USAGE, pay(USDC, endpoint), T0);
    expect(decision.decision).toBe(expected ? "allow" : "reject");
    if (!expected) expect(decision).toMatchObject({ reasonCode: "domain_not_allowed", errorClass: "DomainNotAllowedError" });
  });

  it("omitted allowedDomains lets any domain be paid", () => {
    expect(evaluatePolicy(EMPTY_POLICY, NO_USAGE, pay(USDC, "https://anything.example"), T0).decision).toBe("allow");
  });

  it("a blocked domain wins over the allowlist", () => {
    const both = policy({ allowedDomains: ["example.com"], blockedDomains: ["ads.example.com"] });
    expect(evaluatePolicy(both, NO_USAGE, pay(USDC, "https://ads.example.com/x"), T0)).toMatchObject({
      decision: "reject",
      reasonCode: "domain_blocked",
      errorClass: "DomainNotAllowedError",
      domain: "ads.example.com",
      reason: "domain_blocked: ads.example.com is blocked by the policy (blockedDomains entry ads.example.com)",
      limit: null,
      matchedEntry: "ads.example.com",
    });
    expect(evaluatePolicy(both, NO_USAGE, pay(USDC, "https://other.example.org/x"), T0)).toMatchObject({
      reasonCode: "domain_not_allowed",
      reason: "domain_not_allowed: other.example.org is not on the policy's allowedDomains",
      limit: null,
      matchedEntry: null,
    });
    expect(evaluatePolicy(both, NO_USAGE, pay(USDC, "https://api.example.com/x"), T0).decision).toBe("allow");
  });

  it("the same entry on both lists is rejected", () => {
    const both = policy({ allowedDomains: ["example.com"], blockedDomains: ["example.com"] });
    expect(evaluatePolicy(both, NO_USAGE, pay(USDC, "https://example.com"), T0).reasonCode).toBe("domain_blocked");
  });

  it("a blocked bare domain blocks its subdomains; a blocked subdomain blocks only itself", () => {
    const bare = policy({ blockedDomains: ["example.com"] });
    expect(evaluatePolicy(bare, NO_USAGE, pay(USDC, "https://deep.api.example.com"), T0).reasonCode).toBe("domain_blocked");
    expect(evaluatePolicy(bare, NO_USAGE, pay(USDC, "https://evil-example.com"), T0).decision).toBe("allow");
    const sub = policy({ blockedDomains: ["api.example.com"] });
    expect(evaluatePolicy(sub, NO_USAGE, pay(USDC, "https://web.example.com"), T0).decision).toBe("allow");
    expect(evaluatePolicy(sub, NO_USAGE, pay(USDC, "https://API.example.com."), T0).reasonCode).toBe("domain_blocked");
  });

  it("domain rules come before the per-call limit and the budget", () => {
    const strict = policy({
      blockedDomains: ["evil.com"],
      allowedDomains: ["example.com"],
      perCallLimitUnits: 1n,
      dailyBudgetUnits: 1n,
    });
    expect(evaluatePolicy(strict, usage(1n), pay(USDC, "https://evil.com"), T0).reasonCode).toBe("domain_blocked");
    expect(evaluatePolicy(strict, usage(1n), pay(USDC, "https://other.com"), T0).reasonCode).toBe("domain_not_allowed");
  });

  it("reports the normalized host paid", () => {
    expect(evaluatePolicy(EMPTY_POLICY, NO_USAGE, pay(USDC, "https://API.Example.COM.:443/x"), T0).domain).toBe("api.example.com");
  });
});

describe("rate limit", () => {
  const limited = policy({ rateLimit: { calls: 3, window: "1m" } });

  it("allows the call that reaches the limit and rejects the one after", () => {
    expect(evaluatePolicy(limited, usage(0n, null, 2), pay(USDC), T0).decision).toBe("allow");
    expect(evaluatePolicy(limited, usage(0n, null, 3), pay(USDC), T0)).toMatchObject({
      decision: "reject",
      reasonCode: "rate_limit_exceeded",
      reason: "rate_limit_exceeded: requested 4 calls/1m, limit is 3 calls/1m",
      errorClass: "PolicyViolationError",
    });
  });

  it("counts calls regardless of amount", () => {
    expect(evaluatePolicy(limited, usage(0n, null, 3), pay(1n), T0).reasonCode).toBe("rate_limit_exceeded");
  });

  it("is checked after the daily budget", () => {
    const both = policy({ rateLimit: { calls: 1, window: "1h" }, dailyBudgetUnits: USDC });
    expect(evaluatePolicy(both, usage(USDC, T0, 1), pay(USDC), at(1)).reasonCode).toBe("daily_budget_exceeded");
  });
});

describe("protocol preference", () => {
  const cases: Array<[preference: "auto" | "x402" | "mpp", offered: Array<"x402" | "mpp"> | undefined, expected: string | null]> = [
    ["auto", undefined, "x402"],
    ["auto", ["x402", "mpp"], "x402"],
    ["auto", ["mpp"], "mpp"],
    ["x402", ["mpp", "x402"], "x402"],
    ["x402", ["mpp"], "mpp"],
    ["mpp", ["x402", "mpp"], "mpp"],
    ["mpp", ["x402"], "x402"],
    ["mpp", undefined, "mpp"],
    ["auto", [], null],
  ];

  it.each(cases)("%s with %j offered picks %s", (preference, offered, expected) => {
    expect(chooseProtocol(preference, offered)).toBe(expected);
  });

  it("the client's preference overrides the policy's", () => {
    const prefersMpp = policy({ protocolPreference: "mpp" });
    expect(evaluatePolicy(prefersMpp, NO_USAGE, pay(USDC), T0).protocol).toBe("mpp");
    expect(evaluatePolicy(prefersMpp, NO_USAGE, { ...pay(USDC), protocol: "x402" }, T0).protocol).toBe("x402");
    const override = { ...pay(USDC), protocol: "mpp" as const, offeredProtocols: ["x402", "mpp"] as const };
    expect(evaluatePolicy(EMPTY_POLICY, NO_USAGE, override, T0).protocol).toBe("mpp");
  });
});

describe("request validation", () => {
  it.each([0n, -1n, 2n ** 64n])("rejects amount %s", (amount) => {
    expect(() => evaluatePolicy(EMPTY_POLICY, NO_USAGE, pay(amount), T0)).toThrow(expect.objectContaining({ reason: "invalid_amount" }));
  });

  it.each(["", "   ", "ftp://example.com/x", "https://", "http://exa mple.com/"])("rejects endpoint %j", (endpoint) => {
    let thrown: unknown;
    try {
      evaluatePolicy(EMPTY_POLICY, NO_USAGE, pay(USDC, endpoint), T0);
    } catch (error) {
      thrown = error;
    }
    expect(isPolicyInputError(thrown, "invalid_endpoint")).toBe(true);
  });
});
