/**
 * The TypeScript client against the whole system (scripts/system.ts: our program on the local
 * ledger, a fresh Postgres, the indexer, REST /v1 over real HTTP on loopback) and a paid API on
 * loopback (test/gateway/support/paid-api.ts) that settles through the system's own x402
 * facilitator and MPP service. Nothing of ours is replaced: the client's `fetch` option is only
 * wrapped to record which requests reached the paid API.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Keypair, type PublicKey } from "@solana/web3.js";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tokenBalanceUnits } from "../../api/gateway/chain/ledger.js";
import { decodePaymentHeaders, hasPaymentHeaders, type PaymentRequirement, requirementBody } from "../../api/gateway/x402/index.js";
import { startSystem, type System } from "../../scripts/system.js";
import {
  AuthenticationError,
  BudgetExceededError,
  Client,
  DomainNotAllowedError,
  InsufficientFundsError,
  PaymentProtocolError,
  PolicyViolationError,
  ServiceError,
  usdcToUnits,
  type FetchFunction,
  type PaidResult,
  type Transaction,
} from "../../sdk/src/index.js";
import { type PaidApi, startPaidApi } from "../gateway/support/paid-api.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { type RestAnswer, restCall } from "../support/rest.js";
import { agentKey } from "../support/agent-keys.js";
import { pollUntil } from "../support/poll.js";

const X402_PRICE_UNITS = 50_000n; // 0.05 usdc
const MPP_PRICE_UNITS = 20_000n; // 0.02 usdc
const INDEX_DEADLINE_MS = 20_000;

let db: FreshDatabase;
let system: System;
let apiKey: string;
let paid: PaidApi;
let payee: PublicKey;
let other: Server;
let otherOrigin: string;

interface Seen {
  url: string;
  method: string;
  headers: Record<string, string>;
}

/** The global fetch, recording every request the client sends outside the gateway. */
function recordingFetch(seen: Seen[]): FetchFunction {
  return (input, init) => {
    const url = String(input);
    if (!url.startsWith(system.apiUrl)) {
      const headers: Record<string, string> = {};
      new Headers(init?.headers).forEach((value, name) => {
        headers[name] = value;
      });
      seen.push({ url, method: init?.method ?? "GET", headers });
    }
    return fetch(input, init);
  };
}

function client(agentId: string, seen: Seen[] = [], key = apiKey): Client {
  return new Client({
    agentId,
    apiKey: key,
    baseUrl: system.apiUrl,
    fetch: recordingFetch(seen),
    retryBaseDelayMs: 10,
    explorerRpcUrl: system.localnet.info.rpcUrl,
  });
}

function rest(method: string, path: string, body?: unknown): Promise<RestAnswer> {
  return restCall(system.apiUrl, method, path, { key: apiKey, body, lenientJson: true });
}

/** Registers an agent (REST: agent registration is not a client operation) and funds it through the client. */
async function agent(agentId: string, fundUsdc: number): Promise<Client> {
  const created = await rest("POST", "/v1/agents", { agentId });
  expect(created.status, created.text).toBe(201);
  const sdk = client(agentId);
  if (fundUsdc > 0) expect((await sdk.wallet.fund({ usdc: fundUsdc })).status).toBe("confirmed");
  return sdk;
}

async function reservations(agentId: string): Promise<{ status: string; tx_hash: string | null }[]> {
  const { rows } = await system.pool.query<{ status: string; tx_hash: string | null }>(
    "SELECT status, tx_hash FROM spend_reservations WHERE agent_id = $1 ORDER BY id",
    [await agentKey(system.pool, agentId)],
  );
  return rows;
}

const payeeBalance = (): Promise<bigint> => tokenBalanceUnits(system.ledger, payee);
const units = (money: { usdc: number }): bigint => usdcToUnits(money.usdc);

