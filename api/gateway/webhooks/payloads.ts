/**
 * The JSON bodies webhook receivers get (spec 6). `policy.violation` has exactly the spec's six
 * fields. The spec leaves `budget.warning` open; ours follows the same style (`event`, `agentId`,
 * human `detail`, ISO `timestamp`) and adds the budget figures. `spend_rate.exceeded` is ours (the
 * `spend_rate` alert of spec 2.10). Money is the spec's `{ usdc: number }`, made exactly from
 * base units: the number is a `JsonNumber` holding the exact decimal, written verbatim by
 * `writeJson` (api/shared/http/json.ts), so no amount (nor the threshold percent) ever passes through a
 * float: 0.1 usdc is `0.1` on the wire and 2^64 - 1 base units keep all 20 digits. Read a stored
 * payload back with `readStoredPayload` to keep them exact. The builders take the agent's internal
 * key and write its public id: a receiver sees the id its account registered, never the key
 * (api/shared/agent-ids.ts).
 */
import { publicAgentId } from "../../shared/agent-ids.js";
import { parseJson } from "../../shared/http/json.js";
import { JsonNumber } from "../../shared/json-number.js";
import { formatUsdcShort, type UsdcJson, usdcJson } from "../../shared/money.js";

export const EVENT_TYPES = ["budget.warning", "policy.violation", "spend_rate.exceeded", "approval.requested", "approval.decided"] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** Types a webhook endpoint can subscribe to: the spec's two gateway events and the approvals' (docs/events.md). */
export const SUBSCRIBABLE_EVENT_TYPES: readonly EventType[] = [
  "budget.warning",
  "policy.violation",
  "approval.requested",
  "approval.decided",
];

/** What an endpoint registered without `eventTypes` receives: the spec's two gateway events. */
export const DEFAULT_EVENT_TYPES: readonly EventType[] = ["budget.warning", "policy.violation"];

export function isEventType(value: unknown): value is EventType {
  return typeof value === "string" && (EVENT_TYPES as readonly string[]).includes(value);
}

export interface PolicyViolationPayload {
  readonly event: "policy.violation";
  readonly agentId: string;
  /** Machine code, e.g. `per_call_limit_exceeded`. */
  readonly reason: string;
  /** The refusal text as api/shared/policy/reasons.ts wrote it (docs/policy.md "Refusal texts"). */
  readonly detail: string;
  /** The URL that was called. */
  readonly endpoint: string;
  readonly timestamp: string;
  /** The agent's policy version the refusal was decided under (docs/policy.md "Versions"), when known. */
  readonly policyVersion?: number;
}

export interface BudgetWarningPayload {
  readonly event: "budget.warning";
  readonly agentId: string;
  /** The alert rule that fired; null for the gateway's own 80 % warning (spec 3). */
  readonly alertId: string | null;
  /** 80 for the gateway's warning, the rule's threshold for a `budget_pct` alert. */
  readonly thresholdPercent: JsonNumber;
  readonly usedToday: UsdcJson;
  readonly dailyBudget: UsdcJson;
  /** The budget period (spec 2.1): its first payment and its reset. */
  readonly windowStart: string;
  readonly resetsAt: string;
  readonly detail: string;
  readonly timestamp: string;
  /** The policy version of the payment that crossed the threshold, when known. */
  readonly policyVersion?: number;
}

export interface SpendRatePayload {
  readonly event: "spend_rate.exceeded";
  readonly agentId: string;
  readonly alertId: string;
  /** The rule's window, as given (`1h`). */
  readonly window: string;
  readonly threshold: UsdcJson;
  /** Spent within the window ending at `timestamp`. */
  readonly spent: UsdcJson;
  readonly detail: string;
  readonly timestamp: string;
}

/** A payment held by the policy's `approval` (docs/events.md): the signed one-time link decides it. */
export interface ApprovalRequestedPayload {
  readonly event: "approval.requested";
  readonly approvalId: string;
  readonly agentId: string;
  readonly amount: UsdcJson;
  readonly endpoint: string;
  readonly domain: string;
  readonly rule: string;
  readonly detail: string;
  readonly expiresAt: string;
  readonly decideUrl: string;
  readonly timestamp: string;
  /** The policy version that held the payment (absent for a payment held before versions). */
  readonly policyVersion?: number;
}

/** An approval decided, once: by a person's key, the link, or the timeout. */
export interface ApprovalDecidedPayload {
  readonly event: "approval.decided";
  readonly approvalId: string;
  readonly agentId: string;
  readonly status: "approved" | "denied" | "expired";
  readonly decidedBy: string;
  readonly note: string | null;
  readonly amount: UsdcJson;
  readonly endpoint: string;
  readonly outcome: "authorized" | "refused" | null;
  readonly detail: string;
  readonly timestamp: string;
  /** Approved: the version the re-run policy decided under; denied or expired: the one that held it. */
  readonly policyVersion?: number;
}

export type EventPayload =
  | PolicyViolationPayload
  | BudgetWarningPayload
  | SpendRatePayload
  | ApprovalRequestedPayload
  | ApprovalDecidedPayload;
export type PayloadOf<T extends EventType> = Extract<EventPayload, { event: T }>;

export function policyViolationPayload(input: {
  agentId: string;
  reasonCode: string;
  /** The decision's `reason` (spec 7 text). */
  reason: string;
  endpoint: string;
  at: Date;
  policyVersion?: number | null;
}): PolicyViolationPayload {
  return {
    event: "policy.violation",
    agentId: publicAgentId(input.agentId),
    reason: input.reasonCode,
    detail: input.reason,
    endpoint: input.endpoint,
    timestamp: input.at.toISOString(),
    ...(input.policyVersion == null ? {} : { policyVersion: input.policyVersion }),
  };
}

