/**
 * The backtest of a candidate policy (`simulatePolicy`): an agent's real payment attempts of a
 * window, replayed in order through the gateway's own decision (`evaluatePayment`, rules 1–8, no
 * copy of any rule) with the candidate, answering per attempt pass / refuse (rule, text) / needs
 * approval, and totals. Pure: the attempts, the policy and the usage standing at the window's start
 * in; decisions and totals out. Nothing is read or written.
 *
 * The usage each decision is made on is the replay's own, kept the way the gateway keeps it: an
 * attempt the candidate lets through (or holds: a held payment is reserved while it waits, and the
 * replay assumes the person approves it) counts in the daily budget period it opens or joins, in
 * the rate window, and marks its host as paid (`approval.firstPaymentToDomain`); a daily-budget
 * refusal exhausts the open period (spec 3). An attempt the candidate refuses counts nowhere.
 * Running totals and a sliding pointer over the counted calls make the replay linear in the
 * attempts (bench/policy/backtest.ts measures it against per-payment usage recomputation).
 *
 * Non-guarantees: a held payment is assumed approved at once (a path that cannot wait for a
 * person would refuse it; the history does not say which path a payment took); a payment counts
 * as paid when let through (a settlement that later failed is not replayed as failed); attempts
 * recorded with amount 0 (a client's domain check, before any price was known) meet the domain
 * rules only.
 */
import { endpointHost } from "./domains.js";
import { type EndpointBudget, type EndpointUsage, matchingEndpointBudgets } from "./endpoint-budgets.js";
import type { ApprovalRule } from "./approval.js";
import { evaluateDomainOnly, evaluatePayment, type PaymentDecision, type PolicyUsage, type ReasonCode } from "./engine.js";
import type { Policy, Protocol } from "./policy.js";
import { RATE_WINDOW_MS } from "./windows.js";

/** At most this many attempts per backtest: the window's read is capped at it (and says so). */
export const MAX_BACKTEST_ATTEMPTS = 200_000;

export type BacktestOutcome = "pass" | "refuse" | "needs_approval";

/** One payment attempt as the gateway recorded it. */
export interface PaymentAttempt {
  /** `reservation:<id>` or `rejection:<id>`: where the attempt is recorded. */
  readonly id: string;
  /** When it was decided (a held payment: when it was asked for). */
  readonly at: Date;
  /** Host and path (or a URL), as recorded. */
  readonly endpoint: string;
  /** 0: a domain check made before any amount was known. */
  readonly amountUnits: bigint;
  /** The protocol it used; null when refused before one was chosen. */
  readonly protocol: Protocol | null;
  /** A channel's deposit: an exposure over many calls, not held to the per-call limit (as the gateway). */
  readonly exposure?: boolean;
  /** What really happened to it, to tell what the candidate changes. */
  readonly recorded: BacktestOutcome;
}

/** The usage standing when the window starts (the real history before it). */
export interface BacktestStart {
  /** The daily budget period open at the start, and what was spent in it; null when none. */
  readonly windowStart: Date | null;
  readonly usedUnits: bigint;
  /** When each counted call of the 24 h before the start was made, oldest first (the rate window). */
  readonly callTimes: readonly Date[];
  /** Hosts the agent had a settled payment to before the start. */
  readonly paidDomains: readonly string[];
  /**
   * Per `endpointBudgets` rule of the candidate (by `match`): the spend of the period open at the
   * start on the endpoints it covers, and when each covered call of its rate window was made.
   */
  readonly endpoints?: ReadonlyMap<string, { readonly usedUnits: bigint; readonly callTimes: readonly Date[] }>;
}

export const EMPTY_START: BacktestStart = Object.freeze({ windowStart: null, usedUnits: 0n, callTimes: [], paidDomains: [] });

/** Calls strictly after `now - windowMs`, over times that only grow (windows.ts: half-open). */
class SlidingCalls {
  private head = 0;

  constructor(readonly times: number[]) {}

  since(now: number, windowMs: number): number {
    const after = now - windowMs;
    while (this.head < this.times.length && this.times[this.head]! <= after) this.head += 1;
    return this.times.length - this.head;
  }
}

/** One endpoint rule's running usage: spend of the agent's current period, calls in its window. */
interface RuleUsage {
  usedUnits: bigint;
  readonly calls: SlidingCalls;
  readonly windowMs: number;
}

export interface BacktestDecision {
  readonly attempt: PaymentAttempt;
  readonly outcome: BacktestOutcome;
  /** The refusal's reason code or the approval rule; null for a pass. */
  readonly rule: ReasonCode | ApprovalRule | null;
  /** The engine's text for the refusal or the hold; null for a pass. */
  readonly reason: string | null;
  /** The host, normalized. */
  readonly domain: string;
}

export interface AmountCount {
  readonly count: number;
  readonly amountUnits: bigint;
}

