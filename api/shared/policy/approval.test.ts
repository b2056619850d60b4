/**
 * The policy's `approval` field: the wire parser and validation (each problem a typed
 * InvalidPolicyError naming its sub-field), the duration form, patch semantics, and the engine's
 * third outcome `needs_approval`, which a refusal always beats.
 */
import { describe, expect, it } from "vitest";
import { writeJson } from "../http/json.js";
import {
  type ApprovalPolicy,
  approvalFromColumns,
  approvalJson,
  approvalToColumns,
  approvalView,
  formatDuration,
  parseApprovalInput,
  parseDuration,
} from "./approval.js";
import { evaluatePayment, evaluatePolicy, type PolicyUsage } from "./engine.js";
import { InvalidPolicyError } from "./errors.js";
import { applyPatch, EMPTY_POLICY, parsePolicyPatch, type Policy, validatePolicy } from "./policy.js";

const T0 = new Date("2026-03-01T12:00:00.000Z");
const USDC = 1_000_000n;
const NO_USAGE: PolicyUsage = { usedTodayUnits: 0n, windowStart: null, rateCalls: 0, domainPaidBefore: true };

function refusal(run: () => unknown): { reason?: string; field?: string; code?: string; name?: string } {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidPolicyError);
    return error as { reason?: string; field?: string; code?: string };
  }
  throw new Error("expected a refusal");
}

const RULE: ApprovalPolicy = { aboveUnits: 5n * USDC, domains: [], firstPaymentToDomain: false, timeoutMs: 900_000, onTimeout: "deny" };

function withApproval(approval: Partial<ApprovalPolicy>, fields: Partial<Policy> = {}): Policy {
  return validatePolicy({ ...EMPTY_POLICY, ...fields, approval: { ...RULE, ...approval } });
}

