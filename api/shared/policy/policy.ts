/**
 * The spend policy of one agent (spec 2.1) as the engine sees it, its validation, and the
 * `policies.set` patch semantics of spec 4.1: an omitted field keeps its value, `null` removes it.
 */
import { MAX_AMOUNT_UNITS } from "../money.js";
import { parseAmountInput } from "./amounts.js";
import { type ApprovalPolicy, parseApprovalInput, validateApproval } from "./approval.js";
import { normalizeDomainEntry } from "./domains.js";
import { type EndpointBudget, MAX_ENDPOINT_BUDGETS, normalizeEndpointMatch } from "./endpoint-budgets.js";
import { InvalidPolicyError, isPolicyInputError } from "./errors.js";
import { isRateWindow, type RateWindow } from "./windows.js";

export type Protocol = "x402" | "mpp";
export type ProtocolPreference = "auto" | Protocol;
export const PROTOCOL_PREFERENCES: readonly ProtocolPreference[] = ["auto", "x402", "mpp"];

export interface RateLimit {
  readonly calls: number;
  readonly window: RateWindow;
}

export interface Policy {
  /** null: no daily budget. */
  readonly dailyBudgetUnits: bigint | null;
  /** null: no per-call limit. */
  readonly perCallLimitUnits: bigint | null;
  /** null: any domain may be paid. An empty list allows no domain. */
  readonly allowedDomains: readonly string[] | null;
  readonly blockedDomains: readonly string[];
  readonly rateLimit: RateLimit | null;
  readonly protocolPreference: ProtocolPreference;
  /**
   * Payments held for a person (docs/policy.md "Approvals"); absent or null: none is held. Optional
   * so a policy read by a store that predates it is still a policy.
   */
  readonly approval?: ApprovalPolicy | null;
  /**
   * Limits of one host or host and path prefix (./endpoint-budgets.ts), on top of the agent's own.
   * Absent or empty: none. Optional for the same reason as `approval`.
   */
  readonly endpointBudgets?: readonly EndpointBudget[];
}

/** An agent with no stored policy: no limits, `auto`. */
export const EMPTY_POLICY: Policy = Object.freeze({
  dailyBudgetUnits: null,
  perCallLimitUnits: null,
  allowedDomains: null,
  blockedDomains: Object.freeze([]) as readonly string[],
  rateLimit: null,
  protocolPreference: "auto",
});

/** Fields of `policies.set` in base units; `undefined` keeps, `null` removes. */
export interface PolicyPatch {
  readonly dailyBudgetUnits?: bigint | null;
  readonly perCallLimitUnits?: bigint | null;
  readonly allowedDomains?: readonly string[] | null;
  readonly blockedDomains?: readonly string[] | null;
  readonly rateLimit?: { readonly calls: number; readonly window: string } | null;
  readonly protocolPreference?: string | null;
  /** Replaced whole (its sub-fields are not merged); null removes it. */
  readonly approval?: ApprovalPolicy | null;
  /** Replaced whole; null or [] removes every endpoint budget. */
  readonly endpointBudgets?: readonly EndpointBudget[] | null;
}

export const MAX_DOMAIN_ENTRIES = 1_000;
export const MAX_RATE_LIMIT_CALLS = 1_000_000;

export function applyPatch(current: Policy, patch: PolicyPatch): Policy {
  const pick = <K extends keyof PolicyPatch & keyof Policy>(key: K, removed: Policy[K]) =>
    patch[key] === undefined ? current[key] : patch[key] === null ? removed : patch[key];
  return validatePolicy({
    dailyBudgetUnits: pick("dailyBudgetUnits", null) as bigint | null,
    perCallLimitUnits: pick("perCallLimitUnits", null) as bigint | null,
    allowedDomains: pick("allowedDomains", null) as readonly string[] | null,
    blockedDomains: pick("blockedDomains", []) as readonly string[],
    rateLimit: pick("rateLimit", null) as RateLimit | null,
    protocolPreference: pick("protocolPreference", "auto") as ProtocolPreference,
    approval: pick("approval", null) as ApprovalPolicy | null,
    endpointBudgets: pick("endpointBudgets", []) as readonly EndpointBudget[],
  });
}

/**
 * Checks every field and returns the normalized policy (domains lower-cased, deduplicated). The
 * result has an `approval` key only when the policy holds payments, an `endpointBudgets` key only
 * when it has one.
 */
