/** Settlement on payment_ledger: record_payment with the atomic transfer, invocations, reconciliation. */
export * from "./ledger-errors.js";
export * from "./payee-account.js";
export * from "./reconciler.js";
export * from "./settlement.js";
