/**
 * The spec 2.1 domain rules, checked by `pay` before the first request to an endpoint leaves the
 * client, so a refused host receives nothing, not even the unpaid first request. The rules: an
 * entry with a full subdomain matches only that host; a bare registrable domain matches itself
 * and its subdomains; `blockedDomains` wins over `allowedDomains`.
 *
 * The gateway's matcher (api/shared/policy/domains.ts) cannot be imported by the SDK, so this is
 * its copy, refusal texts included (kept equal by test/sdk/domain-rules.test.ts). The gateway
 * has the last word: a host refused here is put to it (`check`), and it records the refusal.
 * The policy is read from the gateway and kept briefly, shared by a client and its `withParent`
 * copies; `policies.set` / `clear` through the same client forget it at once.
 */
import { DomainNotAllowedError, ServiceError } from "./errors.js";
import type { Transport } from "./transport.js";

/** Second-level public suffixes under which a registrable domain has three labels. */
export const MULTI_LABEL_SUFFIXES: ReadonlySet<string> = new Set([
  "co.uk",
  "org.uk",
  "ac.uk",
  "gov.uk",
  "me.uk",
  "ltd.uk",
  "plc.uk",
  "net.uk",
  "com.au",
  "net.au",
  "org.au",
  "edu.au",
  "gov.au",
  "co.nz",
  "org.nz",
  "net.nz",
  "co.jp",
  "ne.jp",
  "or.jp",
  "ac.jp",
  "com.br",
  "net.br",
  "org.br",
  "com.cn",
  "net.cn",
  "org.cn",
  "co.in",
  "net.in",
  "org.in",
  "co.za",
  "org.za",
  "com.mx",
  "com.ar",
  "com.tr",
  "com.sg",
  "com.hk",
  "com.tw",
  "co.kr",
  "or.kr",
  "co.il",
  "co.id",
]);

const IPV4 = /^\d{1,3}(?:\.\d{1,3}){3}$/;

/** How long a fetched policy is trusted before it is read again. */
export const POLICY_CACHE_MS = 2_000;

/** The host `pay` sends to: the URL's host name (already lower-case punycode) without a trailing dot. */
export function hostOf(url: URL): string {
  return url.hostname.endsWith(".") ? url.hostname.slice(0, -1) : url.hostname;
}

function normalizeEntry(entry: string): string {
  const lower = entry.toLowerCase();
  const trimmed = lower.endsWith(".") ? lower.slice(0, -1) : lower;
  try {
    return new URL(`http://${trimmed}/`).hostname;
  } catch {
    return trimmed;
  }
}

function isRegistrable(entry: string): boolean {
  if (IPV4.test(entry)) return false;
  const labels = entry.split(".");
  if (labels.length === 2) return true;
  return labels.length === 3 && MULTI_LABEL_SUFFIXES.has(labels.slice(1).join("."));
}

export function entryMatches(entry: string, host: string): boolean {
  const normalized = normalizeEntry(entry);
  if (host === normalized) return true;
  return isRegistrable(normalized) && host.endsWith(`.${normalized}`);
}

/** The first entry of `entries` matching `host`, or null. */
export function findMatch(entries: readonly string[], host: string): string | null {
  return entries.find((entry) => entryMatches(entry, host)) ?? null;
}

export interface DomainRules {
  /** null: any domain; an empty list allows none. */
  allowedDomains: readonly string[] | null;
  blockedDomains: readonly string[];
}

/** The refusal for `host` under `rules`, or null when it may be called. */
export function domainRefusal(rules: DomainRules, host: string): DomainNotAllowedError | null {
  const blocked = findMatch(rules.blockedDomains, host);
  if (blocked !== null) {
    const reason = `domain_blocked: ${host} is blocked by the policy (blockedDomains entry ${blocked})`;
    return new DomainNotAllowedError(reason, host, { code: "POLICY_VIOLATION", reasonCode: "domain_blocked" });
  }
  if (rules.allowedDomains !== null && findMatch(rules.allowedDomains, host) === null) {
    const reason = `domain_not_allowed: ${host} is not on the policy's allowedDomains`;
    return new DomainNotAllowedError(reason, host, { code: "POLICY_VIOLATION", reasonCode: "domain_not_allowed" });
  }
  return null;
}

function rulesOf(policy: unknown): DomainRules {
  const record = typeof policy === "object" && policy !== null ? (policy as Record<string, unknown>) : {};
  const strings = (value: unknown): string[] | null =>
    Array.isArray(value) ? value.filter((entry): entry is string => typeof entry === "string") : null;
  return { allowedDomains: strings(record.allowedDomains), blockedDomains: strings(record.blockedDomains) ?? [] };
}

/** The agents' domain rules as last read from the gateway, per agent, for `POLICY_CACHE_MS`. */
export class DomainRuleCache {
  readonly #entries = new Map<string, { at: number; rules: Promise<DomainRules> }>();

  constructor(
    private readonly transport: Transport,
    private readonly now: () => number = Date.now,
  ) {}

  rules(agentId: string, signal?: AbortSignal): Promise<DomainRules> {
    const cached = this.#entries.get(agentId);
    if (cached !== undefined && this.now() - cached.at < POLICY_CACHE_MS) return cached.rules;
    const rules = this.transport
      .request<unknown>("GET", `/v1/policies/${encodeURIComponent(agentId)}`, signal === undefined ? {} : { signal })
      .then(rulesOf);
    const entry = { at: this.now(), rules };
    this.#entries.set(agentId, entry);
    // A failed read is not kept: the next call asks again.
    rules.catch(() => {
      if (this.#entries.get(agentId) === entry) this.#entries.delete(agentId);
    });
    return rules;
  }

  forget(agentId: string): void {
    this.#entries.delete(agentId);
  }

  /**
   * Throws `DomainNotAllowedError` when `url`'s host may not be called by `agentId`. A local
   * refusal is put to the gateway (`POST /v1/agents/{agentId}/payments/domain-check`), which
   * decides on the policy as it stands: it records the refusal (a `rejected` transaction and
   * `policy.violation`) and answers the problem this throws, or, when the policy changed since it
   * was read, allows the host, and the payment goes on. Nothing is sent to the host either way
   * before this returns.
   */
  async check(agentId: string, url: URL, signal?: AbortSignal): Promise<void> {
    const local = domainRefusal(await this.rules(agentId, signal), hostOf(url));
    if (local === null) return;
    this.forget(agentId);
    try {
      await this.transport.request<unknown>("POST", `/v1/agents/${encodeURIComponent(agentId)}/payments/domain-check`, {
        body: { endpoint: url.href },
        ...(signal === undefined ? {} : { signal }),
      });
    } catch (error) {
      // The gateway's answer (its DomainNotAllowedError, or a 4xx such as an archived agent) is
      // thrown as it is; without one (unreachable, 5xx) the local refusal stands.
      if (error instanceof ServiceError && error.status !== undefined && error.status < 500) throw error;
      throw local;
    }
  }
}
