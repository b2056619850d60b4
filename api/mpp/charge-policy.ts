/**
 * The spend policy on MPP session charges (issue: "policy check on MPP session charges"). A charge
 * on an established session carries no fresh signature of the agent, so the gateway admits each
 * one here, inside the transaction that claims the charge row (api/mpp/service.ts):
 *
 * - allowed: the amount is reserved (`reserveInTransaction`, the agent's advisory lock) with the
 *   `budget.warning` / alert events, and the reservation is linked to the charge row as
 *   `mpp-charge:<id>`; after the charge it is settled with the ledger transaction, or released
 *   when the charge definitely failed.
 * - refused: the rejection is recorded (status `rejected`, spec 7 reason text) with its
 *   `policy.violation` event, committed, and no charge row exists; no money moves (spec 7 rule 3).
 *
 * The first call of a session is never charged here: the submission that established it was
 * reserved when the gateway authorized it.
 */
import type pg from "pg";
import { emitPaymentEvents, emitRejectionEvents } from "../events/gateway.js";
import { linkReservation, mppChargeRef, releaseLinkedReservation, reserveInTransaction, settleLinkedReservation } from "../policy/store.js";
import { recordRejection } from "../rejections.js";
import type { ChargeAdmission, SessionCharge, SessionChargePolicy } from "./service.js";

/** Host and path without scheme, as spec 2.2 prints endpoints. */
function printable(endpoint: string): string {
  const url = new URL(endpoint);
  return `${url.host}${url.pathname}`;
}

export class SpendPolicyChargeGate implements SessionChargePolicy {
  constructor(
    private readonly pool: pg.Pool,
    private readonly clock: () => Date = () => new Date(),
  ) {}

  async admit(client: pg.PoolClient, charge: SessionCharge): Promise<ChargeAdmission> {
    const at = this.clock();
    const request = { endpoint: charge.endpoint, amountUnits: charge.amountUnits, protocol: "mpp", offeredProtocols: ["mpp"] } as const;
    const { decision, reservationId } = await reserveInTransaction(client, charge.agentId, request, at);
    if (decision.decision === "reject") {
      await recordRejection(client, {
        agentId: charge.agentId,
        amountUnits: charge.amountUnits,
        endpoint: printable(charge.endpoint),
        domain: decision.domain,
        protocol: "mpp",
        reasonCode: decision.reasonCode,
        reason: decision.reason,
        at,
      });
      await emitRejectionEvents(client, { agentId: charge.agentId, decision, endpoint: charge.endpoint, at });
      return { admitted: false, reasonCode: decision.reasonCode, reason: decision.reason, errorClass: decision.errorClass };
    }
    await emitPaymentEvents(client, { agentId: charge.agentId, decision, at });
    return { admitted: true, reservationId };
  }

  async link(client: pg.PoolClient, reservationId: string, chargeId: string): Promise<void> {
    await linkReservation(client, reservationId, { paymentRef: mppChargeRef(chargeId) });
  }

  async settled(chargeId: string, txHash: string): Promise<void> {
    await settleLinkedReservation(this.pool, mppChargeRef(chargeId), txHash);
  }

  async released(chargeId: string): Promise<void> {
    await releaseLinkedReservation(this.pool, mppChargeRef(chargeId));
  }
}
