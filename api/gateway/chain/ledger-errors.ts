/**
 * A refusal by payment_ledger, turned into the gateway's typed errors: the program's
 * `InsufficientFunds` is InsufficientFundsError with the wallet's balance read now,
 * `InvocationBudgetExceeded` is BudgetExceededError with the invocation's budget and spend, and
 * anything else a PaymentError naming the program's error and code.
 */
import { type PublicKey, Transaction } from "@solana/web3.js";
import {
  findLedgerError,
  LEDGER_ERRORS,
  ledgerErrorCodeFromTransactionError,
  type LedgerErrorInfo,
} from "../../../programs/payment_ledger/ts/index.js";
import { BudgetExceededError, type GatewayError, InsufficientFundsError, PaymentError } from "./errors.js";
import type { SignedTransaction, SubmitResult } from "./ledger.js";

/** A send that neither confirmed nor stayed pending. */
export type SubmitFailure = Exclude<SubmitResult, { status: "confirmed" } | { status: "pending" }>;

/**
 * What `ledgerRefusal` needs of a failed send: the RPC's refusal, or the included transaction's
 * error with the programs it called (read from the signed bytes, so the program is named exactly).
 */
export function submitFailure(result: SubmitFailure, signed: SignedTransaction) {
  if (result.status === "rejected") return { kind: "rejected" as const, error: result.error };
  const programIds = Transaction.from(Buffer.from(signed.wire, "base64")).instructions.map((ix) => ix.programId);
  return { kind: "included" as const, err: result.reason === "included" ? result.err : null, programIds };
}

/** A send's outcome in words, for a failure the program did not name. */
export function failureText(result: SubmitResult): string {
  if (result.status === "rejected") return `rejected by the RPC node: ${(result.error as Error).message}`;
  if (result.status === "failed") return result.reason === "expired" ? "expired before it landed" : "included with an error";
  return result.status;
}

/** The program error behind a preflight refusal or an included failure, if it was the program's. */
export function ledgerRefusal(
  failure: { kind: "rejected"; error: unknown } | { kind: "included"; err: unknown; programIds: readonly PublicKey[] },
  programId: PublicKey,
): LedgerErrorInfo | null {
  if (failure.kind === "rejected") {
    const found = findLedgerError(failure.error, programId);
    return found === null ? null : { code: found.code, name: found.errorName, message: found.message };
  }
  const code = ledgerErrorCodeFromTransactionError(failure.err, failure.programIds, programId);
  return code === undefined ? null : (LEDGER_ERRORS.get(code) ?? null);
}

export interface RefusalContext {
  readonly agentId: string;
  readonly amountUnits: bigint;
  readonly signature: string;
  readonly balance: () => Promise<bigint>;
  readonly invocation?: { readonly address: string; readonly state: () => Promise<{ budgetUnits: bigint; spentUnits: bigint }> };
}

export async function refusalError(refusal: LedgerErrorInfo | null, detail: string, context: RefusalContext): Promise<GatewayError> {
  if (refusal?.name === "InsufficientFunds") {
    return new InsufficientFundsError(context.agentId, context.amountUnits, await context.balance());
  }
  if (refusal?.name === "InvocationBudgetExceeded" && context.invocation !== undefined) {
    const { budgetUnits, spentUnits } = await context.invocation.state();
    return new BudgetExceededError(context.invocation.address, context.amountUnits, budgetUnits, spentUnits);
  }
  const named = refusal === null ? detail : `payment_ledger ${refusal.name} (${refusal.code})`;
  return new PaymentError(`payment ${context.signature} failed: ${named}`, {
    signature: context.signature,
    ...(refusal === null ? {} : { ledgerError: refusal.name, ledgerCode: refusal.code }),
  });
}
