/**
 * Payment attempts replayed the way the gateway decides them one at a time: for each, the usage
 * is computed afresh from everything counted before it, as `readUsage` and the approvals'
 * `paidBefore` compute it from the tables (the budget periods that started less than 24 h ago,
 * the calls in the rate window, a daily-budget refusal since the period opened, a paid host, each
 * endpoint rule's spend and calls over the endpoints it covers), and `evaluatePayment` decides. The backtest's property test compares api/shared/policy/backtest.ts
 * with it, and bench/policy/backtest.ts measures it as the baseline.
 */
import type { BacktestDecision, BacktestStart, PaymentAttempt } from "../../api/shared/policy/backtest.js";
import { endpointHost } from "../../api/shared/policy/domains.js";
import { type EndpointUsage, matchingEndpointBudgets } from "../../api/shared/policy/endpoint-budgets.js";
import { evaluateDomainOnly, evaluatePayment } from "../../api/shared/policy/engine.js";
import type { Policy } from "../../api/shared/policy/policy.js";
import { BUDGET_WINDOW_MS, RATE_WINDOW_MS } from "../../api/shared/policy/windows.js";

interface CountedRow {
  readonly at: number;
  readonly amountUnits: bigint;
  /** The budget period the row counts in; null for a row that only counts as a call. */
  readonly windowStart: number | null;
  readonly call: boolean;
  /** The endpoint paid; null for a seed row. */
  readonly endpoint: string | null;
  /** A seed row of one endpoint rule's usage at the start (by its match); null: the agent's row. */
  readonly rule: string | null;
}

/** The per-payment replay: usage recomputed from the counted rows for every attempt. */
export function liveReplay(policy: Policy, attempts: readonly PaymentAttempt[], start: BacktestStart): BacktestDecision[] {
  const rows: CountedRow[] = [];
  const seed = { endpoint: null, rule: null } as const;
  if (start.windowStart !== null) {
    rows.push({
      ...seed,
      at: start.windowStart.getTime(),
      amountUnits: start.usedUnits,
      windowStart: start.windowStart.getTime(),
      call: false,
    });
  }
  for (const at of start.callTimes) rows.push({ ...seed, at: at.getTime(), amountUnits: 0n, windowStart: null, call: true });
  for (const [rule, usage] of start.endpoints ?? []) {
    if (start.windowStart !== null) {
      const windowStart = start.windowStart.getTime();
      rows.push({ endpoint: null, rule, at: windowStart, amountUnits: usage.usedUnits, windowStart, call: false });
    }
    for (const at of usage.callTimes) rows.push({ endpoint: null, rule, at: at.getTime(), amountUnits: 0n, windowStart: null, call: true });
  }
  rows.sort((a, b) => a.at - b.at);
  const budgetRefusals: number[] = [];
  const paidHosts = new Map<string, number>();
  for (const host of start.paidDomains) paidHosts.set(host, 1);

  return attempts.map((attempt) => {
    const now = attempt.at.getTime();
    const effective = attempt.exposure === true ? { ...policy, perCallLimitUnits: null } : policy;
    // readUsage: the periods that started less than 24 h ago (min start, sum), scanning back.
    let periodStart: number | null = null;
    let used = 0n;
    for (let i = rows.length - 1; i >= 0 && rows[i]!.at > now - 2 * BUDGET_WINDOW_MS; i -= 1) {
      const row = rows[i]!;
      if (row.rule !== null || row.windowStart === null || row.windowStart <= now - BUDGET_WINDOW_MS) continue;
      periodStart = periodStart === null ? row.windowStart : Math.min(periodStart, row.windowStart);
      used += row.amountUnits;
    }
    let exhausted = false;
    for (let i = budgetRefusals.length - 1; periodStart !== null && i >= 0 && budgetRefusals[i]! >= periodStart; i -= 1) exhausted = true;
    let rateCalls = 0;
    if (effective.rateLimit !== null) {
      const after = now - RATE_WINDOW_MS[effective.rateLimit.window];
      for (let i = rows.length - 1; i >= 0 && rows[i]!.at > after; i -= 1) if (rows[i]!.call && rows[i]!.rule === null) rateCalls += 1;
    }
    // readEndpointUsage: per covering rule, the periods' spend and the calls of its window over the endpoints it covers.
    const endpointUsage = new Map<string, EndpointUsage>();
    for (const rule of matchingEndpointBudgets(effective.endpointBudgets, attempt.endpoint)) {
      let usedUnits = 0n;
      let calls = 0;
      const windowMs = rule.rateLimit === null ? null : RATE_WINDOW_MS[rule.rateLimit.window];
      for (let i = rows.length - 1; i >= 0 && rows[i]!.at > now - 2 * BUDGET_WINDOW_MS; i -= 1) {
        const row = rows[i]!;
        const covered = row.rule === rule.match || (row.endpoint !== null && matchingEndpointBudgets([rule], row.endpoint).length === 1);
        if (!covered) continue;
        if (row.windowStart !== null && row.windowStart > now - BUDGET_WINDOW_MS) usedUnits += row.amountUnits;
        if (windowMs !== null && row.call && row.at > now - windowMs) calls += 1;
      }
      endpointUsage.set(rule.match, { usedUnits, rateCalls: calls });
    }
    const usage = {
      usedTodayUnits: used,
      windowStart: periodStart === null ? null : new Date(periodStart),
      rateCalls,
      budgetExhausted: exhausted,
      domainPaidBefore: paidHosts.has(endpointHost(attempt.endpoint)),
      ...(endpointUsage.size === 0 ? {} : { endpointUsage }),
    };
    if (attempt.amountUnits === 0n) {
      const refusal = evaluateDomainOnly(effective, usage, attempt.endpoint, attempt.at);
      if (refusal === null) return { attempt, outcome: "pass", rule: null, reason: null, domain: endpointHost(attempt.endpoint) };
      return { attempt, outcome: "refuse", rule: refusal.reasonCode, reason: refusal.reason, domain: refusal.domain };
    }
    const request =
      attempt.protocol === null
        ? { endpoint: attempt.endpoint, amountUnits: attempt.amountUnits }
        : {
            endpoint: attempt.endpoint,
            amountUnits: attempt.amountUnits,
            protocol: attempt.protocol,
            offeredProtocols: [attempt.protocol],
          };
    const decision = evaluatePayment(effective, usage, request, attempt.at);
    if (decision.decision === "reject") {
      if (decision.reasonCode === "daily_budget_exceeded") budgetRefusals.push(now);
      return { attempt, outcome: "refuse", rule: decision.reasonCode, reason: decision.reason, domain: decision.domain };
    }
    rows.push({
      at: now,
      amountUnits: attempt.amountUnits,
      windowStart: decision.budget.windowStart!.getTime(),
      call: true,
      endpoint: attempt.endpoint,
      rule: null,
    });
    paidHosts.set(decision.domain, (paidHosts.get(decision.domain) ?? 0) + 1);
    if (decision.decision === "needs_approval") {
      return { attempt, outcome: "needs_approval", rule: decision.approvalRule, reason: decision.reason, domain: decision.domain };
    }
    return { attempt, outcome: "pass", rule: null, reason: null, domain: decision.domain };
  });
}