beforeAll(async () => {
  db = await createFreshDatabase();
  system = await startSystem({ databaseUrl: db.url, port: 0, allowPrivateNetworks: true, logger: pino({ level: "silent" }) });
  apiKey = (await system.createAccount("sdk client tests")).apiKey;
  payee = Keypair.generate().publicKey;
  paid = await startPaidApi((origin) => ({
    x402: {
      facilitator: system.facilitator,
      terms: { scheme: "exact", network: system.network, token: system.token, amountUnits: X402_PRICE_UNITS, payTo: payee.toBase58() },
    },
    mpp: {
      service: system.mpp.serviceFor(origin, payee.toBase58()),
      amountUnits: MPP_PRICE_UNITS,
      paymentMethods: ["stablecoin"],
      sessionSupported: true,
    },
  }));
  // Another service: free content, and a 402 in a protocol nobody here speaks.
  other = createServer((req, res) => {
    if (req.url === "/free") {
      res.writeHead(200, { "content-type": "application/json", "x-free": "yes" });
      res.end(JSON.stringify({ free: true }));
      return;
    }
    res.writeHead(402, { "content-type": "application/json" });
    res.end(JSON.stringify({ protocol: "lightning/9", invoice: "lnbc1..." }));
  });
  await new Promise<void>((resolve) => other.listen(0, "127.0.0.1", resolve));
  otherOrigin = `http://127.0.0.1:${(other.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await paid?.close();
  await new Promise<void>((resolve) => (other ? other.close(() => resolve()) : resolve()));
  await system?.stop();
  await db?.drop();
});

describe("pay over x402", () => {
  it("pays the 402, returns the paid answer with the ledger transaction, and closes the reservation", async () => {
    const seen: Seen[] = [];
    const buyer = await agent("x402-buyer", 2);
    const sdk = client("x402-buyer", seen);
    const before = await payeeBalance();

    const result = await sdk.pay({ endpoint: `${paid.origin}/x402/report` });
    expect(result.paid).toBe(true);
    const done = result as PaidResult<{ data: string }>;
    expect(done.status).toBe(200);
    expect(done.protocol).toBe("x402");
    expect(done.amountPaid).toEqual({ usdc: 0.05 });
    expect(done.txHash).toMatch(/^[1-9A-HJ-NP-Za-km-z]{64,90}$/);
    expect(done.data).toEqual({ data: "paid content of /x402/report" });
    expect(done.headers["x-payment-response"]).toBeDefined();
    expect(done.solanaExplorer.startsWith(`https://explorer.solana.com/tx/${done.txHash}`)).toBe(true);
    expect(done.sessionId).toBeUndefined();

    expect(await payeeBalance()).toBe(before + X402_PRICE_UNITS);
    expect(await buyer.wallet.balance()).toEqual({ usdc: 1.95 });
    expect(await reservations("x402-buyer")).toEqual([{ status: "settled", tx_hash: done.txHash }]);
    // The original request, then the retry carrying the signed payment.
    expect(seen.map((request) => request.headers["x-payment"] !== undefined)).toEqual([false, true]);
    expect(seen[1]!.headers["x-payment-signature"]).toBeDefined();
  });

  it("a dropped connection on the paid request is retried with the same signed payment, which settles once", async () => {
    await agent("x402-flaky", 1);
    // A real loopback proxy in front of the paid API that cuts the first paid request after
    // forwarding it (the settlement happens, the answer is lost).
    const payments: string[] = [];
    const proxy = createServer((req, res) => {
      const payment = req.headers["x-payment"];
      if (typeof payment === "string") payments.push(payment);
      const headers: Record<string, string> = {};
      for (const name of ["x-payment", "x-payment-signature", "accept", "content-type"]) {
        const value = req.headers[name];
        if (typeof value === "string") headers[name] = value;
      }
      const forwarded = fetch(`${paid.origin}${req.url}`, { method: req.method ?? "GET", headers });
      forwarded.then(
        async (answer) => {
          const text = await answer.text();
          if (typeof payment === "string" && payments.length === 1) {
            res.socket?.destroy();
            return;
          }
          const headers: Record<string, string> = {};
          answer.headers.forEach((value, name) => {
            headers[name] = value;
          });
          delete headers["content-length"];
          delete headers["transfer-encoding"];
          res.writeHead(answer.status, headers);
          res.end(text);
        },
        () => res.socket?.destroy(),
      );
    });
    await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
    const proxyOrigin = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    const before = await payeeBalance();
    try {
      const error = await client("x402-flaky")
        .pay({ endpoint: `${proxyOrigin}/x402/flaky` })
        .catch((caught: unknown) => caught);
      // The retried payment's nonce is already claimed, so the API refuses it; the client learns
      // from the gateway that the reservation settled and says the payment was made.
      expect(payments.length).toBeGreaterThanOrEqual(2);
      expect(new Set(payments).size).toBe(1);
      expect(await payeeBalance()).toBe(before + X402_PRICE_UNITS);
      expect(error).toBeInstanceOf(ServiceError);
      expect((error as ServiceError).code).toBe("PAYMENT_SETTLED_ANSWER_LOST");
      expect((await reservations("x402-flaky")).map((row) => row.status)).toEqual(["settled"]);
    } finally {
      proxy.closeAllConnections();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    }
  });
  it("a paid request and a release that both get no answer are PAYMENT_OUTCOME_UNKNOWN, never a plain failure", async () => {
    await agent("x402-cut", 1);
    // The network drops the paid request and then the release: the signed payment is out there
    // and its reservation still holds it, so nobody can say that the payment did not happen.
    const dropping: FetchFunction = (input, init) => {
      const url = String(input);
      const paying = new Headers(init?.headers).has("x-payment");
      if (paying || url.endsWith("/release")) return Promise.reject(new TypeError("fetch failed"));
      return fetch(input, init);
    };
    const sdk = new Client({ agentId: "x402-cut", apiKey, baseUrl: system.apiUrl, fetch: dropping, retryBaseDelayMs: 10, maxRetries: 1 });
    const before = await payeeBalance();
    const error = await sdk.pay({ endpoint: `${paid.origin}/x402/cut` }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ServiceError);
    expect((error as ServiceError).code, String(error)).toBe("PAYMENT_OUTCOME_UNKNOWN");
    expect((await reservations("x402-cut")).map((row) => row.status)).toEqual(["reserved"]);
    expect(await payeeBalance()).toBe(before);
  });
});

