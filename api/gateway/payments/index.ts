/**
 * The use cases every protocol shares on the agent's side of a payment: authorizing it within the
 * spend policy, closing its reservation by hand (complete, release), and the domain check a client
 * asks for after its own refused a host. Refused payments as records (rejections.ts) and the
 * archive lock (agent-archive.ts) are imported directly.
 */
export * from "./authorize.js";
export * from "./reservations.js";
export * from "./domain-check.js";
