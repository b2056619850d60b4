/**
 * The authorization every protocol shares, inside the caller's READ COMMITTED transaction: the
 * spend policy decides and the amount is reserved (api/gateway/reservations/store.ts) with its
 * `budget.warning` and alerts; or the refusal, the policy's or the caller's `check` (a sub-agent's
 * invocation budget), is recorded as a rejected payment with its `policy.violation` event and
 * returned, not thrown, so that it commits with the caller's transaction (spec 3). Each caller
 * checks the agent's archive first and answers in its own protocol's terms.
 *
 * A caller that can wait for a person (the pay path's authorize) asks for `hold`: a payment the
 * policy's `approval` holds is then reserved `pending_approval` and answered `held` (nothing else
 * happens here; ./approvals records it). Any other caller gets such a payment refused by the
 * reservation (`approval_required`), so no path pays above the threshold without a person.
 */
import type pg from "pg";
import type { PolicyAllowed, PolicyNeedsApproval, PolicyRejected, ReasonCode } from "../../shared/policy/engine.js";
import type { Protocol } from "../../shared/policy/policy.js";
import { emitPaymentEvents } from "../events/gateway.js";
import { type ReservationRefusal, type ReserveOptions, reserveInTransaction, reserveOrHoldInTransaction } from "../reservations/store.js";
import { recordRefusedPayment } from "./rejections.js";

export interface AuthorizationRequest {
  readonly agentId: string;
  /** The endpoint paid for (for a channel, the service's origin). */
  readonly endpoint: string;
  readonly amountUnits: bigint;
  readonly protocol: Protocol;
  readonly at: Date;
  readonly options?: ReserveOptions;
  /** The caller can hold a payment for approval; `parentTxHash`: a sub-agent's invoking transaction, or null. */
  readonly hold?: { readonly parentTxHash: string | null };
}

/** Every outcome names the policy version it was decided under. */
export type Authorization = { readonly policyVersion: number } & (
  | { readonly outcome: "reserved"; readonly reservationId: string; readonly decision: PolicyAllowed }
  | { readonly outcome: "budget_exceeded"; readonly refusal: ReservationRefusal; readonly rejectionId: string }
  | { readonly outcome: "policy_violation"; readonly decision: PolicyRejected; readonly rejectionId: string }
  /** Held for a person (only with `hold`): reserved `pending_approval`, nothing signed. */
  | { readonly outcome: "held"; readonly reservationId: string; readonly decision: PolicyNeedsApproval }
);

export async function authorizeWithinPolicy(client: pg.ClientBase, request: AuthorizationRequest): Promise<Authorization> {
  const { agentId, endpoint, amountUnits, protocol, at } = request;
  const payment = { endpoint, amountUnits, protocol, offeredProtocols: [protocol] } as const;
  const options = request.options ?? {};
  const { decision, reservationId, refusal, policyVersion } =
    request.hold === undefined
      ? await reserveInTransaction(client, agentId, payment, at, options)
      : await reserveOrHoldInTransaction(client, agentId, payment, at, { ...options, parentTxHash: request.hold.parentTxHash });
  const refused = { agentId, amountUnits, endpoint, protocol, at, policyVersion } as const;
  if (refusal != null && decision.decision !== "reject") {
    const allowed = { ...decision, decision: "allow", reasonCode: null, reason: null, errorClass: null } as const;
    const rejectionId = await recordRefusedPayment(client, { ...refused, rejected: asRejection(allowed, refusal) });
    return { outcome: "budget_exceeded", refusal, rejectionId, policyVersion };
  }
  if (decision.decision === "reject") {
    const rejectionId = await recordRefusedPayment(client, { ...refused, rejected: decision });
    return { outcome: "policy_violation", decision, rejectionId, policyVersion };
  }
  if (decision.decision === "needs_approval") return { outcome: "held", reservationId: reservationId!, decision, policyVersion };
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