describe("pay over MPP", () => {
  it("negotiates a session on the first call and reuses it on the second (no 402 the second time)", async () => {
    const seen: Seen[] = [];
    await agent("mpp-buyer", 1);
    const sdk = client("mpp-buyer", seen);
    const before = await payeeBalance();
    const challengesBefore = paid.counters.mppChallenges;
    const submissionsBefore = paid.counters.mppSubmissions;

    const first = (await sdk.pay({ endpoint: `${paid.origin}/mpp/report` })) as PaidResult;
    expect(first.paid).toBe(true);
    expect(first.protocol).toBe("mpp");
    expect(first.status).toBe(200);
    expect(first.amountPaid).toEqual({ usdc: 0.02 });
    expect(first.txHash).toMatch(/^[1-9A-HJ-NP-Za-km-z]{64,90}$/);
    expect(first.sessionId).toEqual(expect.any(String));
    expect(paid.counters.mppChallenges).toBe(challengesBefore + 1);
    expect(paid.counters.mppSubmissions).toBe(submissionsBefore + 1);

    const second = (await sdk.pay({ endpoint: `${paid.origin}/mpp/report` })) as PaidResult;
    expect(second.paid).toBe(true);
    expect(second.protocol).toBe("mpp");
    expect(second.sessionId).toBe(first.sessionId);
    expect(second.amountPaid).toEqual({ usdc: 0.02 });
    expect(second.txHash).not.toBe(first.txHash);
    expect(paid.counters.mppChallenges).toBe(challengesBefore + 1);
    expect(paid.counters.mppSubmissions).toBe(submissionsBefore + 1);
    // The second call went straight to the resource with the session token.
    const resourceCalls = seen.filter((request) => request.url.endsWith("/mpp/report"));
    expect(resourceCalls.map((request) => request.headers["x-mpp-session"] !== undefined)).toEqual([false, true, true]);
    expect(await payeeBalance()).toBe(before + 2n * MPP_PRICE_UNITS);
    expect((await reservations("mpp-buyer")).map((row) => row.status)).toContain("settled");
  });
});