export function validatePolicy(policy: Policy): Policy {
  const approval = policy.approval == null ? null : validateApproval(policy.approval);
  const endpointBudgets = validEndpointBudgets(policy.endpointBudgets ?? []);
  return {
    dailyBudgetUnits: validLimit(policy.dailyBudgetUnits, "dailyBudget"),
    perCallLimitUnits: validLimit(policy.perCallLimitUnits, "perCallLimit"),
    allowedDomains: policy.allowedDomains === null ? null : validDomains(policy.allowedDomains, "allowedDomains"),
    blockedDomains: validDomains(policy.blockedDomains, "blockedDomains"),
    rateLimit: policy.rateLimit === null ? null : validRateLimit(policy.rateLimit),
    protocolPreference: validPreference(policy.protocolPreference),
    ...(approval === null ? {} : { approval }),
    ...(endpointBudgets.length === 0 ? {} : { endpointBudgets }),
  };
}

function validLimit(units: bigint | null, field: string): bigint | null {
  if (units === null) return null;
  if (typeof units !== "bigint") throw new InvalidPolicyError("invalid_limit", field, "must be an amount in base units");
  if (units <= 0n) throw new InvalidPolicyError("invalid_limit", field, "must be positive (null removes the limit)");
  if (units > MAX_AMOUNT_UNITS) throw new InvalidPolicyError("invalid_limit", field, "is too large");
  return units;
}

/**
 * Each rule normalized; two rules with the same (normalized) match overlap and are refused, as is
 * a rule that limits nothing.
 */
function validEndpointBudgets(budgets: readonly EndpointBudget[]): readonly EndpointBudget[] {
  if (!Array.isArray(budgets)) throw new InvalidPolicyError("invalid_endpoint_budget", "endpointBudgets", "must be a list");
  if (budgets.length > MAX_ENDPOINT_BUDGETS) {
    throw new InvalidPolicyError("invalid_endpoint_budget", "endpointBudgets", `more than ${MAX_ENDPOINT_BUDGETS} rules`);
  }
  const seen = new Map<string, number>();
  return budgets.map((budget, index) => {
    const field = `endpointBudgets[${index}]`;
    const match = normalizeEndpointMatch(budget.match, `${field}.match`);
    const earlier = seen.get(match);
    if (earlier !== undefined) {
      throw new InvalidPolicyError(
        "invalid_endpoint_budget",
        `${field}.match`,
        `${match} overlaps endpointBudgets[${earlier}] (same match)`,
      );
    }
    seen.set(match, index);
    const rule: EndpointBudget = {
      match,
      dailyBudgetUnits: validLimit(budget.dailyBudgetUnits ?? null, `${field}.dailyBudget`),
      perCallLimitUnits: validLimit(budget.perCallLimitUnits ?? null, `${field}.perCallLimit`),
      rateLimit: budget.rateLimit == null ? null : validRateLimit(budget.rateLimit, `${field}.rateLimit`),
    };
    if (rule.dailyBudgetUnits === null && rule.perCallLimitUnits === null && rule.rateLimit === null) {
      throw new InvalidPolicyError("invalid_endpoint_budget", field, "limits nothing: give dailyBudget, perCallLimit or rateLimit");
    }
    return rule;
  });
}

function validDomains(entries: readonly string[], field: string): readonly string[] {
  if (!Array.isArray(entries)) throw new InvalidPolicyError("invalid_domain", field, "must be a list of domains");
  if (entries.length > MAX_DOMAIN_ENTRIES) {
    throw new InvalidPolicyError("invalid_domain", field, `more than ${MAX_DOMAIN_ENTRIES} entries`);
  }
  return [...new Set(entries.map((entry) => normalizeDomainEntry(entry, field)))];
}

function validRateLimit(rateLimit: { readonly calls: number; readonly window: string }, field = "rateLimit"): RateLimit {
  if (!isRecord(rateLimit)) throw new InvalidPolicyError("invalid_rate_limit", field, "must be { calls: number, window: string }");
  const { calls, window } = rateLimit;
  if (!Number.isSafeInteger(calls) || calls < 1 || calls > MAX_RATE_LIMIT_CALLS) {
    throw new InvalidPolicyError("invalid_rate_limit", `${field}.calls`, `must be an integer from 1 to ${MAX_RATE_LIMIT_CALLS}`);
  }
  if (!isRateWindow(window)) {
    throw new InvalidPolicyError("invalid_rate_limit", `${field}.window`, "must be one of 1m, 5m, 15m, 1h, 24h");
  }
  return { calls, window };
}

function validPreference(value: string): ProtocolPreference {
  if (!(PROTOCOL_PREFERENCES as readonly string[]).includes(value)) {
    throw new InvalidPolicyError("invalid_protocol_preference", "protocolPreference", "must be auto, x402 or mpp");
  }
  return value as ProtocolPreference;
}

/** The policy's writable fields, as PUT /v1/policies/{agentId} and the SDKs name them. */
export const POLICY_FIELDS = [
  "dailyBudget",
  "perCallLimit",
  "allowedDomains",
  "blockedDomains",
  "rateLimit",
  "protocolPreference",
  "approval",
  "endpointBudgets",
] as const;