describe("durations", () => {
  it.each([
    ["1s", 1_000],
    ["90s", 90_000],
    ["15m", 900_000],
    ["1h", 3_600_000],
    ["7d", 604_800_000],
  ])("reads %s as %d ms", (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each(["", "0s", "01m", "1.5h", "1w", "1 h", "-1s", "1H", "15", "m", "99999999999s"])("refuses %j", (text) => {
    expect(parseDuration(text)).toBeNull();
  });

  it("writes the largest unit that divides exactly", () => {
    expect(formatDuration(900_000)).toBe("15m");
    expect(formatDuration(90_000)).toBe("90s");
    expect(formatDuration(172_800_000)).toBe("2d");
    expect(formatDuration(5_400_000)).toBe("90m");
  });
});

describe("the approval field on the wire", () => {
  it("reads every sub-field and echoes the timeout in its shortest form", () => {
    const approval = parseApprovalInput({
      above: { usdc: "5.5" },
      domains: ["Vendor.Example.", "vendor.example"],
      firstPaymentToDomain: true,
      timeout: "900s",
      onTimeout: "deny",
    });
    expect(approval).toEqual({
      aboveUnits: 5_500_000n,
      domains: ["vendor.example"],
      firstPaymentToDomain: true,
      timeoutMs: 900_000,
      onTimeout: "deny",
    });
    expect(approvalView(approval!)).toEqual({
      aboveUnits: 5_500_000n,
      domains: ["vendor.example"],
      firstPaymentToDomain: true,
      timeout: "15m",
      onTimeout: "deny",
    });
  });

  it("renders for REST and webhooks with exact money, and maps to the policy columns and back", () => {
    const approval = parseApprovalInput({ above: { usdc: "0.1" }, domains: ["vendor.example"], timeout: "2h" })!;
    expect(writeJson(approvalJson(approval))).toBe(
      '{"above":{"usdc":0.1},"domains":["vendor.example"],"firstPaymentToDomain":false,"timeout":"2h","onTimeout":"deny"}',
    );
    expect(approvalToColumns(approval)).toEqual({
      approval_above_units: "100000",
      approval_domains: ["vendor.example"],
      approval_first_payment_to_domain: false,
      approval_timeout_ms: "7200000",
      approval_on_timeout: "deny",
    });
    expect(approvalFromColumns(approvalToColumns(approval))).toEqual(approval);
    expect(approvalFromColumns(approvalToColumns(null))).toBeNull();
  });

  it("defaults domains, firstPaymentToDomain and onTimeout; null removes the field", () => {
    expect(parseApprovalInput({ above: { usdc: 0 }, timeout: "1h" })).toEqual({
      aboveUnits: 0n,
      domains: [],
      firstPaymentToDomain: false,
      timeoutMs: 3_600_000,
      onTimeout: "deny",
    });
    expect(parseApprovalInput(null)).toBeNull();
  });

  it.each([
    ["not an object", "15m", "approval"],
    ["an unknown key", { above: { usdc: 1 }, timeout: "1m", after: "1m" }, "approval.after"],
    ["no rule", { timeout: "1m" }, "approval"],
    ["an empty domain list and no other rule", { domains: [], firstPaymentToDomain: false, timeout: "1m" }, "approval"],
    ["a missing timeout", { above: { usdc: 1 } }, "approval.timeout"],
    ["a numeric timeout", { above: { usdc: 1 }, timeout: 60 }, "approval.timeout"],
    ["a malformed timeout", { above: { usdc: 1 }, timeout: "soon" }, "approval.timeout"],
    ["a timeout below 1s", { above: { usdc: 1 }, timeout: "0s" }, "approval.timeout"],
    ["a timeout above 7d", { above: { usdc: 1 }, timeout: "8d" }, "approval.timeout"],
    ["a timeout of 7d and a second", { above: { usdc: 1 }, timeout: "604801s" }, "approval.timeout"],
    ["onTimeout other than deny", { above: { usdc: 1 }, timeout: "1m", onTimeout: "approve" }, "approval.onTimeout"],
    ["a negative amount", { above: { usdc: "-1" }, timeout: "1m" }, "approval.above"],
    ["seven decimals", { above: { usdc: "0.0000001" }, timeout: "1m" }, "approval.above"],
    ["an amount that is no object", { above: 5, timeout: "1m" }, "approval.above"],
    ["a bad domain entry", { domains: ["*.example.com"], timeout: "1m" }, "approval.domains"],
    ["a domain list of numbers", { domains: [1], timeout: "1m" }, "approval.domains"],
    ["a non-boolean firstPaymentToDomain", { firstPaymentToDomain: "yes", timeout: "1m" }, "approval.firstPaymentToDomain"],
  ])("refuses %s, naming %s", (_what, value, field) => {
    const error = refusal(() => parseApprovalInput(value));
    expect(error).toMatchObject({ reason: "invalid_approval", field, code: "BAD_USER_INPUT" });
  });

  it("7d itself is allowed", () => {
    expect(parseApprovalInput({ above: { usdc: 1 }, timeout: "7d" })?.timeoutMs).toBe(604_800_000);
  });

  it("is a writable policy field of policies.set, replaced whole, removed by null", () => {
    const patch = parsePolicyPatch({ approval: { domains: ["vendor.example"], timeout: "1h" } });
    const first = applyPatch(EMPTY_POLICY, patch);
    expect(first.approval).toMatchObject({ domains: ["vendor.example"], aboveUnits: null, timeoutMs: 3_600_000 });
    const kept = applyPatch(first, parsePolicyPatch({ dailyBudget: { usdc: 10 } }));
    expect(kept.approval).toEqual(first.approval);
    const replaced = applyPatch(kept, parsePolicyPatch({ approval: { above: { usdc: 2 }, timeout: "1m" } }));
    expect(replaced.approval).toMatchObject({ aboveUnits: 2n * USDC, domains: [] });
    const removed = applyPatch(replaced, parsePolicyPatch({ approval: null }));
    expect(removed.approval).toBeUndefined();
    expect(removed.dailyBudgetUnits).toBe(10n * USDC);
  });

  it("a policy without approval keeps its exact shape (no approval key)", () => {
    expect(Object.keys(validatePolicy(EMPTY_POLICY))).not.toContain("approval");
  });

  it("validatePolicy refuses a rule built in code that the wire would refuse", () => {
    expect(refusal(() => withApproval({ timeoutMs: 500 }))).toMatchObject({ field: "approval.timeout" });
    expect(refusal(() => withApproval({ timeoutMs: 1_500 }))).toMatchObject({ field: "approval.timeout" });
    expect(refusal(() => withApproval({ aboveUnits: -1n }))).toMatchObject({ field: "approval.above" });
    expect(refusal(() => withApproval({ aboveUnits: 2n ** 64n }))).toMatchObject({ field: "approval.above" });
    expect(refusal(() => withApproval({ aboveUnits: null }))).toMatchObject({ field: "approval" });
  });
});

describe("evaluatePayment: the third outcome", () => {
  const endpoint = "https://pay.vendor.example/v1/report";

  it("holds a payment strictly above the threshold, and lets the threshold itself through", () => {
    const held = evaluatePayment(withApproval({}), NO_USAGE, { endpoint, amountUnits: 5n * USDC + 1n }, T0);
    expect(held).toMatchObject({
      decision: "needs_approval",
      approvalRule: "above",
      reasonCode: null,
      errorClass: null,
      timeoutMs: 900_000,
      domain: "pay.vendor.example",
      protocol: "x402",
      reason: "approval_required: 5.000001 usdc is above the approval threshold of 5 usdc",
    });
    expect(evaluatePayment(withApproval({}), NO_USAGE, { endpoint, amountUnits: 5n * USDC }, T0).decision).toBe("allow");
  });

  it("above 0 holds every payment", () => {
    expect(evaluatePayment(withApproval({ aboveUnits: 0n }), NO_USAGE, { endpoint, amountUnits: 1n }, T0).decision).toBe("needs_approval");
  });

  it("holds a payment to a listed domain and its subdomains, naming the entry", () => {
    const policy = withApproval({ aboveUnits: null, domains: ["vendor.example"] });
    expect(evaluatePayment(policy, NO_USAGE, { endpoint, amountUnits: 1n }, T0)).toMatchObject({
      decision: "needs_approval",
      approvalRule: "domains",
      reason: "approval_required: pay.vendor.example is on the policy's approval.domains (entry vendor.example)",
    });
    expect(evaluatePayment(policy, NO_USAGE, { endpoint: "https://evil-vendor.example/x", amountUnits: 1n }, T0).decision).toBe("allow");
  });

  it("holds the first payment to a host never paid, and an unknown history counts as never paid", () => {
    const policy = withApproval({ aboveUnits: null, firstPaymentToDomain: true });
    const request = { endpoint, amountUnits: USDC };
    expect(evaluatePayment(policy, NO_USAGE, request, T0).decision).toBe("allow");
    expect(evaluatePayment(policy, { ...NO_USAGE, domainPaidBefore: false }, request, T0)).toMatchObject({
      decision: "needs_approval",
      approvalRule: "firstPaymentToDomain",
      reason: "approval_required: first payment to pay.vendor.example",
    });
    const { domainPaidBefore: _, ...unknown } = NO_USAGE;
    expect(evaluatePayment(policy, unknown, request, T0).decision).toBe("needs_approval");
  });

  it("names the first rule that matches: above, then domains, then first payment", () => {
    const policy = withApproval({ aboveUnits: USDC, domains: ["vendor.example"], firstPaymentToDomain: true });
    const fresh = { ...NO_USAGE, domainPaidBefore: false };
    expect(evaluatePayment(policy, fresh, { endpoint, amountUnits: 2n * USDC }, T0)).toMatchObject({ approvalRule: "above" });
    expect(evaluatePayment(policy, fresh, { endpoint, amountUnits: USDC }, T0)).toMatchObject({ approvalRule: "domains" });
    expect(evaluatePayment(policy, fresh, { endpoint: "https://other.example/x", amountUnits: USDC }, T0)).toMatchObject({
      approvalRule: "firstPaymentToDomain",
    });
  });

  it("a refusal wins over a hold: blocked domain, per-call limit, daily budget, rate limit", () => {
    const hold = { aboveUnits: 0n };
    const request = { endpoint, amountUnits: 2n * USDC };
    const cases: Array<[Partial<Policy>, PolicyUsage, string]> = [
      [{ blockedDomains: ["vendor.example"] }, NO_USAGE, "domain_blocked"],
      [{ allowedDomains: ["other.example"] }, NO_USAGE, "domain_not_allowed"],
      [{ perCallLimitUnits: USDC }, NO_USAGE, "per_call_limit_exceeded"],
      [{ dailyBudgetUnits: 3n * USDC }, { ...NO_USAGE, usedTodayUnits: 2n * USDC, windowStart: T0 }, "daily_budget_exceeded"],
      [{ rateLimit: { calls: 1, window: "1m" } }, { ...NO_USAGE, rateCalls: 1 }, "rate_limit_exceeded"],
    ];
    for (const [fields, usage, reasonCode] of cases) {
      const decision = evaluatePayment(withApproval(hold, fields), usage, request, T0);
      expect(decision, reasonCode).toMatchObject({ decision: "reject", reasonCode });
    }
  });

  it("a held payment's budget is as if allowed (its amount is reserved) and it may carry the 80 % warning", () => {
    const policy = withApproval({ aboveUnits: 0n }, { dailyBudgetUnits: 10n * USDC });
    const decision = evaluatePayment(
      policy,
      { ...NO_USAGE, usedTodayUnits: 7n * USDC, windowStart: T0 },
      { endpoint, amountUnits: USDC },
      T0,
    );
    expect(decision).toMatchObject({ decision: "needs_approval", warnings: ["budget.warning"] });
    expect(decision.budget).toMatchObject({ usedUnits: 8n * USDC, state: "warning" });
  });

  it("evaluatePolicy (what approving re-runs) ignores the approval rules", () => {
    const decision = evaluatePolicy(withApproval({ aboveUnits: 0n }), NO_USAGE, { endpoint, amountUnits: USDC }, T0);
    expect(decision.decision).toBe("allow");
  });

  it("a policy without approval never holds", () => {
    const decision = evaluatePayment(
      validatePolicy(EMPTY_POLICY),
      { ...NO_USAGE, domainPaidBefore: false },
      { endpoint, amountUnits: USDC },
      T0,
    );
    expect(decision.decision).toBe("allow");
  });
});