describe("pay without payment, or with a protocol nobody speaks", () => {
  it("a non-402 answer passes through without payment fields", async () => {
    await agent("free-rider", 0);
    const result = await client("free-rider").pay({ endpoint: `${otherOrigin}/free` });
    expect(result).toEqual({ paid: false, status: 200, data: { free: true }, headers: expect.objectContaining({ "x-free": "yes" }) });
    expect(await reservations("free-rider")).toEqual([]);
  });

  it("a 402 in an unknown protocol is a PaymentProtocolError naming the endpoint, before any authorization", async () => {
    await agent("lightning-fan", 1);
    const endpoint = `${otherOrigin}/paid`;
    const error = await client("lightning-fan")
      .pay({ endpoint })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(PaymentProtocolError);
    expect((error as PaymentProtocolError).endpoint).toBe(endpoint);
    expect(await reservations("lightning-fan")).toEqual([]);
  });
});

describe("policy rejections come before any payment", () => {
  it("a perCallLimit breach is a PolicyViolationError and the paid API sees no payment attempt", async () => {
    const seen: Seen[] = [];
    const sdk = await agent("capped", 1);
    await sdk.policies.set({ perCallLimit: { usdc: 0.01 } });
    const served = paid.counters.served;
    const before = await payeeBalance();

    const error = await client("capped", seen)
      .pay({ endpoint: `${paid.origin}/x402/capped` })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(PolicyViolationError);
    expect(error).not.toBeInstanceOf(DomainNotAllowedError);
    expect((error as PolicyViolationError).reason).toBe("per_call_limit_exceeded: requested 0.05 usdc, limit is 0.01 usdc");
    expect((error as PolicyViolationError).reasonCode).toBe("per_call_limit_exceeded");
    expect(seen).toHaveLength(1);
    expect(seen[0]!.headers["x-payment"]).toBeUndefined();
    expect(paid.counters.served).toBe(served);
    expect(await payeeBalance()).toBe(before);
    expect(await sdk.wallet.balance()).toEqual({ usdc: 1 });
  });

  it("a blocked domain is a DomainNotAllowedError carrying the domain", async () => {
    const seen: Seen[] = [];
    const sdk = await agent("blocked", 1);
    await sdk.policies.set({ blockedDomains: ["127.0.0.1"] });
    const error = await client("blocked", seen)
      .pay({ endpoint: `${paid.origin}/x402/blocked` })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(DomainNotAllowedError);
    expect(error).toBeInstanceOf(PolicyViolationError);
    expect((error as DomainNotAllowedError).domain).toBe("127.0.0.1");
    // Refused before the first request: the blocked API received nothing.
    expect(seen).toEqual([]);
    expect(await sdk.wallet.balance()).toEqual({ usdc: 1 });
    // The gateway, asked after the client's refusal, recorded it (spec 3: listed as rejected).
    const rejected = await sdk.transactions.list({ status: "rejected" });
    expect(rejected.map((tx) => [tx.status, tx.rejectionCode, tx.endpoint])).toEqual([
      ["rejected", "domain_blocked", `${paid.origin.slice("http://".length)}/x402/blocked`],
    ]);
  });

  it("the rejection is listed with status rejected", async () => {
    const sdk = await agent("capped-listed", 1);
    await sdk.policies.set({ perCallLimit: { usdc: 0.01 } });
    await expect(sdk.pay({ endpoint: `${paid.origin}/x402/capped` })).rejects.toBeInstanceOf(PolicyViolationError);
    const rejected = await sdk.transactions.list({ status: "rejected" });
    expect(rejected.length).toBeGreaterThanOrEqual(1);
    expect(rejected.every((tx) => tx.status === "rejected" && tx.agentId === "capped-listed")).toBe(true);
  });
});

