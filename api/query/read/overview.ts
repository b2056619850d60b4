/**
 * What the dashboard's overview (and the Policies and Runs views at scale) read in one query
 * each, for every agent of the account at once: daily-budget use ranked by share (the same
 * period rule as api/shared/policy/store.ts `readUsage`, set-based), rejections by reason since a
 * time, failing webhook deliveries, the indexer's checkpoint, and runs with their totals.
 * Every read is scoped to the account and bounded.
 */
import type pg from "pg";
import { BUDGET_WINDOW_MS } from "../../shared/policy/windows.js";

export type BudgetStateName = "open" | "warning" | "exhausted";

export interface BudgetUseRow {
  readonly agent_id: string;
  readonly daily_budget_units: string;
  readonly used_units: string;
  readonly state: BudgetStateName;
  /** Used share of the budget in hundredths of a percent (integer text). */
  readonly basis_points: string;
  readonly window_resets_at: Date | null;
}

export interface BudgetUsePage {
  readonly rows: BudgetUseRow[];
  readonly totalCount: number;
  readonly warningCount: number;
  readonly exhaustedCount: number;
}

export type BudgetOrder = "use" | "agent";

/**
 * The daily-budget use of the account's active agents that have a daily budget: one page in
 * `order` ("use": highest share first; "agent": by id), optionally of one state, with the counts
 * of every state. Usage is what `readUsage` computes: the open period's running totals
 * (`spend_periods`), exhausted once a daily-budget refusal followed the policy's last change in it.
 */
export async function budgetUse(
  pool: pg.Pool,
  accountId: string,
  now: Date,
  options: { state?: BudgetStateName | undefined; order: BudgetOrder; limit: number; offset: number },
): Promise<BudgetUsePage> {
  const { rows } = await pool.query<BudgetUseRow & { total: string; warning: string; exhausted: string }>(
    `WITH budgeted AS MATERIALIZED (
       SELECT a.agent_id AS key, a.public_id, p.daily_budget_units AS budget, p.updated_at
       FROM agents a JOIN policies p ON p.agent_id = a.agent_id
       WHERE a.account_id = $1 AND a.archived_at IS NULL AND p.daily_budget_units IS NOT NULL),
     periods AS (
       SELECT sp.agent_id AS key, min(sp.window_start) AS start, sum(sp.used_units) AS used
       FROM spend_periods sp
       WHERE sp.agent_id IN (SELECT key FROM budgeted) AND sp.calls > 0 AND sp.window_start > $2
       GROUP BY sp.agent_id),
     usage AS (
       SELECT b.public_id, b.budget, coalesce(u.used, 0) AS used, u.start,
              u.start IS NOT NULL AND EXISTS (
                SELECT 1 FROM payment_rejections r
                WHERE r.agent_id = b.key AND r.reason_code = 'daily_budget_exceeded'
                  AND r.created_at >= u.start AND r.created_at > b.updated_at) AS refused
       FROM budgeted b LEFT JOIN periods u ON u.key = b.key),
     ranked AS (
       SELECT public_id, budget, used, start,
              CASE WHEN refused OR used >= budget THEN 'exhausted'
                   WHEN used * 100 >= budget * 80 THEN 'warning' ELSE 'open' END AS state,
              CASE WHEN budget = 0 THEN 10000 ELSE floor(used * 10000 / budget) END AS bp
       FROM usage),
     counted AS (
       SELECT *, count(*) OVER () AS total,
              count(*) FILTER (WHERE state = 'warning') OVER () AS warning,
              count(*) FILTER (WHERE state = 'exhausted') OVER () AS exhausted
       FROM ranked)
     SELECT public_id AS agent_id, budget::text AS daily_budget_units, used::text AS used_units, state,
            bp::text AS basis_points, start + $3 * interval '1 millisecond' AS window_resets_at,
            total::text AS total, warning::text AS warning, exhausted::text AS exhausted
     FROM counted
     WHERE $4::text IS NULL OR state = $4
     ORDER BY CASE WHEN $5 = 'use' THEN bp END DESC, CASE WHEN $5 = 'use' THEN used END DESC, public_id
     LIMIT $6 OFFSET $7`,
    [
      accountId,
      new Date(now.getTime() - BUDGET_WINDOW_MS),
      BUDGET_WINDOW_MS,
      options.state ?? null,
      options.order,
      options.limit,
      options.offset,
    ],
  );
  // The counts ride on every row; a page past the end (or of a state no agent is in) has none.
  const counts = rows[0] ?? (options.state === undefined && options.offset === 0 ? null : await budgetCounts(pool, accountId, now));
  return {
    rows,
    totalCount: counts === null ? 0 : Number(counts.total),
    warningCount: counts === null ? 0 : Number(counts.warning),
    exhaustedCount: counts === null ? 0 : Number(counts.exhausted),
  };
}

