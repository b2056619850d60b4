/**
 * Rejected payments (spec 3: "transaction with status rejected"): written by the gateway when a
 * policy refuses a payment, read by the transactions listing and the policy_violations metric.
 */
import type pg from "pg";
import type { Db } from "../../../indexer/db/database.js";
import { emitRejectionEvents } from "../events/gateway.js";
import type { PolicyRejected } from "../../shared/policy/engine.js";

export interface Rejection {
  readonly agentId: string;
  readonly amountUnits: bigint;
  /** Host and path without scheme. */
  readonly endpoint: string;
  readonly domain: string;
  readonly protocol: "x402" | "mpp" | null;
  /** e.g. per_call_limit_exceeded. */
  readonly reasonCode: string;
  readonly reason: string;
  /** Defaults to the database's now(). */
  readonly at?: Date;
  /** The policy version the refusal was decided under; null when unknown. */
  readonly policyVersion?: number | null;
}

export async function recordRejection(pool: Db, rejection: Rejection): Promise<string> {
  const result = await pool.query<{ id: string }>(
    `INSERT INTO payment_rejections (agent_id, amount_units, endpoint, domain, protocol, reason_code, reason, created_at, policy_version)
     VALUES ($1, $2, $3, $4, $5, $6, $7, coalesce($8, now()), $9) RETURNING id`,
    [
      rejection.agentId,
      rejection.amountUnits.toString(),
      rejection.endpoint,
      rejection.domain,
      rejection.protocol,
      rejection.reasonCode,
      rejection.reason,
      rejection.at ?? null,
      rejection.policyVersion ?? null,
    ],
  );
  return result.rows[0]!.id;
}

/**
 * A payment the gateway refused, recorded (status rejected) with its `policy.violation` event and
 * alerts, in the caller's transaction; answers the rejection's id.
 */
export async function recordRefusedPayment(
  client: pg.ClientBase,
  input: {
    agentId: string;
    amountUnits: bigint;
    endpoint: string;
    protocol: "x402" | "mpp" | null;
    rejected: PolicyRejected;
    at: Date;
    policyVersion?: number | null;
  },
): Promise<string> {
  const { agentId, rejected, endpoint, at } = input;
  const rejectionId = await recordRejection(client, {
    agentId,
    amountUnits: input.amountUnits,
    endpoint: printable(endpoint),
    domain: rejected.domain,
    protocol: input.protocol,
    reasonCode: rejected.reasonCode,
    reason: rejected.reason,
    at,
    policyVersion: input.policyVersion ?? null,
  });
  await emitRejectionEvents(client, { agentId, decision: rejected, endpoint, at, policyVersion: input.policyVersion ?? null });
  return rejectionId;
}

/** Host and path without scheme, as spec 2.2 prints endpoints. */
function printable(endpoint: string): string {
  try {
    const url = new URL(endpoint);
    return `${url.host}${url.pathname}`;
  } catch {
    return endpoint;
  }
}

/** A recorded refusal, as an answer repeats it. */
export interface RecordedRejection {
  readonly rejectionId: string;
  readonly reasonCode: string;
  readonly reason: string;
  readonly domain: string;
}

/**
 * The refusal recorded for the agent at `at` for `amountUnits` (the re-check of an approved
 * payment records it at its decision's time), or null.
 */
export async function rejectionAt(db: Db, agentId: string, at: Date, amountUnits: bigint): Promise<RecordedRejection | null> {
  const { rows } = await db.query<{ id: string; reason_code: string; reason: string; domain: string }>(
    `SELECT id::text AS id, reason_code, reason, domain FROM payment_rejections
     WHERE agent_id = $1 AND created_at = $2 AND amount_units = $3 ORDER BY id DESC LIMIT 1`,
    [agentId, at, amountUnits.toString()],
  );
  const row = rows[0];
  return row === undefined ? null : { rejectionId: row.id, reasonCode: row.reason_code, reason: row.reason, domain: row.domain };
}
