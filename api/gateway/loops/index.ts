/** The background loops that finish what the pay path leaves open: the settlement reconciler and the sweeper. */
export * from "./reconciler.js";
export * from "./sweeper.js";
