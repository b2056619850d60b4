/**
 * What settlement needs from `agents.invoke` invocations: the account a payment under one is
 * checked against before it is signed, and opening one. api/gateway/invocations implements
 * `InvocationAccounts` (`LedgerInvocations`) over this floor, so it is given to `Settlement`
 * rather than imported by it.
 */
import type { PublicKey } from "@solana/web3.js";
import { BudgetExceededError, PaymentError } from "../chain/errors.js";

/** An `agents.invoke` invocation account as the chain holds it. */
export interface InvocationAccount {
  /** Wallet addresses (base58). */
  readonly invoker: string;
  readonly subAgent: string;
  readonly budgetUnits: bigint;
  readonly spentUnits: bigint;
}

/** The same account, as `Settlement.invocationState` answers it. */
export type InvocationState = InvocationAccount;

export interface OpenInvocationInput {
  readonly invokerAgentId: string;
  /** Signature of the invoking transaction (the orchestrator's payment to the sub-agent). */
  readonly parentTxHash: string;
  readonly subAgentId: string;
  readonly budgetUnits: bigint;
}

export interface OpenedInvocation {
  /** The invocation PDA: pass it as `invocation` on the sub-agent's payments. */
  readonly invocation: string;
  readonly txHash: string;
  readonly slot: number;
}

/** Invocation accounts on the ledger; `openInvocation` is idempotent for the same terms. */
export interface InvocationAccounts {
  openInvocation(input: OpenInvocationInput, signal?: AbortSignal): Promise<OpenedInvocation>;
  invocationState(invocation: PublicKey): Promise<InvocationState | null>;
}

/**
 * Before a payment of `payer` under the invocation account `invocation` is signed: the account
 * exists (`state`, as the chain holds it now), belongs to this sub-agent, and has budget left for
 * `amountUnits`. Throws `PaymentError` / `BudgetExceededError` otherwise, as the program would refuse.
 */
export function checkInvocationPayment(invocation: string, state: InvocationAccount | null, payer: string, amountUnits: bigint): void {
  if (state === null) throw new PaymentError(`invocation ${invocation} does not exist`);
  if (state.subAgent !== payer) {
    throw new PaymentError(`invocation ${invocation} belongs to another sub-agent`, { ledgerError: "InvocationPayerMismatch" });
  }
  if (state.spentUnits + amountUnits > state.budgetUnits) {
    throw new BudgetExceededError(invocation, amountUnits, state.budgetUnits, state.spentUnits);
  }
}
