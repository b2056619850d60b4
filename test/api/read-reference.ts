/**
 * The listing, spend and metrics queries as they were before their rewrite (keys first; per
 * agent through a lateral), verbatim, so test/api/query-rewrites.test.ts can check on random data
 * that the rewritten queries in api/query/read/ return exactly what these did.
 */
import type pg from "pg";
import type { MetricBucket, SpendCell, SpendScope } from "../../api/query/read/spend.js";
import type { TransactionFilter } from "../../api/query/read/transactions.js";
import type { PaymentRow } from "../../api/shared/rows.js";

const chainColumns = (endpointText: string, domain: string): string => `
  SELECT 0 AS kind, t.event_id::text AS id, t.tx_hash, a.public_id AS agent_id, t.agent AS wallet_address, t.payee,
         t.protocol, t.rail, t.amount_units::text AS amount_units,
         coalesce(${endpointText}, t.endpoint_hash) AS endpoint, t.endpoint_hash, ${domain} AS domain,
         t.policy_check, t.parent_tx_hash, t.explorer_url, t."timestamp",
         (extract(epoch FROM t."timestamp") * 1000000)::bigint::text AS time_micros,
         t.status, coalesce(pe.depth, 0) AS depth, t.settlement_status,
         NULL::text AS reason_code, NULL::text AS reason,
         (SELECT sr.policy_version FROM spend_reservations sr
          WHERE sr.tx_hash = t.tx_hash AND sr.policy_version IS NOT NULL ORDER BY sr.id LIMIT 1) AS policy_version`;

const REJECTION_SELECT = `
  SELECT 1 AS kind, r.id::text AS id, NULL::text AS tx_hash, a.public_id AS agent_id, a.wallet_address, NULL::text AS payee,
         r.protocol, NULL::text AS rail, r.amount_units::text AS amount_units,
         r.endpoint, NULL::text AS endpoint_hash, r.domain,
         'failed' AS policy_check, NULL::text AS parent_tx_hash, NULL::text AS explorer_url, r.created_at AS "timestamp",
         (extract(epoch FROM r.created_at) * 1000000)::bigint::text AS time_micros,
         'rejected' AS status, 0 AS depth, NULL::text AS settlement_status,
         r.reason_code, r.reason, r.policy_version
  FROM payment_rejections r
  JOIN agents a ON a.agent_id = r.agent_id`;

/**
 * The listing's chain branch: for each of the account's agents, its newest matching payments
 * (index `transactions (agent, timestamp)`, read backwards, at most one page each), then merged.
 * Cost grows with agents × page size, not with the account's history.
 */
function chainListing(agentWhere: string, rowWhere: string, limit: string): string {
  return `${chainColumns("t.endpoint_text", "t.domain")}
  FROM agents a
  CROSS JOIN LATERAL (
    SELECT t.*, e.endpoint AS endpoint_text, e.domain
    FROM transactions t LEFT JOIN endpoints e ON e.endpoint_hash = t.endpoint_hash
    WHERE t.agent = a.wallet_address AND ${rowWhere}
    ORDER BY t."timestamp" DESC, t.event_id DESC
    LIMIT ${limit}) t
  LEFT JOIN payment_edges pe ON pe.child_event_id = t.event_id
  WHERE ${agentWhere}`;
}

