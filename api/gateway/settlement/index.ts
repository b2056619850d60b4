/** Settlement: the one call that puts a payment on the ledger, its rows, and a new agent's token account. */
export * from "./payee-account.js";
export * from "./settlement.js";
export * from "./settler.js";