describe("failures with their spec 7 classes", () => {
  it("a wallet short of the price is an InsufficientFundsError with the current balance; the reservation is released", async () => {
    const sdk = await agent("poor", 0.01);
    const before = await payeeBalance();
    const error = await sdk.pay({ endpoint: `${paid.origin}/x402/expensive` }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(InsufficientFundsError);
    expect((error as InsufficientFundsError).currentBalance).toEqual({ usdc: 0.01 });
    expect(await payeeBalance()).toBe(before);
    expect((await reservations("poor")).map((row) => row.status)).toEqual(["released"]);
  });

  it("a bad API key is an AuthenticationError, and nothing is paid", async () => {
    const seen: Seen[] = [];
    await agent("keyless", 1);
    const sdk = client("keyless", seen, "apg_live_not_a_real_key_0000000000000000");
    await expect(sdk.wallet.balance()).rejects.toBeInstanceOf(AuthenticationError);
    await expect(sdk.pay({ endpoint: `${paid.origin}/x402/auth` })).rejects.toBeInstanceOf(AuthenticationError);
    expect(seen.filter((request) => request.headers["x-payment"] !== undefined)).toEqual([]);
    expect(await reservations("keyless")).toEqual([]);
  });

  it("an unknown agent is a NOT_FOUND ServiceError", async () => {
    const error = await client("nobody")
      .wallet.get()
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ServiceError);
    expect((error as ServiceError).code).toBe("NOT_FOUND");
    expect((error as ServiceError).status).toBe(404);
  });
});

