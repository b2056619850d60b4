/**
 * Approvals at the gateway (docs/policy.md "Approvals", docs/rest.md "Approvals"): a payment the
 * policy holds for a person, from the hold to its one decision and the caller's resume.
 *
 * - `hold.ts`: the authorization holds a payment: approval row, signed link, `approval.requested`;
 * - `decide.ts`: a person's key or the link approves (the policy re-run) or denies, once;
 * - `resume.ts`: the caller repeats its authorization with the same Idempotency-Key;
 * - `waits.ts`: long-polls woken by the decisions' notifications;
 * - `refusal.ts`: the re-check's refusal of an approved payment, as the answers repeat it.
 *
 * Their SQL is the stores': api/shared/approvals/store.ts (the approvals, the link, the
 * notification), api/gateway/reservations/store.ts (the held reservation) and ../rejections.ts.
 *
 * The loop that expires undecided approvals by the gateway's clock is api/gateway/loops/approval-timeouts.ts.
 *
 * Authority: `approvals` (api/shared/approvals/store.ts) is the truth for whether a held payment
 * may go; `spend_reservations` for what it holds of the budget (`pending_approval`, then
 * `reserved` or `released`).
 */
export * from "./decide.js";
export * from "./hold.js";
export * from "./refusal.js";
export * from "./resume.js";
export * from "./waits.js";
