/**
 * The spend policy on MPP session charges. A charge on an established session carries no fresh
 * signature of the agent, so the gateway admits each one here, inside the transaction that claims
 * the charge row (sessions.ts): allowed, the amount is reserved with its events and linked to the
 * row as `mpp-charge:<id>` (settled or released after the charge); refused, the rejection is
 * recorded and committed, no row exists and no money moves (spec 7 rule 3). A session's first call
 * is not charged here: its submission was reserved when authorized.
 *
 * A session under a sub-agent's invocation is also held to the invocation's remaining budget,
 * checked under the agent's reservation lock as the authorization checks it; a breach is refused
 * as `budget_exceeded`. An archived agent is not charged (its row is read under a share lock).
 */
import type pg from "pg";
import { authorizeWithinPolicy } from "../payments/authorize.js";
import { lockAgentArchivedAt } from "../payments/agent-archive.js";
import { publicAgentId } from "../../shared/agent-ids.js";
import { invocationBudgetCheck, type InvocationReader, subAgentInvocationState } from "../invocations/index.js";
import {
  landLinkedReservation,
  linkReservation,
  mppChargeRef,
  releaseLinkedReservation,
  type ReserveOptions,
} from "../reservations/store.js";
import type { ChargeAdmission, SessionCharge, SessionChargePolicy } from "./sessions.js";

export type { InvocationReader } from "../invocations/index.js";

export class SpendPolicyChargeGate implements SessionChargePolicy {
  constructor(
    private readonly pool: pg.Pool,
    private readonly clock: () => Date = () => new Date(),
    /** Reads the invocation budget of sessions under a parent; without it only the program caps them. */
    private readonly invocations?: InvocationReader,
  ) {}

  async admit(client: pg.PoolClient, charge: SessionCharge): Promise<ChargeAdmission> {
    const archivedAt = await lockAgentArchivedAt(client, charge.agentId);
    if (archivedAt !== null) {
      return {
        admitted: false,
        reasonCode: "agent_archived",
        reason: `agent ${publicAgentId(charge.agentId)} is archived; it can no longer pay`,
        errorClass: "PolicyViolationError",
      };
    }
    const at = this.clock();
    const reader = this.invocations;
    const parent = charge.parentTxHash;
    const options: ReserveOptions = parent === null || reader === undefined ? {} : chargeBudgetCheck(reader, charge, parent);
    const request = {
      agentId: charge.agentId,
      endpoint: charge.endpoint,
      amountUnits: charge.amountUnits,
      protocol: "mpp",
      at,
      options,
    } as const;
    const authorization = await authorizeWithinPolicy(client, request);
    if (authorization.outcome === "budget_exceeded") {
      const { refusal } = authorization;
      return {
        admitted: false,
        reasonCode: refusal.reasonCode,
        reason: refusal.reason,
        errorClass: "BudgetExceededError",
        failure: "budget_exceeded",
      };
    }
    if (authorization.outcome === "policy_violation") {
      const { decision } = authorization;
      return { admitted: false, reasonCode: decision.reasonCode, reason: decision.reason, errorClass: decision.errorClass };
    }
    return { admitted: true, reservationId: authorization.reservationId };
  }

  async link(client: pg.PoolClient, reservationId: string, chargeId: string, parentTxHash: string | null): Promise<void> {
    // Claimed at once: the charge settles right after this transaction, so it can never be released under it.
    await linkReservation(client, reservationId, { paymentRef: mppChargeRef(chargeId), parentTxHash, claimedAt: new Date() });
  }

  async settled(chargeId: string, txHash: string): Promise<void> {
    await landLinkedReservation(this.pool, mppChargeRef(chargeId), txHash);
  }

  async released(chargeId: string): Promise<void> {
    await releaseLinkedReservation(this.pool, mppChargeRef(chargeId));
  }
}

/**
 * Under the agent's reservation lock (`invocationBudgetCheck`). An invocation that does not exist
 * (or is another sub-agent's) has nothing left.
 */
function chargeBudgetCheck(reader: InvocationReader, charge: SessionCharge, parentTxHash: string): ReserveOptions {
  return invocationBudgetCheck({
    agentId: charge.agentId,
    parentTxHash,
    amountUnits: charge.amountUnits,
    readInvocation: async () => (await subAgentInvocationState(reader, parentTxHash, charge.payer)) ?? { budgetUnits: 0n, spentUnits: 0n },
  });
}
