/**
 * The policy store: policies and the reservation ledger in Postgres (migrations/004_policies.sql).
 * It owns tables `policies` and `spend_reservations`: the SQL on them lives here. The sweeper
 * (api/gateway/settlement/sweeper.ts) closes reservations through it; only its scan, which joins
 * reservations with the gateway's claim tables and settlements, is in
 * api/gateway/settlement/sweeper-store.ts.
 *
 * Authority: `policies` is the truth for what an agent may spend; `spend_reservations` is the truth
 * for what the policy has let through. Usage is read from `spend_periods`, the running total of each
 * budget period that a trigger keeps in the same transaction as every change of a reservation
 * (migrations/029_spend_periods.sql): one row per period, so the check under the lock costs the
 * same with 10 or 100,000 reservations in the period. It is derived, never written here.
 *
 * Concurrency: every write that depends on a policy or on usage (`putPolicy`, the reservation)
 * runs in a READ COMMITTED transaction holding the agent's transaction-level advisory lock, so for
 * one agent they execute one at a time and each sees everything committed before it. Hence accepted
 * payments never sum above the daily budget and never outnumber the rate limit, across any number
 * of gateway processes. Reads (`getPolicy`, `readUsage`, `checkPolicy`) take no lock and write
 * nothing: a dry run records nothing.
 */
import type pg from "pg";
import { type Db, withTransaction } from "../../../indexer/db/database.js";
import { formatUsdcShort } from "../money.js";
import {
  evaluatePayment,
  evaluatePolicy,
  type PaymentDecision,
  type PaymentRequest,
  type PolicyDecision,
  type PolicyNeedsApproval,
  type PolicyUsage,
} from "./engine.js";
import { approvalFromColumns, approvalToColumns } from "./approval.js";
import { endpointHost } from "./domains.js";
import { applyPatch, EMPTY_POLICY, type Policy, type PolicyPatch, type Protocol, type ProtocolPreference } from "./policy.js";
import { BUDGET_WINDOW_MS, openBudgetWindow, type RateWindow, rateWindowStart } from "./windows.js";

export type { Db };

/** `ReservationRefusal.reasonCode` of a payment the policy would hold, on a path that cannot hold it. */
export const APPROVAL_REQUIRED = "approval_required";

/** Key space of the per-agent lock (the two-argument advisory lock form: namespace, hashtext(agent)). */
const POLICY_LOCK_NAMESPACE = 7_240_004;
const MAX_AGENT_ID_LENGTH = 200;

export interface StoredPolicy extends Policy {
  readonly agentId: string;
  readonly updatedAt: Date;
}

export interface UsageView extends PolicyUsage {
  readonly budgetExhausted: boolean;
  /** When the open budget period resets; null if none is open. */
  readonly windowResetsAt: Date | null;
  /** The window `rateCalls` counts over: the policy's, or null (then `rateCalls` is 0). */
  readonly rateWindow: RateWindow | null;
}

export interface Reservation {
  readonly decision: PolicyDecision;
  /** The `spend_reservations.id` (bigserial, as a string) when the payment was accepted. */
  readonly reservationId: string | null;
  /** Set when the policy allowed the payment but the caller's `check` refused it (nothing reserved). */
  readonly refusal?: ReservationRefusal | null;
}

/** A refusal beyond the spend policy (a sub-agent's invocation budget), in the spec 7 reason form. */
export interface ReservationRefusal {
  readonly reasonCode: string;
  /** `<reason_code>: requested <amount> <unit>, limit is <amount> <unit>`. */
  readonly reason: string;
  readonly requested: string;
  readonly limit: string;
  readonly unit: string;
}

export interface ReserveOptions {
  /**
   * Runs under the agent's lock, after the policy allowed the payment and before it is reserved:
   * a non-null answer refuses the payment and nothing is reserved. Because it runs under the same
   * lock as every reservation of the agent, a check that counts the agent's open reservations sees
   * all of them (concurrent authorizations of one agent run it one at a time).
   */
  readonly check?: (client: pg.ClientBase) => Promise<ReservationRefusal | null>;
  /**
   * The amount is an exposure spread over many calls (a channel deposit, api/gateway/channels),
   * not one call: the per-call limit does not apply to it (each charge is held to it when signed).
   * Domains, the daily budget and the rate limit apply as to any payment.
   */
  readonly exposure?: boolean;
}

