/**
 * The story a user lives, on the whole real system (scripts/system.ts: the program on the
 * local ledger, Postgres, the indexer, the API) with every other party a real HTTP server on
 * loopback built with the SDK's own middleware:
 *
 * - an orchestrator agent invokes a sub-agent ("researcher", an x402 endpoint) with a budget;
 * - the researcher pays an x402 API and an MPP API (the MPP session is reused on the second call)
 *   and invokes its own sub-agent ("summarizer"), which pays the x402 API: depths 0, 1 and 2;
 * - a payment over `perCallLimit`, one to a blocked domain and one over the invocation budget are
 *   rejected with the spec's error classes and listed as `rejected` (the blocked domain is refused
 *   by the client before any request and recorded by the gateway it asks, with no amount);
 * - the researcher's daily budget reaches 80 % and `budget.warning` reaches a webhook receiver,
 *   signed;
 * - `transactions.getChain` and `cli transactions tree` show the tree with the right totals.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSystem, type System } from "../../scripts/system.js";
import { runCli } from "../../sdk/src/cli/main.js";
import { Client, type PaidResult, type Transaction } from "../../sdk/src/client.js";
import { BudgetExceededError, DomainNotAllowedError, PolicyViolationError, ServiceError } from "../../sdk/src/errors.js";
import { usdcToUnits } from "../../sdk/src/money.js";
import { mppMiddleware, type NodeMiddleware, type NodeRequest, x402Middleware, type X402Payment } from "../../sdk/src/server/index.js";
import { WebhookReceiver, verifyStandardWebhook } from "../gateway/support/webhook-receiver.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { restCall } from "../support/rest.js";
import { pollUntil } from "../support/poll.js";

const INDEX_DEADLINE_MS = 60_000;

let db: FreshDatabase;
let system: System;
let buyerKey: string;
let sellerKey: string;
let receiver: WebhookReceiver;
let webhookSecret: string;
const servers: Server[] = [];
const wallets = new Map<string, string>();

/** What the researcher's handler saw, for the assertions. */
interface ResearchLog {
  parentTxHash: string;
  paid: PaidResult[];
  summary: { totalCost: { usdc: number }; paymentChain: string[] } | null;
  refusals: Record<"perCall" | "domain" | "budget", unknown>;
}
let research: ResearchLog | null = null;
/** The orchestrator's `agents.invoke` of the researcher, made once in `beforeAll`. */
let invocation: Awaited<ReturnType<Client["agents"]["invoke"]>>;
let summarizerPaid: PaidResult | null = null;
const counters = { x402Challenges: 0, mppChallenges: 0, mppSessionRequests: 0, blockedHostRequests: 0 };

/** A REST call that must succeed; its JSON body ({} when empty). */
async function rest(apiKey: string, method: string, path: string, body?: unknown): Promise<Record<string, unknown>> {
  const answer = await restCall(system.apiUrl, method, path, { key: apiKey, body });
  if (answer.status >= 300) throw new Error(`${method} ${path}: ${answer.status} ${answer.text}`);
  return answer.text === "" ? {} : (answer.body as Record<string, unknown>);
}

async function registerAgent(apiKey: string, agentId: string): Promise<string> {
  await rest(apiKey, "POST", "/v1/agents", { agentId });
  const wallet = await rest(apiKey, "GET", `/v1/agents/${agentId}/wallet`);
  wallets.set(agentId, String(wallet.address));
  return String(wallet.address);
}

/** A node http server: the SDK middleware first, then the route handler once paid. */
async function serve(route: (req: NodeRequest, res: ServerResponse) => Promise<void> | void, gate?: NodeMiddleware): Promise<string> {
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const run = (): void => {
      Promise.resolve(route(req as NodeRequest, res)).catch((error: unknown) => {
        res.writeHead(500, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: String(error) }));
      });
    };
    if (gate === undefined) return run();
    gate(req as NodeRequest, res, (error?: unknown) => {
      if (error !== undefined) {
        res.writeHead(500);
        res.end(String(error));
        return;
      }
      run();
    });
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  servers.push(server);
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

async function readBody(req: IncomingMessage): Promise<unknown> {
  if (req.method === "GET") return null;
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString("utf8");
  return text === "" ? null : JSON.parse(text);
}

function clientOf(agentId: string): Client {
  return new Client({ agentId, apiKey: buyerKey, baseUrl: system.apiUrl, maxRetries: 2, retryBaseDelayMs: 50 });
}

async function refusal(attempt: Promise<unknown>): Promise<unknown> {
  try {
    await attempt;
  } catch (error) {
    return error;
  }
  return new Error("the payment was accepted");
}

