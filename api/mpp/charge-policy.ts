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
 *
 * A session established under a sub-agent's invocation (`SessionCharge.parentTxHash`) is also held
 * to the invocation's remaining budget, checked under the agent's reservation lock exactly as
 * `POST /v1/agents/{id}/payments/authorize` checks it: the budget on-chain against the larger of
 * the on-chain spend and the agent's settled reservations under the parent, plus its open
 * reservations under the parent, plus this charge. A breach is recorded rejected with the reason
 * code `invocation_budget_exceeded` and the spec 7 text, and refused as `budget_exceeded`
 * (`BudgetExceededError`); the charge's reservation carries the parent so later checks count it.
 * Without an invocation reader the check is skipped and only the program's own cap applies.
 */
import { PublicKey } from "@solana/web3.js";
import type pg from "pg";
import { emitPaymentEvents, emitRejectionEvents } from "../events/gateway.js";
import { formatUsdc } from "../policy/amounts.js";
import type { PolicyRejected, ReasonCode } from "../policy/engine.js";
import {
  linkReservation,
  mppChargeRef,
  releaseLinkedReservation,
  type ReservationRefusal,
  type ReserveOptions,
  reserveInTransaction,
  settleLinkedReservation,
  unitsUnderParent,
} from "../policy/store.js";
import { recordRejection } from "../rejections.js";
import { invocationAddress, type Invocations } from "../x402/facilitator.js";
import type { ChargeAdmission, SessionCharge, SessionChargePolicy } from "./service.js";

/** Reads invocation accounts from the chain (api/settlement's `Settlement` is one). */
export type InvocationReader = Pick<Invocations, "invocationState">;

/** Reason code of a charge over its invocation's remaining budget (the same as at authorization). */
export const INVOCATION_BUDGET_EXCEEDED = "invocation_budget_exceeded";

/** Host and path without scheme, as spec 2.2 prints endpoints. */
function printable(endpoint: string): string {
  const url = new URL(endpoint);
  return `${url.host}${url.pathname}`;
}

export class SpendPolicyChargeGate implements SessionChargePolicy {
  constructor(
    private readonly pool: pg.Pool,
    private readonly clock: () => Date = () => new Date(),
    /** Reads the invocation budget of sessions under a parent; without it only the program caps them. */
    private readonly invocations?: InvocationReader,
  ) {}

  async admit(client: pg.PoolClient, charge: SessionCharge): Promise<ChargeAdmission> {
    const at = this.clock();
    const request = { endpoint: charge.endpoint, amountUnits: charge.amountUnits, protocol: "mpp", offeredProtocols: ["mpp"] } as const;
    const reader = this.invocations;
    const parent = charge.parentTxHash;
    const options: ReserveOptions =
      parent === null || reader === undefined ? {} : { check: (locked) => invocationBudgetCheck(locked, reader, charge, parent) };
    const { decision, reservationId, refusal } = await reserveInTransaction(client, charge.agentId, request, at, options);
    if (refusal != null && decision.decision === "allow") {
      // Recorded like a policy rejection (spec 3): status rejected, `policy.violation`, alerts.
      const rejected: PolicyRejected = {
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
      await recordRejection(client, {
        agentId: charge.agentId,
        amountUnits: charge.amountUnits,
        endpoint: printable(charge.endpoint),
        domain: decision.domain,
        protocol: "mpp",
        reasonCode: refusal.reasonCode,
        reason: refusal.reason,
        at,
      });
      await emitRejectionEvents(client, { agentId: charge.agentId, decision: rejected, endpoint: charge.endpoint, at });
      return {
        admitted: false,
        reasonCode: refusal.reasonCode,
        reason: refusal.reason,
        errorClass: "BudgetExceededError",
        failure: "budget_exceeded",
      };
    }
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

  async link(client: pg.PoolClient, reservationId: string, chargeId: string, parentTxHash: string | null): Promise<void> {
    await linkReservation(client, reservationId, { paymentRef: mppChargeRef(chargeId), parentTxHash });
  }

  async settled(chargeId: string, txHash: string): Promise<void> {
    await settleLinkedReservation(this.pool, mppChargeRef(chargeId), txHash);
  }

  async released(chargeId: string): Promise<void> {
    await releaseLinkedReservation(this.pool, mppChargeRef(chargeId));
  }
}

/**
 * Under the agent's reservation lock: the invocation's budget against what is spent under it plus
 * the agent's open reservations under it plus this charge. The reservations are read before the
 * chain, so a payment settling in between is counted twice (a refusal on the safe side), never
 * missed. An invocation that does not exist (or is another sub-agent's) has nothing left.
 */
async function invocationBudgetCheck(
  client: pg.ClientBase,
  reader: InvocationReader,
  charge: SessionCharge,
  parentTxHash: string,
): Promise<ReservationRefusal | null> {
  const { reservedUnits, settledUnits } = await unitsUnderParent(client, charge.agentId, parentTxHash);
  const state = await reader.invocationState(new PublicKey(invocationAddress(parentTxHash, charge.payer)));
  const own = state !== null && state.subAgent === charge.payer;
  const budget = own ? state.budgetUnits : 0n;
  const onChain = own ? state.spentUnits : 0n;
  const spent = onChain > settledUnits ? onChain : settledUnits;
  const committed = spent + reservedUnits;
  if (committed + charge.amountUnits <= budget) return null;
  const remaining = budget > committed ? budget - committed : 0n;
  const requested = formatUsdc(charge.amountUnits);
  const limit = formatUsdc(remaining);
  return {
    reasonCode: INVOCATION_BUDGET_EXCEEDED,
    reason: `${INVOCATION_BUDGET_EXCEEDED}: requested ${requested} usdc, limit is ${limit} usdc`,
    requested,
    limit,
    unit: "usdc",
  };
}
