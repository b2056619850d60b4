/**
 * The `policies` resource (spec 4.1, 4.7): the agent's spend policy (`/v1/policies/{agentId}`),
 * and `backtest`: a candidate policy replayed over the agent's recorded payments of a window.
 * Amounts and the rate-limit count are checked here, before the request, so a caller's mistake is
 * a `TypeError` naming the field rather than a round trip.
 */
import { MAX_RATE_LIMIT_CALLS, type RateWindow } from "../rate-limits.js";
import { moneyToUnits, type Usdc } from "../money.js";
import type { ProtocolPreference } from "../pay/scope.js";
import type { Transport } from "../transport.js";

/** The rate-limit windows the gateway knows (`rate-limits.ts`), under the name the client exports. */
export type RateLimitWindow = RateWindow;

/** The policy's `approval` field as `policies.set` sends it (docs/policy.md "Approvals"). */
export interface ApprovalRuleFields {
  /** Hold a payment strictly above this amount. */
  above?: Usdc | null;
  /** Hold a payment to a host these entries match. */
  domains?: string[];
  /** Hold the first payment to a host the agent never paid. */
  firstPaymentToDomain?: boolean;
  /** How long a held payment waits: `"90s"`, `"15m"`, `"1h"`, `"7d"` (1s to 7d). */
  timeout: string;
  onTimeout?: "deny";
}

/** The policy's `approval` as the gateway echoes it. */
export interface ApprovalRuleView {
  above: Usdc | null;
  domains: string[];
  firstPaymentToDomain: boolean;
  timeout: string;
  onTimeout: "deny";
}

const DURATION = /^[1-9][0-9]{0,9}[smhd]$/;

/** Spec 2.1 fields for `policies.set`: omitted keep their value, `null` removes the limit. */
export interface PolicyFields {
  dailyBudget?: Usdc | null;
  perCallLimit?: Usdc | null;
  allowedDomains?: string[] | null;
  blockedDomains?: string[] | null;
  rateLimit?: { calls: number; window: RateLimitWindow } | null;
  protocolPreference?: ProtocolPreference;
  /** Payments held for a person; replaced whole, `null` removes it. */
  approval?: ApprovalRuleFields | null;
  /** Limits per host or host and path prefix, on top of the agent's own; replaced whole, `null` removes them. */
  endpointBudgets?: EndpointBudgetFields[] | null;
}

/** One `endpointBudgets` rule (docs/policy.md "Endpoint budgets"): at least one limit. */
export interface EndpointBudgetFields {
  /** A host or host and path prefix: `api.example.com/v1/search`. */
  match: string;
  dailyBudget?: Usdc | null;
  perCallLimit?: Usdc | null;
  rateLimit?: { calls: number; window: RateLimitWindow } | null;
}

/** One version of the policy (`policies.history`). */
export interface PolicyVersion {
  agentId: string;
  version: number;
  createdAt: string;
  /** `key:<api key id>`, `admin` or `system`. */
  createdBy: string;
  /** SHA-256 (hex) of the stored policy document. */
  hash: string;
  /** The whole policy, money in base units as decimal strings. */
  policy: Record<string, unknown>;
}

export interface Policy {
  agentId: string;
  dailyBudget: Usdc | null;
  perCallLimit: Usdc | null;
  allowedDomains?: string[] | null;
  blockedDomains: string[];
  rateLimit: { calls: number; window: RateLimitWindow } | null;
  protocolPreference: ProtocolPreference;
  usedToday: Usdc;
  /** Absent from a gateway that predates approvals. */
  approval?: ApprovalRuleView | null;
  /** Absent from a gateway that predates endpoint budgets. */
  endpointBudgets?: EndpointBudgetFields[];
  /** The current version (0: never set); absent from a gateway that predates versions. */
  version?: number;
  [more: string]: unknown;
}

/** What the candidate would have done to a recorded attempt (`recorded`: what happened then). */
export type BacktestOutcome = "pass" | "refuse" | "needs_approval";

/** A count and its amount: the decimal string and the same amount in base units. */
export interface BacktestCount {
  count: number;
  amount: string;
  amountUnits: string;
}

export interface BacktestPayment {
  /** `reservation:<id>`, `approval:<id>` or `rejection:<id>`. */
  id: string;
  at: string;
  endpoint: string;
  domain: string;
  amount: string;
  amountUnits: string;
  protocol: "x402" | "mpp" | null;
  recorded: BacktestOutcome;
  outcome: BacktestOutcome;
  /** The refusal's reason code or the approval rule; null for a pass. */
  rule: string | null;
  /** The engine's refusal or approval text. */
  reason: string | null;
}

