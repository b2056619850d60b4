/**
 * The policy store: policies in Postgres (migrations/004_policies.sql), their versions
 * (migrations/055_policy_versions.sql) and the usage a decision is made on. It owns tables
 * `policies` and `policy_versions`; every change writes the next version under the agent's lock; usage is read from `spend_periods`, the running total of each
 * budget period that a trigger keeps with every change of a reservation (migrations/029_spend_periods.sql),
 * and from the reservations' count for the rate limit; an endpoint rule's usage from the same
 * totals per endpoint (`spend_period_endpoints`, migrations/054_endpoint_budgets.sql). The reservation ledger itself is the
 * gateway's (api/gateway/reservations/store.ts); the query service only reads through this module.
 *
 * Concurrency: `putPolicy` and every reservation hold the agent's transaction-level advisory lock
 * (`lockAgentPolicy`) in a READ COMMITTED transaction, so for one agent they execute one at a time
 * and each sees everything committed before it. Reads (`getPolicy`, `readUsage`, `checkPolicy`)
 * take no lock and write nothing: a dry run records nothing.
 */
import type pg from "pg";
import { type Db, withTransaction } from "../../../indexer/db/database.js";
import { type EndpointUsage, endpointParts, endpointRuleMatches } from "./endpoint-budgets.js";
import { evaluatePolicy, type PaymentRequest, type PolicyDecision, type PolicyUsage } from "./engine.js";
import { approvalFromColumns, approvalToColumns } from "./approval.js";
import { applyPatch, EMPTY_POLICY, type Policy, type PolicyPatch, type ProtocolPreference } from "./policy.js";
import { endpointBudgetsFromDocument, type PolicyDocument, type PolicyVersion, policyDocument } from "./versions.js";
import { BUDGET_WINDOW_MS, openBudgetWindow, RATE_WINDOW_MS, RATE_WINDOWS, type RateWindow, rateWindowStart } from "./windows.js";

export type { Db };

/** Key space of the per-agent lock (the two-argument advisory lock form: namespace, hashtext(agent)). */
const POLICY_LOCK_NAMESPACE = 7_240_004;
const MAX_AGENT_ID_LENGTH = 200;

export interface StoredPolicy extends Policy {
  readonly agentId: string;
  readonly updatedAt: Date;
  /** The policy's current version (migrations/055_policy_versions.sql). */
  readonly version: number;
}

/** The policy a decision is made under and its version (0: the agent never had a policy). */
export interface VersionedPolicy {
  readonly policy: Policy & { readonly updatedAt?: Date };
  readonly version: number;
}

export interface UsageView extends PolicyUsage {
  readonly budgetExhausted: boolean;
  /** When the open budget period resets; null if none is open. */
  readonly windowResetsAt: Date | null;
  /** The window `rateCalls` counts over: the policy's, or null (then `rateCalls` is 0). */
  readonly rateWindow: RateWindow | null;
}

interface PolicyRow {
  agent_id: string;
  daily_budget_units: string | null;
  per_call_limit_units: string | null;
  allowed_domains: string[] | null;
  blocked_domains: string[];
  rate_limit_calls: number | null;
  rate_limit_window: RateWindow | null;
  protocol_preference: ProtocolPreference;
  approval_above_units: string | null;
  approval_domains: readonly string[];
  approval_first_payment_to_domain: boolean;
  approval_timeout_ms: string | null;
  approval_on_timeout: "deny" | null;
  endpoint_budgets: PolicyDocument["endpointBudgets"];
  version: number;
  updated_at: Date;
}

/**
 * `PolicyRow`'s columns, named: a statement prepared on a connection (`policy-versioned`) fails
 * once its result columns change, which `p.*` would do when a migration adds a column.
 */
const POLICY_COLUMN_NAMES = [
  "agent_id",
  "daily_budget_units",
  "per_call_limit_units",
  "allowed_domains",
  "blocked_domains",
  "rate_limit_calls",
  "rate_limit_window",
  "protocol_preference",
  "approval_above_units",
  "approval_domains",
  "approval_first_payment_to_domain",
  "approval_timeout_ms",
  "approval_on_timeout",
  "endpoint_budgets",
  "version",
  "updated_at",
] as const;
/** The columns of `policies p`. */
const POLICY_COLUMNS = POLICY_COLUMN_NAMES.map((name) => `p.${name}`).join(", ");

