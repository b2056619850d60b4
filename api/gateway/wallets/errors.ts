/**
 * Errors of wallets and settlement. Each failure the spec names (section 7) has a class of the
 * same name and the properties the spec lists; the rest carry a stable snake_case `code` (never
 * reused for another meaning) that the REST layer maps to problem JSON. `agentId` properties hold
 * the internal key; messages, which reach callers, name the public id (api/shared/agent-ids.ts).
 */
import { publicAgentId } from "../../shared/agent-ids.js";
import { formatUsdcFixed } from "../../shared/money.js";

export type GatewayErrorCode =
  | "insufficient_funds"
  | "budget_exceeded"
  | "payment_failed"
  | "payment_pending"
  | "wallet_not_found"
  | "wallet_exists"
  | "invalid_address"
  | "invalid_amount"
  | "wallet_key_unavailable"
  | "idempotency_conflict"
  | "invalid_client_reference";

/** Base of the gateway's wallet and settlement errors; `name` is the spec's class name. */
export abstract class GatewayError extends Error {
  abstract readonly code: GatewayErrorCode;
}

/** Spec 7: the wallet lacks the funds. Nothing was sent. */
export class InsufficientFundsError extends GatewayError {
  readonly code = "insufficient_funds";
  constructor(
    readonly agentId: string,
    readonly requestedUnits: bigint,
    readonly currentBalanceUnits: bigint,
  ) {
    super(
      `insufficient funds: agent ${publicAgentId(agentId)} requested ${formatUsdcFixed(requestedUnits)} usdc, ` +
        `balance is ${formatUsdcFixed(currentBalanceUnits)} usdc`,
    );
    this.name = "InsufficientFundsError";
  }

  /** Spec 7 `currentBalance` (`{ usdc }`), as an exact decimal string (money is never a float). */
  get currentBalance(): { usdc: string } {
    return { usdc: formatUsdcFixed(this.currentBalanceUnits) };
  }
}

/** Spec 7: a sub-agent's payment would exceed the budget given in `agents.invoke`. */
export class BudgetExceededError extends GatewayError {
  readonly code = "budget_exceeded";
  constructor(
    readonly invocation: string,
    readonly requestedUnits: bigint,
    readonly budgetUnits: bigint,
    readonly spentUnits: bigint,
  ) {
    super(
      `budget exceeded: invocation ${invocation} has ${formatUsdcFixed(budgetUnits - spentUnits)} usdc left of ` +
        `${formatUsdcFixed(budgetUnits)}, requested ${formatUsdcFixed(requestedUnits)}`,
    );
    this.name = "BudgetExceededError";
  }
}

/**
 * Spec 7: the payment failed. `ledgerError` names the program's refusal (`DuplicatePaymentId`,
 * ...) with its code when the program refused; `expired` when the transaction can no longer land.
 */
export class PaymentError extends GatewayError {
  readonly code = "payment_failed";
  constructor(
    message: string,
    readonly detail: { readonly signature?: string; readonly ledgerError?: string; readonly ledgerCode?: number } = {},
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "PaymentError";
  }
}

/**
 * The transaction was sent but its outcome is not known yet (RPC timeout, crash of the node we
 * asked). It is NOT a failure: the settlement stays pending under `signature` until
 * `reconcilePending` resolves it, and must not be paid again meanwhile.
 */
export class PaymentPendingError extends GatewayError {
  readonly code = "payment_pending";
  constructor(
    readonly signature: string,
    options?: { cause?: unknown },
  ) {
    super(`payment ${signature} was sent and is not confirmed yet; it stays pending until reconciled`, options);
    this.name = "PaymentPendingError";
  }
}

export class WalletNotFoundError extends GatewayError {
  readonly code = "wallet_not_found";
  constructor(readonly agentId: string) {
    super(`agent ${publicAgentId(agentId)} has no wallet`);
    this.name = "WalletNotFoundError";
  }
}

export class WalletExistsError extends GatewayError {
  readonly code = "wallet_exists";
  constructor(readonly agentId: string) {
    super(`agent ${publicAgentId(agentId)} already exists`);
    this.name = "WalletExistsError";
  }
}

export class InvalidAddressError extends GatewayError {
  readonly code = "invalid_address";
  constructor(
    readonly address: string,
    detail: string,
  ) {
    super(`invalid address ${JSON.stringify(address)}: ${detail}`);
    this.name = "InvalidAddressError";
  }
}

export class InvalidAmountUnitsError extends GatewayError {
  readonly code = "invalid_amount";
  constructor(
    readonly amountUnits: bigint,
    detail: string,
  ) {
    super(`invalid amount ${amountUnits} units: ${detail}`);
    this.name = "InvalidAmountUnitsError";
  }
}

/** The key a ciphertext names is not configured, or the ciphertext does not authenticate. */
export class WalletKeyError extends GatewayError {
  readonly code = "wallet_key_unavailable";
  constructor(message: string) {
    super(message);
    this.name = "WalletKeyError";
  }
}

/** A client reference reused for a different operation. */
export class IdempotencyConflictError extends GatewayError {
  readonly code = "idempotency_conflict";
  constructor(readonly clientReference: string) {
    super(`client reference ${JSON.stringify(clientReference)} was used for a different operation`);
    this.name = "IdempotencyConflictError";
  }
}

export class InvalidClientReferenceError extends GatewayError {
  readonly code = "invalid_client_reference";
  constructor(readonly clientReference: string) {
    super(`client reference ${JSON.stringify(clientReference)} must be 1-128 of [A-Za-z0-9_:.-]`);
    this.name = "InvalidClientReferenceError";
  }
}

export function isGatewayError(error: unknown, code?: GatewayErrorCode): error is GatewayError {
  return error instanceof GatewayError && (code === undefined || error.code === code);
}
