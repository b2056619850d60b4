/**
 * Domain rules of spec 2.1:
 *
 * 1. an entry with a full subdomain (`api.example.com`) matches only that exact host;
 * 2. an entry that is a bare registrable domain (`example.com`) matches it and all its subdomains;
 * 3. a host matched by `blockedDomains` is rejected even when `allowedDomains` also matches it.
 *
 * "Registrable" is decided without the full Public Suffix List (no dependency for it): two labels,
 * or three when the last two are one of the common second-level suffixes below (`example.co.uk`).
 * Hosts and entries are compared in their ASCII (punycode) form, lower-cased, without a trailing
 * dot or port, so `API.Example.COM.:443` is the host `api.example.com`.
 */
import { domainToASCII } from "node:url";
import { InvalidEndpointError, InvalidPolicyError } from "./errors.js";

/** Second-level public suffixes under which a registrable domain has three labels. */
const MULTI_LABEL_SUFFIXES: ReadonlySet<string> = new Set([
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

const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
const IPV4 = /^\d{1,3}(?:\.\d{1,3}){3}$/;
const MAX_HOST_LENGTH = 253;

export type EntryKind = "registrable" | "exact";

/**
 * Normalizes one policy entry (lower-case, punycode, no trailing dot) or throws. Schemes, ports,
 * paths and wildcards are rejected: `*.example.com` is written `example.com`.
 */
export function normalizeDomainEntry(entry: string, field: string): string {
  const fail = (detail: string): never => {
    throw new InvalidPolicyError("invalid_domain", field, `${JSON.stringify(entry)} ${detail}`);
  };
  if (typeof entry !== "string") return fail("is not a string");
  const trimmed = entry.endsWith(".") ? entry.slice(0, -1) : entry;
  if (/[^\p{L}\p{N}.-]/u.test(trimmed)) return fail("is not a host name (no scheme, port, path or wildcard)");
  const ascii = domainToASCII(trimmed.toLowerCase());
  if (ascii === "" || !isHostName(ascii)) return fail("is not a valid host name");
  if (MULTI_LABEL_SUFFIXES.has(ascii)) return fail("is a public suffix, not a domain");
  return ascii;
}

export function classifyEntry(domain: string): EntryKind {
  if (IPV4.test(domain)) return "exact";
  const labels = domain.split(".");
  if (labels.length === 2) return "registrable";
  if (labels.length === 3 && MULTI_LABEL_SUFFIXES.has(labels.slice(1).join("."))) return "registrable";
  return "exact";
}

export function entryMatches(entry: string, host: string): boolean {
  if (host === entry) return true;
  return classifyEntry(entry) === "registrable" && host.endsWith(`.${entry}`);
}

/** The first entry of `entries` that matches `host`, if any. */
export function findMatch(entries: readonly string[], host: string): string | null {
  return entries.find((entry) => entryMatches(entry, host)) ?? null;
}

/**
 * The host an endpoint pays: a URL (`https://api.example.com/v1/x`) or, as the spec prints
 * endpoints, a host and path without scheme (`api.example.com/v1/x`).
 */
export function endpointHost(endpoint: string): string {
  if (typeof endpoint !== "string" || endpoint.trim() === "") {
    throw new InvalidEndpointError(String(endpoint), "empty");
  }
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(endpoint) ? endpoint : `https://${endpoint}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw new InvalidEndpointError(endpoint, "not a URL or host");
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new InvalidEndpointError(endpoint, `scheme ${url.protocol} is not http or https`);
  }
  const host = url.hostname.endsWith(".") ? url.hostname.slice(0, -1) : url.hostname;
  if (host === "") throw new InvalidEndpointError(endpoint, "no host");
  return host;
}

function isHostName(host: string): boolean {
  if (host.length > MAX_HOST_LENGTH) return false;
  return host.split(".").every((label) => LABEL.test(label));
}
