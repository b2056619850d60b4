/** x402 in the spec's format: requirement and payload parsing, signing for agents, the facilitator. */
export * from "./errors.js";
export * from "./facilitator.js";
export * from "./headers.js";
export * from "./payload.js";
export * from "./requirement.js";
export * from "./sign.js";
