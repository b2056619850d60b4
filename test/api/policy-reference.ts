/**
 * Test support for the policy property tests: a seeded generator of policies and request
 * sequences, and a deliberately naive reference model that keeps every accepted payment and
 * recomputes every rule from scratch. Used by api/shared/policy/engine.fuzz.test.ts (pure engine) and
 * test/api/policy-store.test.ts (the same sequences through Postgres).
 */
import { expect } from "vitest";
import type { PaymentRequest } from "../../api/shared/policy/engine.js";
import { EMPTY_POLICY, type Policy, validatePolicy } from "../../api/shared/policy/policy.js";
import { RATE_WINDOW_MS, RATE_WINDOWS } from "../../api/shared/policy/windows.js";
import { mulberry32 } from "../support/random.js";

export { mulberry32 };

const DAY_MS = 24 * 3_600_000;
const ENTRY_POOL = ["example.com", "api.example.com", "evil-example.com", "shop.example.co.uk", "example.co.uk", "other.io"];
const HOST_POOL = [
  "example.com",
  "api.example.com",
  "v2.api.example.com",
  "web.example.com",
  "evil-example.com",
  "example.co.uk",
  "shop.example.co.uk",
  "x.shop.example.co.uk",
  "other.io",
  "a.other.io",
  "unrelated.net",
];

/** `endpointBudgets` matches the endpoint scenarios draw from (hosts of HOST_POOL, paths of PATH_POOL). */
const MATCH_POOL = ["api.example.com", "example.com/v1/search", "api.example.com/v1/search/deep", "other.io/v2", "example.co.uk"];
const PATH_POOL = ["/v1/search", "/v1/search/deep", "/v1/searches", "/v2/x", "/v2", "/v1/0"];

export interface Scenario {
  readonly policy: Policy;
  readonly requests: ReadonlyArray<{ readonly at: Date; readonly request: PaymentRequest; readonly host: string; readonly path: string }>;
}

/**
 * `approvals`: the policy may also hold payments (`approval`); its rules are drawn after every
 * other draw of the policy, so the scenarios without it stay the same for the same seed.
 * `endpoints`: the policy has `endpointBudgets` and requests go to paths those rules cover or miss.
 */
export function randomScenario(
  seed: number,
  length: number,
  start: Date,
  options: { approvals?: boolean; endpoints?: boolean } = {},
): Scenario {
  const random = mulberry32(seed);
  const int = (below: number) => Math.floor(random() * below);
  const pick = <T>(items: readonly T[]): T => items[int(items.length)]!;
  const maybe = <T>(make: () => T): T | null => (random() < 0.5 ? null : make());
  const subset = () => ENTRY_POOL.filter(() => random() < 0.3);

  const dailyBudgetUnits = maybe(() => BigInt(1 + int(50)) * 100_000n);
  const policy = validatePolicy({
    ...EMPTY_POLICY,
    dailyBudgetUnits,
    perCallLimitUnits: maybe(() => BigInt(1 + int(30)) * 100_000n),
    allowedDomains: random() < 0.3 ? subset() : null,
    blockedDomains: random() < 0.3 ? subset() : [],
    rateLimit: maybe(() => ({ calls: 1 + int(6), window: pick(RATE_WINDOWS) })),
    approval: options.approvals === true ? randomApproval(random, subset) : null,
    endpointBudgets: options.endpoints === true ? randomEndpointBudgets(random) : [],
  });

  const requests: Array<Scenario["requests"][number]> = [];
  let now = start.getTime();
  for (let i = 0; i < length; i += 1) {
    const step = random();
    // Mostly short steps so limits bind; sometimes exact window lengths to land on boundaries.
    if (step < 0.1) now += DAY_MS;
    else if (step < 0.2 && policy.rateLimit !== null) now += RATE_WINDOW_MS[policy.rateLimit.window];
    else if (step < 0.3) now += int(6) * 3_600_000;
    else now += int(120_000);
    const host = pick(HOST_POOL);
    const decorated = random() < 0.2 ? `${host.toUpperCase()}.` : host;
    const amountUnits = BigInt(1 + int(40)) * 50_000n + (random() < 0.2 ? BigInt(int(3)) - 1n : 0n);
    const path = options.endpoints === true ? pick(PATH_POOL) : `/v1/${i}`;
    const request = { endpoint: `https://${decorated}${path}`, amountUnits: amountUnits > 0n ? amountUnits : 1n };
    requests.push({ at: new Date(now), host, path, request });
  }
  return { policy, requests };
}

