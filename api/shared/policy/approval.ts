/**
 * The policy's `approval` field (docs/policy.md "Approvals"): which payments are held for a person
 * instead of being decided at once, and how long they wait. Its type, its validation (every
 * problem a typed `InvalidPolicyError` naming the sub-field at fault), the wire parser, the
 * `<duration>` form of the timeout, and the pure matching of the approval rules.
 */
import { MAX_AMOUNT_UNITS, type UsdcJson, usdcJsonOrNull } from "../money.js";
import { parseAmountInput } from "./amounts.js";
import { findMatch, normalizeDomainEntry } from "./domains.js";
import { InvalidPolicyError, isPolicyInputError } from "./errors.js";

/** Which approval rule held a payment: the name of the policy field that matched. */
export type ApprovalRule = "above" | "domains" | "firstPaymentToDomain";
export const APPROVAL_RULES: readonly ApprovalRule[] = ["above", "domains", "firstPaymentToDomain"];

export type ApprovalOnTimeout = "deny";

export interface ApprovalPolicy {
  /** Hold a payment strictly above this many base units; null: no amount rule. */
  readonly aboveUnits: bigint | null;
  /** Hold a payment to a host these entries match (the domain lists' matching rules). */
  readonly domains: readonly string[];
  /** Hold the first payment of the agent to a host it never paid. */
  readonly firstPaymentToDomain: boolean;
  /** How long a held payment waits for a decision. */
  readonly timeoutMs: number;
  /** What the gateway decides when the timeout passes: never approval by silence. */
  readonly onTimeout: ApprovalOnTimeout;
}

export const MIN_APPROVAL_TIMEOUT_MS = 1_000;
export const MAX_APPROVAL_TIMEOUT_MS = 7 * 24 * 3_600_000;
export const MAX_APPROVAL_DOMAINS = 1_000;

const UNIT_MS = { d: 86_400_000, h: 3_600_000, m: 60_000, s: 1_000 } as const;
type DurationUnit = keyof typeof UNIT_MS;
const DURATION = /^([1-9][0-9]{0,9})([smhd])$/;

/** `"90s"`, `"15m"`, `"1h"`, `"7d"` → milliseconds; null for any other text. */
export function parseDuration(text: string): number | null {
  const match = DURATION.exec(text);
  if (match === null) return null;
  return Number(match[1]) * UNIT_MS[match[2] as DurationUnit];
}

/** Milliseconds (a whole number of seconds) in the largest unit that divides them: 900000 → `"15m"`. */
export function formatDuration(ms: number): string {
  for (const unit of ["d", "h", "m", "s"] as const) {
    if (ms % UNIT_MS[unit] === 0) return `${ms / UNIT_MS[unit]}${unit}`;
  }
  throw new RangeError(`${ms} ms is not a whole number of seconds`);
}

function fail(field: string, detail: string): never {
  throw new InvalidPolicyError("invalid_approval", field, detail);
}

/** Checks every sub-field and returns the normalized rule (domains lower-cased, deduplicated). */
export function validateApproval(approval: ApprovalPolicy): ApprovalPolicy {
  if (typeof approval !== "object" || approval === null) fail("approval", "must be an object or null");
  const { aboveUnits, domains, firstPaymentToDomain, timeoutMs, onTimeout } = approval;
  if (aboveUnits !== null) {
    if (typeof aboveUnits !== "bigint") fail("approval.above", "must be an amount in base units");
    if (aboveUnits < 0n) fail("approval.above", "must not be negative (0 holds every payment)");
    if (aboveUnits > MAX_AMOUNT_UNITS) fail("approval.above", "is too large");
  }
  if (!Array.isArray(domains)) fail("approval.domains", "must be a list of domains");
  if (domains.length > MAX_APPROVAL_DOMAINS) fail("approval.domains", `more than ${MAX_APPROVAL_DOMAINS} entries`);
  const normalized = [...new Set(domains.map((entry) => approvalDomain(entry)))];
  if (typeof firstPaymentToDomain !== "boolean") fail("approval.firstPaymentToDomain", "must be true or false");
  if (!Number.isSafeInteger(timeoutMs) || timeoutMs < MIN_APPROVAL_TIMEOUT_MS || timeoutMs > MAX_APPROVAL_TIMEOUT_MS) {
    fail("approval.timeout", "must be from 1s to 7d");
  }
  if (timeoutMs % 1_000 !== 0) fail("approval.timeout", "must be a whole number of seconds");
  if (onTimeout !== "deny") fail("approval.onTimeout", 'must be "deny"');
  if (aboveUnits === null && normalized.length === 0 && !firstPaymentToDomain) {
    fail("approval", "names no rule: give above, domains or firstPaymentToDomain (null removes approval)");
  }
  return { aboveUnits, domains: normalized, firstPaymentToDomain, timeoutMs, onTimeout };
}

function approvalDomain(entry: string): string {
  try {
    return normalizeDomainEntry(entry, "approval.domains");
  } catch (error) {
    if (isPolicyInputError(error)) fail("approval.domains", error.message.replace(/^invalid approval\.domains: /, ""));
    throw error;
  }
}

const APPROVAL_KEYS: ReadonlySet<string> = new Set(["above", "domains", "firstPaymentToDomain", "timeout", "onTimeout"]);

/**
 * The wire form of `approval` in `PUT /v1/policies/{agentId}` / `policies.set`:
 * `{ above?: { usdc }, domains?, firstPaymentToDomain?, timeout, onTimeout? }`, or null (removes).
 * Unknown keys are refused; the result is validated.
 */
