/**
 * What the dashboard's browser tests look at: the WHOLE system (test/sdk/server-support.ts
 * `startTestSystem`: local ledger, fresh database, indexer, API serving the dashboard) and real
 * payments made through the SDK's client to paid APIs built with the SDK's own middleware, on
 * loopback. Every figure a test expects is computed from `paid` / `rejected`, what was sent.
 *
 * Account "buyer":
 * - shopper: x402 to the search API at 127.0.0.1 (twice) and at localhost (once: a second domain),
 *   MPP to the LLM API (twice, one session);
 * - orchestrator → researcher → summarizer: an `agents.invoke` run of depth 2 (budgets 0.45 and
 *   0.15), each sub-agent paying under its parent;
 * - limited (allowed domains 127.0.0.1, per call 0.15, daily budget 0.25): paid 0.20, refused over
 *   the per-call limit, to localhost (domain not allowed: the SDK refuses that host before any
 *   request and the gateway it then asks records the refusal), and over the daily budget (exhausted);
 * - careful (daily budget 0.25): paid 0.20, 80 % of its budget (the warning);
 * - chatty (rate limit 2 calls per 1h): paid twice, refused the third time (rate limit).
 * Account "rival": one payment by its own agent, which the buyer must never see.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { Client, type PaidResult } from "../../../sdk/src/client.js";
import { usdcToUnits } from "../../../sdk/src/money.js";
import { mppMiddleware, type NodeMiddleware, type NodeRequest, x402Middleware, type X402Payment } from "../../../sdk/src/server/index.js";
import { pollUntil } from "../../support/poll.js";
import { fundedAgent, rest, type Served, serve, startTestSystem, type TestSystem } from "../../sdk/server-support.js";

export interface Paid {
  readonly agentId: string;
  readonly txHash: string;
  readonly protocol: "x402" | "mpp";
  readonly amountUnits: bigint;
  /** The endpoint's host, the domain the API groups it under. */
  readonly domain: string;
  readonly parentTxHash: string | null;
}

export interface Rejected {
  readonly agentId: string;
  readonly reasonCode: string;
  /** As the spec 7 reason gives them: "0.6", "0.15", "3"...; null for a domain refusal, whose text names no limit. */
  readonly requested: string | null;
  readonly limit: string | null;
  readonly unit: string | null;
}

export interface Run {
  readonly rootTxHash: string;
  readonly researcherPaymentTxHash: string;
  readonly summarizerPaymentTxHash: string;
}

export interface Scenario {
  readonly test: TestSystem;
  readonly apiUrl: string;
  readonly dashboardUrl: string;
  readonly buyerKey: string;
  readonly rivalKey: string;
  readonly paid: Paid[];
  readonly rejected: Rejected[];
  readonly run: Run;
  readonly rivalTxHash: string;
  readonly searchUrl: string;
  /** A new x402 payment by the shopper (the live feed's tests). */
  payAgain(): Promise<Paid>;
  /** Polls GraphQL (with the buyer's key) until these payments are indexed. */
  indexed(txHashes: readonly string[]): Promise<void>;
  graphql(query: string, variables?: Record<string, unknown>, key?: string): Promise<any>;
  stop(): Promise<void>;
}

const SEARCH_PRICE = "100000";
const PREMIUM_PRICE = "600000";
const RESEARCH_PRICE = "250000";
const SUMMARY_PRICE = "200000";
const INDEX_DEADLINE_MS = 60_000;

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

async function drain(req: IncomingMessage): Promise<void> {
  for await (const _ of req) {
    // The body is not used; it is read so the connection can be reused.
  }
}

/** A node server: the SDK middleware first, then `route` once paid. */
async function paidServer(gate: NodeMiddleware, route: (req: NodeRequest, res: ServerResponse) => Promise<void> | void): Promise<Served> {
  return serve((req, res) => {
    gate(req as NodeRequest, res, (error?: unknown) => {
      if (error !== undefined) {
        sendJson(res, 500, { error: String(error) });
        return;
      }
      Promise.resolve(route(req as NodeRequest, res)).catch((failure: unknown) => sendJson(res, 500, { error: String(failure) }));
    });
  });
}

async function refusal(attempt: Promise<unknown>): Promise<unknown> {
  try {
    await attempt;
  } catch (error) {
    return error;
  }
  throw new Error("the payment was accepted");
}