function randomEndpointBudgets(random: () => number): Policy["endpointBudgets"] {
  const maybe = <T>(make: () => T): T | null => (random() < 0.5 ? null : make());
  return MATCH_POOL.filter(() => random() < 0.5).map((match) => {
    const rule = {
      match,
      dailyBudgetUnits: maybe(() => BigInt(1 + Math.floor(random() * 30)) * 100_000n),
      perCallLimitUnits: maybe(() => BigInt(1 + Math.floor(random() * 20)) * 100_000n),
      rateLimit: maybe(() => ({ calls: 1 + Math.floor(random() * 5), window: RATE_WINDOWS[Math.floor(random() * RATE_WINDOWS.length)]! })),
    };
    return rule.dailyBudgetUnits === null && rule.perCallLimitUnits === null && rule.rateLimit === null
      ? { ...rule, perCallLimitUnits: 1_000_000n }
      : rule;
  });
}

function randomApproval(random: () => number, subset: () => string[]): Policy["approval"] {
  if (random() < 0.25) return null;
  const aboveUnits = random() < 0.6 ? BigInt(Math.floor(random() * 20)) * 100_000n : null;
  const domains = random() < 0.4 ? subset() : [];
  const firstPaymentToDomain = random() < 0.4 || (aboveUnits === null && domains.length === 0);
  return { aboveUnits, domains, firstPaymentToDomain, timeoutMs: 60_000, onTimeout: "deny" };
}

/** The reference: every accepted payment, and the period it opened or joined. */
export class ReferenceModel {
  private readonly accepted: Array<{ at: number; amount: bigint; periodStart: number; host: string | null; path: string | null }> = [];
  /** The period in which a payment was refused for the daily budget (spec 3: exhausted). */
  private exhaustedPeriod: number | null = null;

  constructor(private readonly policy: Policy) {}

  private static matches(entry: string, host: string): boolean {
    const labels = entry.split(".").length;
    const registrable = labels === 2 || (labels === 3 && entry.endsWith(".co.uk"));
    return host === entry || (registrable && host.endsWith(`.${entry}`));
  }

  /** Whether an endpointBudgets match covers host and path: the host by the domain rules, the path by whole segments. */
  static covers(match: string, host: string, path: string): boolean {
    const [entry, ...segments] = match.split("/");
    if (!ReferenceModel.matches(entry!, host)) return false;
    const prefix = segments.length === 0 ? "" : `/${segments.join("/")}`;
    return prefix === "" || path === prefix || path.startsWith(`${prefix}/`);
  }

  private ruleUsed(match: string, at: number): bigint {
    const period = this.openPeriod(at);
    return this.accepted
      .filter((p) => p.periodStart === period && p.host !== null && ReferenceModel.covers(match, p.host, p.path ?? ""))
      .reduce((sum, p) => sum + p.amount, 0n);
  }

  private ruleCalls(match: string, windowMs: number, at: number): number {
    return this.accepted.filter((p) => p.at > at - windowMs && p.host !== null && ReferenceModel.covers(match, p.host, p.path ?? ""))
      .length;
  }

  private openPeriod(at: number): number | null {
    const last = this.accepted.at(-1);
    return last !== undefined && at < last.periodStart + DAY_MS ? last.periodStart : null;
  }

  usedInPeriod(at: number): bigint {
    const period = this.openPeriod(at);
    return this.accepted.filter((p) => p.periodStart === period).reduce((sum, p) => sum + p.amount, 0n);
  }

  callsInRateWindow(at: number): number {
    if (this.policy.rateLimit === null) return 0;
    const windowMs = RATE_WINDOW_MS[this.policy.rateLimit.window];
    return this.accepted.filter((p) => p.at > at - windowMs).length;
  }

  /** Spec 3: the open period is exhausted until it resets. */
  exhausted(at: number): boolean {
    const period = this.openPeriod(at);
    return period !== null && period === this.exhaustedPeriod;
  }