let searchUrl: string;
let premiumUrl: string;
let blockedSearchUrl: string;
let llmUrl: string;
let researcherUrl: string;
let summarizerUrl: string;

beforeAll(async () => {
  db = await createFreshDatabase();
  system = await startSystem({
    databaseUrl: db.url,
    allowPrivateNetworks: true,
    allowLoopbackWebhooks: true, // the webhook receiver is on loopback
    reconcileIntervalMs: 500,
    pollIntervalMs: 50,
    logger: pino({ level: "warn" }),
  });
  buyerKey = (await system.createAccount("buyer")).apiKey;
  sellerKey = (await system.createAccount("seller")).apiKey;
  for (const agentId of ["orchestrator", "researcher", "summarizer"]) await registerAgent(buyerKey, agentId);
  for (const agentId of ["search-api", "llm-api"]) await registerAgent(sellerKey, agentId);
  await clientOf("orchestrator").wallet.fund({ usdc: 5 });
  await clientOf("researcher").wallet.fund({ usdc: 2 });
  await clientOf("summarizer").wallet.fund({ usdc: 1 });

  receiver = await WebhookReceiver.start();
  const hook = await rest(buyerKey, "POST", "/v1/webhooks", { url: receiver.url, eventTypes: ["budget.warning"] });
  webhookSecret = String(hook.secret);

  // The researcher: daily budget 0.5, per call 0.5, localhost blocked.
  await clientOf("researcher").policies.set({
    dailyBudget: { usdc: 0.5 },
    perCallLimit: { usdc: 0.5 },
    blockedDomains: ["localhost"],
  });

  const facilitator = { facilitatorUrl: system.apiUrl, apiKey: sellerKey };
  const x402Api = (amount: string): NodeMiddleware =>
    x402Middleware({ ...facilitator, amount, token: "usdc", network: system.network, payTo: wallets.get("search-api")! });
  const searchGate = x402Api("100000");
  const premiumGate = x402Api("600000");
  const search = await serve(
    (req, res) => sendJson(res, 200, { results: ["a", "b"], paidBy: (req.payment as X402Payment).payer }),
    (req, res, next) => {
      if (!req.headers["x-payment"]) counters.x402Challenges += 1;
      if (req.headers.host?.startsWith("localhost")) counters.blockedHostRequests += 1;
      (req.url?.startsWith("/premium") ? premiumGate : searchGate)(req, res, next);
    },
  );
  searchUrl = `${search}/search?q=ledgers`;
  premiumUrl = `${search}/premium?q=ledgers`;
  blockedSearchUrl = searchUrl.replace("127.0.0.1", "localhost");

  const llmGate = mppMiddleware({
    ...facilitator,
    amount: { value: "0.05", currency: "USDC" },
    paymentMethods: ["stablecoin", "card"],
    sessionSupported: true,
    payTo: wallets.get("llm-api")!,
  });
  const llm = await serve(
    (_req, res) => sendJson(res, 200, { completion: "a summary" }),
    (req, res, next) => {
      if (req.headers["x-mpp-session"]) counters.mppSessionRequests += 1;
      else if (!req.url?.startsWith("/mpp/pay")) counters.mppChallenges += 1;
      llmGate(req, res, next);
    },
  );
  llmUrl = `${llm}/complete`;

  // The summarizer (depth 2 payer): paid 0.2 by the researcher, pays the search API under that.
  const summarizer = await serve(
    async (req, res) => {
      const payment = req.payment as X402Payment;
      await readBody(req);
      summarizerPaid = (await clientOf("summarizer").withParent(payment.txHash).pay({ endpoint: searchUrl })) as PaidResult;
      sendJson(res, 200, { summary: "short", paidWith: summarizerPaid.txHash });
    },
    x402Middleware({
      facilitatorUrl: system.apiUrl,
      apiKey: buyerKey,
      amount: "200000",
      token: "usdc",
      network: system.network,
      payTo: wallets.get("summarizer")!,
    }),
  );
  summarizerUrl = `${summarizer}/summarize`;

  // The researcher (depth 1 payer), invoked by the orchestrator with a 0.45 budget for 0.25.
  const researcher = await serve(
    async (req, res) => {
      const payment = req.payment as X402Payment;
      const task = await readBody(req);
      const self = clientOf("researcher").withParent(payment.txHash);
      const log: ResearchLog = {
        parentTxHash: payment.txHash,
        paid: [],
        summary: null,
        refusals: { perCall: null, domain: null, budget: null },
      };
      research = log;
      log.paid.push((await self.pay({ endpoint: searchUrl })) as PaidResult); // 0.10 → 20 %
      log.paid.push((await self.pay({ endpoint: llmUrl, method: "POST", body: { prompt: "summarize" } })) as PaidResult); // 0.05 → 30 %
      log.paid.push((await self.pay({ endpoint: llmUrl, method: "POST", body: { prompt: "again" } })) as PaidResult); // 0.05 → 40 %, session
      const summary = await self.agents.invoke({ agentEndpoint: summarizerUrl, task: { text: "notes" }, budget: { usdc: 0.15 } }); // 0.20 → 80 %
      log.summary = { totalCost: summary.totalCost, paymentChain: summary.paymentChain };
      log.refusals.perCall = await refusal(self.pay({ endpoint: premiumUrl })); // 0.60 > perCallLimit 0.5
      log.refusals.domain = await refusal(self.pay({ endpoint: blockedSearchUrl })); // localhost is blocked
      log.refusals.budget = await refusal(self.pay({ endpoint: searchUrl })); // 0.40 + 0.10 > invocation budget 0.45
      sendJson(res, 200, { report: "done", task });
    },
    x402Middleware({
      facilitatorUrl: system.apiUrl,
      apiKey: buyerKey,
      amount: "250000",
      token: "usdc",
      network: system.network,
      payTo: wallets.get("researcher")!,
    }),
  );
  researcherUrl = `${researcher}/research`;

  // The story itself: the orchestrator invokes the researcher once; every test below reads what it
  // did, so none depends on another having run first.
  invocation = await clientOf("orchestrator").agents.invoke({
    agentEndpoint: researcherUrl,
    task: { topic: "ledgers" },
    budget: { usdc: 0.45 },
  });
}, 240_000);

