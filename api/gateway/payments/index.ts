/**
 * The use cases every protocol shares on the agent's side of a payment: closing a reservation by
 * hand (complete, release), the domain check a client asks for after its own refused a host,
 * refused payments as records, and the archive lock a payment takes.
 */
export * from "./reservations.js";
export * from "./domain-check.js";
