/**
 * Transaction listings (spec 2.2, 4.7 transactions.list/get): chain transactions of the account's
 * agents (payer wallet -> agent id through `agents`) unioned with the payments the gateway
 * rejected (status `rejected`), newest first, keyset-paginated on (time, kind, id). Each carries the
 * policy version it was decided under (its reservation's, or the rejection's; docs/policy.md "Versions").
 */
import type pg from "pg";
import type { ListCursor } from "../../shared/validation.js";
import type { PaymentRow } from "../../shared/rows.js";
import { PageBounds } from "./page-bounds.js";

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
 * A listing row's columns: each one's expression for a chain payment (`t` the payment, `a` its
 * agent or the page's key row, `e` its endpoint, `pe` its tree edge) and for a rejection (`r`,
 * `a` its agent). The row's `agent_id` is the agent's public id (api/shared/agent-ids.ts): rows
 * are answers, never keys.
 */
const COLUMNS: { readonly [K in keyof PaymentRow]: readonly [chain: string, rejection: string] } = {
  kind: ["0", "1"],
  id: ["t.event_id::text", "r.id::text"],
  tx_hash: ["t.tx_hash", "NULL::text"],
  agent_id: ["a.public_id", "a.public_id"],
  wallet_address: ["t.agent", "a.wallet_address"],
  payee: ["t.payee", "NULL::text"],
  protocol: ["t.protocol", "r.protocol"],
  rail: ["t.rail", "NULL::text"],
  amount_units: ["t.amount_units::text", "r.amount_units::text"],
  endpoint: ["coalesce(e.endpoint, t.endpoint_hash)", "r.endpoint"],
  endpoint_hash: ["t.endpoint_hash", "NULL::text"],
  domain: ["e.domain", "r.domain"],
  policy_check: ["t.policy_check", "'failed'"],
  parent_tx_hash: ["t.parent_tx_hash", "NULL::text"],
  explorer_url: ["t.explorer_url", "NULL::text"],
  timestamp: ['t."timestamp"', "r.created_at"],
  time_micros: [
    '(extract(epoch FROM t."timestamp") * 1000000)::bigint::text',
    "(extract(epoch FROM r.created_at) * 1000000)::bigint::text",
  ],
  status: ["t.status", "'rejected'"],
  depth: ["coalesce(pe.depth, 0)", "0"],
  settlement_status: ["t.settlement_status", "NULL::text"],
  reason_code: ["NULL::text", "r.reason_code"],
  reason: ["NULL::text", "r.reason"],
  // The version of the payment's first reservation that has one (index spend_reservations_tx_hash).
  policy_version: [
    `(SELECT sr.policy_version FROM spend_reservations sr
      WHERE sr.tx_hash = t.tx_hash AND sr.policy_version IS NOT NULL ORDER BY sr.id LIMIT 1)`,
    "r.policy_version",
  ],
};

export type ListingColumn = keyof PaymentRow;
const ALL_COLUMNS = Object.keys(COLUMNS) as ListingColumn[];
/** What the listing reads whatever is asked: the keyset order and the cursor. */
const KEY_COLUMNS: readonly ListingColumn[] = ["kind", "id", "timestamp", "time_micros"];

const selectList = (columns: readonly ListingColumn[], branch: 0 | 1): string =>
  columns.map((column) => `${COLUMNS[column][branch]} AS "${column}"`).join(", ");

const CHAIN_SELECT = `SELECT ${selectList(ALL_COLUMNS, 0)}
  FROM transactions t
  JOIN agents a ON a.wallet_address = t.agent
  LEFT JOIN endpoints e ON e.endpoint_hash = t.endpoint_hash
  LEFT JOIN payment_edges pe ON pe.child_event_id = t.event_id`;

/**
 * The listing's chain branch, keys first: for each of the account's agents, the keys (time, id) of
 * its newest matching payments (index `transactions (agent, timestamp, event_id)`, read backwards
 * and index-only, at most one page each), merged and cut to one page; only then the page's rows
 * (`a`: key and agent) are read and joined with their endpoint and tree edge. Cost grows with agents × page size for the narrow keys and
 * with the page size for the joins, not with the account's history. (Joining every candidate
 * before the cut read 20 × 51 whole rows and edges for a 51-row page: bench/api/queries.ts.)
 * `endpointJoin` is the endpoints join the row filter needs (the domain filter), else empty.
 */
