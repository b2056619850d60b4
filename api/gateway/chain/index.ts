/**
 * The chain as the gateway sees it: the ledger client (submit, sign, blockhash, outcomes), the
 * errors the program's codes become, ed25519 signing, payee account rules and network names.
 */
export * from "./errors.js";
export * from "./ledger.js";
export * from "./ledger-errors.js";
export * from "./networks.js";
export * from "./payee.js";
export * from "./signer.js";
