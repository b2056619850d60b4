/**
 * Errors of wallets and settlement, all ServiceErrors (api/shared/errors.ts). Each failure the spec
 * names (section 7) has a class of the same name and the properties the spec lists; every class
 * has a registry `code` (what the answer says) and a stable snake_case `reason` (which failure
 * it is, never reused for another meaning). `agentId` properties hold the internal key;
 * messages, which reach callers, name the public id (api/shared/agent-ids.ts).
 */
import { publicAgentId } from "../../shared/agent-ids.js";
import { type ErrorCode, ServiceError, type ServiceErrorOptions } from "../../shared/errors.js";
import { formatUsdcFixed, usdcJson } from "../../shared/money.js";

export type GatewayErrorReason =
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
export abstract class GatewayError extends ServiceError {
  declare readonly reason: GatewayErrorReason;

  constructor(code: ErrorCode, reason: GatewayErrorReason, message: string, options: ServiceErrorOptions = {}) {
    super(code, message, { ...options, reason });
  }

  // Only an input refusal names its rule in the answer; the other reasons are the server's own
  // (logs, `isGatewayError` narrowing): their code and class say all a client acts on.
  protected override properties(): Record<string, unknown> {
    const { reason, ...properties } = super.properties();
    return this.code === "BAD_USER_INPUT" ? { reason, ...properties } : properties;
  }
}

/** Spec 7: the wallet lacks the funds. Nothing was sent. */
export class InsufficientFundsError extends GatewayError {
  constructor(
    readonly agentId: string,
    readonly requestedUnits: bigint,
    readonly currentBalanceUnits: bigint,
  ) {
    super(
      "INSUFFICIENT_FUNDS",
      "insufficient_funds",
      `insufficient funds: agent ${publicAgentId(agentId)} requested ${formatUsdcFixed(requestedUnits)} usdc, ` +
        `balance is ${formatUsdcFixed(currentBalanceUnits)} usdc`,
      // The answer's `currentBalance` is the spec's `{ usdc: number }`, written exactly.
      { extra: { currentBalance: usdcJson(currentBalanceUnits) } },
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
  constructor(
    readonly invocation: string,
    readonly requestedUnits: bigint,
    readonly budgetUnits: bigint,
    readonly spentUnits: bigint,
  ) {
    super(
      "BUDGET_EXCEEDED",
      "budget_exceeded",
      `budget exceeded: invocation ${invocation} has ${formatUsdcFixed(budgetUnits - spentUnits)} usdc left of ` +
        `${formatUsdcFixed(budgetUnits)}, requested ${formatUsdcFixed(requestedUnits)}`,
      { extra: { invocation } },
    );
    this.name = "BudgetExceededError";
  }
}

/**
 * Spec 7: the payment failed. `ledgerError` names the program's refusal (`DuplicatePaymentId`,
 * ...) with its code when the program refused; `expired` when the transaction can no longer land.
 */
export class PaymentError extends GatewayError {
  constructor(
    message: string,
    readonly detail: { readonly signature?: string; readonly ledgerError?: string; readonly ledgerCode?: number } = {},
    options: { cause?: unknown } = {},
  ) {
    super("PAYMENT_FAILED", "payment_failed", message, options);
    this.name = "PaymentError";
  }
}

/**
 * The transaction was sent but its outcome is not known yet (RPC timeout, crash of the node we
 * asked). It is NOT a failure: the settlement stays pending under `signature` until
 * `reconcilePending` resolves it, and must not be paid again meanwhile. Should it reach an answer,
 * it is SERVICE_UNAVAILABLE: the caller asks again later.
 */
export class PaymentPendingError extends GatewayError {
  constructor(
    readonly signature: string,
    options: { cause?: unknown } = {},
  ) {
    super(
      "SERVICE_UNAVAILABLE",
      "payment_pending",
      `payment ${signature} was sent and is not confirmed yet; it stays pending until reconciled`,
      options,
    );
    this.name = "PaymentPendingError";
  }
}

export class WalletNotFoundError extends GatewayError {
  constructor(readonly agentId: string) {
    super("NOT_FOUND", "wallet_not_found", `agent ${publicAgentId(agentId)} has no wallet`);
    this.name = "WalletNotFoundError";
  }
}

export class WalletExistsError extends GatewayError {
  constructor(readonly agentId: string) {
    super("AGENT_EXISTS", "wallet_exists", `agent ${publicAgentId(agentId)} already exists`);
    this.name = "WalletExistsError";
  }
}

export class InvalidAddressError extends GatewayError {
  constructor(
    readonly address: string,
    detail: string,
  ) {
    super("BAD_USER_INPUT", "invalid_address", `invalid address ${JSON.stringify(address)}: ${detail}`);
    this.name = "InvalidAddressError";
  }
}

export class InvalidAmountUnitsError extends GatewayError {
  constructor(
    readonly amountUnits: bigint,
    detail: string,
  ) {
    super("BAD_USER_INPUT", "invalid_amount", `invalid amount ${amountUnits} units: ${detail}`);
    this.name = "InvalidAmountUnitsError";
  }
}

/** The key a ciphertext names is not configured, or the ciphertext does not authenticate. */
export class WalletKeyError extends GatewayError {
  constructor(message: string) {
    super("SERVICE_UNAVAILABLE", "wallet_key_unavailable", message);
    this.name = "WalletKeyError";
  }
}

/** A client reference reused for a different operation. */
export class IdempotencyConflictError extends GatewayError {
  constructor(readonly clientReference: string) {
    super(
      "IDEMPOTENCY_KEY_REUSED",
      "idempotency_conflict",
      `client reference ${JSON.stringify(clientReference)} was used for a different operation`,
    );
    this.name = "IdempotencyConflictError";
  }
}

export class InvalidClientReferenceError extends GatewayError {
  constructor(readonly clientReference: string) {
    super(
      "BAD_USER_INPUT",
      "invalid_client_reference",
      `client reference ${JSON.stringify(clientReference)} must be 1-128 of [A-Za-z0-9_:.-]`,
    );
    this.name = "InvalidClientReferenceError";
  }
}

export function isGatewayError(error: unknown, reason?: GatewayErrorReason): error is GatewayError {
  return error instanceof GatewayError && (reason === undefined || error.reason === reason);
}