function chainListing(
  columns: readonly ListingColumn[],
  agentWhere: string,
  rowWhere: string,
  limit: string,
  endpointJoin: string,
): string {
  return `SELECT ${selectList(columns, 0)}
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

/**
 * Listing statements run as named (prepared) statements: parsed once per connection and, with the
 * page size in their text, planned once too. Postgres keeps a statement's generic plan when it is
 * estimated no costlier than its custom plans; a `LIMIT $n` is estimated at a tenth of the rows,
 * which kept the generic plan costlier and every execution planned anew. On the 1,000,000-payment
 * bench store: ~1.4 ms of Postgres CPU per listing unnamed, ~0.45 ms named with the literal page
 * size (bench/http). Distinct texts (filter shapes × page sizes) are bounded: past this many, a
 * new text runs unnamed (parsed and planned at each execution).
 */
const NAMED_STATEMENTS_MAX = 64;
const statementNames = new Map<string, string>();

function statementName(sql: string): string | undefined {
  let name = statementNames.get(sql);
  if (name === undefined && statementNames.size < NAMED_STATEMENTS_MAX) {
    name = `transactions_list_${statementNames.size}`;
    statementNames.set(sql, name);
  }
  return name;
}

/**
 * First-page bounds shared by the process's listings (page-bounds.ts). A full bounded answer is
 * the listing's answer; a short one is read again without the bound.
 */
export const firstPageBounds = new PageBounds(1_000);

/**
 * One page plus one row (to tell whether another page follows). `columns`: the row's columns to
 * read (with the key columns, always read); the others are absent from the rows. All by default.
 * A first page (no cursor) asked before is read with its last answer's time bound (page-bounds.ts).
 */
export async function listTransactions(
  pool: pg.Pool,
  filter: TransactionFilter,
  columns: ReadonlySet<ListingColumn> | undefined = undefined,
): Promise<PaymentRow[]> {
  if (!Number.isSafeInteger(filter.limit) || filter.limit < 1) throw new Error(`listing limit must be a positive integer: ${filter.limit}`);
  const read = columns === undefined ? ALL_COLUMNS : ALL_COLUMNS.filter((c) => columns.has(c) || KEY_COLUMNS.includes(c));
  // Answered: what was read, less the time's column when not asked (the keys make the cursor).
  const answered = columns === undefined || columns.has("timestamp") ? read : read.filter((c) => c !== "timestamp");
  // The filter's bound: per account and filter, a `since` by its presence only (a relative window,
  // "24h", moves with every request; any bound is checked anyway).
  const key =
    filter.after === undefined
      ? JSON.stringify([
          filter.accountId,
          filter.agentId,
          filter.protocol,
          filter.domain,
          filter.since !== undefined,
          filter.status,
          filter.reasonCode,
          filter.limit,
        ])
      : undefined;
  const bound = key === undefined ? undefined : firstPageBounds.get(key);
  let rows: PaymentRow[] | undefined;
  if (bound !== undefined) {
    rows = await runListing(pool, filter, read, answered, bound);
    if (rows.length === filter.limit + 1) firstPageBounds.hits += 1;
    else {
      firstPageBounds.fallbacks += 1;
      rows = undefined;
    }
  }
  rows ??= await runListing(pool, filter, read, answered, undefined);
  if (key !== undefined) {
    if (rows.length === filter.limit + 1) firstPageBounds.set(key, BigInt(rows[filter.limit]!.time_micros));
    else firstPageBounds.delete(key);
  }
  return rows;
}

/** The listing's statement, bounded below by `bound` (epoch microseconds) when given. */
async function runListing(
  pool: pg.Pool,
  filter: TransactionFilter,
  read: readonly ListingColumn[],
  answered: readonly ListingColumn[],
  bound: bigint | undefined,
): Promise<PaymentRow[]> {
  const params: unknown[] = [filter.accountId];
  const param = (value: unknown): string => {
    params.push(value);
    return `$${params.length}`;
  };
  // A time from its epoch microseconds, given as a bigint expression.
  const epochMicros = (micros: string): string => `('epoch'::timestamptz + ${micros}::bigint * interval '1 microsecond')`;
  const agentWhere = [`a.account_id = $1`];
  if (filter.agentId !== undefined) agentWhere.push(`a.agent_id = ${param(filter.agentId)}`);
  // The bound as an InitPlan (a sub-SELECT), so a custom plan cannot see its value either: both
  // estimate it alike and Postgres keeps the generic plan (with the value visible, each custom
  // plan looked cheaper and the statement was planned at every execution).
  const boundAt = bound === undefined ? undefined : epochMicros(`(SELECT ${param(bound.toString())}::bigint)`);
  const rowWhere = (time: string, prefix: string): string[] => {
    const where: string[] = ["true"];
    if (filter.protocol !== undefined) where.push(`${prefix}.protocol = ${param(filter.protocol)}`);
    if (filter.since !== undefined) where.push(`${time} >= ${param(filter.since)}`);
    if (boundAt !== undefined) where.push(`${time} >= ${boundAt}`);
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
    const at = epochMicros(param(c.timeMicros.toString()));
    return `${time} <= ${at} AND (${time}, ${kind}, ${id}) < (${at}, ${c.kind}, ${param(c.id.toString())}::bigint)`;
  };
  // An integer (checked above), in the text: see statementName.
  const limit = String(filter.limit + 1);

  const branches: string[] = [];
  if (filter.status !== "rejected" && filter.reasonCode === undefined) {
    const where = rowWhere(`t."timestamp"`, "t");
    if (filter.status !== undefined) where.push(`t.status = ${param(filter.status)}`);
    if (filter.domain !== undefined) where.push(domainMatch("e.domain"));
    if (filter.after !== undefined) where.push(afterCursor(`t."timestamp"`, 0, "t.event_id"));
    const endpointJoin = filter.domain === undefined ? "" : "LEFT JOIN endpoints e ON e.endpoint_hash = t.endpoint_hash";
    branches.push(`(${chainListing(read, agentWhere.join(" AND "), where.join(" AND "), limit, endpointJoin)})`);
  }
  if (filter.status === undefined || filter.status === "rejected") {
    const where = [...agentWhere, ...rowWhere("r.created_at", "r")];
    if (filter.domain !== undefined) where.push(domainMatch("r.domain"));
    if (filter.reasonCode !== undefined) where.push(`r.reason_code = ${param(filter.reasonCode)}`);
    if (filter.after !== undefined) where.push(afterCursor("r.created_at", 1, "r.id"));
    branches.push(
      `(SELECT ${selectList(read, 1)} FROM payment_rejections r JOIN agents a ON a.agent_id = r.agent_id
        WHERE ${where.join(" AND ")} ORDER BY r.created_at DESC, r.id DESC LIMIT ${limit})`,
    );
  }
  // A reason filter with a chain status (confirmed, finalized) matches nothing.
  if (branches.length === 0) return [];
  // The time comes as `time_micros` alone and is made a Date here (no timestamp text formatted by
  // Postgres, nor parsed); its column is a NULL placeholder, so each row object has its slot from the start.
  const withTime = answered.includes("timestamp");
  const sql = `SELECT ${answered.map((c) => (c === "timestamp" ? `NULL::timestamptz AS "timestamp"` : `x."${c}"`)).join(", ")}
               FROM (${branches.join(" UNION ALL ")}) x
               ORDER BY x."timestamp" DESC, x.kind DESC, x.id::bigint DESC LIMIT ${limit}`;
  const result = await pool.query<PaymentRow>({ name: statementName(sql), text: sql, values: params });
  if (withTime) for (const row of result.rows) (row as { timestamp: Date }).timestamp = dateOfMicros(row.time_micros);
  return result.rows;
}

/**
 * The Date of a time in epoch microseconds (decimal text), cut to the millisecond toward the past:
 * the Date the driver parses from Postgres's text of the same time (its fraction truncated).
 */
export function dateOfMicros(micros: string): Date {
  const value = Number(micros);
  if (!Number.isSafeInteger(value)) {
    // Beyond 2^53 µs (after the year 2255): exact in bigint, floored.
    const big = BigInt(micros);
    return new Date(Number((big - (((big % 1000n) + 1000n) % 1000n)) / 1000n));
  }
  const belowMs = ((value % 1000) + 1000) % 1000;
  return new Date((value - belowMs) / 1000);
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
