/**
 * What the clients refuse or set up themselves, against the whole real system (scripts/system.ts:
 * the program on the local ledger, Postgres, the indexer, REST over loopback):
 *
 * - `pay` applies the agent's domain rules before the first request to the endpoint: a blocked or
 *   unlisted host receives nothing (a loopback server counts what arrives), and a host that is
 *   down still answers `DomainNotAllowedError`; the gateway, asked after the local refusal,
 *   records it as a rejected payment, or allows a host the policy no longer refuses;
 * - `agents.create|get|archive` and `cli agents ...`, `cli alerts delete` with their typed errors;
 * - `wallet.withdraw` answers its destination.
 */
import { randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Keypair } from "@solana/web3.js";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSystem, type System } from "../../scripts/system.js";
import { runCli } from "../../sdk/src/cli/main.js";
import { Client, DomainNotAllowedError, type FetchFunction, InvalidInputError, PaymentError, ServiceError } from "../../sdk/src/index.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";

let db: FreshDatabase;
let system: System;
let apiKey: string;
/** A loopback API that counts every request it receives (free content: no 402). */
let counted: Server;
let countedOrigin: string;
let arrivals = 0;

/** The global fetch, counting the requests that leave for anything but the gateway. */
function countingFetch(outside: { count: number }): FetchFunction {
  return (input, init) => {
    if (!String(input).startsWith(system.apiUrl)) outside.count += 1;
    return fetch(input, init);
  };
}

function client(agentId: string, outside = { count: 0 }): Client {
  return new Client({ agentId, apiKey, baseUrl: system.apiUrl, fetch: countingFetch(outside), retryBaseDelayMs: 10, maxRetries: 0 });
}

/** Any client of the account: `agents.*` act on the account, not on the client's agent. */
const account = (): Client => client("account-ops");

async function cli(argv: string[]): Promise<{ status: number; stdout: string; stderr: string }> {
  const stdout: string[] = [];
  const stderr: string[] = [];
  const status = await runCli(argv, {
    env: { APG_API_KEY: apiKey, APG_BASE_URL: system.apiUrl },
    stdout: { write: (chunk: string) => stdout.push(chunk) },
    stderr: { write: (chunk: string) => stderr.push(chunk) },
    maxRetries: 0,
  });
  return { status, stdout: stdout.join(""), stderr: stderr.join("") };
}

