/** The card rail: the processor interface, the stand-in, and the ledger's reference encoding. */
export * from "./processor.js";
export * from "./reference.js";
export * from "./stand-in.js";
