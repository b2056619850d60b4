/**
 * Invocations of `agents.invoke` (spec 2.6, 4.7): an orchestrator's payment to a sub-agent opens
 * an invocation with a budget; the sub-agent's payments under it carry the parent link and may not
 * exceed the budget in total.
 *
 * Authority: the invocation account on payment_ledger is the truth for its terms and what the
 * program counted spent (the program refuses a payment over the budget whatever the gateway
 * believes); `spend_reservations` (api/gateway/reservations/store.ts) is the truth for what was
 * let through but not settled yet, and whether the invocation a payment starts is open.
 *
 * `address.ts` the account's address; `ledger.ts` opening and reading it (`LedgerInvocations`,
 * given to settlement as its `InvocationAccounts`); `opening.ts` opening the invocation a settled
 * payment starts (retried by the sweeper); `budget.ts` the checks under the agent's reservation
 * lock, so a breach is recorded like a policy refusal; `lookup.ts` an invocation as either party sees it.
 */
export * from "./address.js";
export * from "./budget.js";
export * from "./ledger.js";
export * from "./lookup.js";
export * from "./opening.js";