/** `policies.backtest`'s answer (docs/policy.md "Backtest"). */
export interface PolicyBacktest {
  agentId: string;
  window: string;
  from: string;
  to: string;
  /** More than 200,000 attempts in the window: the oldest 200,000 were replayed. */
  truncated: boolean;
  totals: {
    attempts: number;
    passed: BacktestCount;
    refused: BacktestCount;
    needsApproval: BacktestCount;
    /** Attempts whose outcome differs from the recorded one. */
    changed: number;
    refusedByRule: Array<BacktestCount & { rule: string }>;
    refusedByDomain: Array<BacktestCount & { domain: string }>;
    needsApprovalByRule: Array<BacktestCount & { rule: string }>;
  };
  /** The decisions, oldest first, at most `limit`. */
  payments: BacktestPayment[];
}

export interface BacktestOptions {
  /** How far back from now: `"1h"` to `"90d"`, e.g. `"30d"`. */
  window: string;
  /** Decisions listed, 0 to 10,000 (default 1,000); the totals cover every attempt. */
  limit?: number;
}

const BACKTEST_WINDOW = /^[1-9][0-9]{0,4}[mhd]$/;

export class PolicyOperations {
  constructor(
    private readonly transport: Transport,
    private readonly path: string,
    /** Called after the policy changed through this client (its cached domain rules are stale). */
    private readonly changed: () => void = () => {},
  ) {}

  /** Spec 4.1: omitted fields keep their current values; `null` removes a limit. */
  async set(fields: PolicyFields): Promise<Policy> {
    if (typeof fields !== "object" || fields === null || Array.isArray(fields))
      throw new TypeError("policies.set takes an object of spec 2.1 fields");
    for (const name of ["dailyBudget", "perCallLimit"] as const) {
      const value: Usdc | null | undefined = fields[name];
      if (value !== undefined && value !== null) moneyToUnits(value, name);
    }
    // A count: a fraction, NaN or 1e21 (which JSON writes as "1e+21") would be sent as a number
    // the gateway refuses; say so here, before the request.
    const calls: unknown = fields.rateLimit?.calls;
    if (fields.rateLimit != null && (!Number.isSafeInteger(calls) || (calls as number) < 1 || (calls as number) > MAX_RATE_LIMIT_CALLS)) {
      throw new TypeError(`rateLimit.calls must be an integer from 1 to ${MAX_RATE_LIMIT_CALLS}, got ${String(calls)}`);
    }
    for (const [index, rule] of (fields.endpointBudgets ?? []).entries()) {
      if (typeof rule?.match !== "string") throw new TypeError(`endpointBudgets[${index}].match must be a host or host/path`);
      for (const name of ["dailyBudget", "perCallLimit"] as const) {
        const value: Usdc | null | undefined = rule[name];
        if (value !== undefined && value !== null) moneyToUnits(value, `endpointBudgets[${index}].${name}`);
      }
    }
    const approval = fields.approval;
    if (approval != null) {
      if (approval.above != null) moneyToUnits(approval.above, "approval.above");
      if (typeof approval.timeout !== "string" || !DURATION.test(approval.timeout)) {
        throw new TypeError(`approval.timeout must be a duration such as "15m" (1s to 7d), got ${JSON.stringify(approval.timeout)}`);
      }
    }
    try {
      return await this.transport.request<Policy>("PUT", this.path, { body: fields });
    } finally {
      this.changed();
    }
  }

  /**
   * The backtest: the agent's recorded payment attempts of `window` replayed through the gateway's
   * policy engine under `policy` (the fields `set` takes, as a whole policy: an omitted field is no
   * limit). Reads only: nothing is stored, moved or counted.
   */
  backtest(policy: PolicyFields, options: BacktestOptions): Promise<PolicyBacktest> {
    if (typeof policy !== "object" || policy === null || Array.isArray(policy)) {
      throw new TypeError("policies.backtest takes the candidate policy as an object of spec 2.1 fields");
    }
    if (typeof options?.window !== "string" || !BACKTEST_WINDOW.test(options.window)) {
      throw new TypeError(`window must be a duration such as "30d" (1h to 90d), got ${JSON.stringify(options?.window)}`);
    }
    const body = { policy, window: options.window, ...(options.limit === undefined ? {} : { limit: options.limit }) };
    return this.transport.request<PolicyBacktest>("POST", `${this.path}/backtest`, { body });
  }

  get(): Promise<Policy> {
    return this.transport.request<Policy>("GET", this.path);
  }

  /** The policy's versions, newest first; `before` pages on (the previous page's `nextBefore`). */
  history(options: { limit?: number; before?: number } = {}): Promise<{ versions: PolicyVersion[]; nextBefore: number | null }> {
    const query = new URLSearchParams();
    if (options.limit !== undefined) query.set("limit", String(options.limit));
    if (options.before !== undefined) query.set("before", String(options.before));
    const suffix = query.size === 0 ? "" : `?${query}`;
    return this.transport.request("GET", `${this.path}/history${suffix}`);
  }

  /** Removes every spend policy of the agent. */
  async clear(): Promise<void> {
    try {
      await this.transport.request<void>("DELETE", this.path);
    } finally {
      this.changed();
    }
  }
}
