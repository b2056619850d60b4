/**
 * Transaction listings (spec 2.2, 4.7 transactions.list/get): chain transactions of the account's
 * agents (payer wallet -> agent id through `agents`) unioned with the payments the gateway
 * rejected (status `rejected`), newest first, keyset-paginated on (time, kind, id). Each carries the
 * policy version it was decided under (its reservation's, or the rejection's; docs/policy.md "Versions").
 */
import type pg from "pg";
import type { ListCursor } from "../../shared/validation.js";
import type { PaymentRow } from "../../shared/rows.js";

export type Protocol = "x402" | "mpp";
export type TransactionStatus = "confirmed" | "finalized" | "rejected";

export interface TransactionFilter {
  readonly accountId: string;
  /** The agent's internal key (`agents.agent_id`). */
  readonly agentId?: string | undefined;
  readonly protocol?: Protocol | undefined;
  /** Exact host or any subdomain of it (spec 2.1 rule 2 for a bare domain). */
  readonly domain?: string | undefined;
  readonly since?: Date | undefined;
  readonly status?: TransactionStatus | undefined;
  /** Only rejections with this reason code (no chain payments). */
  readonly reasonCode?: string | undefined;
  readonly after?: ListCursor | undefined;
  readonly limit: number;
}

/**
 * The listing's columns of a chain payment `t` (with `a` its agent, `pe` its tree edge). The row's
 * `agent_id` is the agent's public id (api/shared/agent-ids.ts): rows are answers, never keys.
 */
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

const CHAIN_SELECT = `${chainColumns("e.endpoint", "e.domain")}
  FROM transactions t
  JOIN agents a ON a.wallet_address = t.agent
  LEFT JOIN endpoints e ON e.endpoint_hash = t.endpoint_hash
  LEFT JOIN payment_edges pe ON pe.child_event_id = t.event_id`;

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
 * The listing's chain branch, keys first: for each of the account's agents, the keys (time, id) of
 * its newest matching payments (index `transactions (agent, timestamp)`, read backwards, at most
 * one page each), merged and cut to one page; only then the page's rows (`a`: key and agent) are read whole and joined
 * with their endpoint and tree edge. Cost grows with agents × page size for the narrow keys and
 * with the page size for the joins, not with the account's history. (Joining every candidate
 * before the cut read 20 × 51 whole rows and edges for a 51-row page: bench/api/queries.ts.)
 * `endpointJoin` is the endpoints join the row filter needs (the domain filter), else empty.
 */
function chainListing(agentWhere: string, rowWhere: string, limit: string, endpointJoin: string): string {
  return `${chainColumns("e.endpoint", "e.domain")}
  FROM (
    SELECT k.event_id, k."timestamp", a.public_id
    FROM agents a
    CROSS JOIN LATERAL (
      SELECT t.event_id, t."timestamp"
      FROM transactions t ${endpointJoin}
      WHERE t.agent = a.wallet_address AND ${rowWhere}
      ORDER BY t."timestamp" DESC, t.event_id DESC
      LIMIT ${limit}) k
    WHERE ${agentWhere}
    ORDER BY k."timestamp" DESC, k.event_id DESC
    LIMIT ${limit}) a
  JOIN transactions t ON t.event_id = a.event_id
  LEFT JOIN endpoints e ON e.endpoint_hash = t.endpoint_hash
  LEFT JOIN payment_edges pe ON pe.child_event_id = t.event_id`;
}

/** One page plus one row (to tell whether another page follows). */
export async function listTransactions(pool: pg.Pool, filter: TransactionFilter): Promise<PaymentRow[]> {
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
  if (filter.status !== "rejected" && filter.reasonCode === undefined) {
    const where = rowWhere(`t."timestamp"`, "t");
    if (filter.status !== undefined) where.push(`t.status = ${param(filter.status)}`);
    if (filter.domain !== undefined) where.push(domainMatch("e.domain"));
    if (filter.after !== undefined) where.push(afterCursor(`t."timestamp"`, 0, "t.event_id"));
    const endpointJoin = filter.domain === undefined ? "" : "LEFT JOIN endpoints e ON e.endpoint_hash = t.endpoint_hash";
    branches.push(`(${chainListing(agentWhere.join(" AND "), where.join(" AND "), limit, endpointJoin)})`);
  }
  if (filter.status === undefined || filter.status === "rejected") {
    const where = [...agentWhere, ...rowWhere("r.created_at", "r")];
    if (filter.domain !== undefined) where.push(domainMatch("r.domain"));
    if (filter.reasonCode !== undefined) where.push(`r.reason_code = ${param(filter.reasonCode)}`);
    if (filter.after !== undefined) where.push(afterCursor("r.created_at", 1, "r.id"));
    branches.push(`(${REJECTION_SELECT} WHERE ${where.join(" AND ")} ORDER BY r.created_at DESC, r.id DESC LIMIT ${limit})`);
  }
  // A reason filter with a chain status (confirmed, finalized) matches nothing.
  if (branches.length === 0) return [];
  const sql = `SELECT * FROM (${branches.join(" UNION ALL ")}) x
               ORDER BY "timestamp" DESC, kind DESC, id::bigint DESC LIMIT ${limit}`;
  const result = await pool.query<PaymentRow>(sql, params);
  return result.rows;
}

/** Spec 4.7 transactions.get: the payment of this hash if its payer is one of the account's agents. */
export async function getTransaction(pool: pg.Pool, accountId: string, txHash: string): Promise<PaymentRow | null> {
  const result = await pool.query<PaymentRow>(
    `${CHAIN_SELECT} WHERE a.account_id = $1 AND t.tx_hash = $2 ORDER BY t.instruction_index LIMIT 1`,
    [accountId, txHash],
  );
  return result.rows[0] ?? null;
}

/** Batch form of getTransaction, for the live feed and parent links. */
export async function transactionsByHashes(pool: pg.Pool, accountId: string, txHashes: readonly string[]): Promise<(PaymentRow | null)[]> {
  const result = await pool.query<PaymentRow>(
    `${CHAIN_SELECT} WHERE a.account_id = $1 AND t.tx_hash = ANY($2::text[]) ORDER BY t.instruction_index`,
    [accountId, [...txHashes]],
  );
  const byHash = new Map<string, PaymentRow>();
  for (const row of result.rows) if (!byHash.has(row.tx_hash!)) byHash.set(row.tx_hash!, row);
  return txHashes.map((hash) => byHash.get(hash) ?? null);
}
