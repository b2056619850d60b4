/**
 * The spend-policy decision (spec 2.1, 3, 7, 8) as one pure function: the same code answers the
 * GraphQL dry run and the gateway's hot path. Rules run in this order and the first breach decides:
 *
 * 1. blocked domain       → domain_blocked           (DomainNotAllowedError)
 * 2. domain not allowed   → domain_not_allowed       (DomainNotAllowedError)
 * 3. per-call limit       → per_call_limit_exceeded  (PolicyViolationError)
 * 4. daily budget         → daily_budget_exceeded    (DailyBudgetExceededError)
 * 5. rate limit           → rate_limit_exceeded      (PolicyViolationError)
 *
 * Rules 3–5 apply the agent's own limit and the limit of every `endpointBudgets` rule that covers
 * the endpoint (./endpoint-budgets.ts); among those a payment breaks, the refusal names the one with
 * the least room left (the agent's own on a tie) in `endpointRule` (null: the agent's own).
 *
 * Domains and the per-call limit come first because spec 4.7 step 3 and section 7 reject them
 * before any handshake or payment is attempted; both need no usage.
 *
 * `evaluatePayment` is the whole decision: those five refusals, then the policy's approval rules
 * (docs/policy.md "Approvals"): a payment that passes every refusal rule but matches one of
 *
 * 6. amount above `approval.above`            → needs_approval, rule `above`
 * 7. host matched by `approval.domains`       → needs_approval, rule `domains`
 * 8. first payment to a host (if set)         → needs_approval, rule `firstPaymentToDomain`
 *
 * is held for a person. A refusal always wins over a hold. `evaluatePolicy` is rules 1–5 alone:
 * what approving a held payment re-runs.
 */
import { formatUsdcShort } from "../money.js";
import { assertAmountUnits } from "./amounts.js";
import { endpointHost, findMatch } from "./domains.js";
import { type EndpointUsage, matchingEndpointBudgets } from "./endpoint-budgets.js";
import { type ApprovalRule, matchApproval } from "./approval.js";
import type { Policy, Protocol, ProtocolPreference, RateLimit } from "./policy.js";
import {
  approvalReason,
  dailyBudgetReason,
  domainBlockedReason,
  domainNotAllowedReason,
  endpointRuleReason,
  limitReason,
} from "./reasons.js";
import { BUDGET_WINDOW_MS, openBudgetWindow, type RateWindow } from "./windows.js";

export type ReasonCode =
  | "domain_blocked"
  | "domain_not_allowed"
  | "per_call_limit_exceeded"
  | "daily_budget_exceeded"
  | "rate_limit_exceeded";

/** Client error class names of spec section 7. */
export type ErrorClassName = "DomainNotAllowedError" | "PolicyViolationError" | "DailyBudgetExceededError";

export const ERROR_CLASS: Readonly<Record<ReasonCode, ErrorClassName>> = {
  domain_blocked: "DomainNotAllowedError",
  domain_not_allowed: "DomainNotAllowedError",
  per_call_limit_exceeded: "PolicyViolationError",
  daily_budget_exceeded: "DailyBudgetExceededError",
  rate_limit_exceeded: "PolicyViolationError",
};

export type PolicyWarning = "budget.warning";

/** Spec 3: open, warning (80 % consumed), exhausted (100 % consumed). */
export type BudgetState = "open" | "warning" | "exhausted";

export const WARNING_PERCENT = 80n;

/** What has been spent and called so far; `readUsage` computes it from the reservation ledger. */
export interface PolicyUsage {
  /** Spend in the budget period that started at `windowStart`. */
  readonly usedTodayUnits: bigint;
  /** First payment of the current period; null if no period is open. */
  readonly windowStart: Date | null;
  /** Payment calls in the policy's rate window ending now. */
  readonly rateCalls: number;
  /**
   * A payment was refused for the daily budget in the open period (after the policy's last change):
   * spec 3's `exhausted` state, in which every payment is refused until the period resets.
   */
  readonly budgetExhausted?: boolean;
  /**
   * Whether the agent has a settled payment to the request's exact (normalized) host: the
   * `approval.firstPaymentToDomain` rule. Undefined counts as never paid (the payment is held).
   */
  readonly domainPaidBefore?: boolean;
  /**
   * Usage of each `endpointBudgets` rule, by its `match`: spend in the open budget period and
   * calls in the rule's rate window. A rule missing here has used nothing.
   */
  readonly endpointUsage?: ReadonlyMap<string, EndpointUsage>;
}

export interface PaymentRequest {
  /** URL, or host and path as the spec prints endpoints. */
  readonly endpoint: string;
  readonly amountUnits: bigint;
  /** The client's `protocolPreference` (spec 4.6), which overrides the policy's. */
  readonly protocol?: ProtocolPreference;
  /** Protocols the 402 response offers; unknown (a dry run) means both. */
  readonly offeredProtocols?: readonly Protocol[];
}

