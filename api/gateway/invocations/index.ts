/**
 * Invocations of `agents.invoke` (spec 2.6, 4.7): an orchestrator's payment to a sub-agent opens
 * an invocation with a budget; the sub-agent's payments under it carry the parent link and may not
 * exceed the budget in total. Everything the gateway does with invocations lives here.
 *
 * Authority: the invocation account on payment_ledger (`ledger.ts`) is the truth for an
 * invocation's terms (invoker, sub-agent, budget) and what the program counted spent under it; the
 * program refuses a payment over the budget whatever the gateway believes. `spend_reservations`
 * (api/shared/policy/store.ts) is the truth for what the gateway has let through under a parent but not
 * yet settled, and for whether the invocation a payment starts is open yet (its `invocation`
 * column, written by `opening.ts`; NULL until an opening succeeds, retried by the sweeper).
 * `budget.ts` refuses a payment up front by combining both, so a refusal is recorded like a
 * policy rejection instead of surfacing as a failed transaction.
 *
 * The lifecycle, and who calls it:
 * - link: a payment authorized with `parentTxHash` pays under an invocation, one with
 *   `invocationBudget` starts one; both are written on its reservation when it is linked to the
 *   signed payment (api/gateway/payments/authorize.ts, through the policy store).
 * - budget check: `budget.ts`, under the agent's reservation lock (authorize, MPP session charges)
 *   and before a payment under the invocation is signed (the settle path).
 * - open: `opening.ts`, once the invoking payment settled (the facilitator) and again by the
 *   sweeper until it succeeded; `ledger.ts` sends the opening and reads the account.
 * - close: the payments under it settle against the account (`address.ts` names it), which the
 *   program caps at the budget; an invocation account is never closed, it is the record.
 *
 * - `address.ts`: the account's address, derived from the parent transaction and the sub-agent.
 * - `ledger.ts`: open an invocation on the chain and read its account (`LedgerInvocations`).
 * - `opening.ts`: open the invocation a settled payment starts and link it to its reservation.
 * - `budget.ts`: the invocation budget checks.
 * - `lookup.ts`: an invocation as a sub-agent or an invoker sees it.
 */
export * from "./address.js";
export * from "./budget.js";
export * from "./ledger.js";
export * from "./lookup.js";
export * from "./opening.js";