describe("wallet, policies, transactions and agents", () => {
  it("wallet.get, balance, fund and withdraw move exact amounts", async () => {
    const sdk = await agent("treasurer", 3);
    const wallet = await sdk.wallet.get();
    expect(wallet).toMatchObject({ agentId: "treasurer", balance: { usdc: 3 }, network: system.network });
    expect(wallet.address).toMatch(/^[1-9A-HJ-NP-Za-km-z]{32,44}$/);

    const funded = await sdk.wallet.fund({ usdc: 1.000001 });
    expect(funded).toMatchObject({ kind: "fund", status: "confirmed", amount: { usdc: 1.000001 } });
    expect(await sdk.wallet.balance()).toEqual({ usdc: 4.000001 });

    const to = Keypair.generate().publicKey;
    const withdrawn = await sdk.wallet.withdraw({ to: to.toBase58(), usdc: 0.5 });
    expect(withdrawn).toMatchObject({ kind: "withdraw", status: "confirmed" });
    expect(await sdk.wallet.balance()).toEqual({ usdc: 3.500001 });
    expect(await tokenBalanceUnits(system.ledger, to)).toBe(500_000n);

    await expect(sdk.wallet.fund({ usdc: 0.1 + 0.2 })).rejects.toThrow(/decimal places/);
    await expect(sdk.wallet.withdraw({ to: to.toBase58(), usdc: 100 })).rejects.toBeInstanceOf(InsufficientFundsError);
  });

  it("the same idempotency key funds once", async () => {
    const sdk = await agent("once", 0);
    const first = await sdk.wallet.fund({ usdc: 2 }, { idempotencyKey: "fund-once-1" });
    const again = await sdk.wallet.fund({ usdc: 2 }, { idempotencyKey: "fund-once-1" });
    expect(again.operationId).toBe(first.operationId);
    expect(await sdk.wallet.balance()).toEqual({ usdc: 2 });
  });

  it("policies.set keeps omitted fields, null removes, get reports usedToday, clear removes all", async () => {
    const sdk = await agent("governed", 1);
    const set = await sdk.policies.set({
      dailyBudget: { usdc: 5 },
      perCallLimit: { usdc: 0.5 },
      allowedDomains: ["127.0.0.1", "example.com"],
      rateLimit: { calls: 10, window: "1h" },
      protocolPreference: "mpp",
    });
    expect(set).toMatchObject({
      dailyBudget: { usdc: 5 },
      perCallLimit: { usdc: 0.5 },
      rateLimit: { calls: 10, window: "1h" },
      protocolPreference: "mpp",
    });

    await sdk.policies.set({ perCallLimit: null });
    const read = await sdk.policies.get();
    expect(read).toMatchObject({ dailyBudget: { usdc: 5 }, perCallLimit: null, usedToday: { usdc: 0 }, protocolPreference: "mpp" });
    expect(read.allowedDomains).toEqual(expect.arrayContaining(["127.0.0.1", "example.com"]));

    await sdk.pay({ endpoint: `${paid.origin}/x402/governed` });
    expect((await sdk.policies.get()).usedToday).toEqual({ usdc: 0.05 });

    await sdk.policies.clear();
    expect(await sdk.policies.get()).toMatchObject({ dailyBudget: null, perCallLimit: null, rateLimit: null });
    await expect(sdk.policies.set({ perCallLimit: { usdc: 0.0000001 } })).rejects.toThrow(/decimal places/);
    const invalid = await sdk.policies.set({ rateLimit: { calls: 1, window: "2h" as "1h" } }).catch((caught: unknown) => caught);
    expect((invalid as ServiceError).code).toBe("BAD_USER_INPUT");
  });

  it("policies.set refuses a rateLimit.calls that is not an integer from 1 to 1000000 before sending anything", async () => {
    const sdk = await agent("counted", 0);
    let sent = 0;
    const counting = new Client({
      agentId: "counted",
      apiKey,
      baseUrl: system.apiUrl,
      fetch: (input, init) => {
        sent += 1;
        return fetch(input, init);
      },
      retryBaseDelayMs: 10,
    });
    for (const calls of [1.5, 0, -1, 1_000_001, Number.NaN, 1e21]) {
      await expect(counting.policies.set({ rateLimit: { calls, window: "1h" } }), String(calls)).rejects.toThrow(/rateLimit.calls/);
    }
    expect(sent).toBe(0);
    expect((await sdk.policies.set({ rateLimit: { calls: 1e2, window: "1h" } })).rateLimit).toEqual({ calls: 100, window: "1h" });
  });

  it("transactions.list, get and getChain read the indexed payments", async () => {
    const sdk = await agent("reader", 1);
    const x402 = (await sdk.pay({ endpoint: `${paid.origin}/x402/read` })) as PaidResult;
    const mpp = (await sdk.pay({ endpoint: `${paid.origin}/mpp/read` })) as PaidResult;

    const listed: Transaction[] = await pollUntil(
      async () => {
        const page = await sdk.transactions.list({ limit: 50 });
        return page.filter((tx) => tx.status !== "rejected").length >= 2 ? page : undefined;
      },
      { timeoutMs: INDEX_DEADLINE_MS, intervalMs: 100, what: "both payments to be indexed" },
    );
    expect(listed.map((tx) => tx.txHash).sort()).toEqual([x402.txHash, mpp.txHash].sort());
    expect((await sdk.transactions.list({ protocol: "x402" })).map((tx) => tx.txHash)).toEqual([x402.txHash]);
    expect((await sdk.transactions.list({ protocol: "mpp", since: "24h" })).map((tx) => tx.txHash)).toEqual([mpp.txHash]);
    expect(await sdk.transactions.list({ domain: "elsewhere.example" })).toEqual([]);

    const one = await sdk.transactions.get(x402.txHash);
    expect(one).toMatchObject({ txHash: x402.txHash, agentId: "reader", protocol: "x402", amountPaid: { usdc: 0.05 }, parentTxHash: null });
    expect(one.endpoint).toContain("/x402/read");
    expect(units(one.amountPaid)).toBe(X402_PRICE_UNITS);
    expect(one.solanaExplorer).toContain(x402.txHash);

    const chain = await sdk.transactions.getChain(x402.txHash);
    expect(chain.map((tx) => [tx.txHash, tx.depth])).toEqual([[x402.txHash, 0]]);
    // The chain's rows read their policy check as list and get do.
    expect(one.policyCheck).toBe("passed");
    expect(chain.map((tx) => tx.policyCheck)).toEqual([one.policyCheck]);

    const missing = await sdk.transactions.get("1".repeat(64)).catch((caught: unknown) => caught);
    expect((missing as ServiceError).code).toBe("NOT_FOUND");
  });

  it("agents.list shows the account's agents with balances", async () => {
    // Agents of its own: one that paid (1 - 0.05 - 0.02 usdc left), one never funded.
    const lister = await agent("lister", 1);
    await lister.pay({ endpoint: `${paid.origin}/x402/list` });
    await lister.pay({ endpoint: `${paid.origin}/mpp/list` });
    await agent("lister-idle", 0);
    const agents = await client("lister").agents.list();
    expect(agents.find((entry) => entry.agentId === "lister")?.balance).toEqual({ usdc: 0.93 });
    expect(agents.find((entry) => entry.agentId === "lister-idle")?.balance).toEqual({ usdc: 0 });
    expect(agents.map((entry) => entry.agentId)).toEqual(expect.arrayContaining(["lister", "lister-idle"]));
  });
});

