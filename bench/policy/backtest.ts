/**
 * `npm run bench:backtest`: 100,000 recorded payment attempts (30 days of one busy agent, a few
 * hundred hosts, approval rules and two endpoint budgets on) backtested under a candidate policy by the backtest
 * (api/shared/policy/backtest.ts: running usage), next to the baseline in the same run: the same
 * replay through the live path's per-payment function (test/api/live-replay.ts: the usage
 * recomputed for each payment from what counted before it, as `readUsage` does, then
 * `evaluatePayment`). Both must answer the same; the goal is under 2 s for the backtest.
 * Then the whole use case (`simulatePolicy`: the store's read of 100,000 reservations in a fresh
 * Postgres, the usage at the start, the replay), unless `--no-db`.
 */
import { createAccount, registerAgent } from "../../api/shared/keys.js";
import { backtest, EMPTY_START, type PaymentAttempt } from "../../api/shared/policy/backtest.js";
import { simulatePolicy } from "../../api/shared/policy/simulate.js";
import { createFreshDatabase } from "../../test/indexer/fresh-database.js";
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
  endpointBudgets: [
    { match: "vendor5.example", dailyBudgetUnits: 2_000_000n, perCallLimitUnits: null, rateLimit: { calls: 20, window: "1h" } },
    { match: "api1.vendor1.example/v1/search", dailyBudgetUnits: null, perCallLimitUnits: 30_000n, rateLimit: null },
  ],
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

if (!process.argv.includes("--no-db")) {
  const db = await createFreshDatabase();
  try {
    const account = await createAccount(db.pool, "bench");
    await registerAgent(db.pool, account, { agentId: "bench-agent", walletAddress: "WalletBench11111111111111111111111111111111" });
    const seeding = performance.now();
    for (let from = 0; from < ATTEMPTS; from += 20_000) {
      await db.pool.query(
        `INSERT INTO spend_reservations (agent_id, amount_units, endpoint, domain, protocol, status, created_at, budget_window_start)
         SELECT 'bench-agent', 1 + (i * 7919) % 50000, 'https://api' || (i % 300) || '.vendor' || (i % 40) || '.example/v1/search',
                'api' || (i % 300) || '.vendor' || (i % 40) || '.example', 'x402', 'reserved', t, date_trunc('day', t)
         FROM generate_series($1::int, $2::int) AS i, LATERAL (SELECT $3::timestamptz + (i * $4::double precision) * interval '1 millisecond' AS t) AS at`,
        [from, Math.min(from + 20_000, ATTEMPTS) - 1, new Date(START), (DAYS * 86_400_000) / ATTEMPTS],
      );
    }
    console.log(`seeded ${ATTEMPTS} reservations in ${((performance.now() - seeding) / 1000).toFixed(1)} s`);
    const now = new Date(START + DAYS * 86_400_000);
    const whole = await (async () => {
      const started = performance.now();
      const simulation = await simulatePolicy(db.pool, "bench-agent", policy, 31 * 86_400_000, now, 1_000);
      return { ms: performance.now() - started, simulation };
    })();
    console.log(
      `simulatePolicy end to end (read ${whole.simulation.totals.attempts} attempts + start usage + replay): ${whole.ms.toFixed(0)} ms ` +
        `(goal under ${GOAL_MS} ms: ${whole.ms < GOAL_MS ? "met" : "NOT met"})`,
    );
  } finally {
    await db.drop();
  }
}