export async function startScenario(): Promise<Scenario> {
  const test = await startTestSystem();
  const { system } = test;
  const servers: Served[] = [];
  const buyer = await system.createAccount("buyer");
  const rival = await system.createAccount("rival");
  const seller = await system.createAccount("seller");
  const sellerWallet = await fundedAgent(system, seller.apiKey, "search-api", 0);
  const llmWallet = await fundedAgent(system, seller.apiKey, "llm-api", 0);
  const wallets = new Map<string, string>();
  const funding: [string, number][] = [
    ["shopper", 5],
    ["orchestrator", 5],
    ["researcher", 2],
    ["summarizer", 1],
    ["limited", 2],
    ["chatty", 2],
    ["careful", 1],
  ];
  for (const [agentId, usdc] of funding) wallets.set(agentId, await fundedAgent(system, buyer.apiKey, agentId, usdc));
  await fundedAgent(system, rival.apiKey, "rival-bot", 2);

  const clientOf = (agentId: string, apiKey = buyer.apiKey): Client =>
    new Client({ agentId, apiKey, baseUrl: system.apiUrl, maxRetries: 2, retryBaseDelayMs: 50 });
  const facilitator = { facilitatorUrl: system.apiUrl, apiKey: seller.apiKey };
  const x402 = (amount: string, payTo: string, apiKey = seller.apiKey): NodeMiddleware =>
    x402Middleware({ facilitatorUrl: system.apiUrl, apiKey, amount, token: "usdc", network: system.network, payTo });

  const searchGate = x402(SEARCH_PRICE, sellerWallet);
  const premiumGate = x402(PREMIUM_PRICE, sellerWallet);
  const search = await paidServer(
    (req, res, next) => (req.url?.startsWith("/premium") ? premiumGate : searchGate)(req, res, next),
    (_req, res) => sendJson(res, 200, { results: ["a", "b"] }),
  );
  servers.push(search);
  const searchUrl = `${search.origin}/search?q=ledgers`;
  const localSearchUrl = searchUrl.replace("127.0.0.1", "localhost");
  const premiumUrl = `${search.origin}/premium?q=ledgers`;

  const llm = await paidServer(
    mppMiddleware({
      ...facilitator,
      amount: { value: "0.05", currency: "USDC" },
      paymentMethods: ["stablecoin"],
      sessionSupported: true,
      payTo: llmWallet,
    }),
    (_req, res) => sendJson(res, 200, { completion: "a summary" }),
  );
  servers.push(llm);
  const llmUrl = `${llm.origin}/complete`;

  const paid: Paid[] = [];
  const rejected: Rejected[] = [];
  const record = (agentId: string, result: PaidResult, endpoint: string, parentTxHash: string | null): Paid => {
    const entry: Paid = {
      agentId,
      txHash: result.txHash,
      protocol: result.protocol,
      amountUnits: usdcToUnits(result.amountPaid.usdc),
      domain: new URL(endpoint).hostname,
      parentTxHash,
    };
    paid.push(entry);
    return entry;
  };
  const pay = async (agentId: string, endpoint: string, init: { method?: string; body?: unknown } = {}): Promise<Paid> =>
    record(agentId, (await clientOf(agentId).pay({ endpoint, ...init })) as PaidResult, endpoint, null);

  // The shopper: two protocols, two domains.
  await pay("shopper", searchUrl);
  await pay("shopper", llmUrl, { method: "POST", body: { prompt: "one" } });
  await pay("shopper", llmUrl, { method: "POST", body: { prompt: "two" } });
  await pay("shopper", searchUrl);
  await pay("shopper", localSearchUrl);

  // The run: orchestrator → researcher → summarizer.
  let researcherPayment = "";
  let summarizerPayment = "";
  const summarizer = await paidServer(x402(SUMMARY_PRICE, wallets.get("summarizer")!, buyer.apiKey), async (req, res) => {
    const parent = (req.payment as X402Payment).txHash;
    await drain(req);
    const result = (await clientOf("summarizer").withParent(parent).pay({ endpoint: searchUrl })) as PaidResult;
    summarizerPayment = record("summarizer", result, searchUrl, parent).txHash;
    sendJson(res, 200, { summary: "short" });
  });
  servers.push(summarizer);
  let invokedUnder = "";
  const researcher = await paidServer(x402(RESEARCH_PRICE, wallets.get("researcher")!, buyer.apiKey), async (req, res) => {
    const parent = (req.payment as X402Payment).txHash;
    invokedUnder = parent;
    await drain(req);
    const self = clientOf("researcher").withParent(parent);
    researcherPayment = record("researcher", (await self.pay({ endpoint: searchUrl })) as PaidResult, searchUrl, parent).txHash;
    const summary = await self.agents.invoke({
      agentEndpoint: `${summarizer.origin}/summarize`,
      task: { text: "notes" },
      budget: { usdc: 0.15 },
    });
    const summaryTx = summary.paymentChain[0]!;
    paid.push({
      agentId: "researcher",
      txHash: summaryTx,
      protocol: "x402",
      amountUnits: BigInt(SUMMARY_PRICE),
      domain: "127.0.0.1",
      parentTxHash: parent,
    });
    sendJson(res, 200, { report: "done" });
  });
  servers.push(researcher);
  const invocation = await clientOf("orchestrator").agents.invoke({
    agentEndpoint: `${researcher.origin}/research`,
    task: { topic: "ledgers" },
    budget: { usdc: 0.45 },
  });
  const rootTxHash = invocation.paymentChain[0]!;
  if (rootTxHash !== invokedUnder) throw new Error("the researcher was paid by another transaction than the invocation's");
  paid.push({
    agentId: "orchestrator",
    txHash: rootTxHash,
    protocol: "x402",
    amountUnits: BigInt(RESEARCH_PRICE),
    domain: "127.0.0.1",
    parentTxHash: null,
  });
  // The summarizer's payment is a child of the researcher's payment to it.
  const summarizerEntry = paid.find((p) => p.txHash === summarizerPayment)!;
  const summaryPayment = paid.find((p) => p.agentId === "researcher" && p.amountUnits === BigInt(SUMMARY_PRICE))!;
  if (summarizerEntry.parentTxHash !== summaryPayment.txHash) throw new Error("the summarizer did not pay under the researcher's payment");

  // limited: allowed domains, per-call limit and daily budget.
  await clientOf("limited").policies.set({ allowedDomains: ["127.0.0.1"], perCallLimit: { usdc: 0.15 }, dailyBudget: { usdc: 0.25 } });
  const refused = async (agentId: string, endpoint: string, expected: Omit<Rejected, "agentId">): Promise<void> => {
    const error = await refusal(clientOf(agentId).pay({ endpoint }));
    const reason = String((error as { reason?: unknown }).reason ?? (error as Error).message);
    if (!reason.includes(expected.reasonCode) && !(error as Error).message.includes(expected.reasonCode)) {
      throw new Error(`${agentId}: expected ${expected.reasonCode}, got ${String(error)}`);
    }
    rejected.push({ agentId, ...expected });
  };
  await pay("limited", searchUrl);
  await refused("limited", premiumUrl, { reasonCode: "per_call_limit_exceeded", requested: "0.6", limit: "0.15", unit: "usdc" });
  // The client refuses the unlisted host before any request and the gateway it asks records it.
  await refused("limited", localSearchUrl, { reasonCode: "domain_not_allowed", requested: null, limit: null, unit: null });
  await pay("limited", searchUrl);
  await refused("limited", searchUrl, { reasonCode: "daily_budget_exceeded", requested: "0.1", limit: "0.25", unit: "usdc" });

  // chatty: the rate limit.
  await clientOf("chatty").policies.set({ rateLimit: { calls: 2, window: "1h" } });
  await pay("chatty", searchUrl);
  await pay("chatty", searchUrl);
  await refused("chatty", searchUrl, { reasonCode: "rate_limit_exceeded", requested: "3", limit: "2", unit: "calls/1h" });

  // careful: 80 % of its daily budget, the warning state.
  await clientOf("careful").policies.set({ dailyBudget: { usdc: 0.25 } });
  await pay("careful", searchUrl);
  await pay("careful", searchUrl);

  // The rival account's own payment.
  const rivalPaid = (await clientOf("rival-bot", rival.apiKey).pay({ endpoint: searchUrl })) as PaidResult;

  const graphql = async (query: string, variables: Record<string, unknown> = {}, key = buyer.apiKey): Promise<any> => {
    const answer = await fetch(`${system.apiUrl}/graphql`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ query, variables }),
    });
    const body = (await answer.json()) as { data?: unknown; errors?: unknown };
    if (body.errors !== undefined) throw new Error(`GraphQL errors: ${JSON.stringify(body.errors)}`);
    return body.data;
  };
  const indexed = async (txHashes: readonly string[], key = buyer.apiKey): Promise<void> => {
    let missing: string[] = [...txHashes];
    await pollUntil(
      async () => {
        const found = await Promise.all(
          missing.map(
            async (hash) => (await graphql("query($h: String!) { transaction(txHash: $h) { txHash } }", { h: hash }, key)).transaction,
          ),
        );
        missing = missing.filter((_, i) => found[i] === null);
        return missing.length === 0;
      },
      { timeoutMs: INDEX_DEADLINE_MS, intervalMs: 100, what: () => `the indexer to record ${missing.join(", ")}` },
    );
  };
  await indexed(paid.map((p) => p.txHash));
  await indexed([rivalPaid.txHash], rival.apiKey);
  await pollUntil(
    async () =>
      (await graphql("query($h: String!) { paymentTree(rootTxHash: $h) { totals { transactionCount } } }", { h: rootTxHash })).paymentTree
        ?.totals.transactionCount === 4,
    { timeoutMs: INDEX_DEADLINE_MS, intervalMs: 100, what: "the run's four payments in its tree" },
  );

  return {
    test,
    apiUrl: system.apiUrl,
    dashboardUrl: `${system.apiUrl}/dashboard/`,
    buyerKey: buyer.apiKey,
    rivalKey: rival.apiKey,
    paid,
    rejected,
    run: { rootTxHash, researcherPaymentTxHash: researcherPayment, summarizerPaymentTxHash: summarizerPayment },
    rivalTxHash: rivalPaid.txHash,
    searchUrl,
    payAgain: () => pay("shopper", searchUrl),
    indexed,
    graphql,
    async stop() {
      for (const server of servers) await server.close();
      await test.stop();
    },
  };
}

/** REST with a key, for the tests' own setup (issuing and revoking keys). */
export function restOf(scenario: Scenario, key: string, method: string, path: string, body?: unknown) {
  return rest(scenario.test.system, key, method, path, body);
}