export interface BudgetStatus {
  readonly state: BudgetState;
  readonly limitUnits: bigint | null;
  readonly usedUnits: bigint;
  readonly windowStart: Date | null;
  readonly resetsAt: Date | null;
}

interface DecisionCommon {
  /** The host paid, normalized. */
  readonly domain: string;
  /** The protocol this payment would use; null if the target offers none we speak. */
  readonly protocol: Protocol | null;
  /** The daily budget as it stands after this decision (a rejection changes nothing). */
  readonly budget: BudgetStatus;
}

export interface PolicyAllowed extends DecisionCommon {
  readonly decision: "allow";
  readonly reasonCode: null;
  readonly reason: null;
  readonly errorClass: null;
  /** `budget.warning` when this payment takes consumption to 80 % or more from below it. */
  readonly warnings: readonly PolicyWarning[];
}

export interface PolicyRejected extends DecisionCommon {
  readonly decision: "reject";
  readonly reasonCode: ReasonCode;
  /** The refusal text (./reasons.ts): spec 7's form where a limit exists, the domain and rule otherwise. */
  readonly reason: string;
  readonly errorClass: ErrorClassName;
  /** The amount asked for; null for a domain refusal made before any amount was known. */
  readonly requested: string | null;
  /** The limit the request broke; null for a domain rule, which has none. */
  readonly limit: string | null;
  readonly unit: string;
  /** For a domain refusal: the blockedDomains entry that matched, or null (not on allowedDomains). */
  readonly matchedEntry?: string | null;
  /** For a limit refusal: the `endpointBudgets` rule (its match) whose limit refused; null: the agent's own. */
  readonly endpointRule?: string | null;
  readonly warnings: readonly [];
}

export type PolicyDecision = PolicyAllowed | PolicyRejected;

/**
 * The payment passes every refusal rule but the policy holds it for a person (rules 6–8). Its
 * amount is to be reserved while it waits (so `budget` and `warnings` are those of an allowed
 * payment); nothing is signed until it is approved and `evaluatePolicy` allows it again.
 */
export interface PolicyNeedsApproval extends DecisionCommon {
  readonly decision: "needs_approval";
  readonly reasonCode: null;
  /** Which approval rule held it: the policy field's name. */
  readonly approvalRule: ApprovalRule;
  /** `approval_required: …` (./reasons.ts `approvalReason`). */
  readonly reason: string;
  readonly errorClass: null;
  /** How long the payment waits for a decision (the policy's `approval.timeout`). */
  readonly timeoutMs: number;
  readonly warnings: readonly PolicyWarning[];
}

/** `evaluatePayment`'s answer: allowed, refused, or held for approval. */
export type PaymentDecision = PolicyDecision | PolicyNeedsApproval;

const UNIT = "usdc";