beforeAll(async () => {
  db = await createFreshDatabase();
  system = await startSystem({ databaseUrl: db.url, port: 0, allowPrivateNetworks: true, logger: pino({ level: "silent" }) });
  apiKey = (await system.createAccount("client input tests")).apiKey;
  counted = createServer((_req, res) => {
    arrivals += 1;
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ free: true }));
  });
  await new Promise<void>((resolve) => counted.listen(0, "127.0.0.1", resolve));
  countedOrigin = `http://127.0.0.1:${(counted.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => (counted ? counted.close(() => resolve()) : resolve()));
  await system?.stop();
  await db?.drop();
});

describe("pay checks the domain rules before the first request leaves", () => {
  it("a blocked host receives nothing; an allowed one is called", async () => {
    await account().agents.create({ agentId: "guarded" });
    const outside = { count: 0 };
    const sdk = client("guarded", outside);
    await sdk.policies.set({ blockedDomains: ["127.0.0.1"] });
    const before = arrivals;
    const error = await sdk.pay({ endpoint: `${countedOrigin}/data`, method: "POST", body: { secret: "x" } }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DomainNotAllowedError);
    expect(error).toMatchObject({
      domain: "127.0.0.1",
      reasonCode: "domain_blocked",
      // The gateway's wording (api/shared/policy/reasons.ts), word for word.
      reason: "domain_blocked: 127.0.0.1 is blocked by the policy (blockedDomains entry 127.0.0.1)",
    });
    expect(arrivals).toBe(before);
    expect(outside.count).toBe(0);
    // The gateway decided and recorded the refusal (spec 3: listed as rejected, policy.violation).
    const rejected = await sdk.transactions.list({ status: "rejected" });
    expect(rejected).toHaveLength(1);
    expect(rejected[0]).toMatchObject({
      agentId: "guarded",
      status: "rejected",
      rejectionCode: "domain_blocked",
      endpoint: `${countedOrigin.slice(7)}/data`,
    });
    expect((error as DomainNotAllowedError).detail).toMatchObject({ rejectionId: expect.any(String), requested: null });

    // The policy changed through this client: the next call sees it at once (no stale cache).
    await sdk.policies.set({ blockedDomains: [] });
    const answer = await sdk.pay({ endpoint: `${countedOrigin}/data` });
    expect(answer).toMatchObject({ paid: false, status: 200, data: { free: true } });
    expect(arrivals).toBe(before + 1);
  });

  it("a host off allowedDomains receives nothing; a listed one is called", async () => {
    await account().agents.create({ agentId: "listed" });
    const outside = { count: 0 };
    const sdk = client("listed", outside);
    await sdk.policies.set({ allowedDomains: ["example.com"] });
    const before = arrivals;
    const error = await sdk.pay({ endpoint: `${countedOrigin}/data` }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DomainNotAllowedError);
    expect(error).toMatchObject({
      domain: "127.0.0.1",
      reasonCode: "domain_not_allowed",
      reason: "domain_not_allowed: 127.0.0.1 is not on the policy's allowedDomains",
    });
    expect(arrivals).toBe(before);
    expect(outside.count).toBe(0);
    await sdk.policies.set({ allowedDomains: ["localhost"] });
    const reached = await sdk.pay({ endpoint: `${countedOrigin.replace("127.0.0.1", "localhost")}/data` });
    expect(reached).toMatchObject({ paid: false, status: 200 });
    expect(outside.count).toBe(1);
  });

  it("a policy changed elsewhere since the client read it: the gateway allows the host, the call goes on, nothing is recorded", async () => {
    await account().agents.create({ agentId: "stale-read" });
    const asked: string[] = [];
    const outside = { count: 0 };
    const counting = countingFetch(outside);
    const sdk = new Client({
      agentId: "stale-read",
      apiKey,
      baseUrl: system.apiUrl,
      maxRetries: 0,
      fetch: (input, init) => {
        if (String(input).endsWith("/payments/domain-check")) asked.push(String(input));
        return counting(input, init);
      },
    });
    await sdk.policies.set({ blockedDomains: ["127.0.0.1"] });
    // A call to an allowed host caches the policy (2 s) that blocks 127.0.0.1.
    const cachedAt = Date.now();
    await sdk.pay({ endpoint: `${countedOrigin.replace("127.0.0.1", "localhost")}/data` });
    expect(asked).toHaveLength(0);
    // Another client lifts the block; this one's cached read still refuses locally, asks the
    // gateway, which allows, and the request goes out once.
    await client("stale-read").policies.set({ blockedDomains: [] });
    const before = arrivals;
    const stillCached = Date.now() - cachedAt < 1_500;
    const answer = await sdk.pay({ endpoint: `${countedOrigin}/data` });
    // On a machine so slow that the 2 s cache ran out, the fresh read allows without asking
    // (test/sdk/domain-rules.test.ts covers the gateway's allow with a controlled clock).
    if (stillCached) expect(asked).toHaveLength(1);
    expect(answer).toMatchObject({ paid: false, status: 200, data: { free: true } });
    expect(arrivals).toBe(before + 1);
    expect(outside.count).toBe(2);
    expect(await sdk.transactions.list({ status: "rejected" })).toHaveLength(0);
  });

  it("a blocked host that is down is still DomainNotAllowedError, not PaymentError", async () => {
    await account().agents.create({ agentId: "down-host" });
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const outside = { count: 0 };
    const sdk = client("down-host", outside);
    await sdk.policies.set({ blockedDomains: ["127.0.0.1"] });
    await expect(sdk.pay({ endpoint: `http://127.0.0.1:${port}/gone` })).rejects.toBeInstanceOf(DomainNotAllowedError);
    expect(outside.count).toBe(0);
  });
});

describe("an unreachable API", () => {
  it("is a PaymentError with code API_UNREACHABLE (nothing was paid)", async () => {
    await account().agents.create({ agentId: "unreachable" });
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const error = await client("unreachable")
      .pay({ endpoint: `http://127.0.0.1:${port}/gone` })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PaymentError);
    expect(error).toMatchObject({ code: "API_UNREACHABLE" });
  });
});