afterAll(async () => {
  for (const server of servers) {
    server.closeAllConnections();
    await new Promise<void>((done) => server.close(() => done()));
  }
  await receiver?.close();
  await system?.stop();
  await db?.drop();
});

async function indexedChain(client: Client, root: string, size: number): Promise<Transaction[]> {
  let last = "nothing yet";
  return pollUntil(
    async () => {
      try {
        const chain = await client.transactions.getChain(root);
        last = `${chain.length} transactions`;
        return chain.length >= size ? chain : undefined;
      } catch (error) {
        // The service answering an error while the indexer catches up is "not yet"; anything else is a failure.
        if (!(error instanceof ServiceError)) throw error;
        last = String(error);
        return undefined;
      }
    },
    { timeoutMs: INDEX_DEADLINE_MS, intervalMs: 100, what: () => `the chain of ${root} to reach ${size} transactions (last: ${last})` },
  );
}

describe("an orchestrator, its sub-agents and their paid APIs", () => {
  it("invokes the researcher with a budget and gets its output and cost", () => {
    expect(invocation.output).toMatchObject({ report: "done", task: { topic: "ledgers" } });
    expect(research).not.toBeNull();
    expect(invocation.paymentChain[0]).toBe(research!.parentTxHash);
    // The orchestrator's 0.25 plus what the researcher spent under its invocation (0.40).
    expect(invocation.totalCost).toEqual({ usdc: 0.65 });
    for (const paid of research!.paid) expect(invocation.paymentChain).toContain(paid.txHash);
  });

  it("paid the x402 API and the MPP API, reusing the MPP session on the second call", () => {
    const [search, first, second] = research!.paid;
    expect(search).toMatchObject({ paid: true, status: 200, protocol: "x402", amountPaid: { usdc: 0.1 } });
    expect(first).toMatchObject({ paid: true, status: 200, protocol: "mpp", amountPaid: { usdc: 0.05 } });
    expect(second).toMatchObject({ paid: true, status: 200, protocol: "mpp", amountPaid: { usdc: 0.05 } });
    expect(first!.sessionId).toBeTruthy();
    expect(second!.sessionId).toBe(first!.sessionId);
    expect(second!.txHash).not.toBe(first!.txHash);
    // One negotiation (one 402) for two paid MPP calls; the second came with the session.
    expect(counters.mppChallenges).toBe(1);
    expect(counters.mppSessionRequests).toBeGreaterThanOrEqual(2);
    expect(summarizerPaid).toMatchObject({ paid: true, protocol: "x402", amountPaid: { usdc: 0.1 } });
    // The explorer entry of each payment, as the gateway (and later the index) names it.
    for (const paid of [...research!.paid, summarizerPaid!]) expect(paid.solanaExplorer).toBe(explorerOf(paid.txHash));
  });

  it("rejects over perCallLimit, to a blocked domain and over the invocation budget with the spec's classes", async () => {
    const { perCall, domain, budget } = research!.refusals;
    expect(perCall).toBeInstanceOf(PolicyViolationError);
    expect((perCall as PolicyViolationError).reason).toBe("per_call_limit_exceeded: requested 0.6 usdc, limit is 0.5 usdc");
    expect(domain).toBeInstanceOf(DomainNotAllowedError);
    expect((domain as DomainNotAllowedError).domain).toBe("localhost");
    expect(budget).toBeInstanceOf(BudgetExceededError);
    for (const error of [perCall, domain, budget]) expect(error).toBeInstanceOf(ServiceError);

    const rejected = (await clientOf("researcher").transactions.list({ limit: 50 })).filter((tx) => tx.status === "rejected");
    // The blocked domain is refused by the client before any request and recorded by the gateway
    // it then asks: no 402 was read, so no amount (0) and no protocol.
    expect(rejected).toHaveLength(3);
    expect(rejected.map((tx) => tx.amountPaid.usdc).sort()).toEqual([0, 0.1, 0.6]);
    for (const tx of rejected) expect(tx.txHash).toBeNull();
    const domainRow = rejected.find((tx) => tx.amountPaid.usdc === 0);
    expect(domainRow).toMatchObject({ protocol: null, rejectionCode: "domain_blocked" });
    expect(domainRow!.endpoint.startsWith("localhost:")).toBe(true);
    // The blocked host received nothing.
    expect(counters.blockedHostRequests).toBe(0);
  });

  it("resolves the whole tree from the root: depths 0–2 and the right totals", async () => {
    const root = research!.parentTxHash;
    const chain = await indexedChain(clientOf("orchestrator"), root, 6);
    expect(chain).toHaveLength(6);
    const byDepth = (depth: number) => chain.filter((tx) => tx.depth === depth);
    expect(byDepth(0).map((tx) => tx.txHash)).toEqual([root]);
    expect(byDepth(0)[0]).toMatchObject({ agentId: "orchestrator", amountPaid: { usdc: 0.25 }, parentTxHash: null });
    expect(byDepth(1)).toHaveLength(4);
    for (const tx of byDepth(1)) expect(tx).toMatchObject({ agentId: "researcher", parentTxHash: root });
    expect(byDepth(2)).toHaveLength(1);
    expect(byDepth(2)[0]).toMatchObject({ agentId: "summarizer", txHash: summarizerPaid!.txHash, amountPaid: { usdc: 0.1 } });
    for (const tx of chain) expect(tx.solanaExplorer).toBe(explorerOf(tx.txHash!));
    const sumUnits = chain.reduce((sum, tx) => sum + usdcToUnits(tx.amountPaid.usdc), 0n);
    expect(sumUnits).toBe(750_000n);

    const out = captured();
    const code = await runCli(["transactions", "tree", root, "--api-key", buyerKey, "--base-url", system.apiUrl], {
      env: {},
      stdout: out.stream,
      stderr: out.stream,
    });
    expect(code).toBe(0);
    const lines = out.text().trimEnd().split("\n");
    for (const tx of chain) expect(out.text()).toContain(tx.txHash!);
    const total = lines.at(-1)!;
    expect(total).toBe("Total: 0.75 USDC in 6 transactions by 3 agents");
  });

  it("sent a signed budget.warning for the researcher at 80 %", async () => {
    await receiver.until(
      (received) => received.some((r) => r.body.includes('"budget.warning"') && r.body.includes('"researcher"')),
      30_000,
    );
    const warning = receiver.received.find((r) => r.body.includes('"budget.warning"') && r.body.includes('"researcher"'))!;
    expect(() => verifyStandardWebhook(webhookSecret, warning.headers, warning.body)).not.toThrow();
    const payload = JSON.parse(warning.body) as Record<string, unknown>;
    expect(payload).toMatchObject({ event: "budget.warning", agentId: "researcher" });
    // Exactly one warning for the period: 0.10, 0.15, 0.20 crossed nothing; 0.40 reached 80 %.
    expect(receiver.received.filter((r) => r.body.includes('"budget.warning"') && r.body.includes('"researcher"'))).toHaveLength(1);
  });
});

function explorerOf(txHash: string): string {
  return `https://explorer.solana.com/tx/${txHash}?cluster=custom&customUrl=${encodeURIComponent(system.localnet.rpcUrl)}`;
}

function captured(): { stream: Writable; text(): string } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer | string, _encoding, done) {
      chunks.push(chunk.toString());
      done();
    },
  });
  return { stream, text: () => chunks.join("") };
}
