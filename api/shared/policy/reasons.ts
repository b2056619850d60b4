/**
 * The one source of every refusal text (the `reason` of spec 7). Webhooks, REST problems, GraphQL
 * `checkPolicy`, the dashboard, the CLI and both SDKs show what these functions wrote; none
 * composes its own. docs/policy.md "Refusal texts" lists them.
 *
 * Spec 7's form `<reason_code>: requested <amount> <unit>, limit is <amount> <unit>` is kept where
 * a limit exists (per call, rate, daily budget, invocation budget). A domain rule has no amount
 * limit, so its text names the domain and the rule instead.
 */

/** Spec 7: `<reason_code>: requested <amount> <unit>, limit is <amount> <unit>`. */
export function limitReason(reasonCode: string, requested: string, limit: string, unit: string): string {
  return `${reasonCode}: requested ${requested} ${unit}, limit is ${limit} ${unit}`;
}

export interface DailyBudgetFigures {
  readonly requested: string;
  /** The daily budget. */
  readonly budget: string;
  readonly used: string;
  readonly left: string;
  readonly unit: string;
  /**
   * The end of the open period when the budget is exhausted (a payment was already refused for it
   * in this period, or nothing is left): every payment is refused until then (spec 3).
   */
  readonly exhaustedUntil: Date | null;
}

/**
 * `daily_budget_exceeded: requested 0.04 usdc, limit is 0.1 usdc (used 0.08 usdc, left 0.02 usdc)`, or
 * `daily_budget_exceeded: requested 0.04 usdc, limit is 0.1 usdc (used 0.08 usdc, exhausted until 2026-03-02T09:00:00.000Z)`.
 */
export function dailyBudgetReason(figures: DailyBudgetFigures): string {
  const head = limitReason("daily_budget_exceeded", figures.requested, figures.budget, figures.unit);
  const state =
    figures.exhaustedUntil === null ? `left ${figures.left} ${figures.unit}` : `exhausted until ${figures.exhaustedUntil.toISOString()}`;
  return `${head} (used ${figures.used} ${figures.unit}, ${state})`;
}

/**
 * A limit refusal made by an `endpointBudgets` rule: the limit text, then the rule's match, e.g.
 * `per_call_limit_exceeded: requested 2 usdc, limit is 1 usdc (endpointBudgets api.example.com/v1/search)`.
 */
export function endpointRuleReason(limitText: string, match: string): string {
  return `${limitText} (endpointBudgets ${match})`;
}

/** `domain_blocked: evil.example.com is blocked by the policy (blockedDomains entry *.example.com)`. */
export function domainBlockedReason(domain: string, entry: string): string {
  return `domain_blocked: ${domain} is blocked by the policy (blockedDomains entry ${entry})`;
}

/** `domain_not_allowed: other.example.org is not on the policy's allowedDomains`. */
export function domainNotAllowedReason(domain: string): string {
  return `domain_not_allowed: ${domain} is not on the policy's allowedDomains`;
}

/**
 * Why a payment is held for approval (not a refusal; docs/policy.md "Approvals"):
 * `approval_required: 6 usdc is above the approval threshold of 5 usdc`,
 * `approval_required: pay.vendor.example is on the policy's approval.domains (entry vendor.example)`,
 * `approval_required: first payment to api.example.org`.
 */
export function approvalReason(
  match: { readonly rule: "above" | "domains" | "firstPaymentToDomain"; readonly entry: string | null },
  figures: { readonly requested: string; readonly above: string | null; readonly domain: string; readonly unit: string },
): string {
  switch (match.rule) {
    case "above":
      return `approval_required: ${figures.requested} ${figures.unit} is above the approval threshold of ${figures.above} ${figures.unit}`;
    case "domains":
      return `approval_required: ${figures.domain} is on the policy's approval.domains (entry ${match.entry})`;
    case "firstPaymentToDomain":
      return `approval_required: first payment to ${figures.domain}`;
  }
}

// A limit text, with the daily budget's "(used ..., left ...)" tail when there is one.
const LIMIT_TEXT = /^[a-z0-9_]+: requested (\S+) (\S+), limit is (\S+) (\S+)(?: \(.*\))?$/;

/**
 * The requested amount, the limit and their unit a stored refusal text names, or null for a text
 * without a limit (a domain refusal). Older rows keep the texts they were written with.
 */
export function reasonTerms(reason: string | null): { requested: string; limit: string; unit: string } | null {
  const match = reason === null ? null : LIMIT_TEXT.exec(reason);
  if (match === null || match[2] !== match[4]) return null;
  return { requested: match[1]!, limit: match[3]!, unit: match[2]! };
}
