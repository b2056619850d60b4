export * from "./alerts.js";
export * from "./evaluate.js";
export * from "./events.js";
export * from "./gateway.js";
export * from "./low-balance.js";