  /** Whether the latest period (open or not) was exhausted: stale on purpose, for the engine to judge. */
  lastPeriodExhausted(): boolean {
    const last = this.accepted.at(-1);
    return last !== undefined && last.periodStart === this.exhaustedPeriod;
  }

  lastPeriodStart(): Date | null {
    const last = this.accepted.at(-1);
    return last === undefined ? null : new Date(last.periodStart);
  }

  /** Whether an accepted payment went to exactly this host (the `firstPaymentToDomain` rule). */
  paidBefore(host: string): boolean {
    return this.accepted.some((p) => p.host === host);
  }

  /**
   * The whole decision (rules 1–8): a refusal code, or null with `approval` naming the approval
   * rule that holds the payment (null: allowed at once).
   */
  decide(
    host: string,
    amount: bigint,
    at: number,
    path = "/",
  ): { reasonCode: string | null; warning: boolean; approval: string | null; endpointRule?: string | null } {
    const decision = this.decideLimits(host, amount, at, path);
    const rule = this.policy.approval;
    if (decision.reasonCode !== null || rule == null) return { ...decision, approval: null };
    if (rule.aboveUnits !== null && amount > rule.aboveUnits) return { ...decision, approval: "above" };
    if (rule.domains.some((e) => ReferenceModel.matches(e, host))) return { ...decision, approval: "domains" };
    if (rule.firstPaymentToDomain && !this.paidBefore(host)) return { ...decision, approval: "firstPaymentToDomain" };
    return { ...decision, approval: null };
  }

  /**
   * Rules 1–5: what approving a held payment re-runs. Each of rules 3–5 weighs the agent's own limit
   * and every endpoint rule covering host and path; the one with least room refuses (the agent's on a tie).
   */
  decideLimits(
    host: string,
    amount: bigint,
    at: number,
    path = "/",
  ): { reasonCode: string | null; warning: boolean; endpointRule?: string | null } {
    const p = this.policy;
    const reject = (reasonCode: string, endpointRule: string | null = null) => ({ reasonCode, warning: false, endpointRule });
    if (p.blockedDomains.some((e) => ReferenceModel.matches(e, host))) return reject("domain_blocked");
    if (p.allowedDomains !== null && !p.allowedDomains.some((e) => ReferenceModel.matches(e, host))) {
      return reject("domain_not_allowed");
    }
    const rules = (p.endpointBudgets ?? []).filter((r) => ReferenceModel.covers(r.match, host, path));
    const least = (candidates: Array<{ rule: string | null; room: bigint }>) =>
      candidates.reduce<{ rule: string | null; room: bigint } | null>((best, c) => (best === null || c.room < best.room ? c : best), null);
    const perCall = [
      { rule: null as string | null, limit: p.perCallLimitUnits },
      ...rules.map((r) => ({ rule: r.match as string | null, limit: r.perCallLimitUnits })),
    ]
      .filter((c): c is { rule: string | null; limit: bigint } => c.limit !== null && amount > c.limit)
      .map((c) => ({ rule: c.rule, room: c.limit }));
    const perCallBreach = least(perCall);
    if (perCallBreach !== null) return reject("per_call_limit_exceeded", perCallBreach.rule);
    const used = this.usedInPeriod(at);
    const budgets: Array<{ rule: string | null; room: bigint }> = [];
    if (p.dailyBudgetUnits !== null && (this.exhausted(at) || used + amount > p.dailyBudgetUnits)) {
      budgets.push({ rule: null, room: this.exhausted(at) || used >= p.dailyBudgetUnits ? 0n : p.dailyBudgetUnits - used });
    }
    for (const r of rules) {
      const ruleUsed = this.ruleUsed(r.match, at);
      if (r.dailyBudgetUnits !== null && ruleUsed + amount > r.dailyBudgetUnits) {
        budgets.push({ rule: r.match, room: ruleUsed >= r.dailyBudgetUnits ? 0n : r.dailyBudgetUnits - ruleUsed });
      }
    }
    const budgetBreach = least(budgets);
    if (budgetBreach !== null) return reject("daily_budget_exceeded", budgetBreach.rule);
    const rates: Array<{ rule: string | null; room: bigint }> = [];
    if (p.rateLimit !== null && this.callsInRateWindow(at) >= p.rateLimit.calls) {
      rates.push({ rule: null, room: BigInt(p.rateLimit.calls - this.callsInRateWindow(at)) });
    }
    for (const r of rules) {
      if (r.rateLimit === null) continue;
      const calls = this.ruleCalls(r.match, RATE_WINDOW_MS[r.rateLimit.window], at);
      if (calls >= r.rateLimit.calls) rates.push({ rule: r.match, room: BigInt(r.rateLimit.calls - calls) });
    }
    const rateBreach = least(rates);
    if (rateBreach !== null) return reject("rate_limit_exceeded", rateBreach.rule);
    const budget = p.dailyBudgetUnits;
    const warning = budget !== null && used * 5n < budget * 4n && (used + amount) * 5n >= budget * 4n;
    return { reasonCode: null, warning, endpointRule: null };
  }

