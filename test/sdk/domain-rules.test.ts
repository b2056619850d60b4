/**
 * The clients' copies of the spec 2.1 domain matcher (sdk/src/domain-rules.ts and the Python
 * client's domain_rules.py) decide every host as the gateway's (api/shared/policy/domains.ts):
 * the same second-level suffix list, and the same answer on a table of entries and hosts. And what
 * the TS client does after a local refusal, whatever the gateway answers (a fetch function stands in
 * for the gateway there: only what leaves the client and what it throws are under test; the real
 * gateway's answers are test/gateway/domain-check.test.ts and test/sdk/client-input.test.ts).
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { entryMatches as gatewayMatches } from "../../api/shared/policy/domains.js";
import { DomainRuleCache, domainRefusal, entryMatches, MULTI_LABEL_SUFFIXES } from "../../sdk/src/domain-rules.js";
import { DomainNotAllowedError, ServiceError } from "../../sdk/src/errors.js";
import { Transport } from "../../sdk/src/transport.js";

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

describe("DomainRuleCache.check after a local refusal", () => {
  const POLICY = { agentId: "a1", allowedDomains: null, blockedDomains: ["blocked.example"] };
  type Answer = { status: number; body?: unknown } | Error;

  /** A stand-in gateway: the policy read, and `check` answering as given; records every request. */
  function gateway(check: Answer) {
    const sent: Array<{ method: string; url: string; body: unknown }> = [];
    const transport = new Transport({
      apiKey: "k",
      baseUrl: "http://gateway.test",
      maxRetries: 0,
      fetch: async (input, init) => {
        const url = String(input);
        sent.push({ method: init?.method ?? "GET", url, body: init?.body === undefined ? undefined : JSON.parse(String(init.body)) });
        const answer: Answer = url.endsWith("/payments/domain-check") ? check : { status: 200, body: POLICY };
        if (answer instanceof Error) throw answer;
        const type = answer.status >= 400 ? "application/problem+json" : "application/json";
        return new Response(JSON.stringify(answer.body ?? {}), { status: answer.status, headers: { "content-type": type } });
      },
    });
    return { sent, transport };
  }

  it("an allowed host never asks the gateway", async () => {
    const { sent, transport } = gateway(new Error("must not be called"));
    await new DomainRuleCache(transport).check("a1", new URL("https://api.example.com/x"));
    expect(sent.map((r) => r.url)).toEqual(["http://gateway.test/v1/policies/a1"]);
  });

  it("the gateway's refusal is thrown as it answered it (recorded there)", async () => {
    const problem = {
      code: "POLICY_VIOLATION",
      errorClass: "DomainNotAllowedError",
      reasonCode: "domain_blocked",
      reason: "domain_blocked: api.blocked.example is blocked by the policy (blockedDomains entry blocked.example)",
      detail: "domain_blocked: api.blocked.example is blocked by the policy (blockedDomains entry blocked.example)",
      domain: "api.blocked.example",
      requested: null,
      rejectionId: "7",
    };
    const { sent, transport } = gateway({ status: 403, body: problem });
    const error = await new DomainRuleCache(transport).check("a1", new URL("https://api.blocked.example/x?q=1")).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DomainNotAllowedError);
    expect(error).toMatchObject({ status: 403, reasonCode: "domain_blocked", domain: "api.blocked.example", detail: { rejectionId: "7" } });
    expect(sent[1]).toEqual({
      method: "POST",
      url: "http://gateway.test/v1/agents/a1/payments/domain-check",
      body: { endpoint: "https://api.blocked.example/x?q=1" },
    });
  });

  it("the gateway allows (the policy changed since the cached read): check returns, and the next read is fresh", async () => {
    let now = 0;
    const { sent, transport } = gateway({ status: 200, body: { agentId: "a1", endpoint: "https://api.blocked.example/x", allowed: true } });
    const cache = new DomainRuleCache(transport, () => now);
    await cache.check("a1", new URL("https://api.blocked.example/x"));
    now += 10;
    await cache.check("a1", new URL("https://api.example.com/y"));
    expect(sent.map((r) => `${r.method} ${r.url.slice("http://gateway.test".length)}`)).toEqual([
      "GET /v1/policies/a1",
      "POST /v1/agents/a1/payments/domain-check",
      "GET /v1/policies/a1",
    ]);
  });

  it("another 4xx (an archived agent) is thrown as the gateway's", async () => {
    const { transport } = gateway({ status: 409, body: { code: "AGENT_ARCHIVED", detail: "agent a1 is archived" } });
    const error = await new DomainRuleCache(transport).check("a1", new URL("https://blocked.example/")).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ServiceError);
    expect(error).not.toBeInstanceOf(DomainNotAllowedError);
    expect(error).toMatchObject({ status: 409, code: "AGENT_ARCHIVED" });
  });

  it.each<[string, Answer]>([
    ["a 503", { status: 503, body: { code: "SERVICE_UNAVAILABLE" } }],
    ["a 500", { status: 500, body: { code: "INTERNAL" } }],
    ["no answer", new TypeError("fetch failed")],
  ])("%s from the gateway: the local refusal stands", async (_, answer) => {
    const { transport } = gateway(answer);
    const error = await new DomainRuleCache(transport).check("a1", new URL("https://blocked.example/")).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DomainNotAllowedError);
    expect(error).toMatchObject({
      reasonCode: "domain_blocked",
      reason: "domain_blocked: blocked.example is blocked by the policy (blockedDomains entry blocked.example)",
      domain: "blocked.example",
    });
    expect((error as DomainNotAllowedError).status).toBeUndefined();
  });
});
