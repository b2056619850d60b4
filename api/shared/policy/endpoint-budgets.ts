/**
 * Budgets per endpoint (docs/policy.md "Endpoint budgets"): limits of one host, or one host and path
 * prefix (`api.example.com/v1/search`), that apply on top of the agent's own limits. The host part
 * follows the domain rules of spec 2.1 (./domains.ts: a bare registrable domain covers its
 * subdomains); a path prefix matches at a segment boundary (`/v1/search` covers `/v1/search` and
 * `/v1/search/deep`, not `/v1/searches`). Every rule that matches a payment applies.
 *
 * Pure: the engine gets each rule's usage from its caller (`EndpointUsage`, keyed by `match`), so
 * the gateway reads it from the reservation ledger and a backtest can feed it from history.
 */
import { endpointHost, entryMatches, normalizeDomainEntry } from "./domains.js";
import { InvalidPolicyError, isPolicyInputError } from "./errors.js";
import type { RateLimit } from "./policy.js";

export interface EndpointBudget {
  /** Normalized: the host lower-cased in ASCII, then the path prefix (percent-encoded) if any. */
  readonly match: string;
  /** Spend through this rule's endpoints in the agent's open budget period; null: no limit. */
  readonly dailyBudgetUnits: bigint | null;
  readonly perCallLimitUnits: bigint | null;
  readonly rateLimit: RateLimit | null;
}

/** What has been spent and called through one rule's endpoints (the gateway reads it under the agent's lock). */
export interface EndpointUsage {
  /** Spend in the agent's open budget period (the engine ignores it when that period has reset). */
  readonly usedUnits: bigint;
  /** Calls in the rule's rate window ending now. */
  readonly rateCalls: number;
}

export const MAX_ENDPOINT_BUDGETS = 100;
const MAX_MATCH_LENGTH = 500;
const PATH = /^(?:\/[A-Za-z0-9._~!$&'()*+,;=:@%-]+)+$/;

/**
 * Normalizes one `match` or throws: a host (spec 2.1 domain entry rules) and an optional path
 * prefix; no scheme, port, query, fragment, wildcard, empty, `.` or `..` segment. A trailing `/` is
 * dropped (`api.example.com/` is the host alone).
 */
export function normalizeEndpointMatch(match: string, field: string): string {
  const fail = (detail: string): never => {
    throw new InvalidPolicyError("invalid_endpoint_budget", field, `${JSON.stringify(match)} ${detail}`);
  };
  if (typeof match !== "string" || match.length === 0) return fail("must be a host or host/path");
  if (match.length > MAX_MATCH_LENGTH) return fail(`is longer than ${MAX_MATCH_LENGTH} characters`);
  const slash = match.indexOf("/");
  const hostPart = slash === -1 ? match : match.slice(0, slash);
  let host: string;
  try {
    host = normalizeDomainEntry(hostPart, field);
  } catch (error) {
    if (isPolicyInputError(error)) return fail("is not a host or host/path (no scheme, port or wildcard)");
    throw error;
  }
  const rawPath = slash === -1 ? "" : match.slice(slash).replace(/\/+$/, "");
  if (rawPath === "") return host;
  if (!PATH.test(rawPath) || rawPath.split("/").some((segment) => segment === "." || segment === "..")) {
    return fail("has a path that is not a plain path prefix (no query, fragment, empty, . or .. segment)");
  }
  return `${host}${new URL(`https://h${rawPath}`).pathname}`;
}

/** Whether the normalized `match` covers the payment to `host` (normalized) at `path` (URL-encoded). */
export function endpointRuleMatches(match: string, host: string, path: string): boolean {
  const slash = match.indexOf("/");
  const entry = slash === -1 ? match : match.slice(0, slash);
  if (!entryMatches(entry, host)) return false;
  if (slash === -1) return true;
  const prefix = match.slice(slash);
  return path === prefix || path.startsWith(`${prefix}/`);
}

/** The host and path an endpoint pays (a URL, or host and path without scheme). */
export function endpointParts(endpoint: string): { readonly host: string; readonly path: string } {
  const host = endpointHost(endpoint);
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(endpoint) ? endpoint : `https://${endpoint}`;
  return { host, path: new URL(withScheme).pathname };
}

/** The rules of `budgets` that cover `endpoint`, in the policy's order. */
export function matchingEndpointBudgets(budgets: readonly EndpointBudget[] | undefined, endpoint: string): readonly EndpointBudget[] {
  if (budgets === undefined || budgets.length === 0) return [];
  const { host, path } = endpointParts(endpoint);
  return budgets.filter((budget) => endpointRuleMatches(budget.match, host, path));
}