  /** Usage of each endpoint rule at `at`, as the gateway hands it to the engine. */
  endpointUsage(at: number): Map<string, { usedUnits: bigint; rateCalls: number }> {
    const usage = new Map<string, { usedUnits: bigint; rateCalls: number }>();
    for (const r of this.policy.endpointBudgets ?? []) {
      const windowMs = r.rateLimit === null ? 0 : RATE_WINDOW_MS[r.rateLimit.window];
      usage.set(r.match, {
        usedUnits: this.ruleUsed(r.match, at),
        rateCalls: r.rateLimit === null ? 0 : this.ruleCalls(r.match, windowMs, at),
      });
    }
    return usage;
  }

  /** A refusal the gateway recorded: one for the daily budget exhausts the open period. */
  refuse(reasonCode: string, at: number): void {
    const period = this.openPeriod(at);
    if (reasonCode === "daily_budget_exceeded" && period !== null) this.exhaustedPeriod = period;
  }

  /** An accepted payment; `host` (when given) counts as paid for `firstPaymentToDomain`. */
  accept(amount: bigint, at: number, host: string | null = null, path: string | null = null): void {
    this.accepted.push({ at, amount, periodStart: this.openPeriod(at) ?? at, host, path });
  }

  /** Invariants the policy promises, checked over the whole history. */
  assertInvariants(): void {
    const p = this.policy;
    if (p.dailyBudgetUnits !== null) {
      const perPeriod = new Map<number, bigint>();
      for (const { periodStart, amount } of this.accepted) {
        perPeriod.set(periodStart, (perPeriod.get(periodStart) ?? 0n) + amount);
      }
      for (const total of perPeriod.values()) expect(total).toBeLessThanOrEqual(p.dailyBudgetUnits);
    }
    for (const rule of p.endpointBudgets ?? []) {
      const covered = this.accepted.filter((q) => q.host !== null && ReferenceModel.covers(rule.match, q.host, q.path ?? ""));
      if (rule.dailyBudgetUnits !== null) {
        const perPeriod = new Map<number, bigint>();
        for (const { periodStart, amount } of covered) perPeriod.set(periodStart, (perPeriod.get(periodStart) ?? 0n) + amount);
        for (const total of perPeriod.values()) expect(total, rule.match).toBeLessThanOrEqual(rule.dailyBudgetUnits);
      }
      if (rule.perCallLimitUnits !== null)
        for (const q of covered) expect(q.amount, rule.match).toBeLessThanOrEqual(rule.perCallLimitUnits);
      if (rule.rateLimit !== null) {
        const windowMs = RATE_WINDOW_MS[rule.rateLimit.window];
        for (const q of covered) {
          expect(covered.filter((o) => o.at > q.at - windowMs && o.at <= q.at).length, rule.match).toBeLessThanOrEqual(
            rule.rateLimit.calls,
          );
        }
      }
    }
    if (p.rateLimit !== null) {
      const windowMs = RATE_WINDOW_MS[p.rateLimit.window];
      for (const payment of this.accepted) {
        const inWindow = this.accepted.filter((q) => q.at > payment.at - windowMs && q.at <= payment.at).length;
        expect(inWindow).toBeLessThanOrEqual(p.rateLimit.calls);
      }
    }
  }
}