async function budgetCounts(pool: pg.Pool, accountId: string, now: Date): Promise<{ total: string; warning: string; exhausted: string }> {
  const page = await budgetUse(pool, accountId, now, { order: "agent", limit: 1, offset: 0 });
  return { total: String(page.totalCount), warning: String(page.warningCount), exhausted: String(page.exhaustedCount) };
}

/** The account's rejected payments since `since`, counted by reason code, most frequent first. */
export async function rejectionsByReason(pool: pg.Pool, accountId: string, since: Date): Promise<{ reason_code: string; n: string }[]> {
  const { rows } = await pool.query<{ reason_code: string; n: string }>(
    `SELECT r.reason_code, count(*)::text AS n
     FROM payment_rejections r JOIN agents a ON a.agent_id = r.agent_id
     WHERE a.account_id = $1 AND r.created_at >= $2
     GROUP BY r.reason_code ORDER BY count(*) DESC, r.reason_code LIMIT 50`,
    [accountId, since],
  );
  return rows;
}

export interface WebhookFailures {
  /** Deliveries given up on (status failed) created since `since`. */
  readonly failed: number;
  /** Deliveries still pending after at least one failed attempt. */
  readonly retrying: number;
  /** The error of the newest such delivery. */
  readonly lastError: string | null;
}

/** The account's webhook deliveries that failed (given up) or are being retried, since `since`. */
export async function webhookFailures(pool: pg.Pool, accountId: string, since: Date): Promise<WebhookFailures> {
  const { rows } = await pool.query<{ failed: string; retrying: string; last_error: string | null }>(
    `WITH bad AS (
       SELECT d.id, d.status, d.last_error
       FROM event_deliveries d JOIN gateway_events g ON g.id = d.event_id
       WHERE g.account_id = $1 AND d.channel = 'webhook' AND d.created_at >= $2
         AND (d.status = 'failed' OR (d.status = 'pending' AND d.attempts > 0 AND d.last_error IS NOT NULL)))
     SELECT count(*) FILTER (WHERE status = 'failed')::text AS failed,
            count(*) FILTER (WHERE status = 'pending')::text AS retrying,
            (SELECT last_error FROM bad ORDER BY id DESC LIMIT 1) AS last_error
     FROM bad`,
    [accountId, since],
  );
  const row = rows[0]!;
  return { failed: Number(row.failed), retrying: Number(row.retrying), lastError: row.last_error };
}

/** The indexer's most recently advanced checkpoint, and the block time of the newest payment it has stored. */
export async function indexerCheckpoint(pool: pg.Pool): Promise<{ slot: string; updated_at: Date; latest_block_time: Date | null } | null> {
  const { rows } = await pool.query<{ slot: string; updated_at: Date; latest_block_time: Date | null }>(
    `SELECT c.slot::text AS slot, c.updated_at,
            (SELECT max(t."timestamp") FROM transactions t) AS latest_block_time
     FROM checkpoints c ORDER BY c.updated_at DESC LIMIT 1`,
  );
  return rows[0] ?? null;
}