export async function getPolicy(db: Db, agentId: string): Promise<StoredPolicy | null> {
  assertAgentId(agentId);
  const { rows } = await db.query<PolicyRow>("SELECT * FROM policies WHERE agent_id = $1", [agentId]);
  return rows[0] === undefined ? null : fromRow(rows[0]);
}

/**
 * A payment's first read in its transaction, one statement instead of two: the agent's
 * `archived_at`, its row locked FOR SHARE against a concurrent archive (see
 * api/gateway/payments/agent-archive.ts), and its stored policy, whose protocol preference chooses
 * among the offered protocols (the decision reads the policy again under the agent's lock).
 * `archivedAt` is null for an agent that is not archived, or not found.
 */
export async function getPolicyLockingAgent(db: Db, agentId: string): Promise<{ archivedAt: Date | null; policy: StoredPolicy | null }> {
  assertAgentId(agentId);
  const { rows } = await db.query<PolicyRow & { archived_at: Date | null; agent_id: string | null }>({
    name: "policy-locking-agent",
    text: `SELECT a.archived_at, ${POLICY_COLUMNS} FROM agents a LEFT JOIN policies p ON p.agent_id = a.agent_id
     WHERE a.agent_id = $1 FOR SHARE OF a`,
    values: [agentId],
  });
  const row = rows[0];
  return { archivedAt: row?.archived_at ?? null, policy: row === undefined || row.agent_id === null ? null : fromRow(row) };
}

/**
 * `policies.set` (spec 4.1): omitted fields keep their value, `null` removes one. Writes the next
 * version, by `actor` (`key:<id>`, `admin`, `system`). Returns the result.
 */
export async function putPolicy(
  pool: pg.Pool,
  agentId: string,
  patch: PolicyPatch,
  now: Date = new Date(),
  actor = "system",
): Promise<StoredPolicy> {
  assertAgentId(agentId);
  return withTransaction(
    pool,
    async (client) => {
      await lockAgent(client, agentId);
      const next = applyPatch((await getPolicy(client, agentId)) ?? EMPTY_POLICY, patch);
      const version = await writeVersion(client, agentId, next, now, actor);
      const { rows } = await client.query<PolicyRow>(
        `INSERT INTO policies (agent_id, daily_budget_units, per_call_limit_units, allowed_domains, blocked_domains,
                             rate_limit_calls, rate_limit_window, protocol_preference, updated_at,
                             approval_above_units, approval_domains, approval_first_payment_to_domain, approval_timeout_ms,
                             approval_on_timeout, endpoint_budgets, version)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
       ON CONFLICT (agent_id) DO UPDATE SET
         daily_budget_units = EXCLUDED.daily_budget_units, per_call_limit_units = EXCLUDED.per_call_limit_units,
         allowed_domains = EXCLUDED.allowed_domains, blocked_domains = EXCLUDED.blocked_domains,
         rate_limit_calls = EXCLUDED.rate_limit_calls, rate_limit_window = EXCLUDED.rate_limit_window,
         protocol_preference = EXCLUDED.protocol_preference, updated_at = EXCLUDED.updated_at,
         approval_above_units = EXCLUDED.approval_above_units, approval_domains = EXCLUDED.approval_domains,
         approval_first_payment_to_domain = EXCLUDED.approval_first_payment_to_domain,
         approval_timeout_ms = EXCLUDED.approval_timeout_ms, approval_on_timeout = EXCLUDED.approval_on_timeout,
         endpoint_budgets = EXCLUDED.endpoint_budgets, version = EXCLUDED.version
       RETURNING *`,
        [
          agentId,
          next.dailyBudgetUnits?.toString() ?? null,
          next.perCallLimitUnits?.toString() ?? null,
          next.allowedDomains,
          next.blockedDomains,
          next.rateLimit?.calls ?? null,
          next.rateLimit?.window ?? null,
          next.protocolPreference,
          now,
          ...approvalColumns(next.approval),
          JSON.stringify(policyDocument(next).endpointBudgets),
          version,
        ],
      );
      return fromRow(rows[0]!);
    },
    { isolation: "read committed" },
  );
}

/**
 * `policies.clear`: removes every limit of the agent, as a new version (the empty policy). The
 * reservation ledger is kept. False (and no version) when there was no policy.
 */