export interface BacktestTotals {
  readonly attempts: number;
  readonly passed: AmountCount;
  readonly refused: AmountCount;
  readonly needsApproval: AmountCount;
  /** Attempts whose outcome differs from the recorded one. */
  readonly changed: number;
  /** Refusals by reason code, most amount first. */
  readonly refusedByRule: ReadonlyArray<AmountCount & { readonly rule: ReasonCode }>;
  /** Refusals by host, most amount first. */
  readonly refusedByDomain: ReadonlyArray<AmountCount & { readonly domain: string }>;
  /** Holds by approval rule, most amount first. */
  readonly needsApprovalByRule: ReadonlyArray<AmountCount & { readonly rule: ApprovalRule }>;
}

export interface BacktestResult {
  readonly decisions: readonly BacktestDecision[];
  readonly totals: BacktestTotals;
}

/** The running usage of the replay. */
class ReplayUsage {
  windowStart: Date | null;
  usedUnits: bigint;
  /** When the last daily-budget refusal happened (ms), or null. */
  budgetRefusedAt: number | null = null;
  private readonly calls: SlidingCalls;
  readonly paid: Set<string>;
  /** The candidate's endpoint rules, by match (empty without any). */
  private readonly rules = new Map<string, RuleUsage>();
  /** The rules covering each endpoint seen (an endpoint recurs; matching parses it). */
  private readonly covering = new Map<string, readonly EndpointBudget[]>();

  constructor(policy: Policy, start: BacktestStart) {
    this.windowStart = start.windowStart;
    this.usedUnits = start.usedUnits;
    this.calls = new SlidingCalls(start.callTimes.map((at) => at.getTime()));
    this.paid = new Set(start.paidDomains);
    for (const rule of policy.endpointBudgets ?? []) {
      const seed = start.endpoints?.get(rule.match);
      this.rules.set(rule.match, {
        usedUnits: seed?.usedUnits ?? 0n,
        calls: new SlidingCalls((seed?.callTimes ?? []).map((at) => at.getTime())),
        windowMs: rule.rateLimit === null ? 0 : RATE_WINDOW_MS[rule.rateLimit.window],
      });
    }
  }

  view(policy: Policy, now: number, domain: (() => string) | null, endpoint: string): PolicyUsage {
    const exhausted = this.windowStart !== null && this.budgetRefusedAt !== null && this.budgetRefusedAt >= this.windowStart.getTime();
    return {
      usedTodayUnits: this.usedUnits,
      windowStart: this.windowStart,
      rateCalls: policy.rateLimit === null ? 0 : this.calls.since(now, RATE_WINDOW_MS[policy.rateLimit.window]),
      budgetExhausted: exhausted,
      ...(domain === null ? {} : { domainPaidBefore: this.paid.has(domain()) }),
      ...(this.rules.size === 0 ? {} : { endpointUsage: this.endpointUsage(policy, now, endpoint) }),
    };
  }

  /** The usage of the rules covering `endpoint` (the engine reads no other). */
  private endpointUsage(policy: Policy, now: number, endpoint: string): ReadonlyMap<string, EndpointUsage> {
    const usage = new Map<string, EndpointUsage>();
    for (const rule of this.rulesCovering(policy, endpoint)) {
      const running = this.rules.get(rule.match)!;
      usage.set(rule.match, {
        usedUnits: running.usedUnits,
        rateCalls: running.windowMs === 0 ? 0 : running.calls.since(now, running.windowMs),
      });
    }
    return usage;
  }

  private rulesCovering(policy: Policy, endpoint: string): readonly EndpointBudget[] {
    let rules = this.covering.get(endpoint);
    if (rules === undefined) {
      rules = matchingEndpointBudgets(policy.endpointBudgets, endpoint);
      this.covering.set(endpoint, rules);
    }
    return rules;
  }

  count(policy: Policy, decision: PaymentDecision, now: number, endpoint: string, amountUnits: bigint): void {
    const opened = decision.budget.windowStart?.getTime() !== this.windowStart?.getTime();
    this.windowStart = decision.budget.windowStart;
    this.usedUnits = decision.budget.usedUnits;
    this.calls.times.push(now);
    this.paid.add(decision.domain);
    if (this.rules.size === 0) return;
    // A new period starts every rule's spend afresh, as it does the agent's.
    if (opened) for (const running of this.rules.values()) running.usedUnits = 0n;
    for (const rule of this.rulesCovering(policy, endpoint)) {
      const running = this.rules.get(rule.match)!;
      running.usedUnits += amountUnits;
      running.calls.times.push(now);
    }
  }
}

/**
 * Replays `attempts` (oldest first) under `policy` from the usage `start`. Throws when the attempts
 * are out of order or more than MAX_BACKTEST_ATTEMPTS, or an attempt's endpoint or amount is one the
 * engine refuses to read (InvalidEndpointError / InvalidAmountError): the caller's bug, not a decision.
 */
