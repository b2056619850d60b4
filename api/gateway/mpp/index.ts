/** MPP in the spec's format: request and submission parsing, rail choice, the service side, sessions. */
export * from "./amount.js";
export * from "./errors.js";
export * from "./rails.js";
export * from "./request.js";
export * from "./service.js";
export * from "./session-token.js";
export * from "./submission.js";
export * from "./charge-policy.js";
export * from "./gateway.js";
export * from "./payment.js";
