/**
 * The background loops that finish what the pay path leaves open: the settlement reconciler, the
 * sweeper, and the approvals' timeouts.
 */
export * from "./approval-timeouts.js";
export * from "./reconciler.js";
export * from "./sweeper.js";