describe("agents.create, get and archive", () => {
  it("create answers the agent with its wallet; get finds it; a taken id is AGENT_EXISTS", async () => {
    const created = await account().agents.create({ agentId: "seller-1", name: "Weather API" });
    expect(created).toMatchObject({ agentId: "seller-1", name: "Weather API", balance: { usdc: 0 }, archivedAt: null });
    expect(typeof created.address).toBe("string");
    expect(await account().agents.get("seller-1")).toMatchObject({ agentId: "seller-1", address: created.address });
    const taken = await account()
      .agents.create({ agentId: "seller-1" })
      .catch((e: unknown) => e);
    expect(taken).toBeInstanceOf(ServiceError);
    expect(taken).toMatchObject({ code: "AGENT_EXISTS", status: 409 });
    const missing = await account()
      .agents.get("no-such-agent")
      .catch((e: unknown) => e);
    expect(missing).toMatchObject({ code: "NOT_FOUND", status: 404 });
  });

  it("a bad id is an InvalidInputError naming agentId, with no request sent", async () => {
    const outside = { count: 0 };
    let gatewayCalls = 0;
    const sdk = new Client({
      agentId: "account-ops",
      apiKey,
      baseUrl: system.apiUrl,
      fetch: (input, init) => {
        gatewayCalls += 1;
        return countingFetch(outside)(input, init);
      },
    });
    for (const agentId of ["", "-starts-with-dash", "has space", "a\u0000b", "x".repeat(129), "lone\ud800"]) {
      const error = await sdk.agents.create({ agentId }).catch((e: unknown) => e);
      expect(error, JSON.stringify(agentId)).toBeInstanceOf(InvalidInputError);
      expect((error as InvalidInputError).field).toBe("agentId");
    }
    await expect(sdk.agents.create({ agentId: "ok-id", name: "tab\there" })).rejects.toMatchObject({ field: "name" });
    await expect(sdk.agents.get("a\u0000b")).rejects.toBeInstanceOf(InvalidInputError);
    expect(gatewayCalls).toBe(0);
  });

  it("archive hides the agent from list; get still answers it with archivedAt", async () => {
    await account().agents.create({ agentId: "short-lived" });
    const archived = await account().agents.archive("short-lived");
    expect(typeof archived.archivedAt).toBe("string");
    const listed = await account().agents.list();
    expect(listed.map((agent) => agent.agentId)).not.toContain("short-lived");
    expect((await account().agents.get("short-lived")).archivedAt).toBe(archived.archivedAt);
  });
});

describe("wallet.withdraw", () => {
  it("answers the destination it was asked to pay", async () => {
    await account().agents.create({ agentId: "withdrawer" });
    const sdk = client("withdrawer");
    expect((await sdk.wallet.fund({ usdc: 1 })).status).toBe("confirmed");
    const to = Keypair.generate().publicKey.toBase58();
    const operation = await sdk.wallet.withdraw({ to, usdc: 0.25 });
    expect(operation).toMatchObject({ kind: "withdraw", status: "confirmed", to, amount: { usdc: 0.25 } });
  });
});

describe("cli agents and alerts delete", () => {
  it("agents create|get|list|archive; a taken id is exit 1 [AGENT_EXISTS]; a bad id exit 2", async () => {
    const created = await cli(["agents", "create", "cli-agent", "--name", "From the CLI"]);
    expect(created.status, created.stderr).toBe(0);
    expect(created.stdout).toMatch(/Agent cli-agent created\./);
    expect(created.stdout).toMatch(/Name:\s+From the CLI/);
    const again = await cli(["agents", "create", "cli-agent"]);
    expect(again.status).toBe(1);
    expect(again.stderr).toMatch(/\[AGENT_EXISTS\]/);
    const bad = await cli(["agents", "create", "bad id"]);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/agentId/);
    const got = await cli(["agents", "get", "cli-agent", "--json"]);
    expect(JSON.parse(got.stdout)).toMatchObject({ agentId: "cli-agent", name: "From the CLI" });
    expect((await cli(["agents", "list"])).stdout).toMatch(/cli-agent\s+From the CLI\s+0 USDC/);
    const archived = await cli(["agents", "archive", "cli-agent"]);
    expect(archived.status, archived.stderr).toBe(0);
    expect((await cli(["agents", "list"])).stdout).not.toMatch(/cli-agent/);
    expect((await cli(["agents", "list", "--include-archived"])).stdout).toMatch(/cli-agent/);
    const missing = await cli(["agents", "get", "never-made"]);
    expect(missing.status).toBe(1);
    expect(missing.stderr).toMatch(/\[NOT_FOUND\]/);
  });

  it("alerts delete removes the rule; an unknown id is exit 1, a malformed one exit 2", async () => {
    await account().agents.create({ agentId: "alerted" });
    const created = await cli([
      "alerts",
      "create",
      "--agent",
      "alerted",
      "--type",
      "policy_violation",
      "--notify",
      "webhook:https://hooks.example.com/x",
      "--json",
    ]);
    expect(created.status, created.stderr).toBe(0);
    const id = JSON.parse(created.stdout).id as string;
    const deleted = await cli(["alerts", "delete", id]);
    expect(deleted.status, deleted.stderr).toBe(0);
    expect(deleted.stdout).toMatch(new RegExp(`Alert ${id} deleted`));
    expect((await cli(["alerts", "list", "--agent", "alerted"])).stdout).toMatch(/No alerts/);
    const unknown = await cli(["alerts", "delete", randomUUID()]);
    expect(unknown.status).toBe(1);
    expect(unknown.stderr).toMatch(/\[NOT_FOUND\]/);
    expect((await cli(["alerts", "delete", "not-an-id"])).status).toBe(2);
  });
});
