/**
 * The baseline for the reservation bench: the same check and reservation as
 * `reserveInTransaction` (same policy read, same usage query, same pure `evaluatePolicy`, same
 * INSERT), but made safe the textbook way instead of with the per-agent advisory lock: a
 * SERIALIZABLE transaction, retried from the start on a serialization failure or deadlock.
 * Postgres' SSI then aborts one of two reservations that read each other's usage, so the budget
 * and the rate limit still hold; the price is the aborted work and the retries.
 */
import type pg from "pg";
import {
  EMPTY_POLICY,
  evaluatePolicy,
  getPolicy,
  type PaymentRequest,
  type PolicyDecision,
  readUsage,
} from "../../api/shared/policy/index.js";

/** Retries are bounded: a reservation that cannot commit after this many attempts is an error. */
export const MAX_ATTEMPTS = 200;
const RETRYABLE = new Set(["40001", "40P01"]);

export interface NaiveReservation {
  readonly decision: PolicyDecision;
  readonly reservationId: string | null;
  /** 1 when the first attempt committed. */
  readonly attempts: number;
}

export async function reserveSerializable(
  client: pg.ClientBase,
  agentId: string,
  request: PaymentRequest,
  now: Date,
): Promise<NaiveReservation> {
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt += 1) {
    try {
      await client.query("BEGIN ISOLATION LEVEL SERIALIZABLE");
      const policy = (await getPolicy(client, agentId)) ?? EMPTY_POLICY;
      const usage = await readUsage(client, agentId, policy, now);
      const decision = evaluatePolicy(policy, usage, request, now);
      let reservationId: string | null = null;
      if (decision.decision === "allow") {
        const { rows } = await client.query<{ id: string }>(
          `INSERT INTO spend_reservations (agent_id, amount_units, endpoint, domain, protocol, created_at, budget_window_start)
           VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`,
          [agentId, request.amountUnits.toString(), request.endpoint, decision.domain, decision.protocol, now, decision.budget.windowStart],
        );
        reservationId = rows[0]!.id;
      }
      await client.query("COMMIT");
      return { decision, reservationId, attempts: attempt };
    } catch (error) {
      await client.query("ROLLBACK").catch(() => undefined);
      if (!RETRYABLE.has((error as { code?: string }).code ?? "")) throw error;
    }
  }
  throw new Error(`reservation of ${agentId} did not commit after ${MAX_ATTEMPTS} serializable attempts`);
}
