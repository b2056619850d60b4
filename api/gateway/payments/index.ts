/**
 * The agent's side of a payment, as use cases the REST routes call (api/gateway/http/routes/payments.ts):
 * authorizing it (policy, reservation, signature), the domain check a client asks for after its own
 * refused a host, and closing its reservation by hand.
 */
export * from "./reservations.js";
export * from "./domain-check.js";
