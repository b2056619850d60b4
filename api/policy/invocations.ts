/** Moved to the invocation module (api/invocations/budget.ts); kept so existing imports resolve. */
export { asRejection, INVOCATION_BUDGET_EXCEEDED, type InvocationBudget, invocationBudgetRefusal } from "../invocations/budget.js";