export interface RunRow {
  readonly root_tx_hash: string;
  readonly agent_id: string;
  readonly timestamp: Date;
  readonly total_units: string;
  readonly payment_count: string;
  readonly agent_count: string;
  readonly budget_units: string | null;
  readonly budget_spent_units: string | null;
}

export type RunOrder = "recent" | "cost";

/**
 * Runs of the account: its top-level payments that have payments under them, each with the total
 * cost, payments and distinct agents of its tree (the account's payments only, as `paymentTree`
 * counts them) and the agents.invoke budgets opened in it with what they consumed. One page,
 * newest or costliest first; `agentKey` keeps the runs one agent's payment started.
 */
export async function listRuns(
  pool: pg.Pool,
  accountId: string,
  options: { agentKey?: string | undefined; order: RunOrder; limit: number; offset: number },
): Promise<{ rows: RunRow[]; totalCount: number }> {
  const { rows } = await pool.query<RunRow & { total: string }>(
    `WITH mine AS MATERIALIZED (SELECT wallet_address, public_id, agent_id FROM agents WHERE account_id = $1),
     roots AS MATERIALIZED (
       SELECT DISTINCT ON (t.tx_hash) t.tx_hash, t."timestamp", m.public_id
       FROM transactions t JOIN mine m ON m.wallet_address = t.agent
       WHERE t.parent_tx_hash IS NULL AND ($2::text IS NULL OR m.agent_id = $2)
         AND EXISTS (SELECT 1 FROM payment_closure c WHERE c.ancestor_tx_hash = t.tx_hash AND c.distance = 1)
       ORDER BY t.tx_hash, t.instruction_index),
     members AS (
       SELECT r.tx_hash AS root, t.event_id, t.tx_hash, t.amount_units, t.agent
       FROM roots r JOIN transactions t ON t.tx_hash = r.tx_hash
       UNION
       SELECT r.tx_hash, t.event_id, t.tx_hash, t.amount_units, t.agent
       FROM roots r JOIN payment_closure c ON c.ancestor_tx_hash = r.tx_hash
       JOIN transactions t ON t.event_id = c.descendant_event_id
       WHERE t.agent IN (SELECT wallet_address FROM mine)),
     totals AS (
       SELECT root, sum(amount_units) AS total, count(*) AS payments, count(DISTINCT agent) AS agents,
              array_agg(DISTINCT tx_hash) AS hashes
       FROM members GROUP BY root),
     paged AS (
       SELECT r.tx_hash, r."timestamp", r.public_id, t.total, t.payments, t.agents, t.hashes, count(*) OVER () AS n
       FROM roots r JOIN totals t ON t.root = r.tx_hash
       ORDER BY CASE WHEN $3 = 'cost' THEN t.total END DESC, r."timestamp" DESC, r.tx_hash
       LIMIT $4 OFFSET $5)
     SELECT p.tx_hash AS root_tx_hash, p.public_id AS agent_id, p."timestamp", p.total::text AS total_units,
            p.payments::text AS payment_count, p.agents::text AS agent_count, p.n::text AS total,
            b.budget::text AS budget_units, b.spent::text AS budget_spent_units
     FROM paged p
     LEFT JOIN LATERAL (
       SELECT sum(i.budget_units) AS budget, sum(i.spent_units) AS spent
       FROM invocations i WHERE i.parent_tx_hash = ANY(p.hashes)) b ON true
     ORDER BY CASE WHEN $3 = 'cost' THEN p.total END DESC, p."timestamp" DESC, p.tx_hash`,
    [accountId, options.agentKey ?? null, options.order, options.limit, options.offset],
  );
  let totalCount = rows[0] === undefined ? 0 : Number(rows[0].total);
  if (rows[0] === undefined && options.offset > 0)
    totalCount = (await listRuns(pool, accountId, { ...options, limit: 1, offset: 0 })).totalCount;
  return { rows, totalCount };
}