/** One page plus one row (to tell whether another page follows). */
export async function listTransactionsBefore(pool: pg.Pool, filter: TransactionFilter): Promise<PaymentRow[]> {
  const params: unknown[] = [filter.accountId];
  const param = (value: unknown): string => {
    params.push(value);
    return `$${params.length}`;
  };
  const agentWhere = [`a.account_id = $1`];
  if (filter.agentId !== undefined) agentWhere.push(`a.agent_id = ${param(filter.agentId)}`);
  const rowWhere = (time: string, prefix: string): string[] => {
    const where: string[] = ["true"];
    if (filter.protocol !== undefined) where.push(`${prefix}.protocol = ${param(filter.protocol)}`);
    if (filter.since !== undefined) where.push(`${time} >= ${param(filter.since)}`);
    return where;
  };
  const domainMatch = (column: string): string => {
    const p = param(filter.domain);
    return `(${column} = ${p} OR right(${column}, length(${p}) + 1) = '.' || ${p})`;
  };
  // Keyset: rows strictly after the cursor in (time desc, kind desc, id desc) order. The plain
  // `time <= cursor time` lets the (agent, time) indexes bound the scan.
  const afterCursor = (time: string, kind: 0 | 1, id: string): string => {
    const c = filter.after!;
    const at = `('epoch'::timestamptz + ${param(c.timeMicros.toString())}::bigint * interval '1 microsecond')`;
    return `${time} <= ${at} AND (${time}, ${kind}, ${id}) < (${at}, ${c.kind}, ${param(c.id.toString())}::bigint)`;
  };
  const limit = param(filter.limit + 1);

  const branches: string[] = [];
  if (filter.status !== "rejected") {
    const where = rowWhere(`t."timestamp"`, "t");
    if (filter.status !== undefined) where.push(`t.status = ${param(filter.status)}`);
    if (filter.domain !== undefined) where.push(domainMatch("e.domain"));
    if (filter.after !== undefined) where.push(afterCursor(`t."timestamp"`, 0, "t.event_id"));
    branches.push(`(${chainListing(agentWhere.join(" AND "), where.join(" AND "), limit)})`);
  }
  if (filter.status === undefined || filter.status === "rejected") {
    const where = [...agentWhere, ...rowWhere("r.created_at", "r")];
    if (filter.domain !== undefined) where.push(domainMatch("r.domain"));
    if (filter.after !== undefined) where.push(afterCursor("r.created_at", 1, "r.id"));
    branches.push(`(${REJECTION_SELECT} WHERE ${where.join(" AND ")} ORDER BY r.created_at DESC, r.id DESC LIMIT ${limit})`);
  }
  const sql = `SELECT * FROM (${branches.join(" UNION ALL ")}) x
               ORDER BY "timestamp" DESC, kind DESC, id::bigint DESC LIMIT ${limit}`;
  const result = await pool.query<PaymentRow>(sql, params);
  return result.rows;
}

export async function readSpendCellsBefore(pool: pg.Pool, scope: SpendScope): Promise<SpendCell[]> {
  const result = await pool.query<{ agent_id: string; protocol: "x402" | "mpp"; domain: string; amount_units: string; tx_count: string }>(
    // One aggregation over the per-minute rollups (the spend_rollups_by_domain view would group
    // every minute first: 30 days of 100,000 payments took ~0.7 s that way, ~0.2 s this way).
    `SELECT a.public_id AS agent_id, r.protocol, coalesce(e.domain, r.endpoint_hash) AS domain,
            sum(r.amount_units)::text AS amount_units, sum(r.tx_count)::text AS tx_count
     FROM agents a
     JOIN spend_rollups r ON r.agent = a.wallet_address
     LEFT JOIN endpoints e ON e.endpoint_hash = r.endpoint_hash
     WHERE a.account_id = $1 AND ($2::text IS NULL OR a.agent_id = $2)
       AND r.bucket_start >= $3 AND r.bucket_start < $4
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

/** Non-empty buckets of `resolutionMs`, aligned on the window start. */
export async function readMetricBucketsBefore(pool: pg.Pool, scope: SpendScope, resolutionMs: number): Promise<MetricBucket[]> {
  const result = await pool.query<{ start: Date; spend: string; n: string; x402: string; mpp: string }>(
    `SELECT date_bin(make_interval(secs => $5::int), m.bucket_start, $3::timestamptz) AS start,
            sum(m.spend_units)::text AS spend, sum(m.tx_count)::text AS n,
            sum(m.x402_spend_units)::text AS x402, sum(m.mpp_spend_units)::text AS mpp
     FROM metric_buckets m
     JOIN agents a ON a.wallet_address = m.agent
     WHERE a.account_id = $1 AND ($2::text IS NULL OR a.agent_id = $2)
       AND m.bucket_start >= $3 AND m.bucket_start < $4
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
