/**
 * The reservation ledger (`spend_reservations`, migrations/004_policies.sql): what the spend policy
 * has let through. It owns the SQL on that table: reserving under the agent's policy lock, linking
 * a reservation to the signed payment it authorized (`x402:<payer>:<nonce>`, `mpp:<payer>:<nonce>`,
 * `mpp-charge:<id>`, `channel:<channel>`, `transfer:<signature>`), claiming, landing, releasing.
 * Only the sweeper's scan, which joins reservations with the claim tables and settlements, is in
 * api/gateway/loops/sweeper-store.ts.
 *
 * Concurrency: a reservation runs in a READ COMMITTED transaction holding the agent's advisory
 * lock (api/shared/policy/store.ts `lockAgentPolicy`, the one `putPolicy` takes), so for one agent
 * reservations and policy changes execute one at a time and each sees everything committed before
 * it: accepted payments never sum above the daily budget nor outnumber the rate limit.
 */
import type pg from "pg";
import { type Db, withTransaction } from "../../../indexer/db/database.js";
import { formatUsdcShort } from "../../shared/money.js";
import { endpointHost } from "../../shared/policy/domains.js";
import {
  evaluatePayment,
  evaluatePolicy,
  type PaymentDecision,
  type PolicyAllowed,
  type PaymentRequest,
  type PolicyDecision,
  type PolicyNeedsApproval,
  type PolicyUsage,
} from "../../shared/policy/engine.js";
import type { Policy, Protocol } from "../../shared/policy/policy.js";
import { assertAgentId, getVersionedPolicy, lockAgentPolicy, lockAndReadPolicy, readUsage } from "../../shared/policy/store.js";

export interface Reservation {
  readonly decision: PolicyDecision;
  /** The `spend_reservations.id` (bigserial, as a string) when the payment was accepted. */
  readonly reservationId: string | null;
  /** The policy version the decision was made under (read under the agent's lock). */
  readonly policyVersion: number;
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
  /**
   * Runs under the agent's lock once the payment is allowed (and the `check` passed), before it is
   * reserved: the signed payment's link, written by the reservation's INSERT itself instead of a
   * `linkReservation` UPDATE after it (one round trip fewer under the lock, and no second version of
   * the row in its eight indexes). Not called for a refused or held payment. A throw is passed on,
   * nothing reserved (rolled back to the savepoint, or with the caller's transaction without one).
   */
  readonly link?: (decision: PolicyAllowed) => Promise<PaymentLink>;
  /**
   * False when the caller rolls its whole transaction back on any error of the reservation (the
   * REST authorize route): no savepoint, one round trip fewer. By default a savepoint is set, so a
   * failed reservation leaves the caller's transaction usable.
   */
  readonly savepoint?: boolean;
}

/** `reserveOrHoldInTransaction`'s answer: allowed and reserved, refused, or held (reserved `pending_approval`). */
export interface HeldOrReserved {
  readonly decision: PaymentDecision;
  /** The reservation: `reserved` when allowed, `pending_approval` when held; null when refused. */
  readonly reservationId: string | null;
  /** The policy version the decision was made under (read under the agent's lock). */
  readonly policyVersion: number;
  readonly refusal?: ReservationRefusal | null;
}

/** `ReservationRefusal.reasonCode` of a payment the policy would hold, on a path that cannot hold it. */
export const APPROVAL_REQUIRED = "approval_required";

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
  return reserve(client, agentId, request, now, options, options.savepoint ?? true);
}

/**
 * Three round trips: SAVEPOINT, the lock with the policy (and its version) and the usage read in
 * one call (`lockAndReadPolicy`; one statement more for a policy with endpoint budgets), the
 * INSERT (the savepoint ends with the caller's transaction; values are always bound parameters).
 * The reads start after the lock is granted (a new snapshot for each statement of the function,
 * under READ COMMITTED), so they see every reservation committed before; fewer round trips under
 * the lock is what lets one agent reserve faster. The call and the INSERT are named, so each
 * connection plans them once. The savepoint (a failure leaves the caller's transaction usable) is
 * skipped when the transaction is the reservation's own (`reserveWithinPolicy`) or the caller
 * rolls it back whole on an error (`ReserveOptions.savepoint`).
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
  return reserveOrHold(client, agentId, request, now, options, options.savepoint ?? true, { parentTxHash: options.parentTxHash ?? null });
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
    if (savepoint) await client.query("SAVEPOINT policy_reservation");
    const read = await lockAndReadPolicy(client, agentId, now);
    const { policy: stored, version: policyVersion } = read.versioned;
    const policy = options.exposure === true ? withoutPerCallLimits(stored) : stored;
    let usage: PolicyUsage = read.usage;
    if (policy.approval?.firstPaymentToDomain === true) usage = { ...usage, domainPaidBefore: await paidBefore(client, agentId, request) };
    const payment = evaluatePayment(policy, usage, request, now);
    if (hold === null && payment.decision === "needs_approval") {
      // A payment path that cannot wait for a person (a channel's deposit, a session's charge)
      // refuses what the policy would hold: approval is never granted by taking another path.
      return {
        decision: evaluatePolicy(policy, usage, request, now),
        reservationId: null,
        policyVersion,
        refusal: approvalRefusal(payment, request, policy.approval?.aboveUnits ?? null),
      };
    }
    const decision: PaymentDecision = hold === null ? evaluatePolicy(policy, usage, request, now) : payment;
    const refusal = decision.decision !== "reject" && options.check !== undefined ? await options.check(client) : null;
    if (refusal !== null || decision.decision === "reject") {
      return refusal === null
        ? { decision, reservationId: null, policyVersion }
        : { decision, reservationId: null, policyVersion, refusal };
    }
    if (decision.protocol === null) throw new Error("reservation needs a protocol the target offers (x402 or mpp)");
    const held = decision.decision === "needs_approval";
    const link = decision.decision === "allow" && options.link !== undefined ? await options.link(decision) : null;
    // The savepoint is not released: it ends with the caller's transaction, and releasing it
    // would cost a round trip for nothing.
    const values = [
      agentId,
      request.amountUnits.toString(),
      request.endpoint,
      decision.domain,
      decision.protocol,
      now,
      decision.budget.windowStart,
      held ? "pending_approval" : "reserved",
      held ? hold!.parentTxHash : (link?.parentTxHash ?? null),
      policyVersion,
    ];
    const { rows } = await client.query<{ id: string }>(
      link === null
        ? { name: "reservation-insert", text: RESERVATION_INSERT, values }
        : {
            name: "reservation-insert-linked",
            text: RESERVATION_INSERT_LINKED,
            values: [...values, ...linkValues(link)],
          },
    );
    const id = rows[0]!.id;
    return { decision, reservationId: id, policyVersion };
  } catch (error) {
    if (savepoint) await client.query("ROLLBACK TO SAVEPOINT policy_reservation").catch(() => undefined);
    throw error;
  }
}

/** The reservation's INSERT, and the same with its payment's link (`ReserveOptions.link`). */
const RESERVATION_COLUMNS = `agent_id, amount_units, endpoint, domain, protocol, created_at, budget_window_start, status,
                                      parent_tx_hash, policy_version`;