export function budgetWarningPayload(input: {
  agentId: string;
  alertId: string | null;
  /** Hundredths of a percent: 8000 = 80 %. */
  thresholdBp: number;
  usedUnits: bigint;
  limitUnits: bigint;
  windowStart: Date;
  resetsAt: Date;
  at: Date;
  policyVersion?: number | null;
}): BudgetWarningPayload {
  const percent = percentText(input.thresholdBp);
  return {
    event: "budget.warning",
    agentId: publicAgentId(input.agentId),
    alertId: input.alertId,
    thresholdPercent: new JsonNumber(percent),
    usedToday: usdcJson(input.usedUnits),
    dailyBudget: usdcJson(input.limitUnits),
    windowStart: input.windowStart.toISOString(),
    resetsAt: input.resetsAt.toISOString(),
    detail:
      `${percent} % of the daily budget reached: used ${formatUsdcShort(input.usedUnits)} usdc of ` +
      `${formatUsdcShort(input.limitUnits)} usdc; the window resets at ${input.resetsAt.toISOString()}`,
    timestamp: input.at.toISOString(),
    ...(input.policyVersion == null ? {} : { policyVersion: input.policyVersion }),
  };
}

export function spendRatePayload(input: {
  agentId: string;
  alertId: string;
  window: string;
  thresholdUnits: bigint;
  spentUnits: bigint;
  at: Date;
}): SpendRatePayload {
  return {
    event: "spend_rate.exceeded",
    agentId: publicAgentId(input.agentId),
    alertId: input.alertId,
    window: input.window,
    threshold: usdcJson(input.thresholdUnits),
    spent: usdcJson(input.spentUnits),
    detail: `spent ${formatUsdcShort(input.spentUnits)} usdc within ${input.window}, above the alert threshold of ${formatUsdcShort(input.thresholdUnits)} usdc`,
    timestamp: input.at.toISOString(),
  };
}

export function approvalRequestedPayload(input: {
  approvalId: string;
  agentId: string;
  amountUnits: bigint;
  endpoint: string;
  domain: string;
  rule: string;
  reason: string;
  expiresAt: Date;
  decideUrl: string;
  at: Date;
  policyVersion?: number | null;
}): ApprovalRequestedPayload {
  return {
    event: "approval.requested",
    approvalId: input.approvalId,
    agentId: publicAgentId(input.agentId),
    amount: usdcJson(input.amountUnits),
    endpoint: input.endpoint,
    domain: input.domain,
    rule: input.rule,
    detail: input.reason,
    expiresAt: input.expiresAt.toISOString(),
    decideUrl: input.decideUrl,
    timestamp: input.at.toISOString(),
    ...(input.policyVersion == null ? {} : { policyVersion: input.policyVersion }),
  };
}

export function approvalDecidedPayload(input: {
  approvalId: string;
  agentId: string;
  status: "approved" | "denied" | "expired";
  decidedBy: string;
  note: string | null;
  amountUnits: bigint;
  endpoint: string;
  outcome: "authorized" | "refused" | null;
  at: Date;
  policyVersion?: number | null;
}): ApprovalDecidedPayload {
  const by = input.decidedBy === "timeout" ? "the timeout" : input.decidedBy === "link" ? "the signed link" : `key ${input.decidedBy}`;
  const verb = input.status === "expired" ? "expired: not decided in time" : `${input.status} by ${by}`;
  return {
    event: "approval.decided",
    approvalId: input.approvalId,
    agentId: publicAgentId(input.agentId),
    status: input.status,
    decidedBy: input.decidedBy,
    note: input.note,
    amount: usdcJson(input.amountUnits),
    endpoint: input.endpoint,
    outcome: input.outcome,
    detail: input.outcome === "refused" ? `${verb}; the re-run policy refused the payment` : verb,
    timestamp: input.at.toISOString(),
    ...(input.policyVersion == null ? {} : { policyVersion: input.policyVersion }),
  };
}

/** A stored payload (the outbox's exact text) back as a payload, numbers still exact tokens. */
export function readStoredPayload(text: string): EventPayload {
  return parseJson(text) as unknown as EventPayload;
}

/** Hundredths of a percent → the exact percent: 8000 → "80", 3333 → "33.33", 5 → "0.05". */
export function percentText(bp: number): string {
  if (!Number.isSafeInteger(bp) || bp < 0) throw new RangeError(`threshold must be a non-negative integer of hundredths, got ${bp}`);
  const hundredths = BigInt(bp);
  const fraction = (hundredths % 100n).toString().padStart(2, "0").replace(/0+$/, "");
  const whole = hundredths / 100n;
  return fraction === "" ? `${whole}` : `${whole}.${fraction}`;
}

/** One line for humans (Slack text, e-mail subject). */
export function summarize(payload: EventPayload): string {
  switch (payload.event) {
    case "policy.violation":
      return `policy.violation: agent ${payload.agentId} rejected (${payload.reason})`;
    case "budget.warning":
      return `budget.warning: agent ${payload.agentId} reached ${payload.thresholdPercent} % of its daily budget`;
    case "spend_rate.exceeded":
      return `spend_rate.exceeded: agent ${payload.agentId} spent ${payload.spent.usdc} usdc within ${payload.window}`;
    case "approval.requested":
      return `approval.requested: agent ${payload.agentId} asks to pay ${payload.amount.usdc} usdc to ${payload.domain}: ${payload.decideUrl}`;
    case "approval.decided":
      return `approval.decided: agent ${payload.agentId}'s payment of ${payload.amount.usdc} usdc ${payload.status}`;
  }
}