/** `reserveOrHoldInTransaction`'s answer: allowed and reserved, refused, or held (reserved `pending_approval`). */
export interface HeldOrReserved {
  readonly decision: PaymentDecision;
  /** The reservation: `reserved` when allowed, `pending_approval` when held; null when refused. */
  readonly reservationId: string | null;
  readonly refusal?: ReservationRefusal | null;
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
  updated_at: Date;
}

export async function getPolicy(db: Db, agentId: string): Promise<StoredPolicy | null> {
  assertAgentId(agentId);
  const { rows } = await db.query<PolicyRow>("SELECT * FROM policies WHERE agent_id = $1", [agentId]);
  return rows[0] === undefined ? null : fromRow(rows[0]);
}

/** `policies.set` (spec 4.1): omitted fields keep their value, `null` removes one. Returns the result. */
export async function putPolicy(pool: pg.Pool, agentId: string, patch: PolicyPatch, now: Date = new Date()): Promise<StoredPolicy> {
  assertAgentId(agentId);
  return withTransaction(
    pool,
    async (client) => {
      await lockAgent(client, agentId);
      const next = applyPatch((await getPolicy(client, agentId)) ?? EMPTY_POLICY, patch);
      const { rows } = await client.query<PolicyRow>(
        `INSERT INTO policies (agent_id, daily_budget_units, per_call_limit_units, allowed_domains, blocked_domains,
                             rate_limit_calls, rate_limit_window, protocol_preference, updated_at,
                             approval_above_units, approval_domains, approval_first_payment_to_domain, approval_timeout_ms,
                             approval_on_timeout)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
       ON CONFLICT (agent_id) DO UPDATE SET
         daily_budget_units = EXCLUDED.daily_budget_units, per_call_limit_units = EXCLUDED.per_call_limit_units,
         allowed_domains = EXCLUDED.allowed_domains, blocked_domains = EXCLUDED.blocked_domains,
         rate_limit_calls = EXCLUDED.rate_limit_calls, rate_limit_window = EXCLUDED.rate_limit_window,
         protocol_preference = EXCLUDED.protocol_preference, updated_at = EXCLUDED.updated_at,
         approval_above_units = EXCLUDED.approval_above_units, approval_domains = EXCLUDED.approval_domains,
         approval_first_payment_to_domain = EXCLUDED.approval_first_payment_to_domain,
         approval_timeout_ms = EXCLUDED.approval_timeout_ms, approval_on_timeout = EXCLUDED.approval_on_timeout
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
        ],
      );
      return fromRow(rows[0]!);
    },
    { isolation: "read committed" },
  );
}

/** `policies.clear`: removes every limit of the agent. The reservation ledger is kept. */
export async function clearPolicy(db: Db, agentId: string): Promise<boolean> {
  assertAgentId(agentId);
  const result = await db.query("DELETE FROM policies WHERE agent_id = $1", [agentId]);
  return (result.rowCount ?? 0) > 0;
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
 * (`spend_periods`), not by summing the reservations. The period is exhausted (spec 3) once a payment was
 * refused for the daily budget in it after the policy's last change; it stays so until it resets.
 */
export async function readUsage(db: Db, agentId: string, policy: Policy & { readonly updatedAt?: Date }, now: Date): Promise<UsageView> {
  assertAgentId(agentId);
  const rateWindow = policy.rateLimit?.window ?? null;
  const { rows } = await db.query<{ window_start: Date | null; used_units: string; exhausted: boolean; rate_calls: number }>(
    `WITH open_period AS (
       SELECT min(window_start) AS start, coalesce(sum(used_units), 0) AS used FROM spend_periods
       WHERE agent_id = $1 AND calls > 0 AND window_start > $2
     )
     SELECT p.start AS window_start, p.used::text AS used_units,
            p.start IS NOT NULL AND EXISTS (
              SELECT 1 FROM payment_rejections
              WHERE agent_id = $1 AND reason_code = 'daily_budget_exceeded' AND created_at >= p.start AND created_at > $4
            ) AS exhausted,
            CASE WHEN $3::timestamptz IS NULL THEN 0
                 ELSE (SELECT count(*) FROM spend_reservations
                       WHERE agent_id = $1 AND status <> 'released' AND created_at > $3::timestamptz)
                    + (SELECT count(*) FROM channel_charges c JOIN channel_sessions s ON s.channel = c.channel
                       WHERE s.agent_id = $1 AND (s.closed_at IS NULL OR s.closed_at > $3::timestamptz)
                         AND c.status <> 'void' AND c.created_at > $3::timestamptz) END::int AS rate_calls
     FROM open_period p`,
    [
      agentId,
      new Date(now.getTime() - BUDGET_WINDOW_MS),
      rateWindow === null ? null : rateWindowStart(rateWindow, now),
      policy.updatedAt ?? new Date(0),
    ],
  );
  const row = rows[0]!;
  const window = openBudgetWindow(row.window_start, now);
  return {
    usedTodayUnits: window === null ? 0n : BigInt(row.used_units),
    windowStart: window?.start ?? null,
    windowResetsAt: window?.resetsAt ?? null,
    budgetExhausted: window !== null && row.exhausted,
    rateCalls: row.rate_calls,
    rateWindow,
  };
}

/** The dry run: what the policy would decide for this payment now. Writes nothing. */
export async function checkPolicy(db: Db, agentId: string, request: PaymentRequest, now: Date): Promise<PolicyDecision> {
  const policy = (await getPolicy(db, agentId)) ?? EMPTY_POLICY;
  return evaluatePolicy(policy, await readUsage(db, agentId, policy, now), request, now);
}

/**
 * Check and reserve in a transaction of its own, on a connection from the pool. To reserve together
 * with other writes, use `reserveInTransaction` inside your transaction.
 */
export async function reserveWithinPolicy(pool: pg.Pool, agentId: string, request: PaymentRequest, now: Date): Promise<Reservation> {
  return withTransaction(pool, (client) => reserve(client, agentId, request, now, {}, false), { isolation: "read committed" });
}

/**
 * Check and reserve inside the caller's READ COMMITTED transaction (the gateway's, so the
 * reservation commits or rolls back with its other writes). Throws when no transaction is open:
 * outside one the advisory lock would end with the statement and protect nothing.
 */
export async function reserveInTransaction(
  client: pg.ClientBase,
  agentId: string,
  request: PaymentRequest,
  now: Date,
  options: ReserveOptions = {},
): Promise<Reservation> {
  return reserve(client, agentId, request, now, options, true);
}

/**
 * Five round trips (were seven): SAVEPOINT, the lock, the policy, the usage, the INSERT (the
 * savepoint ends with the caller's transaction; values are always bound parameters). The policy and usage reads stay separate statements after the lock (each
 * READ COMMITTED statement's snapshot is taken when it starts, so after the lock is held: they see
 * every reservation committed before; one combined statement measured no faster — planning its
 * CTEs cost what the round trip saved). The savepoint (a failure leaves the caller's transaction
 * usable) is skipped when the transaction is the reservation's own (`reserveWithinPolicy`).
 */
async function reserve(
  client: pg.ClientBase,
  agentId: string,
  request: PaymentRequest,
  now: Date,
  options: ReserveOptions,
  savepoint: boolean,
): Promise<Reservation> {
  return (await reserveOrHold(client, agentId, request, now, options, savepoint, null)) as Reservation;
}

/**
 * Like `reserveInTransaction`, with the policy's approval rules (docs/policy.md "Approvals"): a
 * payment the policy holds for a person is reserved with status `pending_approval` (counted like
 * `reserved` by every usage read, so held payments cannot together exceed a limit), with the
 * invoking transaction of a sub-agent's payment so its invocation budget counts it too.
 */
export async function reserveOrHoldInTransaction(
  client: pg.ClientBase,
  agentId: string,
  request: PaymentRequest,
  now: Date,
  options: ReserveOptions & { readonly parentTxHash?: string | null } = {},
): Promise<HeldOrReserved> {
  return reserveOrHold(client, agentId, request, now, options, true, { parentTxHash: options.parentTxHash ?? null });
}

async function reserveOrHold(
  client: pg.ClientBase,
  agentId: string,
  request: PaymentRequest,
  now: Date,
  options: ReserveOptions,
  savepoint: boolean,
  hold: { readonly parentTxHash: string | null } | null,
): Promise<HeldOrReserved> {
  assertAgentId(agentId);
  try {
    await lockAgent(client, agentId, savepoint);
    const stored = (await getPolicy(client, agentId)) ?? EMPTY_POLICY;
    const policy = options.exposure === true ? { ...stored, perCallLimitUnits: null } : stored;
    let usage: PolicyUsage = await readUsage(client, agentId, stored, now);
    if (policy.approval?.firstPaymentToDomain === true) usage = { ...usage, domainPaidBefore: await paidBefore(client, agentId, request) };
    const payment = evaluatePayment(policy, usage, request, now);
    if (hold === null && payment.decision === "needs_approval") {
      // A payment path that cannot wait for a person (a channel's deposit, a session's charge)
      // refuses what the policy would hold: approval is never granted by taking another path.
      return {
        decision: evaluatePolicy(policy, usage, request, now),
        reservationId: null,
        refusal: approvalRefusal(payment, request, policy.approval?.aboveUnits ?? null),
      };
    }
    const decision: PaymentDecision = hold === null ? evaluatePolicy(policy, usage, request, now) : payment;
    const refusal = decision.decision !== "reject" && options.check !== undefined ? await options.check(client) : null;
    if (refusal !== null || decision.decision === "reject") {
      return refusal === null ? { decision, reservationId: null } : { decision, reservationId: null, refusal };
    }
    if (decision.protocol === null) throw new Error("reservation needs a protocol the target offers (x402 or mpp)");
    const held = decision.decision === "needs_approval";
    // The savepoint is not released: it ends with the caller's transaction, and releasing it
    // would cost a round trip for nothing.
    const { rows } = await client.query<{ id: string }>(
      `INSERT INTO spend_reservations (agent_id, amount_units, endpoint, domain, protocol, created_at, budget_window_start, status, parent_tx_hash)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id`,
      [
        agentId,
        request.amountUnits.toString(),
        request.endpoint,
        decision.domain,
        decision.protocol,
        now,
        decision.budget.windowStart,
        held ? "pending_approval" : "reserved",
        held ? hold!.parentTxHash : null,
      ],
    );
    const id = rows[0]!.id;
    return { decision, reservationId: id };
  } catch (error) {
    if (savepoint) await client.query("ROLLBACK TO SAVEPOINT policy_reservation").catch(() => undefined);
    throw error;
  }
}

/**
 * The payment went through elsewhere (`.../complete`): the reservation keeps counting, now with
 * its ledger transaction. Refused (false) once a settler of this gateway took the payment: that
 * settler records the transaction it sent, so a caller's hash can never stand in for it.
 */
export async function settleReservation(db: Db, reservationId: string, txHash: string): Promise<boolean> {
  const result = await db.query(
    "UPDATE spend_reservations SET status = 'settled', tx_hash = $2 WHERE id = $1 AND status = 'reserved' AND claimed_at IS NULL",
    [reservationId, txHash],
  );
  return (result.rowCount ?? 0) > 0;
}

/**
 * The agent gives the payment up (`.../release`): its amount and its call stop counting, and its
 * signed payment is revoked (a settler's `claimLinkedReservation` refuses it from now on). Refused
 * (false) once a settler claimed the payment: its money may land, so it keeps counting until the
 * settler or the sweeper learns the outcome. One conditional UPDATE against the claim's, so exactly
 * one of release and claim wins.
 */
export async function releaseReservation(db: Db, reservationId: string): Promise<boolean> {
  const result = await db.query(
    "UPDATE spend_reservations SET status = 'released' WHERE id = $1 AND status = 'reserved' AND claimed_at IS NULL",
    [reservationId],
  );
  return (result.rowCount ?? 0) > 0;
}

/** The refusal of a payment the policy holds for a person, on a path that cannot hold it. */
function approvalRefusal(decision: PolicyNeedsApproval, request: PaymentRequest, aboveUnits: bigint | null): ReservationRefusal {
  return {
    reasonCode: APPROVAL_REQUIRED,
    reason: `${decision.reason}; this payment cannot wait for a person's approval, so it is refused`,
    requested: formatUsdcShort(request.amountUnits),
    // What passes without a person: the threshold of the amount rule, nothing for a host rule.
    limit: decision.approvalRule === "above" && aboveUnits !== null ? formatUsdcShort(aboveUnits) : "0",
    unit: "usdc",
  };
}

/**
 * Whether the agent has a settled payment to the request's exact host (`approval.firstPaymentToDomain`).
 * Bounded by the agent's index; stops at the first row.
 */
async function paidBefore(client: pg.ClientBase, agentId: string, request: PaymentRequest): Promise<boolean> {
  const { rows } = await client.query<{ paid: boolean }>(
    "SELECT EXISTS (SELECT 1 FROM spend_reservations WHERE agent_id = $1 AND domain = $2 AND status = 'settled') AS paid",
    [agentId, endpointHost(request.endpoint)],
  );
  return rows[0]!.paid;
}

/** A held payment's reservation re-checked on approval: the policy's answer and, when refused by the caller's check, why. */
export interface HeldRecheck {
  readonly decision: PolicyDecision;
  readonly refusal: ReservationRefusal | null;
}

/**
 * Approving a held payment (docs/policy.md "Approvals"): under the agent's lock, the held
 * reservation stops counting, the whole policy (rules 1–5) and the caller's check (an invocation
 * budget) are run on usage without it (so it is not counted twice), and then it counts again as an
 * ordinary `reserved` reservation of the current budget period and rate window (`created_at` now),
 * or stays released when refused. `resumeBy`: until when the caller may resume and sign it; after
 * that the approvals loop releases it (`releaseUnresumedReservations`). Inside the caller's READ
 * COMMITTED transaction. Null when the reservation is not held (decided before).
 */
export async function recheckHeldReservation(
  client: pg.ClientBase,
  agentId: string,
  reservationId: string,
  request: PaymentRequest,
  now: Date,
  options: ReserveOptions & { readonly resumeBy: Date },
): Promise<HeldRecheck | null> {
  assertAgentId(agentId);
  await lockAgent(client, agentId);
  const released = await client.query(
    "UPDATE spend_reservations SET status = 'released' WHERE id = $1 AND agent_id = $2 AND status = 'pending_approval'",
    [reservationId, agentId],
  );
  if (released.rowCount !== 1) return null;
  const policy = (await getPolicy(client, agentId)) ?? EMPTY_POLICY;
  // Spec 3's exhausted state is not applied: the held amount was counted before the refusals that
  // exhausted the period (often refused because it was held). The arithmetic still applies, so a
  // budget lowered meanwhile refuses.
  const usage = { ...(await readUsage(client, agentId, policy, now)), budgetExhausted: false };
  const decision = evaluatePolicy(policy, usage, request, now);
  const refusal = decision.decision === "allow" && options.check !== undefined ? await options.check(client) : null;
  if (decision.decision !== "allow" || refusal !== null) return { decision, refusal };
  await client.query(
    `UPDATE spend_reservations SET status = 'reserved', created_at = $2, budget_window_start = $3, expires_at = $4
     WHERE id = $1 AND status = 'released'`,
    [reservationId, now, decision.budget.windowStart, options.resumeBy],
  );
  return { decision, refusal: null };
}

/** A held reservation's protocol, invoking transaction and the agent's wallet (the re-check's inputs); null when not held. */
export async function heldReservation(
  db: Db,
  reservationId: string,
): Promise<{ readonly protocol: Protocol; readonly parentTxHash: string | null; readonly walletAddress: string } | null> {
  const { rows } = await db.query<{ protocol: Protocol; parent_tx_hash: string | null; wallet_address: string }>(
    `SELECT r.protocol, r.parent_tx_hash, a.wallet_address FROM spend_reservations r JOIN agents a ON a.agent_id = r.agent_id
     WHERE r.id = $1 AND r.status = 'pending_approval'`,
    [reservationId],
  );
  const row = rows[0];
  return row === undefined ? null : { protocol: row.protocol, parentTxHash: row.parent_tx_hash, walletAddress: row.wallet_address };
}

/** A held payment denied or expired: its amount and its call stop counting. False when it was not held. */
export async function releaseHeldReservation(db: Db, reservationId: string): Promise<boolean> {
  const result = await db.query("UPDATE spend_reservations SET status = 'released' WHERE id = $1 AND status = 'pending_approval'", [
    reservationId,
  ]);
  return result.rowCount === 1;
}

/**
 * The caller resumes an approved payment: its reservation, locked until the caller's transaction
 * ends (so the approvals loop cannot release it while it is being signed and linked), when it is
 * still `reserved`, unsigned (no `payment_ref`) and within its resume deadline; else null.
 */
export async function takeApprovedReservation(
  client: pg.ClientBase,
  reservationId: string,
  now: Date,
): Promise<{ readonly createdAt: Date; readonly budgetWindowStart: Date } | null> {
  const { rows } = await client.query<{ created_at: Date; budget_window_start: Date }>(
    `SELECT created_at, budget_window_start FROM spend_reservations
     WHERE id = $1 AND status = 'reserved' AND payment_ref IS NULL AND claimed_at IS NULL AND (expires_at IS NULL OR expires_at > $2)
     FOR UPDATE`,
    [reservationId, now],
  );
  return rows[0] === undefined ? null : { createdAt: rows[0].created_at, budgetWindowStart: rows[0].budget_window_start };
}

/**
 * Approved payments the caller never resumed: released once their resume deadline passed, at most
 * `limit` per call (the reservations that approvals hold, `reservation_id`). Each is released once
 * (the status condition); a resume that took the reservation first keeps it (its link is set).
 */
export async function releaseUnresumedReservations(db: Db, now: Date, limit: number): Promise<number> {
  const result = await db.query(
    `UPDATE spend_reservations r SET status = 'released'
     WHERE r.id IN (
       SELECT r2.id FROM spend_reservations r2 JOIN approvals a ON a.reservation_id = r2.id
       WHERE a.status = 'approved' AND r2.status = 'reserved' AND r2.payment_ref IS NULL AND r2.claimed_at IS NULL
         AND r2.expires_at <= $1
       ORDER BY r2.expires_at LIMIT $2 FOR UPDATE OF r2 SKIP LOCKED)
       AND r.status = 'reserved' AND r.payment_ref IS NULL`,
    [now, limit],
  );
  return result.rowCount ?? 0;
}

/** A reservation's status and transaction, or null when there is none (of `agentId`, when given). */
export async function reservationState(
  db: Db,
  reservationId: string,
  agentId?: string,
): Promise<{ readonly status: LinkedReservation["status"]; readonly txHash: string | null } | null> {
  const { rows } = await db.query<{ status: LinkedReservation["status"]; tx_hash: string | null }>(
    "SELECT status, tx_hash FROM spend_reservations WHERE id = $1 AND ($2::text IS NULL OR agent_id = $2)",
    [reservationId, agentId ?? null],
  );
  return rows[0] === undefined ? null : { status: rows[0].status, txHash: rows[0].tx_hash };
}

/** What a settler may do with a signed payment, by its reservation (`claimLinkedReservation`). */
export type ReservationClaim =
  | { readonly outcome: "claimed"; readonly reservation: LinkedReservation }
  /** No reservation names the payment: it was not authorized through the gateway's policy path. */
  | { readonly outcome: "unlinked" }
  /** Released, or closed by `.../complete`, before any settler took it: the payment must not move. */
  | { readonly outcome: "revoked"; readonly reservation: LinkedReservation };

/**
 * A settler takes the signed payment before it moves any money: from here `release` is refused
 * and the reservation counts until the settler (or the sweeper) closes it with the outcome. Call it
 * after the payment's replay claim (nonce), so one settler at most reaches it per payment.
 */
export async function claimLinkedReservation(db: Db, paymentRef: string, now: Date): Promise<ReservationClaim> {
  const claimed = await db.query<LinkedRow>(
    `UPDATE spend_reservations SET claimed_at = $2 WHERE payment_ref = $1 AND status = 'reserved' AND claimed_at IS NULL
     RETURNING ${LINKED_COLUMNS}`,
    [paymentRef, now],
  );
  if (claimed.rows[0] !== undefined) return { outcome: "claimed", reservation: fromLinkedRow(claimed.rows[0]) };
  // Not taken: either no reservation names the payment, or it is closed (one read, off the common path).
  const reservation = await linkedReservation(db, paymentRef);
  return reservation === null ? { outcome: "unlinked" } : { outcome: "revoked", reservation };
}

/** How a reservation is tied to the signed payment it let through (migrations/011_payment_links.sql). */
export interface PaymentLink {
  /** `x402:<payer>:<nonce>`, `mpp:<payer>:<nonce>` or `mpp-charge:<mpp_payments id>`. */
  readonly paymentRef: string;
  /** The signed payment's `validUntil`: after it nothing can settle the payment. */
  readonly expiresAt?: Date | null;
  /** The invoking transaction when a sub-agent pays under `agents.invoke`. */
  readonly parentTxHash?: string | null;
  /** This payment invokes its payee as a sub-agent with this budget (base units). */
  readonly invocationBudgetUnits?: bigint | null;
  /** The payment is already being settled (a session charge): `release` is refused from the start. */
  readonly claimedAt?: Date | null;
}

export interface LinkedReservation {
  readonly id: string;
  readonly agentId: string;
  readonly amountUnits: bigint;
  readonly status: "reserved" | "settled" | "released" | "pending_approval";
  readonly txHash: string | null;
  readonly paymentRef: string;
  readonly expiresAt: Date | null;
  readonly parentTxHash: string | null;
  readonly invocationBudgetUnits: bigint | null;
  readonly invocation: string | null;
}

export const x402PaymentRef = (payer: string, nonce: string): string => `x402:${payer}:${nonce}`;
export const mppPaymentRef = (payer: string, nonce: string): string => `mpp:${payer}:${nonce}`;
export const mppChargeRef = (mppPaymentId: string): string => `mpp-charge:${mppPaymentId}`;
export const channelRef = (channel: string): string => `channel:${channel}`;

/** Ties an open reservation to its signed payment (same transaction as the reservation). */
export async function linkReservation(db: Db, reservationId: string, link: PaymentLink): Promise<void> {
  await db.query(
    `UPDATE spend_reservations SET payment_ref = $2, expires_at = $3, parent_tx_hash = $4, invocation_budget_units = $5, claimed_at = $6
     WHERE id = $1 AND status = 'reserved'`,
    [
      reservationId,
      link.paymentRef,
      link.expiresAt ?? null,
      link.parentTxHash ?? null,
      link.invocationBudgetUnits?.toString() ?? null,
      link.claimedAt ?? null,
    ],
  );
}

/** The reservation of a signed payment, or null when the gateway did not authorize it. */
export async function linkedReservation(db: Db, paymentRef: string): Promise<LinkedReservation | null> {
  const { rows } = await db.query<LinkedRow>(`SELECT ${LINKED_COLUMNS} FROM spend_reservations WHERE payment_ref = $1`, [paymentRef]);
  return rows[0] === undefined ? null : fromLinkedRow(rows[0]);
}

interface LinkedRow {
  id: string;
  agent_id: string;
  amount_units: string;
  status: LinkedReservation["status"];
  tx_hash: string | null;
  payment_ref: string;
  expires_at: Date | null;
  parent_tx_hash: string | null;
  invocation_budget_units: string | null;
  invocation: string | null;
}

const LINKED_COLUMNS =
  "id, agent_id, amount_units, status, tx_hash, payment_ref, expires_at, parent_tx_hash, invocation_budget_units, invocation";

function fromLinkedRow(row: LinkedRow): LinkedReservation {
  return {
    id: row.id,
    agentId: row.agent_id,
    amountUnits: BigInt(row.amount_units),
    status: row.status,
    txHash: row.tx_hash,
    paymentRef: row.payment_ref,
    expiresAt: row.expires_at,
    parentTxHash: row.parent_tx_hash,
    invocationBudgetUnits: row.invocation_budget_units === null ? null : BigInt(row.invocation_budget_units),
    invocation: row.invocation,
  };
}

/**
 * The linked payment is known to have landed on the ledger (the chain is the truth): the
 * reservation counts, with the transaction, even if it had been released meanwhile (a sweeper
 * that gave up on the claim, a `release` call racing the settlement). A reservation settled with
 * another transaction is left alone. True when this call changed it.
 */
export async function landLinkedReservation(db: Db, paymentRef: string, txHash: string): Promise<boolean> {
  const result = await db.query(
    `UPDATE spend_reservations SET status = 'settled', tx_hash = $2
     WHERE payment_ref = $1 AND (status = 'reserved' OR (status = 'released' AND tx_hash IS NULL))`,
    [paymentRef, txHash],
  );
  return (result.rowCount ?? 0) > 0;
}

/**
 * What the agent has reserved but not yet settled, and what it settled, under the invocation
 * opened by `parentTxHash` (base units). Read it under the agent's lock (`ReserveOptions.check`)
 * for a sound budget check.
 */
export async function unitsUnderParent(
  db: Db,
  agentId: string,
  parentTxHash: string,
): Promise<{ readonly reservedUnits: bigint; readonly settledUnits: bigint }> {
  const { rows } = await db.query<{ reserved: string; settled: string }>(
    `SELECT coalesce(sum(amount_units) FILTER (WHERE status IN ('reserved', 'pending_approval')), 0)::text AS reserved,
            coalesce(sum(amount_units) FILTER (WHERE status = 'settled'), 0)::text AS settled
     FROM spend_reservations WHERE agent_id = $1 AND parent_tx_hash = $2 AND status <> 'released'`,
    [agentId, parentTxHash],
  );
  return { reservedUnits: BigInt(rows[0]!.reserved), settledUnits: BigInt(rows[0]!.settled) };
}

/**
 * The invocation the reservation's payment opened (its `invocation_budget_units` made it invoke
 * its payee): set once, by whichever opener finishes first.
 */
export async function recordReservationInvocation(db: Db, reservationId: string, invocation: string): Promise<void> {
  await db.query("UPDATE spend_reservations SET invocation = $2 WHERE id = $1 AND invocation IS NULL", [reservationId, invocation]);
}

/** A settled payment that invokes its payee but whose invocation is not open yet. */
export interface AwaitingInvocation {
  readonly reservationId: string;
  readonly agentId: string;
  /** The invoking payment's transaction (confirmed). */
  readonly txHash: string;
  readonly budgetUnits: bigint;
  /** The payment's payee, the sub-agent's wallet. */
  readonly payee: string;
}

/** Settled reservations with an invocation budget and no invocation yet, whose settlement is confirmed; oldest first. */
export async function reservationsAwaitingInvocation(db: Db, limit: number): Promise<AwaitingInvocation[]> {
  const { rows } = await db.query<{ id: string; agent_id: string; tx_hash: string; budget: string; payee: string }>(
    `SELECT r.id, r.agent_id, r.tx_hash, r.invocation_budget_units::text AS budget, s.payee
     FROM spend_reservations r JOIN settlements s ON s.signature = r.tx_hash AND s.status = 'confirmed'
     WHERE r.status = 'settled' AND r.invocation_budget_units IS NOT NULL AND r.invocation IS NULL
     ORDER BY r.id LIMIT $1`,
    [limit],
  );
  return rows.map((row) => ({
    reservationId: row.id,
    agentId: row.agent_id,
    txHash: row.tx_hash,
    budgetUnits: BigInt(row.budget),
    payee: row.payee,
  }));
}

/**
 * A channel's deposit reservation (`channel:<address>`) ends at what the channel paid: the amount
 * becomes the settled total, with the close transaction; nothing paid releases it. The unused
 * deposit stops counting against the budget. True when this call changed it.
 */
export async function endExposureReservation(db: Db, paymentRef: string, paidUnits: bigint, txHash: string): Promise<boolean> {
  const result = await db.query(
    `UPDATE spend_reservations
     SET amount_units = CASE WHEN $2::numeric > 0 THEN $2::numeric ELSE amount_units END,
         status = CASE WHEN $2::numeric > 0 THEN 'settled' ELSE 'released' END,
         tx_hash = CASE WHEN $2::numeric > 0 THEN $3 ELSE tx_hash END
     WHERE payment_ref = $1 AND status = 'reserved' AND $2::numeric <= amount_units`,
    [paymentRef, paidUnits.toString(), txHash],
  );
  return (result.rowCount ?? 0) > 0;
}

/** The linked payment definitely did not happen: its amount and its call stop counting. */
export async function releaseLinkedReservation(db: Db, paymentRef: string): Promise<boolean> {
  const result = await db.query("UPDATE spend_reservations SET status = 'released' WHERE payment_ref = $1 AND status = 'reserved'", [
    paymentRef,
  ]);
  return (result.rowCount ?? 0) > 0;
}

/**
 * A linked reservation whose signed payment was never claimed and expired: released, only while
 * it is still unclaimed and no settlement carries its reference (a claim racing in keeps it).
 * Rows changed.
 */
export async function releaseUnclaimedReservation(db: Db, paymentRef: string): Promise<number> {
  const done = await db.query(
    `UPDATE spend_reservations r SET status = 'released' WHERE r.payment_ref = $1 AND r.status = 'reserved'
       AND r.claimed_at IS NULL AND NOT EXISTS (SELECT 1 FROM settlements s WHERE s.payment_ref = r.payment_ref)`,
    [paymentRef],
  );
  return done.rowCount ?? 0;
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

async function lockAgent(client: pg.ClientBase, agentId: string, savepoint = false): Promise<void> {
  if (savepoint) await client.query("SAVEPOINT policy_reservation");
  const { rows } = await client.query<{ isolation: string }>(
    "SELECT pg_advisory_xact_lock($1, hashtext($2)), current_setting('transaction_isolation') AS isolation",
    [POLICY_LOCK_NAMESPACE, agentId],
  );
  const isolation = rows[0]!.isolation;
  // Under REPEATABLE READ the snapshot predates the lock wait, so the check could miss a
  // reservation committed while we waited: the guarantee holds only under READ COMMITTED.
  if (isolation !== "read committed") {
    throw new Error(`policy writes need a READ COMMITTED transaction, not ${isolation}`);
  }
}

function assertAgentId(agentId: string): void {
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
    updatedAt: row.updated_at,
  };
}