export function evaluatePolicy(policy: Policy, usage: PolicyUsage, request: PaymentRequest, now: Date): PolicyDecision {
  assertAmountUnits(request.amountUnits, "amount");
  const amount = request.amountUnits;
  const domain = endpointHost(request.endpoint);
  const protocol = chooseProtocol(request.protocol ?? policy.protocolPreference, request.offeredProtocols);
  const window = openBudgetWindow(usage.windowStart, now);
  const used = window === null ? 0n : usage.usedTodayUnits;
  const exhausted = window !== null && policy.dailyBudgetUnits !== null && usage.budgetExhausted === true;
  const before = budgetStatus(policy.dailyBudgetUnits, used, window, exhausted);
  const reject = (
    reasonCode: ReasonCode,
    requested: string,
    limit: string | null,
    unit: string,
    reason = limitReason(reasonCode, requested, limit ?? "", unit),
  ): PolicyRejected => ({
    decision: "reject",
    reasonCode,
    reason,
    errorClass: ERROR_CLASS[reasonCode],
    requested,
    limit,
    unit,
    domain,
    protocol,
    budget: before,
    warnings: [],
  });

  const domainRefusal = evaluateDomain(policy, domain);
  if (domainRefusal !== null) {
    const { reasonCode, reason, matchedEntry } = domainRefusal;
    return { ...reject(reasonCode, formatUsdcShort(amount), null, UNIT, reason), matchedEntry };
  }
  const rules = matchingEndpointBudgets(policy.endpointBudgets, request.endpoint);
  const ruleUsage = (match: string): EndpointUsage => usage.endpointUsage?.get(match) ?? { usedUnits: 0n, rateCalls: 0 };

  // Rule 3: the smallest per-call limit that applies (the agent's first on a tie).
  const perCall = tightest([
    { rule: null, limit: policy.perCallLimitUnits },
    ...rules.map((r) => ({ rule: r.match, limit: r.perCallLimitUnits })),
  ]);
  if (perCall !== null && amount > perCall.limit) {
    const text = limitReason("per_call_limit_exceeded", formatUsdcShort(amount), formatUsdcShort(perCall.limit), UNIT);
    return named(reject("per_call_limit_exceeded", formatUsdcShort(amount), formatUsdcShort(perCall.limit), UNIT, text), perCall.rule);
  }

  // Rule 4: the agent's daily budget and each rule's, over the same open period.
  const budget = policy.dailyBudgetUnits;
  const budgets: Breach[] = [];
  if (budget !== null && (exhausted || used + amount > budget))
    budgets.push({ rule: null, room: exhausted ? 0n : remaining(budget, used) });
  for (const rule of rules) {
    if (rule.dailyBudgetUnits === null) continue;
    const ruleUsed = window === null ? 0n : ruleUsage(rule.match).usedUnits;
    if (ruleUsed + amount > rule.dailyBudgetUnits) budgets.push({ rule: rule.match, room: remaining(rule.dailyBudgetUnits, ruleUsed) });
  }
  const budgetBreach = leastRoom(budgets);
  if (budgetBreach !== null) {
    const rule = rules.find((r) => r.match === budgetBreach.rule);
    const limit = rule === undefined ? budget! : rule.dailyBudgetUnits!;
    const spent = rule === undefined ? used : window === null ? 0n : ruleUsage(rule.match).usedUnits;
    const text = dailyBudgetReason({
      requested: formatUsdcShort(amount),
      budget: formatUsdcShort(limit),
      used: formatUsdcShort(spent),
      left: formatUsdcShort(remaining(limit, spent)),
      unit: UNIT,
      exhaustedUntil: rule === undefined && (exhausted || used >= limit) ? before.resetsAt : null,
    });
    return named(reject("daily_budget_exceeded", formatUsdcShort(amount), formatUsdcShort(limit), UNIT, text), budgetBreach.rule);
  }

  // Rule 5: the agent's rate limit and each rule's, each over its own window.
  const rates: (Breach & { calls: number; limit: RateLimit })[] = [];
  if (policy.rateLimit !== null && usage.rateCalls >= policy.rateLimit.calls) {
    rates.push({ rule: null, room: BigInt(policy.rateLimit.calls - usage.rateCalls), calls: usage.rateCalls, limit: policy.rateLimit });
  }
  for (const rule of rules) {
    const calls = ruleUsage(rule.match).rateCalls;
    if (rule.rateLimit !== null && calls >= rule.rateLimit.calls) {
      rates.push({ rule: rule.match, room: BigInt(rule.rateLimit.calls - calls), calls, limit: rule.rateLimit });
    }
  }
  const rateBreach = leastRoom(rates);
  if (rateBreach !== null) {
    const unit = rateUnit(rateBreach.limit.window);
    const [requested, limit] = [String(rateBreach.calls + 1), String(rateBreach.limit.calls)];
    return named(
      reject("rate_limit_exceeded", requested, limit, unit, limitReason("rate_limit_exceeded", requested, limit, unit)),
      rateBreach.rule,
    );
  }

  const after = budgetStatus(budget, used + amount, window ?? { start: now, resetsAt: new Date(now.getTime() + BUDGET_WINDOW_MS) });
  return {
    decision: "allow",
    reasonCode: null,
    reason: null,
    errorClass: null,
    domain,
    protocol,
    budget: after,
    warnings: budget !== null && crossesWarning(budget, used, used + amount) ? ["budget.warning"] : [],
  };
}

/**
 * The whole decision (rules 1–8): `evaluatePolicy`, and when it allows the payment, the policy's
 * approval rules. A refusal wins over a hold; a policy without `approval` never holds.
 */
export function evaluatePayment(policy: Policy, usage: PolicyUsage, request: PaymentRequest, now: Date): PaymentDecision {
  const decision = evaluatePolicy(policy, usage, request, now);
  const approval = policy.approval;
  if (decision.decision !== "allow" || approval == null) return decision;
  const match = matchApproval(approval, request.amountUnits, decision.domain, usage.domainPaidBefore);
  if (match === null) return decision;
  const figures = {
    requested: formatUsdcShort(request.amountUnits),
    above: approval.aboveUnits === null ? null : formatUsdcShort(approval.aboveUnits),
    domain: decision.domain,
    unit: UNIT,
  };
  return {
    decision: "needs_approval",
    reasonCode: null,
    approvalRule: match.rule,
    reason: approvalReason(match, figures),
    errorClass: null,
    timeoutMs: approval.timeoutMs,
    domain: decision.domain,
    protocol: decision.protocol,
    budget: decision.budget,
    warnings: decision.warnings,
  };
}