const placeholders = (n: number): string => Array.from({ length: n }, (_, i) => `$${i + 1}`).join(", ");
const RESERVATION_INSERT = `INSERT INTO spend_reservations (${RESERVATION_COLUMNS})
       VALUES (${placeholders(10)}) RETURNING id`;
const RESERVATION_INSERT_LINKED = `INSERT INTO spend_reservations (${RESERVATION_COLUMNS}, payment_ref, expires_at, invocation_budget_units, claimed_at)
       VALUES (${placeholders(14)}) RETURNING id`;

/** An exposure (a channel deposit) is held to no per-call limit, the agent's nor an endpoint rule's. */
function withoutPerCallLimits(policy: Policy): Policy {
  const endpointBudgets = policy.endpointBudgets?.map((rule) => ({ ...rule, perCallLimitUnits: null }));
  return { ...policy, perCallLimitUnits: null, ...(endpointBudgets === undefined ? {} : { endpointBudgets }) };
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
  /** The policy version the re-check ran under; an approved reservation records it. */
  readonly policyVersion: number;
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
  await lockAgentPolicy(client, agentId);
  const released = await client.query(
    "UPDATE spend_reservations SET status = 'released' WHERE id = $1 AND agent_id = $2 AND status = 'pending_approval'",
    [reservationId, agentId],
  );
  if (released.rowCount !== 1) return null;
  const { policy, version: policyVersion } = await getVersionedPolicy(client, agentId);
  // Spec 3's exhausted state is not applied: the held amount was counted before the refusals that
  // exhausted the period (often refused because it was held). The arithmetic still applies, so a
  // budget lowered meanwhile refuses.
  const usage = { ...(await readUsage(client, agentId, policy, now)), budgetExhausted: false };
  const decision = evaluatePolicy(policy, usage, request, now);
  const refusal = decision.decision === "allow" && options.check !== undefined ? await options.check(client) : null;
  if (decision.decision !== "allow" || refusal !== null) return { decision, refusal, policyVersion };
  await client.query(
    `UPDATE spend_reservations SET status = 'reserved', created_at = $2, budget_window_start = $3, expires_at = $4, policy_version = $5
     WHERE id = $1 AND status = 'released'`,
    [reservationId, now, decision.budget.windowStart, options.resumeBy, policyVersion],
  );
  return { decision, refusal: null, policyVersion };
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
): Promise<{ readonly createdAt: Date; readonly budgetWindowStart: Date; readonly policyVersion: number | null } | null> {
  const { rows } = await client.query<{ created_at: Date; budget_window_start: Date; policy_version: number | null }>(
    `SELECT created_at, budget_window_start, policy_version FROM spend_reservations
     WHERE id = $1 AND status = 'reserved' AND payment_ref IS NULL AND claimed_at IS NULL AND (expires_at IS NULL OR expires_at > $2)
     FOR UPDATE`,
    [reservationId, now],
  );
  const row = rows[0];
  return row === undefined
    ? null
    : { createdAt: row.created_at, budgetWindowStart: row.budget_window_start, policyVersion: row.policy_version };
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
    `UPDATE spend_reservations SET payment_ref = $2, expires_at = $3, invocation_budget_units = $4, claimed_at = $5, parent_tx_hash = $6
     WHERE id = $1 AND status = 'reserved'`,
    [reservationId, ...linkValues(link), link.parentTxHash ?? null],
  );
}

/** `payment_ref, expires_at, invocation_budget_units, claimed_at` of a link, as bound values. */
function linkValues(link: PaymentLink): (string | Date | null)[] {
  return [link.paymentRef, link.expiresAt ?? null, link.invocationBudgetUnits?.toString() ?? null, link.claimedAt ?? null];
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