describe("agents.invoke", () => {
  it("pays the sub-agent under a hard budget; its payments carry the parent and the budget refuses the overshoot", async () => {
    const orchestrator = await agent("orchestrator", 1);
    await agent("sub-worker", 1);
    const subAddress = (await client("sub-worker").wallet.get()).address;
    const subPayments: string[] = [];
    let refusal: unknown;

    // The sub-agent's own endpoint: x402 at 0.1 usdc, settled by the gateway's facilitator; the
    // work it does is `calls` paid requests of its own, made with a client bound to the parent.
    const subAgent = createServer((req, res) => {
      const origin = `http://127.0.0.1:${(subAgent.address() as AddressInfo).port}`;
      const requirement: PaymentRequirement = {
        scheme: "exact",
        network: system.network,
        token: system.token,
        amountUnits: 100_000n,
        payTo: subAddress,
        resource: `${origin}${req.url}`,
      };
      const chunks: Buffer[] = [];
      req.on("data", (chunk: Buffer) => chunks.push(chunk));
      req.on("end", () => {
        void (async () => {
          if (!hasPaymentHeaders(req.headers)) {
            res.writeHead(402, { "content-type": "application/json" });
            res.end(JSON.stringify(requirementBody(requirement)));
            return;
          }
          const outcome = await system.facilitator.settle(decodePaymentHeaders(req.headers), requirement);
          if (!outcome.ok) {
            res.writeHead(402, { "content-type": "application/json", "x-payment-error": outcome.reason });
            res.end(JSON.stringify(requirementBody(requirement)));
            return;
          }
          const task = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { calls: number };
          const worker = client("sub-worker").withParent(outcome.txHash);
          for (let i = 0; i < task.calls; i += 1) {
            try {
              const done = (await worker.pay({ endpoint: `${paid.origin}/x402/sub-${i}` })) as PaidResult;
              subPayments.push(done.txHash);
            } catch (error) {
              refusal = error;
              break;
            }
          }
          const receipt = { success: true, transaction: outcome.txHash, network: outcome.network, payer: outcome.payer };
          res.writeHead(200, {
            "content-type": "application/json",
            "x-payment-response": Buffer.from(JSON.stringify(receipt)).toString("base64"),
          });
          res.end(JSON.stringify({ answer: 42, paidCalls: subPayments.length }));
        })().catch((error: unknown) => {
          res.writeHead(500, { "content-type": "application/json" });
          res.end(JSON.stringify({ error: String(error) }));
        });
      });
    });
    await new Promise<void>((resolve) => subAgent.listen(0, "127.0.0.1", resolve));
    try {
      const endpoint = `http://127.0.0.1:${(subAgent.address() as AddressInfo).port}/task`;
      const result = await orchestrator.agents.invoke({ agentEndpoint: endpoint, task: { calls: 2 }, budget: { usdc: 0.08 } });
      expect(refusal).toBeInstanceOf(BudgetExceededError);
      expect(refusal).toBeInstanceOf(PolicyViolationError);
      expect(subPayments).toHaveLength(1);
      expect(result.output).toEqual({ answer: 42, paidCalls: 1 });
      expect(result.totalCost).toEqual({ usdc: 0.15 });
      expect(result.paymentChain).toHaveLength(2);
      expect(result.paymentChain[1]).toBe(subPayments[0]);
      expect(await client("sub-worker").wallet.balance()).toEqual({ usdc: 1.05 });
      expect(await orchestrator.wallet.balance()).toEqual({ usdc: 0.9 });
    } finally {
      subAgent.closeAllConnections();
      await new Promise<void>((resolve) => subAgent.close(() => resolve()));
    }
  });
});
