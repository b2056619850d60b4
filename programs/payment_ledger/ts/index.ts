/** The TypeScript binding of the payment_ledger program. */
export * from "./channel-account.js";
export * from "./config-account.js";
export * from "./endpoint-hash.js";
export * from "./enums.js";
export * from "./errors.js";
export * from "./events.js";
export * from "./idl.js";
export * from "./instructions.js";
export * from "./pda.js";
export * from "./voucher.js";
