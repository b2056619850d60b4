/**
 * A sub-agent's invocation budget (spec 2.6, 4.7, 7 `BudgetExceededError`), checked by the gateway
 * twice. Under the agent's reservation lock (`ReserveOptions.check`, built by `invocationBudgetCheck`)
 * when it authorizes a payment, opens a channel or admits an MPP session charge: a refusal is
 * recorded like a policy rejection (api/gateway/payments/authorize.ts). And against the invocation
 * account right before a payment under it is signed (`checkInvocationPayment`,
 * api/gateway/settlement/invocation-accounts.ts), so a payment the program would refuse is never sent.
 */
import { formatUsdcShort } from "../../shared/money.js";
import { limitReason } from "../../shared/policy/reasons.js";
import type { Db } from "../../shared/policy/store.js";
import { type ReservationRefusal, type ReserveOptions, unitsUnderParent } from "../reservations/store.js";

/** Reason code of a sub-agent payment over its invocation's remaining budget. */
export const INVOCATION_BUDGET_EXCEEDED = "invocation_budget_exceeded";

/** What the chain holds of an invocation: its budget and what the program counted spent under it. */
export interface InvocationBudget {
  readonly budgetUnits: bigint;
  readonly spentUnits: bigint;
}

/**
 * The invocation's budget against what is spent under it plus the agent's open reservations under
 * it plus this payment; null when it fits. Spent is the larger of the on-chain spend and the
 * agent's settled reservations under the parent (a payment settled without the invocation account,
 * by a settler that does not pass it, still counts). The reservations are read before the chain
 * (`readInvocation` runs after them): a payment settling in between is then counted twice (a
 * refusal on the safe side), never missed.
 */
export async function invocationBudgetRefusal(
  db: Db,
  input: {
    readonly agentId: string;
    readonly parentTxHash: string;
    readonly amountUnits: bigint;
    readonly readInvocation: () => Promise<InvocationBudget>;
  },
): Promise<ReservationRefusal | null> {
  const { reservedUnits, settledUnits } = await unitsUnderParent(db, input.agentId, input.parentTxHash);
  const { budgetUnits, spentUnits } = await input.readInvocation();
  const spent = spentUnits > settledUnits ? spentUnits : settledUnits;
  const committed = spent + reservedUnits;
  if (committed + input.amountUnits <= budgetUnits) return null;
  const remaining = budgetUnits > committed ? budgetUnits - committed : 0n;
  const requested = formatUsdcShort(input.amountUnits);
  const limit = formatUsdcShort(remaining);
  return {
    reasonCode: INVOCATION_BUDGET_EXCEEDED,
    reason: limitReason(INVOCATION_BUDGET_EXCEEDED, requested, limit, "usdc"),
    requested,
    limit,
    unit: "usdc",
  };
}

/** The reservation option that holds a sub-agent's payment to its invocation's remaining budget (`invocationBudgetRefusal`). */
export function invocationBudgetCheck(input: Parameters<typeof invocationBudgetRefusal>[1]): ReserveOptions {
  return { check: (locked) => invocationBudgetRefusal(locked, input) };
}
