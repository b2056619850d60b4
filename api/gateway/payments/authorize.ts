/**
 * The authorization every protocol shares, inside the caller's READ COMMITTED transaction: the
 * spend policy decides and the amount is reserved (api/gateway/reservations/store.ts) with its
 * `budget.warning` and alerts; or the refusal, the policy's or the caller's `check` (a sub-agent's
 * invocation budget), is recorded as a rejected payment with its `policy.violation` event and
 * returned, not thrown, so that it commits with the caller's transaction (spec 3). Each caller
 * checks the agent's archive first and answers in its own protocol's terms.
 */
import type pg from "pg";
import type { PolicyAllowed, PolicyRejected, ReasonCode } from "../../shared/policy/engine.js";
import type { Protocol } from "../../shared/policy/policy.js";
import { emitPaymentEvents } from "../events/gateway.js";
import { type ReservationRefusal, type ReserveOptions, reserveInTransaction } from "../reservations/store.js";
import { recordRefusedPayment } from "./rejections.js";

export interface AuthorizationRequest {
  readonly agentId: string;
  /** The endpoint paid for (for a channel, the service's origin). */
  readonly endpoint: string;
  readonly amountUnits: bigint;
  readonly protocol: Protocol;
  readonly at: Date;
  readonly options?: ReserveOptions;
}

/** Every outcome names the policy version it was decided under. */
export type Authorization = { readonly policyVersion: number } & (
  | { readonly outcome: "reserved"; readonly reservationId: string; readonly decision: PolicyAllowed }
  | { readonly outcome: "budget_exceeded"; readonly refusal: ReservationRefusal; readonly rejectionId: string }
  | { readonly outcome: "policy_violation"; readonly decision: PolicyRejected; readonly rejectionId: string }
);

export async function authorizeWithinPolicy(client: pg.ClientBase, request: AuthorizationRequest): Promise<Authorization> {
  const { agentId, endpoint, amountUnits, protocol, at } = request;
  const payment = { endpoint, amountUnits, protocol, offeredProtocols: [protocol] } as const;
  const reservation = await reserveInTransaction(client, agentId, payment, at, request.options ?? {});
  const { decision, reservationId, refusal, policyVersion } = reservation;
  const refused = { agentId, amountUnits, endpoint, protocol, at, policyVersion } as const;
  if (refusal != null && decision.decision === "allow") {
    const rejectionId = await recordRefusedPayment(client, { ...refused, rejected: asRejection(decision, refusal) });
    return { outcome: "budget_exceeded", refusal, rejectionId, policyVersion };
  }
  if (decision.decision === "reject") {
    const rejectionId = await recordRefusedPayment(client, { ...refused, rejected: decision });
    return { outcome: "policy_violation", decision, rejectionId, policyVersion };
  }
  await emitPaymentEvents(client, { agentId, decision, at, policyVersion });
  return { outcome: "reserved", reservationId: reservationId!, decision, policyVersion };
}

/**
 * A refusal beyond the policy engine (the policy allowed the payment) as a rejection, so it is
 * recorded like one (spec 3): status rejected, `policy.violation`, alerts.
 */
export function asRejection(decision: PolicyAllowed, refusal: ReservationRefusal): PolicyRejected {
  return {
    ...decision,
    decision: "reject",
    // Beyond the policy engine's own codes; the events and the listing take any code.
    reasonCode: refusal.reasonCode as ReasonCode,
    reason: refusal.reason,
    errorClass: "PolicyViolationError",
    requested: refusal.requested,
    limit: refusal.limit,
    unit: refusal.unit,
    warnings: [],
  };
}