export async function clearPolicy(pool: pg.Pool, agentId: string, now: Date = new Date(), actor = "system"): Promise<boolean> {
  assertAgentId(agentId);
  return withTransaction(
    pool,
    async (client) => {
      await lockAgent(client, agentId);
      const result = await client.query("DELETE FROM policies WHERE agent_id = $1", [agentId]);
      if ((result.rowCount ?? 0) === 0) return false;
      await writeVersion(client, agentId, EMPTY_POLICY, now, actor);
      return true;
    },
    { isolation: "read committed" },
  );
}

/** The next version of the agent's policy, under its lock; answers its number. */
async function writeVersion(client: pg.ClientBase, agentId: string, policy: Policy, now: Date, actor: string): Promise<number> {
  const { rows } = await client.query<{ version: number }>(
    `INSERT INTO policy_versions (agent_id, version, created_at, created_by, policy, hash)
     SELECT $1, coalesce(max(version), 0) + 1, $2, $3, $4::jsonb, encode(sha256(convert_to($4::jsonb::text, 'UTF8')), 'hex')
     FROM policy_versions WHERE agent_id = $1
     RETURNING version`,
    [agentId, now, actor, JSON.stringify(policyDocument(policy))],
  );
  return rows[0]!.version;
}

/**
 * The policy a decision is made under and its version, in one statement: the stored policy, or
 * the empty policy at the version of its last clearing (0 if it never had one). Read it under the
 * agent's lock so no version is written between it and the decision.
 */
export async function getVersionedPolicy(db: Db, agentId: string): Promise<VersionedPolicy> {
  assertAgentId(agentId);
  const { rows } = await db.query<PolicyRow & { current_version: number; agent_id: string | null }>({
    name: "policy-versioned",
    text: `SELECT ${POLICY_COLUMNS}, coalesce(p.version, (SELECT max(version) FROM policy_versions WHERE agent_id = $1), 0) AS current_version
     FROM (SELECT 1) AS one LEFT JOIN policies p ON p.agent_id = $1`,
    values: [agentId],
  });
  const row = rows[0]!;
  return { policy: row.agent_id === null ? EMPTY_POLICY : fromRow(row), version: row.current_version };
}

/** Versions answered at most by one history page. */
export const MAX_HISTORY_PAGE = 100;

/** `policies.history`: the agent's versions, newest first, those below `before` when given. */
export async function policyHistory(
  db: Db,
  agentId: string,
  options: { readonly limit?: number; readonly before?: number | null } = {},
): Promise<PolicyVersion[]> {
  assertAgentId(agentId);
  const limit = Math.min(Math.max(options.limit ?? 20, 1), MAX_HISTORY_PAGE);
  const { rows } = await db.query<{
    agent_id: string;
    version: number;
    created_at: Date;
    created_by: string;
    policy: PolicyDocument;
    hash: string;
  }>(
    `SELECT agent_id, version, created_at, created_by, policy, hash FROM policy_versions
     WHERE agent_id = $1 AND ($2::int IS NULL OR version < $2) ORDER BY version DESC LIMIT $3`,
    [agentId, options.before ?? null, limit],
  );
  return rows.map((row) => ({
    agentId: row.agent_id,
    version: row.version,
    createdAt: row.created_at,
    createdBy: row.created_by,
    policy: row.policy,
    hash: row.hash,
  }));
}

/**
 * Spend in the open budget period and calls in the policy's rate window, at `now`. The rate
 * window counts every call the policy let through: reservations not released, and the charges
 * (vouchers) of the agent's channel sessions not void; both are admitted under `lockAgentPolicy`.
 *
 * The period is open while any reservation that still counts (reserved, settled, or released and
 * then landed anyway) started its period less than 24 h ago; usage sums all of them. Counting
 * every such reservation, not only those of the latest period, is what keeps a payment that lands
 * late (released, then settled by a payload already in flight) inside the budget: the period it
 * belongs to cannot be forgotten by a newer one. Read from the periods' running totals
 * (`spend_periods`), not by summing the reservations; the rate window's reservations from their
 * running counts per hour and minute (`spend_rate_calls`, migrations/057): the hours and minutes
 * after the window's start in full, and the reservations of the start's own minute one by one, so
 * the count is exact for the sliding window and bounded by one minute's reservations. The period
 * is exhausted (spec 3) once a payment was refused for the daily budget in it after the policy's
 * last change; it stays so until it resets.
 */
