/**
 * `npm run bench:backtest`: 100,000 recorded payment attempts (30 days of one busy agent, a few
 * hundred hosts, approval rules on) backtested under a candidate policy by the backtest
 * (api/shared/policy/backtest.ts: running usage), next to the baseline in the same run: the same
 * replay through the live path's per-payment function (test/api/live-replay.ts: the usage
 * recomputed for each payment from what counted before it, as `readUsage` does, then
 * `evaluatePayment`). Both must answer the same; the goal is under 2 s for the backtest.
 */
import { backtest, EMPTY_START, type PaymentAttempt } from "../../api/shared/policy/backtest.js";
import { EMPTY_POLICY, validatePolicy } from "../../api/shared/policy/policy.js";
import { liveReplay } from "../../test/api/live-replay.js";
import { mulberry32 } from "../../test/support/random.js";

const ATTEMPTS = Number(process.env.BACKTEST_ATTEMPTS ?? 100_000);
const GOAL_MS = 2_000;
const DAYS = 30;
const START = Date.parse("2026-05-01T00:00:00.000Z");

function history(count: number): PaymentAttempt[] {
  const random = mulberry32(42);
  const step = (DAYS * 86_400_000) / count;
  return Array.from({ length: count }, (_, i) => ({
    id: `reservation:${i + 1}`,
    at: new Date(START + Math.floor(i * step)),
    endpoint: `https://api${Math.floor(random() * 300)}.vendor${Math.floor(random() * 40)}.example/v1/search`,
    amountUnits: BigInt(1 + Math.floor(random() * 50_000)),
    protocol: random() < 0.7 ? "x402" : "mpp",
    recorded: "pass" as const,
  }));
}

const policy = validatePolicy({
  ...EMPTY_POLICY,
  dailyBudgetUnits: 60_000_000n,
  perCallLimitUnits: 45_000n,
  blockedDomains: ["vendor7.example"],
  rateLimit: { calls: 120, window: "1h" },
  approval: { aboveUnits: 40_000n, domains: ["vendor3.example"], firstPaymentToDomain: true, timeoutMs: 900_000, onTimeout: "deny" },
});

function time<T>(run: () => T): { ms: number; value: T } {
  const started = performance.now();
  const value = run();
  return { ms: performance.now() - started, value };
}

const attempts = history(ATTEMPTS);
backtest(policy, attempts.slice(0, 5_000)); // warm-up
const fast = time(() => backtest(policy, attempts, EMPTY_START));
const slow = time(() => liveReplay(policy, attempts, EMPTY_START));
for (let i = 0; i < attempts.length; i += 1) {
  const a = fast.value.decisions[i]!;
  const b = slow.value[i]!;
  if (a.outcome !== b.outcome || a.rule !== b.rule || a.reason !== b.reason) throw new Error(`the replays disagree at attempt ${i}`);
}
const { totals } = fast.value;
console.log(
  `attempts: ${ATTEMPTS}, pass ${totals.passed.count}, refuse ${totals.refused.count}, needs approval ${totals.needsApproval.count}`,
);
console.log(`refused by rule: ${totals.refusedByRule.map((r) => `${r.rule} ${r.count}`).join(", ")}`);
console.log(`backtest (running usage):             ${fast.ms.toFixed(0)} ms`);
console.log(`baseline (usage per payment, live):    ${slow.ms.toFixed(0)} ms`);
console.log(
  `goal: under ${GOAL_MS} ms: ${fast.ms < GOAL_MS ? "met" : "NOT met"} (${(slow.ms / fast.ms).toFixed(1)}x the baseline's speed)`,
);
