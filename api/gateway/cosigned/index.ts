/** Payments by wallets the gateway does not hold, co-signed as fee payer (cosigned.ts). */
export * from "./check.js";
export * from "./cosigned.js";
