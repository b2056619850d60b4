/**
 * The clients' copies of the spec 2.1 domain matcher (sdk/src/domain-rules.ts and the Python
 * client's domain_rules.py) decide every host as the gateway's (api/shared/policy/domains.ts):
 * the same second-level suffix list, and the same answer on a table of entries and hosts.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { entryMatches as gatewayMatches } from "../../api/shared/policy/domains.js";
import { domainRefusal, entryMatches, MULTI_LABEL_SUFFIXES } from "../../sdk/src/domain-rules.js";

function suffixesIn(path: string, start: string): string[] {
  const text = readFileSync(new URL(`../../${path}`, import.meta.url), "utf8");
  const from = text.indexOf(start);
  const block = text.slice(from, text.indexOf(")", from));
  return [...block.matchAll(/"([a-z]+\.[a-z]+)"/g)].map((match) => match[1]!).sort();
}

describe("the clients' domain matcher", () => {
  it("has the gateway's suffix list, in TypeScript and in Python", () => {
    const gateway = suffixesIn("api/shared/policy/domains.ts", "MULTI_LABEL_SUFFIXES");
    expect(gateway.length).toBeGreaterThan(30);
    expect([...MULTI_LABEL_SUFFIXES].sort()).toEqual(gateway);
    expect(suffixesIn("python/src/agent_payment_gateway/domain_rules.py", "MULTI_LABEL_SUFFIXES")).toEqual(gateway);
  });

  const entries = ["example.com", "api.example.com", "example.co.uk", "api.example.co.uk", "127.0.0.1", "localhost", "a.b.c.d"];
  const hosts = [
    "example.com",
    "api.example.com",
    "x.api.example.com",
    "badexample.com",
    "example.com.evil.io",
    "example.co.uk",
    "shop.example.co.uk",
    "co.uk",
    "127.0.0.1",
    "10.127.0.0.1",
    "localhost",
    "a.b.c.d",
    "x.a.b.c.d",
  ];
  it.each(entries.flatMap((entry) => hosts.map((host) => [entry, host] as const)))("%s vs %s as the gateway decides", (entry, host) => {
    expect(entryMatches(entry, host)).toBe(gatewayMatches(entry, host));
  });

  it("blockedDomains wins over allowedDomains; null allows any, [] none", () => {
    expect(domainRefusal({ allowedDomains: ["example.com"], blockedDomains: ["api.example.com"] }, "api.example.com")?.reasonCode).toBe(
      "domain_blocked",
    );
    expect(domainRefusal({ allowedDomains: ["example.com"], blockedDomains: [] }, "api.example.com")).toBeNull();
    expect(domainRefusal({ allowedDomains: null, blockedDomains: [] }, "anything.io")).toBeNull();
    expect(domainRefusal({ allowedDomains: [], blockedDomains: [] }, "anything.io")?.reasonCode).toBe("domain_not_allowed");
  });
});