export function backtest(policy: Policy, attempts: readonly PaymentAttempt[], start: BacktestStart = EMPTY_START): BacktestResult {
  if (attempts.length > MAX_BACKTEST_ATTEMPTS) throw new RangeError(`a backtest replays at most ${MAX_BACKTEST_ATTEMPTS} attempts`);
  const usage = new ReplayUsage(policy, start);
  const exposurePolicy: Policy = { ...policy, perCallLimitUnits: null };
  const needsHost = policy.approval?.firstPaymentToDomain === true;
  const decisions: BacktestDecision[] = new Array(attempts.length);
  let previous = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < attempts.length; i += 1) {
    const attempt = attempts[i]!;
    const now = attempt.at.getTime();
    if (!(now >= previous)) throw new RangeError(`attempt ${attempt.id} is out of order`);
    previous = now;
    decisions[i] = decide(attempt.exposure === true ? exposurePolicy : policy, attempt, usage, needsHost);
  }
  return { decisions, totals: totalsOf(decisions) };
}

function decide(policy: Policy, attempt: PaymentAttempt, usage: ReplayUsage, needsHost: boolean): BacktestDecision {
  const now = attempt.at.getTime();
  if (attempt.amountUnits === 0n) {
    // A domain check: the domain rules alone, and nothing counts (no payment followed it here).
    const refusal = evaluateDomainOnly(policy, usage.view(policy, now, null, attempt.endpoint), attempt.endpoint, attempt.at);
    if (refusal !== null) return { attempt, outcome: "refuse", rule: refusal.reasonCode, reason: refusal.reason, domain: refusal.domain };
    return { attempt, outcome: "pass", rule: null, reason: null, domain: endpointHost(attempt.endpoint) };
  }
  const request =
    attempt.protocol === null
      ? { endpoint: attempt.endpoint, amountUnits: attempt.amountUnits }
      : { endpoint: attempt.endpoint, amountUnits: attempt.amountUnits, protocol: attempt.protocol, offeredProtocols: [attempt.protocol] };
  const host = needsHost ? () => endpointHost(attempt.endpoint) : null;
  const decision = evaluatePayment(policy, usage.view(policy, now, host, attempt.endpoint), request, attempt.at);
  switch (decision.decision) {
    case "reject":
      if (decision.reasonCode === "daily_budget_exceeded") usage.budgetRefusedAt = now;
      return { attempt, outcome: "refuse", rule: decision.reasonCode, reason: decision.reason, domain: decision.domain };
    case "needs_approval":
      usage.count(policy, decision, now, attempt.endpoint, attempt.amountUnits);
      return { attempt, outcome: "needs_approval", rule: decision.approvalRule, reason: decision.reason, domain: decision.domain };
    case "allow":
      usage.count(policy, decision, now, attempt.endpoint, attempt.amountUnits);
      return { attempt, outcome: "pass", rule: null, reason: null, domain: decision.domain };
  }
}

class Tally<K> {
  readonly entries = new Map<K, { count: number; amountUnits: bigint }>();

  add(key: K, amountUnits: bigint): void {
    const entry = this.entries.get(key);
    if (entry === undefined) this.entries.set(key, { count: 1, amountUnits });
    else {
      entry.count += 1;
      entry.amountUnits += amountUnits;
    }
  }

  sorted<N extends string>(name: N): Array<AmountCount & Record<N, K>> {
    return [...this.entries]
      .map(([key, value]) => ({ [name]: key, ...value }) as AmountCount & Record<N, K>)
      .sort((a, b) => (a.amountUnits === b.amountUnits ? b.count - a.count : a.amountUnits > b.amountUnits ? -1 : 1));
  }
}

function totalsOf(decisions: readonly BacktestDecision[]): BacktestTotals {
  const sums = {
    pass: { count: 0, amountUnits: 0n },
    refuse: { count: 0, amountUnits: 0n },
    needs_approval: { count: 0, amountUnits: 0n },
  };
  const byRule = new Tally<ReasonCode>();
  const byDomain = new Tally<string>();
  const heldByRule = new Tally<ApprovalRule>();
  let changed = 0;
  for (const { attempt, outcome, rule, domain } of decisions) {
    const amount = attempt.amountUnits;
    sums[outcome].count += 1;
    sums[outcome].amountUnits += amount;
    if (outcome !== attempt.recorded) changed += 1;
    if (outcome === "refuse") {
      byRule.add(rule as ReasonCode, amount);
      byDomain.add(domain, amount);
    } else if (outcome === "needs_approval") heldByRule.add(rule as ApprovalRule, amount);
  }
  return {
    attempts: decisions.length,
    passed: sums.pass,
    refused: sums.refuse,
    needsApproval: sums.needs_approval,
    changed,
    refusedByRule: byRule.sorted("rule"),
    refusedByDomain: byDomain.sorted("domain"),
    needsApprovalByRule: heldByRule.sorted("rule"),
  };
}
