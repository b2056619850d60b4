import { describe, expect, it } from "vitest";
import type * as errors from "./errors.js";
import {
  AuthenticationError,
  BudgetExceededError,
  DailyBudgetExceededError,
  DomainNotAllowedError,
  errorFromProblem,
  InsufficientFundsError,
  PaymentError,
  PaymentProtocolError,
  PolicyViolationError,
  ServiceError,
} from "./errors.js";

const PER_CALL = "per_call_limit_exceeded: requested 0.5 usdc, limit is 0.1 usdc";

describe("the gateway's problem JSON maps to the spec's classes", () => {
  it("a per-call-limit rejection is a PolicyViolationError with the spec's reason text", () => {
    const error = errorFromProblem(403, {
      type: "about:blank",
      title: "POLICY_VIOLATION",
      status: 403,
      code: "POLICY_VIOLATION",
      detail: PER_CALL,
      errorClass: "PolicyViolationError",
      reason: PER_CALL,
      reasonCode: "per_call_limit_exceeded",
      domain: "api.example.com",
    });
    expect(error).toBeInstanceOf(PolicyViolationError);
    expect(error).toBeInstanceOf(ServiceError);
    expect(error).not.toBeInstanceOf(DomainNotAllowedError);
    const policy = error as PolicyViolationError;
    expect(policy.reason).toBe(PER_CALL);
    expect(policy.reasonCode).toBe("per_call_limit_exceeded");
    expect(policy.code).toBe("POLICY_VIOLATION");
    expect(policy.status).toBe(403);
    expect(policy.name).toBe("PolicyViolationError");
    expect(policy.message).toBe(PER_CALL);
  });

  it("a domain rejection carries the domain and is also a PolicyViolationError", () => {
    const error = errorFromProblem(403, {
      code: "POLICY_VIOLATION",
      errorClass: "DomainNotAllowedError",
      reason: "domain_blocked: requested 0.1 usdc, limit is 0 usdc",
      domain: "evil.example",
    });
    expect(error).toBeInstanceOf(DomainNotAllowedError);
    expect(error).toBeInstanceOf(PolicyViolationError);
    expect((error as DomainNotAllowedError).domain).toBe("evil.example");
    expect((error as DomainNotAllowedError).reasonCode).toBe("domain_blocked");
  });

  it("daily budget, invocation budget, funds, protocol, payment and auth failures", () => {
    expect(
      errorFromProblem(403, {
        code: "POLICY_VIOLATION",
        errorClass: "DailyBudgetExceededError",
        reason: "daily_budget_exceeded: requested 1 usdc, limit is 5 usdc",
      }),
    ).toBeInstanceOf(DailyBudgetExceededError);
    const budget = errorFromProblem(422, { code: "BUDGET_EXCEEDED", detail: "budget_exceeded: requested 2 usdc, limit is 1 usdc" });
    expect(budget).toBeInstanceOf(BudgetExceededError);
    expect(budget).toBeInstanceOf(PolicyViolationError);
    expect((budget as BudgetExceededError).reason).toBe("budget_exceeded: requested 2 usdc, limit is 1 usdc");

    const funds = errorFromProblem(422, {
      code: "INSUFFICIENT_FUNDS",
      errorClass: "InsufficientFundsError",
      detail: "no",
      currentBalance: { usdc: 2.000001 },
    });
    expect(funds).toBeInstanceOf(InsufficientFundsError);
    expect((funds as InsufficientFundsError).currentBalance).toEqual({ usdc: 2.000001 });

    const protocol = errorFromProblem(400, {
      code: "BAD_USER_INPUT",
      errorClass: "PaymentProtocolError",
      endpoint: "http://x/y",
      detail: "?",
    });
    expect(protocol).toBeInstanceOf(PaymentProtocolError);
    expect((protocol as PaymentProtocolError).endpoint).toBe("http://x/y");

    expect(errorFromProblem(502, { code: "PAYMENT_FAILED", detail: "expired" })).toBeInstanceOf(PaymentError);
    expect(errorFromProblem(401, { code: "AUTHENTICATION_ERROR" })).toBeInstanceOf(AuthenticationError);
    expect(errorFromProblem(401, "not json")).toBeInstanceOf(AuthenticationError);
  });

  it("anything else is a plain ServiceError with its code and status", () => {
    const error = errorFromProblem(404, { code: "NOT_FOUND", detail: "no agent a1" });
    expect(error.constructor).toBe(ServiceError);
    expect(error.code).toBe("NOT_FOUND");
    expect(error.status).toBe(404);
    expect(error.message).toBe("no agent a1");
    expect(error).not.toBeInstanceOf(PolicyViolationError);
    expect(errorFromProblem(500, undefined).message).toMatch(/500/);
  });
});

describe("instanceof across two copies of the package", () => {
  it("an error of one module instance is an instance of the other's classes", async () => {
    // The query string makes vite load a second, separate instance of the module.
    const specifier = "./errors.js?second-copy";
    const copy = (await import(/* @vite-ignore */ specifier)) as typeof errors;
    expect(copy.PolicyViolationError).not.toBe(PolicyViolationError);

    const theirs = new copy.DomainNotAllowedError("domain_not_allowed: requested 1 usdc, limit is 0 usdc", "x.example");
    expect(theirs).toBeInstanceOf(DomainNotAllowedError);
    expect(theirs).toBeInstanceOf(PolicyViolationError);
    expect(theirs).toBeInstanceOf(ServiceError);
    expect(theirs).not.toBeInstanceOf(InsufficientFundsError);

    const ours = new InsufficientFundsError("low", { usdc: 1 });
    expect(ours instanceof copy.InsufficientFundsError).toBe(true);
    expect(ours instanceof copy.ServiceError).toBe(true);
    expect(ours instanceof copy.PolicyViolationError).toBe(false);
    expect(new Error("x") instanceof copy.ServiceError).toBe(false);
    expect(ours).toBeInstanceOf(Error);
  });
});
