/**
 * The store read behind the backtest (api/shared/policy/backtest.ts): an agent's recorded payment
 * attempts of a time range, oldest first, and the usage standing when it starts. Reads only; it
 * writes nothing and takes no lock, so a backtest moves nothing and consumes no counter.
 *
 * An attempt is what the gateway decided and recorded:
 * - a reservation that counts (reserved, settled; `pending_approval` is an approval's): the policy
 *   let it through. A released one without an approval (the caller gave the payment up) is not
 *   read: the index of the agent's reservations by time holds only those that count;
 * - an approval (migrations/049_approvals.sql), at the time it was asked for, whatever was decided;
 * - a rejection (`payment_rejections`): refused, by the policy or another check.
 * A channel's charges (vouchers) are not attempts here: the deposit's reservation is.
 */
import type { Db } from "../../../indexer/db/database.js";
import type { BacktestStart, BacktestOutcome, PaymentAttempt } from "./backtest.js";
import { matchingEndpointBudgets } from "./endpoint-budgets.js";
import type { Policy, Protocol } from "./policy.js";
import { BUDGET_WINDOW_MS, RATE_WINDOW_MS } from "./windows.js";

/** Reservations of the 24 h before a backtest's start read at most, for its endpoint rules' usage. */
const MAX_START_ROWS = 200_000;

interface AttemptRow {
  id: string;
  at: Date;
  endpoint: string;
  domain: string;
  amount_units: string;
  protocol: Protocol | null;
  exposure: boolean;
  recorded: BacktestOutcome;
}

export interface RecordedAttempts {
  readonly attempts: readonly PaymentAttempt[];
  /** The normalized hosts the attempts name (as recorded). */
  readonly domains: readonly string[];
  /** More than `limit` attempts in the range: only the oldest `limit` were read. */
  readonly truncated: boolean;
}

/** The attempts of [from, to), oldest first (ties: reservations, approvals, rejections, by id), at most `limit`. */
export async function readAttempts(db: Db, agentId: string, from: Date, to: Date, limit: number): Promise<RecordedAttempts> {
  const { rows } = await db.query<AttemptRow>(
    `SELECT * FROM (
       SELECT 'reservation:' || r.id AS id, 1 AS kind, r.id AS seq, r.created_at AS at, r.endpoint, r.domain, r.amount_units::text,
              r.protocol, coalesce(r.payment_ref LIKE 'channel:%', false) AS exposure, 'pass' AS recorded
       FROM spend_reservations r
       WHERE r.agent_id = $1 AND r.status <> 'released' AND r.created_at >= $2 AND r.created_at < $3
         AND NOT EXISTS (SELECT 1 FROM approvals a WHERE a.reservation_id = r.id)
       UNION ALL
       SELECT 'approval:' || a.id, 2, a.reservation_id, a.requested_at, a.endpoint, a.domain, a.amount_units::text,
              r.protocol, false, 'needs_approval'
       FROM approvals a JOIN spend_reservations r ON r.id = a.reservation_id
       WHERE a.agent_id = $1 AND a.requested_at >= $2 AND a.requested_at < $3
       UNION ALL
       SELECT 'rejection:' || j.id, 3, j.id, j.created_at, j.endpoint, j.domain, j.amount_units::text, j.protocol, false, 'refuse'
       FROM payment_rejections j
       WHERE j.agent_id = $1 AND j.created_at >= $2 AND j.created_at < $3
     ) attempts
     ORDER BY at, kind, seq
     LIMIT $4`,
    [agentId, from, to, limit + 1],
  );
  const truncated = rows.length > limit;
  const kept = truncated ? rows.slice(0, limit) : rows;
  const domains = new Set<string>();
  const attempts = kept.map((row): PaymentAttempt => {
    domains.add(row.domain);
    return {
      id: row.id,
      at: row.at,
      endpoint: row.endpoint,
      amountUnits: BigInt(row.amount_units),
      protocol: row.protocol,
      ...(row.exposure ? { exposure: true } : {}),
      recorded: row.recorded,
    };
  });
  return { attempts, domains: [...domains], truncated };
}