export async function readUsage(db: Db, agentId: string, policy: Policy & { readonly updatedAt?: Date }, now: Date): Promise<UsageView> {
  assertAgentId(agentId);
  const rateWindow = policy.rateLimit?.window ?? null;
  const { rows } = await db.query<UsageRow>({
    name: "policy-usage",
    text: "SELECT window_start, used_units, exhausted, rate_calls FROM policy_usage($1, $2, $3, $4)",
    values: [
      agentId,
      new Date(now.getTime() - BUDGET_WINDOW_MS),
      rateWindow === null ? null : rateWindowStart(rateWindow, now),
      policy.updatedAt ?? new Date(0),
    ],
  });
  return usageView(db, agentId, policy, rows[0]!, now);
}

/** What `policy_usage` answers (migrations/059_policy_lock_and_read.sql). */
interface UsageRow {
  window_start: Date | null;
  used_units: string;
  exhausted: boolean;
  rate_calls: number;
}

async function usageView(db: Db, agentId: string, policy: Policy, row: UsageRow, now: Date): Promise<UsageView> {
  const window = openBudgetWindow(row.window_start, now);
  const endpointUsage = (policy.endpointBudgets ?? []).length === 0 ? undefined : await readEndpointUsage(db, agentId, policy, now);
  return {
    ...(endpointUsage === undefined ? {} : { endpointUsage }),
    usedTodayUnits: window === null ? 0n : BigInt(row.used_units),
    windowStart: window?.start ?? null,
    windowResetsAt: window?.resetsAt ?? null,
    budgetExhausted: window !== null && row.exhausted,
    rateCalls: row.rate_calls,
    rateWindow: policy.rateLimit?.window ?? null,
  };
}

/**
 * A reservation's reads, in its READ COMMITTED transaction: takes the agent's lock (as
 * `lockAgentPolicy`), then reads the policy with its version (as `getVersionedPolicy`) and the
 * usage at `now` (as `readUsage`), all in one round trip: `policy_lock_and_read` runs both reads
 * after the lock is granted (migrations/059_policy_lock_and_read.sql). The lock is held from its
 * grant to the commit, so the fewer round trips under it, the more reservations one agent makes
 * per second. An endpoint rule's usage is one more statement, after it.
 */
export async function lockAndReadPolicy(
  client: pg.ClientBase,
  agentId: string,
  now: Date,
): Promise<{ readonly versioned: VersionedPolicy; readonly usage: UsageView }> {
  assertAgentId(agentId);
  const { rows } = await client.query<PolicyRow & UsageRow & { isolation: string; agent_id: string | null; current_version: number }>({
    name: "policy-lock-and-read",
    text: `SELECT isolation, ${POLICY_COLUMN_NAMES.join(", ")}, current_version, window_start, used_units, exhausted, rate_calls
     FROM policy_lock_and_read($1, $2, $3)`,
    values: [POLICY_LOCK_NAMESPACE, agentId, now],
  });
  const row = rows[0]!;
  requireReadCommitted(row.isolation);
  const policy = row.agent_id === null ? EMPTY_POLICY : fromRow(row);
  return { versioned: { policy, version: row.current_version }, usage: await usageView(client, agentId, policy, row, now) };
}

/**
 * Each endpoint rule's usage: spend of the open budget period (the same periods `readUsage` sums,
 * from their running totals per endpoint) and calls in the rule's rate window, over the endpoints
 * the rule covers. Two statements, each bounded by the endpoints the agent paid in the last 24 h.
 */