export function parseApprovalInput(value: unknown): ApprovalPolicy | null {
  if (value === null) return null;
  if (!isRecord(value)) fail("approval", "must be an object or null");
  for (const key of Object.keys(value)) {
    if (!APPROVAL_KEYS.has(key)) fail(`approval.${key}`, "is not an approval field");
  }
  const timeout = value.timeout;
  if (timeout === undefined) fail("approval.timeout", 'is required (a duration such as "15m", from 1s to 7d)');
  if (typeof timeout !== "string") fail("approval.timeout", 'must be a duration such as "15m"');
  const timeoutMs = parseDuration(timeout);
  if (timeoutMs === null) fail("approval.timeout", `${JSON.stringify(timeout)} is not a duration: a positive integer and s, m, h or d`);
  const domains = value.domains ?? [];
  if (!Array.isArray(domains) || !domains.every((entry) => typeof entry === "string")) {
    fail("approval.domains", "must be a list of strings");
  }
  const first = value.firstPaymentToDomain ?? false;
  if (typeof first !== "boolean") fail("approval.firstPaymentToDomain", "must be true or false");
  const onTimeout = value.onTimeout ?? "deny";
  if (onTimeout !== "deny") fail("approval.onTimeout", 'must be "deny"');
  return validateApproval({
    aboveUnits: value.above === undefined || value.above === null ? null : aboveAmount(value.above),
    domains: domains as string[],
    firstPaymentToDomain: first,
    timeoutMs,
    onTimeout,
  });
}

function aboveAmount(value: unknown): bigint {
  const usdc = isRecord(value) ? value.usdc : undefined;
  if (typeof usdc !== "number" && typeof usdc !== "string") fail("approval.above", "must be { usdc: number } or null");
  try {
    return parseAmountInput(usdc);
  } catch (error) {
    if (isPolicyInputError(error)) fail("approval.above", error.message);
    throw error;
  }
}

/** The read views' shape of the rule, money left in base units for each surface to render. */
export interface ApprovalView {
  readonly aboveUnits: bigint | null;
  readonly domains: readonly string[];
  readonly firstPaymentToDomain: boolean;
  readonly timeout: string;
  readonly onTimeout: ApprovalOnTimeout;
}

export function approvalView(approval: ApprovalPolicy): ApprovalView {
  return {
    aboveUnits: approval.aboveUnits,
    domains: approval.domains,
    firstPaymentToDomain: approval.firstPaymentToDomain,
    timeout: formatDuration(approval.timeoutMs),
    onTimeout: approval.onTimeout,
  };
}

/** The REST / webhook form (docs/rest.md): money as the spec's exact `{ usdc }`. */
export interface ApprovalJson {
  readonly above: UsdcJson | null;
  readonly domains: readonly string[];
  readonly firstPaymentToDomain: boolean;
  readonly timeout: string;
  readonly onTimeout: ApprovalOnTimeout;
}

export function approvalJson(approval: ApprovalPolicy): ApprovalJson {
  const { aboveUnits, ...view } = approvalView(approval);
  return { above: usdcJsonOrNull(aboveUnits), ...view };
}

/**
 * The `policies` columns of migration 049 (`approval_*`), as the policy store writes and reads
 * them: all NULL / empty / false for no approval, which the table's CHECK requires together.
 */
export interface ApprovalColumns {
  readonly approval_above_units: string | null;
  readonly approval_domains: readonly string[];
  readonly approval_first_payment_to_domain: boolean;
  readonly approval_timeout_ms: string | null;
  readonly approval_on_timeout: ApprovalOnTimeout | null;
}

export function approvalToColumns(approval: ApprovalPolicy | null | undefined): ApprovalColumns {
  if (approval == null) {
    return {
      approval_above_units: null,
      approval_domains: [],
      approval_first_payment_to_domain: false,
      approval_timeout_ms: null,
      approval_on_timeout: null,
    };
  }
  return {
    approval_above_units: approval.aboveUnits === null ? null : approval.aboveUnits.toString(),
    approval_domains: approval.domains,
    approval_first_payment_to_domain: approval.firstPaymentToDomain,
    approval_timeout_ms: String(approval.timeoutMs),
    approval_on_timeout: approval.onTimeout,
  };
}

/** The columns as `pg` reads them (numeric and int8 as strings) → the rule, or null for none. */
export function approvalFromColumns(row: {
  readonly approval_above_units: string | null;
  readonly approval_domains: readonly string[] | null;
  readonly approval_first_payment_to_domain: boolean | null;
  readonly approval_timeout_ms: string | number | null;
  readonly approval_on_timeout: string | null;
}): ApprovalPolicy | null {
  if (row.approval_timeout_ms === null) return null;
  return {
    aboveUnits: row.approval_above_units === null ? null : BigInt(row.approval_above_units),
    domains: row.approval_domains ?? [],
    firstPaymentToDomain: row.approval_first_payment_to_domain === true,
    timeoutMs: Number(row.approval_timeout_ms),
    onTimeout: "deny",
  };
}

/** What matched: the rule, and for `domains` the entry. */
export interface ApprovalMatch {
  readonly rule: ApprovalRule;
  readonly entry: string | null;
}

/**
 * The first approval rule a payment matches (above, then domains, then first payment to the host),
 * or null. `domainPaidBefore` undefined (the caller did not say) counts as never paid: a forgotten
 * input holds the payment rather than letting it through.
 */
export function matchApproval(
  approval: ApprovalPolicy,
  amountUnits: bigint,
  domain: string,
  domainPaidBefore: boolean | undefined,
): ApprovalMatch | null {
  if (approval.aboveUnits !== null && amountUnits > approval.aboveUnits) return { rule: "above", entry: null };
  const entry = findMatch(approval.domains, domain);
  if (entry !== null) return { rule: "domains", entry };
  if (approval.firstPaymentToDomain && domainPaidBefore !== true) return { rule: "firstPaymentToDomain", entry: null };
  return null;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