/**
 * The usage standing at `from`, as the gateway would have read it then: the budget periods that
 * started in the 24 h before (their start and spend), the latest `rateCalls` calls of the
 * `rateWindowMs` before (a rate check only asks whether the limit is reached, so the newest
 * `limit` calls answer it for every later instant), which of `domains` had a settled payment, and
 * for each of the candidate's `endpointBudgets` rules the same spend and calls over the endpoints
 * it covers.
 */
export async function readStartUsage(
  db: Db,
  agentId: string,
  from: Date,
  options: {
    readonly rateCalls: number;
    readonly rateWindowMs: number;
    readonly domains: readonly string[] | null;
    readonly endpointBudgets?: Policy["endpointBudgets"];
  },
): Promise<BacktestStart> {
  const period = await db.query<{ start: Date | null; used: string }>(
    `SELECT min(budget_window_start) AS start, coalesce(sum(amount_units), 0)::text AS used FROM spend_reservations
     WHERE agent_id = $1 AND status <> 'released' AND budget_window_start > $2 AND created_at < $3`,
    [agentId, new Date(from.getTime() - BUDGET_WINDOW_MS), from],
  );
  const calls =
    options.rateCalls === 0
      ? []
      : (
          await db.query<{ created_at: Date }>(
            `SELECT created_at FROM spend_reservations
             WHERE agent_id = $1 AND status <> 'released' AND created_at > $2 AND created_at < $3
             ORDER BY created_at DESC LIMIT $4`,
            [agentId, new Date(from.getTime() - options.rateWindowMs), from, options.rateCalls],
          )
        ).rows
          .map((row) => row.created_at)
          .reverse();
  const paid =
    options.domains === null || options.domains.length === 0
      ? []
      : (
          await db.query<{ domain: string }>(
            `SELECT DISTINCT domain FROM spend_reservations
             WHERE agent_id = $1 AND status = 'settled' AND domain = ANY($2::text[]) AND created_at < $3`,
            [agentId, options.domains, from],
          )
        ).rows.map((row) => row.domain);
  const row = period.rows[0]!;
  const start = { windowStart: row.start, usedUnits: row.start === null ? 0n : BigInt(row.used), callTimes: calls, paidDomains: paid };
  const rules = options.endpointBudgets ?? [];
  if (rules.length === 0) return start;
  return { ...start, endpoints: await readEndpointStart(db, agentId, from, rules) };
}

/** Each rule's spend of the periods open at `from` and its calls within its rate window before `from`. */
async function readEndpointStart(
  db: Db,
  agentId: string,
  from: Date,
  rules: NonNullable<Policy["endpointBudgets"]>,
): Promise<Map<string, { usedUnits: bigint; callTimes: Date[] }>> {
  const dayBefore = new Date(from.getTime() - BUDGET_WINDOW_MS);
  const { rows } = await db.query<{ endpoint: string; amount_units: string; created_at: Date; budget_window_start: Date }>(
    `SELECT endpoint, amount_units::text, created_at, budget_window_start FROM spend_reservations
     WHERE agent_id = $1 AND status <> 'released' AND created_at > $2 AND created_at < $3
     ORDER BY created_at LIMIT $4`,
    [agentId, dayBefore, from, MAX_START_ROWS],
  );
  const usage = new Map(rules.map((rule) => [rule.match, { usedUnits: 0n, callTimes: [] as Date[] }]));
  for (const row of rows) {
    for (const rule of matchingEndpointBudgets(rules, row.endpoint)) {
      const entry = usage.get(rule.match)!;
      if (row.budget_window_start.getTime() > dayBefore.getTime()) entry.usedUnits += BigInt(row.amount_units);
      if (rule.rateLimit !== null && row.created_at.getTime() > from.getTime() - RATE_WINDOW_MS[rule.rateLimit.window]) {
        entry.callTimes.push(row.created_at);
      }
    }
  }
  return usage;
}