/** A refusal by the domain rules (rules 1 and 2): the reason code, its text and the matched entry. */
export interface DomainRefusal {
  readonly reasonCode: "domain_blocked" | "domain_not_allowed";
  readonly reason: string;
  /** The blockedDomains entry that matched, or null (not on allowedDomains). */
  readonly matchedEntry: string | null;
}

/**
 * Rules 1 and 2 alone, for a normalized host: what `evaluatePolicy` applies first, and what the
 * gateway's domain check answers when a client refused a host before any request left it.
 */
export function evaluateDomain(policy: Policy, domain: string): DomainRefusal | null {
  const blockedBy = findMatch(policy.blockedDomains, domain);
  if (blockedBy !== null) return { reasonCode: "domain_blocked", reason: domainBlockedReason(domain, blockedBy), matchedEntry: blockedBy };
  if (policy.allowedDomains !== null && findMatch(policy.allowedDomains, domain) === null) {
    return { reasonCode: "domain_not_allowed", reason: domainNotAllowedReason(domain), matchedEntry: null };
  }
  return null;
}

/**
 * The domain rules alone, before any amount is known (a client refused the host locally and asks
 * the gateway, which decides): the same refusal `evaluatePolicy` gives, with `requested` null.
 */
export function evaluateDomainOnly(policy: Policy, usage: PolicyUsage, endpoint: string, now: Date): PolicyRejected | null {
  const domain = endpointHost(endpoint);
  const refusal = evaluateDomain(policy, domain);
  if (refusal === null) return null;
  const window = openBudgetWindow(usage.windowStart, now);
  const used = window === null ? 0n : usage.usedTodayUnits;
  const exhausted = window !== null && policy.dailyBudgetUnits !== null && usage.budgetExhausted === true;
  return {
    decision: "reject",
    ...refusal,
    errorClass: ERROR_CLASS[refusal.reasonCode],
    requested: null,
    limit: null,
    unit: UNIT,
    domain,
    protocol: null,
    budget: budgetStatus(policy.dailyBudgetUnits, used, window, exhausted),
    warnings: [],
  };
}

/** A limit that applies: the agent's own (`rule` null) or an endpoint rule's. */
interface Breach {
  readonly rule: string | null;
  /** What was left under the limit before this payment (amount or calls). */
  readonly room: bigint;
}

function tightest(limits: readonly { rule: string | null; limit: bigint | null }[]): { rule: string | null; limit: bigint } | null {
  let best: { rule: string | null; limit: bigint } | null = null;
  for (const { rule, limit } of limits) {
    if (limit !== null && (best === null || limit < best.limit)) best = { rule, limit };
  }
  return best;
}

function leastRoom<T extends Breach>(breaches: readonly T[]): T | null {
  let best: T | null = null;
  for (const breach of breaches) if (best === null || breach.room < best.room) best = breach;
  return best;
}

/** A limit refusal named after the limit that made it: an endpoint rule's text says which rule. */
function named(rejected: PolicyRejected, rule: string | null): PolicyRejected {
  return rule === null
    ? { ...rejected, endpointRule: null }
    : { ...rejected, reason: endpointRuleReason(rejected.reason, rule), endpointRule: rule };
}

/** auto and x402 prefer x402 and fall back to MPP; mpp prefers MPP and falls back to x402. */
export function chooseProtocol(preference: ProtocolPreference, offered?: readonly Protocol[]): Protocol | null {
  const order: readonly Protocol[] = preference === "mpp" ? ["mpp", "x402"] : ["x402", "mpp"];
  return order.find((protocol) => offered === undefined || offered.includes(protocol)) ?? null;
}

/** `exhausted`: a payment was refused for the budget in the open period (spec 3), whatever is left. */
export function budgetState(limitUnits: bigint | null, usedUnits: bigint, exhausted = false): BudgetState {
  if (limitUnits === null) return "open";
  if (exhausted || usedUnits >= limitUnits) return "exhausted";
  return usedUnits * 100n >= limitUnits * WARNING_PERCENT ? "warning" : "open";
}

function crossesWarning(limitUnits: bigint, beforeUnits: bigint, afterUnits: bigint): boolean {
  const threshold = limitUnits * WARNING_PERCENT;
  return beforeUnits * 100n < threshold && afterUnits * 100n >= threshold;
}

function budgetStatus(
  limitUnits: bigint | null,
  usedUnits: bigint,
  window: { start: Date; resetsAt: Date } | null,
  exhausted = false,
): BudgetStatus {
  return {
    state: budgetState(limitUnits, usedUnits, exhausted),
    limitUnits,
    usedUnits,
    windowStart: window?.start ?? null,
    resetsAt: window?.resetsAt ?? null,
  };
}

function remaining(limitUnits: bigint, usedUnits: bigint): bigint {
  return usedUnits >= limitUnits ? 0n : limitUnits - usedUnits;
}

function rateUnit(window: RateWindow): string {
  return `calls/${window}`;
}
