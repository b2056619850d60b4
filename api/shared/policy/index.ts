export * from "./amounts.js";
export * from "./domains.js";
export * from "./engine.js";
export * from "./errors.js";
export * from "./policy.js";
export * from "./reasons.js";
export * from "./store.js";
export * from "./windows.js";
