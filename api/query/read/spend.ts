/**
 * Spend summaries (spec 4.8 `cli spend`, 4.9 spend tab) and metrics series (spec 4.2), read from
 * the per-minute rollups (`spend_rollups` with the gateway's `endpoints`, `metric_buckets`) and, for policy
 * violations, from the gateway's `payment_rejections`. Windows are whole minutes (validation.ts),
 * so a window is always a whole number of rollup buckets and the sums are exact.
 */
import type pg from "pg";
import type { TimeWindow } from "../../shared/validation.js";

export interface SpendScope {
  readonly accountId: string;
  /** One agent of the account, by internal key; undefined = all of its agents. */
  readonly agentId?: string | undefined;
  readonly window: TimeWindow;
}

export interface SpendCell {
  /** The agent's public id (api/shared/agent-ids.ts). */
  readonly agentId: string;
  readonly protocol: "x402" | "mpp";
  /** The gateway's domain for the endpoint, else the endpoint hash (the chain only knows hashes). */
  readonly domain: string;
  readonly amountUnits: bigint;
  readonly txCount: bigint;
}

export async function readSpendCells(pool: pg.Pool, scope: SpendScope): Promise<SpendCell[]> {
  const result = await pool.query<{ agent_id: string; protocol: "x402" | "mpp"; domain: string; amount_units: string; tx_count: string }>(
    // Per agent, a range of the rollups' primary key (index-only: migration 032 carries the sums),
    // then one aggregation by agent, protocol and domain. The lateral (OFFSET 0: not flattened
    // into a plain join) keeps the planner on those
    // ranges: as a plain join over a window covering most of the table it chose a sequential scan
    // of every account's rollups (bench/api/queries.ts). (The spend_rollups_by_domain view would
    // group every minute first: 30 days of 100,000 payments took ~0.7 s that way.)
    `SELECT a.public_id AS agent_id, r.protocol, coalesce(e.domain, r.endpoint_hash) AS domain,
            sum(r.amount_units)::text AS amount_units, sum(r.tx_count)::text AS tx_count
     FROM agents a
     CROSS JOIN LATERAL (
       SELECT r.protocol, r.endpoint_hash, r.amount_units, r.tx_count
       FROM spend_rollups r
       WHERE r.agent = a.wallet_address AND r.bucket_start >= $3 AND r.bucket_start < $4
       OFFSET 0) r
     LEFT JOIN endpoints e ON e.endpoint_hash = r.endpoint_hash
     WHERE a.account_id = $1 AND ($2::text IS NULL OR a.agent_id = $2)
     GROUP BY 1, 2, 3`,
    [scope.accountId, scope.agentId ?? null, scope.window.from, scope.window.to],
  );
  return result.rows.map((row) => ({
    agentId: row.agent_id,
    protocol: row.protocol,
    domain: row.domain,
    amountUnits: BigInt(row.amount_units),
    txCount: BigInt(row.tx_count),
  }));
}

export interface MetricBucket {
  readonly start: Date;
  readonly spendUnits: bigint;
  readonly txCount: bigint;
  readonly x402SpendUnits: bigint;
  readonly mppSpendUnits: bigint;
}

/** Non-empty buckets of `resolutionMs`, aligned on the window start. */
export async function readMetricBuckets(pool: pg.Pool, scope: SpendScope, resolutionMs: number): Promise<MetricBucket[]> {
  const result = await pool.query<{ start: Date; spend: string; n: string; x402: string; mpp: string }>(
    // Per agent, a range of metric_buckets' primary key (index-only, migration 032), then one
    // aggregation by bin: the lateral keeps the planner off a sequential scan (see readSpendCells).
    `SELECT date_bin(make_interval(secs => $5::int), m.bucket_start, $3::timestamptz) AS start,
            sum(m.spend_units)::text AS spend, sum(m.tx_count)::text AS n,
            sum(m.x402_spend_units)::text AS x402, sum(m.mpp_spend_units)::text AS mpp
     FROM agents a
     CROSS JOIN LATERAL (
       SELECT m.bucket_start, m.spend_units, m.tx_count, m.x402_spend_units, m.mpp_spend_units
       FROM metric_buckets m
       WHERE m.agent = a.wallet_address AND m.bucket_start >= $3 AND m.bucket_start < $4
       OFFSET 0) m
     WHERE a.account_id = $1 AND ($2::text IS NULL OR a.agent_id = $2)
     GROUP BY 1 ORDER BY 1`,
    [scope.accountId, scope.agentId ?? null, scope.window.from, scope.window.to, resolutionMs / 1000],
  );
  return result.rows.map((row) => ({
    start: row.start,
    spendUnits: BigInt(row.spend),
    txCount: BigInt(row.n),
    x402SpendUnits: BigInt(row.x402),
    mppSpendUnits: BigInt(row.mpp),
  }));
}

export interface ViolationBucket {
  readonly start: Date;
  readonly reason: string;
  readonly count: number;
}

/** Rejected payments per bucket and reason code. */
export async function readViolationBuckets(pool: pg.Pool, scope: SpendScope, resolutionMs: number): Promise<ViolationBucket[]> {
  const result = await pool.query<{ start: Date; reason: string; n: string }>(
    `SELECT date_bin(make_interval(secs => $5::int), r.created_at, $3::timestamptz) AS start,
            r.reason_code AS reason, count(*)::text AS n
     FROM payment_rejections r
     JOIN agents a ON a.agent_id = r.agent_id
     WHERE a.account_id = $1 AND ($2::text IS NULL OR a.agent_id = $2)
       AND r.created_at >= $3 AND r.created_at < $4
     GROUP BY 1, 2 ORDER BY 1, 2`,
    [scope.accountId, scope.agentId ?? null, scope.window.from, scope.window.to, resolutionMs / 1000],
  );
  return result.rows.map((row) => ({ start: row.start, reason: row.reason, count: Number(row.n) }));
}