/**
 * Parses the wire body of `PUT /v1/policies/{agentId}` / `policies.set` (spec 2.1 shapes, money as
 * `{ usdc: number }` or a decimal string) into a patch. Unknown fields and the read-only
 * `usedToday` are rejected.
 */
export function parsePolicyPatch(body: unknown): PolicyPatch {
  if (!isRecord(body)) throw new InvalidPolicyError("invalid_policy_field", "body", "must be a JSON object");
  const known = new Set<string>(POLICY_FIELDS);
  for (const key of Object.keys(body)) {
    if (!known.has(key)) throw new InvalidPolicyError("invalid_policy_field", key, "is not a writable policy field");
  }
  const patch: { -readonly [K in keyof PolicyPatch]: PolicyPatch[K] } = {};
  if ("dailyBudget" in body) patch.dailyBudgetUnits = money(body.dailyBudget, "dailyBudget");
  if ("perCallLimit" in body) patch.perCallLimitUnits = money(body.perCallLimit, "perCallLimit");
  if ("allowedDomains" in body) patch.allowedDomains = stringList(body.allowedDomains, "allowedDomains");
  if ("blockedDomains" in body) patch.blockedDomains = stringList(body.blockedDomains, "blockedDomains");
  if ("rateLimit" in body) patch.rateLimit = rateLimitField(body.rateLimit);
  if ("protocolPreference" in body) {
    const value = body.protocolPreference;
    if (value !== null && typeof value !== "string") {
      throw new InvalidPolicyError("invalid_protocol_preference", "protocolPreference", "must be auto, x402 or mpp");
    }
    patch.protocolPreference = value;
  }
  if ("approval" in body) patch.approval = parseApprovalInput(body.approval);
  if ("endpointBudgets" in body) patch.endpointBudgets = parseEndpointBudgets(body.endpointBudgets);
  return patch;
}

/** `[{ match, dailyBudget?, perCallLimit?, rateLimit? }]` on the wire; validated by `validatePolicy`. */
function parseEndpointBudgets(value: unknown): readonly EndpointBudget[] | null {
  if (value === null) return null;
  if (!Array.isArray(value)) throw new InvalidPolicyError("invalid_endpoint_budget", "endpointBudgets", "must be a list or null");
  const known = new Set(["match", "dailyBudget", "perCallLimit", "rateLimit"]);
  return value.map((entry, index): EndpointBudget => {
    const field = `endpointBudgets[${index}]`;
    if (!isRecord(entry)) throw new InvalidPolicyError("invalid_endpoint_budget", field, "must be an object");
    for (const key of Object.keys(entry)) {
      if (!known.has(key))
        throw new InvalidPolicyError("invalid_endpoint_budget", `${field}.${key}`, "is not a field of an endpoint budget");
    }
    if (typeof entry.match !== "string")
      throw new InvalidPolicyError("invalid_endpoint_budget", `${field}.match`, "must be a host or host/path");
    return {
      match: entry.match,
      dailyBudgetUnits: entry.dailyBudget === undefined ? null : money(entry.dailyBudget, `${field}.dailyBudget`),
      perCallLimitUnits: entry.perCallLimit === undefined ? null : money(entry.perCallLimit, `${field}.perCallLimit`),
      rateLimit: entry.rateLimit === undefined ? null : rateLimitField(entry.rateLimit, `${field}.rateLimit`),
    } as EndpointBudget;
  });
}

function money(value: unknown, field: string): bigint | null {
  if (value === null) return null;
  const usdc = isRecord(value) ? value.usdc : undefined;
  if (typeof usdc !== "number" && typeof usdc !== "string") {
    throw new InvalidPolicyError("invalid_limit", field, "must be { usdc: number } or null");
  }
  try {
    return parseAmountInput(usdc);
  } catch (error) {
    if (isPolicyInputError(error)) throw new InvalidPolicyError("invalid_limit", field, error.message);
    throw error;
  }
}

function stringList(value: unknown, field: string): readonly string[] | null {
  if (value === null) return null;
  if (!Array.isArray(value) || !value.every((entry) => typeof entry === "string")) {
    throw new InvalidPolicyError("invalid_domain", field, "must be a list of strings or null");
  }
  return value as string[];
}

function rateLimitField(value: unknown, field = "rateLimit"): PolicyPatch["rateLimit"] {
  if (value === null) return null;
  if (!isRecord(value) || typeof value.calls !== "number" || typeof value.window !== "string") {
    throw new InvalidPolicyError("invalid_rate_limit", field, "must be { calls: number, window: string } or null");
  }
  return { calls: value.calls, window: value.window };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