async function readEndpointUsage(db: Db, agentId: string, policy: Policy, now: Date): Promise<ReadonlyMap<string, EndpointUsage>> {
  const rules = policy.endpointBudgets ?? [];
  const spent = await db.query<{ endpoint: string; used: string }>(
    `SELECT endpoint, sum(used_units)::text AS used FROM spend_period_endpoints
     WHERE agent_id = $1 AND window_start > $2 AND calls > 0 GROUP BY endpoint`,
    [agentId, new Date(now.getTime() - BUDGET_WINDOW_MS)],
  );
  const windows = [...new Set(rules.flatMap((rule) => (rule.rateLimit === null ? [] : [rule.rateLimit.window])))];
  const longest = windows.reduce<RateWindow | null>((a, w) => (a === null || RATE_WINDOW_MS[w] > RATE_WINDOW_MS[a] ? w : a), null);
  // Calls per endpoint in each of the five rate windows at once (bounded by the endpoints paid).
  const calls =
    longest === null
      ? []
      : (
          await db.query<{ endpoint: string; counts: number[] }>(
            `SELECT endpoint, ARRAY[${RATE_WINDOWS.map((_, i) => `count(*) FILTER (WHERE created_at > $${i + 3})`).join(", ")}]::int[] AS counts
             FROM spend_reservations WHERE agent_id = $1 AND status <> 'released' AND created_at > $2 GROUP BY endpoint`,
            [agentId, rateWindowStart(longest, now), ...RATE_WINDOWS.map((w) => rateWindowStart(w, now))],
          )
        ).rows;
  const usage = new Map<string, { usedUnits: bigint; rateCalls: number }>();
  for (const rule of rules) usage.set(rule.match, { usedUnits: 0n, rateCalls: 0 });
  const covering = (endpoint: string) => {
    const { host, path } = endpointParts(endpoint);
    return rules.filter((rule) => endpointRuleMatches(rule.match, host, path));
  };
  for (const { endpoint, used } of spent.rows) {
    for (const rule of covering(endpoint)) usage.get(rule.match)!.usedUnits += BigInt(used);
  }
  for (const { endpoint, counts } of calls) {
    for (const rule of covering(endpoint)) {
      if (rule.rateLimit !== null) usage.get(rule.match)!.rateCalls += counts[RATE_WINDOWS.indexOf(rule.rateLimit.window)]!;
    }
  }
  return usage;
}

/** The dry run: what the policy would decide for this payment now. Writes nothing. */
export async function checkPolicy(db: Db, agentId: string, request: PaymentRequest, now: Date): Promise<PolicyDecision> {
  const policy = (await getPolicy(db, agentId)) ?? EMPTY_POLICY;
  return evaluatePolicy(policy, await readUsage(db, agentId, policy, now), request, now);
}

/**
 * The agent's policy lock in the caller's READ COMMITTED transaction, for a write admitted by the
 * rate limit outside a reservation (a channel voucher): it then counts in one running count with
 * the agent's reservations, one at a time.
 */
export async function lockAgentPolicy(client: pg.ClientBase, agentId: string): Promise<void> {
  assertAgentId(agentId);
  await lockAgent(client, agentId);
}

async function lockAgent(client: pg.ClientBase, agentId: string): Promise<void> {
  const { rows } = await client.query<{ isolation: string }>({
    name: "policy-lock",
    text: "SELECT pg_advisory_xact_lock($1, hashtext($2)), current_setting('transaction_isolation') AS isolation",
    values: [POLICY_LOCK_NAMESPACE, agentId],
  });
  requireReadCommitted(rows[0]!.isolation);
}

/**
 * Under REPEATABLE READ the snapshot predates the lock wait, so the check could miss a
 * reservation committed while we waited: the guarantee holds only under READ COMMITTED.
 */
function requireReadCommitted(isolation: string): void {
  if (isolation !== "read committed") {
    throw new Error(`policy writes need a READ COMMITTED transaction, not ${isolation}`);
  }
}

/** Agent ids are 1..200 characters; anything else is a caller's bug. */
export function assertAgentId(agentId: string): void {
  if (typeof agentId !== "string" || agentId.length === 0 || agentId.length > MAX_AGENT_ID_LENGTH) {
    throw new Error(`agent id must be 1..${MAX_AGENT_ID_LENGTH} characters`);
  }
}

/** The approval columns in the INSERT's order. */
function approvalColumns(approval: Policy["approval"]): readonly unknown[] {
  const c = approvalToColumns(approval);
  return [c.approval_above_units, c.approval_domains, c.approval_first_payment_to_domain, c.approval_timeout_ms, c.approval_on_timeout];
}

function fromRow(row: PolicyRow): StoredPolicy {
  const approval = approvalFromColumns(row);
  return {
    agentId: row.agent_id,
    dailyBudgetUnits: row.daily_budget_units === null ? null : BigInt(row.daily_budget_units),
    perCallLimitUnits: row.per_call_limit_units === null ? null : BigInt(row.per_call_limit_units),
    allowedDomains: row.allowed_domains,
    blockedDomains: row.blocked_domains,
    rateLimit:
      row.rate_limit_calls === null || row.rate_limit_window === null
        ? null
        : { calls: row.rate_limit_calls, window: row.rate_limit_window },
    protocolPreference: row.protocol_preference,
    ...(approval === null ? {} : { approval }),
    ...(row.endpoint_budgets.length === 0 ? {} : { endpointBudgets: endpointBudgetsFromDocument(row.endpoint_budgets) }),
    updatedAt: row.updated_at,
    version: row.version,
  };
}
