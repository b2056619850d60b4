import { describe, expect, it } from "vitest";
import { classifyEntry } from "./domains.js";
import { applyPatch, EMPTY_POLICY, parsePolicyPatch, type Policy, validatePolicy } from "./policy.js";

function validate(fields: Partial<Policy>): Policy {
  return validatePolicy({ ...EMPTY_POLICY, ...fields });
}

function reasonOf(run: () => unknown): string | undefined {
  try {
    run();
  } catch (error) {
    return (error as { reason?: string }).reason;
  }
  return undefined;
}

describe("policy validation", () => {
  it.each([0n, -1n, 2n ** 64n])("rejects a limit of %s base units", (units) => {
    expect(reasonOf(() => validate({ dailyBudgetUnits: units }))).toBe("invalid_limit");
    expect(reasonOf(() => validate({ perCallLimitUnits: units }))).toBe("invalid_limit");
  });

  it.each([
    "https://example.com",
    "example.com:443",
    "example.com/path",
    "*.example.com",
    "-example.com",
    "example-.com",
    "a..b.com",
    "",
    ".",
    "exa mple.com",
    "under_score.com",
    "co.uk",
    `${"a".repeat(64)}.com`,
    `${"a.".repeat(127)}com`,
    "[::1]",
  ])("rejects the domain entry %j", (entry) => {
    expect(reasonOf(() => validate({ allowedDomains: [entry] }))).toBe("invalid_domain");
    expect(reasonOf(() => validate({ blockedDomains: [entry] }))).toBe("invalid_domain");
  });

  it("normalizes entries: lower-case, no trailing dot, punycode, no duplicates", () => {
    const policy = validate({ allowedDomains: ["Example.COM.", "example.com", "BÜCHER.de", "xn--bcher-kva.de"] });
    expect(policy.allowedDomains).toEqual(["example.com", "xn--bcher-kva.de"]);
  });

  it.each([
    [{ calls: 0, window: "1m" }],
    [{ calls: 1.5, window: "1m" }],
    [{ calls: -3, window: "1h" }],
    [{ calls: 10, window: "2h" }],
    [{ calls: 10, window: "1H" }],
    [{ calls: 10, window: "60s" }],
  ])("rejects the rate limit %j", (rateLimit) => {
    expect(reasonOf(() => validate({ rateLimit: rateLimit as Policy["rateLimit"] }))).toBe("invalid_rate_limit");
  });

  it.each(["1m", "5m", "15m", "1h", "24h"] as const)("accepts the rate window %s", (window) => {
    expect(validate({ rateLimit: { calls: 1, window } }).rateLimit).toEqual({ calls: 1, window });
  });

  it("rejects an unknown protocol preference", () => {
    expect(reasonOf(() => validate({ protocolPreference: "fast" as Policy["protocolPreference"] }))).toBe("invalid_protocol_preference");
  });

  it.each([
    ["example.com", "registrable"],
    ["api.example.com", "exact"],
    ["example.co.uk", "registrable"],
    ["api.example.co.uk", "exact"],
    ["localhost", "exact"],
    ["10.0.0.1", "exact"],
  ])("classifies %s as %s", (entry, kind) => {
    expect(classifyEntry(entry)).toBe(kind);
  });
});

describe("policies.set patch semantics (spec 4.1)", () => {
  const current = validate({
    dailyBudgetUnits: 10_000_000n,
    perCallLimitUnits: 1_000_000n,
    allowedDomains: ["example.com"],
    blockedDomains: ["ads.example.com"],
    rateLimit: { calls: 5, window: "1h" },
    protocolPreference: "mpp",
  });

  it("omitted fields keep their current values", () => {
    expect(applyPatch(current, { perCallLimitUnits: 2_000_000n })).toEqual({ ...current, perCallLimitUnits: 2_000_000n });
    expect(applyPatch(current, {})).toEqual(current);
  });

  it("null removes a limit", () => {
    expect(
      applyPatch(current, {
        dailyBudgetUnits: null,
        perCallLimitUnits: null,
        allowedDomains: null,
        blockedDomains: null,
        rateLimit: null,
        protocolPreference: null,
      }),
    ).toEqual(EMPTY_POLICY);
  });

  it("validates the result", () => {
    expect(reasonOf(() => applyPatch(current, { allowedDomains: ["not a domain"] }))).toBe("invalid_domain");
  });
});

describe("parsePolicyPatch (wire body)", () => {
  it("reads the spec 2.1 shapes into base units", () => {
    expect(
      parsePolicyPatch({
        dailyBudget: { usdc: 50 },
        perCallLimit: { usdc: 1.5 },
        allowedDomains: ["example.com"],
        rateLimit: { calls: 100, window: "1h" },
        protocolPreference: "x402",
      }),
    ).toEqual({
      dailyBudgetUnits: 50_000_000n,
      perCallLimitUnits: 1_500_000n,
      allowedDomains: ["example.com"],
      rateLimit: { calls: 100, window: "1h" },
      protocolPreference: "x402",
    });
  });

  it("keeps null (remove) apart from omitted (keep)", () => {
    expect(parsePolicyPatch({ dailyBudget: null })).toEqual({ dailyBudgetUnits: null });
    expect(parsePolicyPatch({})).toEqual({});
  });

  it.each([
    [{ dailyBudget: 5 }, "invalid_limit"],
    [{ dailyBudget: { usdc: 0.0000001 } }, "invalid_limit"],
    [{ perCallLimit: { usdc: "1.2345678" } }, "invalid_limit"],
    [{ usedToday: { usdc: 1 } }, "invalid_policy_field"],
    [{ dailybudget: { usdc: 1 } }, "invalid_policy_field"],
    [{ allowedDomains: "example.com" }, "invalid_domain"],
    [{ rateLimit: { calls: "5", window: "1h" } }, "invalid_rate_limit"],
    [{ protocolPreference: 1 }, "invalid_protocol_preference"],
    [[], "invalid_policy_field"],
  ])("rejects %j", (body, code) => {
    expect(reasonOf(() => parsePolicyPatch(body))).toBe(code);
  });
});
