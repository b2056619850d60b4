/** Custodial agent wallets: sealed keys, chain balances, funding and withdrawal. */
export * from "./funding-source.js";
export * from "./keystore.js";
export * from "./wallets.js";
