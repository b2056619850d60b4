/**
 * Policy versions (docs/policy.md "Versions"): the document a version stores, the whole policy as
 * the engine sees it, in a stable JSON form (money in base units as decimal strings, keys in a
 * fixed order), and the version as the APIs show it. The store writes one version per change
 * (./store.ts `putPolicy`, `clearPolicy`); each decision records the version it was made under.
 */
import type { EndpointBudget } from "./endpoint-budgets.js";
import type { Policy } from "./policy.js";

/** JSON of one policy version: what `policies.history` answers and the hash covers. */
export interface PolicyDocument {
  readonly dailyBudgetUnits: string | null;
  readonly perCallLimitUnits: string | null;
  readonly allowedDomains: readonly string[] | null;
  readonly blockedDomains: readonly string[];
  readonly rateLimit: { readonly calls: number; readonly window: string } | null;
  readonly protocolPreference: string;
  readonly approval: {
    readonly aboveUnits: string | null;
    readonly domains: readonly string[];
    readonly firstPaymentToDomain: boolean;
    readonly timeoutMs: number;
    readonly onTimeout: string;
  } | null;
  readonly endpointBudgets: readonly {
    readonly match: string;
    readonly dailyBudgetUnits: string | null;
    readonly perCallLimitUnits: string | null;
    readonly rateLimit: { readonly calls: number; readonly window: string } | null;
  }[];
}

export interface PolicyVersion {
  readonly agentId: string;
  /** 1, 2, … per agent; 0 is the empty policy of an agent that never had one (never stored). */
  readonly version: number;
  readonly createdAt: Date;
  /** `key:<api key id>`, `admin` or `system`. */
  readonly createdBy: string;
  readonly policy: PolicyDocument;
  /** SHA-256 (hex) of the stored document. */
  readonly hash: string;
}

const units = (value: bigint | null): string | null => (value === null ? null : value.toString());

export function policyDocument(policy: Policy): PolicyDocument {
  const approval = policy.approval ?? null;
  return {
    dailyBudgetUnits: units(policy.dailyBudgetUnits),
    perCallLimitUnits: units(policy.perCallLimitUnits),
    allowedDomains: policy.allowedDomains,
    blockedDomains: policy.blockedDomains,
    rateLimit: policy.rateLimit === null ? null : { calls: policy.rateLimit.calls, window: policy.rateLimit.window },
    protocolPreference: policy.protocolPreference,
    approval:
      approval === null
        ? null
        : {
            aboveUnits: units(approval.aboveUnits),
            domains: approval.domains,
            firstPaymentToDomain: approval.firstPaymentToDomain,
            timeoutMs: approval.timeoutMs,
            onTimeout: approval.onTimeout,
          },
    endpointBudgets: (policy.endpointBudgets ?? []).map(endpointBudgetDocument),
  };
}

export function endpointBudgetDocument(rule: EndpointBudget): PolicyDocument["endpointBudgets"][number] {
  return {
    match: rule.match,
    dailyBudgetUnits: units(rule.dailyBudgetUnits),
    perCallLimitUnits: units(rule.perCallLimitUnits),
    rateLimit: rule.rateLimit === null ? null : { calls: rule.rateLimit.calls, window: rule.rateLimit.window },
  };
}

/** The stored jsonb form back into rules. */
export function endpointBudgetsFromDocument(rules: PolicyDocument["endpointBudgets"]): readonly EndpointBudget[] {
  return rules.map((rule) => ({
    match: rule.match,
    dailyBudgetUnits: rule.dailyBudgetUnits === null ? null : BigInt(rule.dailyBudgetUnits),
    perCallLimitUnits: rule.perCallLimitUnits === null ? null : BigInt(rule.perCallLimitUnits),
    rateLimit: rule.rateLimit === null ? null : (rule.rateLimit as EndpointBudget["rateLimit"]),
  }));
}
