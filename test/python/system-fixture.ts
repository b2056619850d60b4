/**
 * The whole system for the Python client's tests and bench (python/tests/conftest.py,
 * bench/python/pay_overhead.py), as a child process: `npx tsx test/python/system-fixture.ts`.
 *
 * It starts the system (`startSystem`), a buyer and a seller account, three seller agents and a
 * paid API on the TypeScript middleware (`x402Middleware`, `mppMiddleware`), prints ONE JSON line
 * `{"ready": {...}}` (URLs, keys, addresses), then answers JSON-line requests from stdin by `id`:
 * - `steps`: client operations run with the TypeScript client, each outcome in the shape the
 *   Python tests compare theirs with (the cross-language test);
 * - `chain`: `transactions.getChain` with the TypeScript client and the totals it adds up.
 *
 * It stops everything on SIGTERM, SIGINT or when stdin closes, so a dying test run cannot leave it
 * running. Logs go to stderr; stdout carries only the protocol.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { createInterface } from "node:readline";
import { pino } from "pino";
import { ERROR_CODES } from "../../api/shared/errors.js";
import { startSystem, type System } from "../../scripts/system.js";
import {
  Client,
  DomainNotAllowedError,
  InsufficientFundsError,
  PaymentProtocolError,
  PolicyViolationError,
  ServiceError,
  type PaymentResult,
  type PolicyFields,
  type Transaction,
  unitsToDecimal,
  usdcToUnits,
} from "../../sdk/src/index.js";
import { mppMiddleware, type NodeMiddleware, type NodeRequest, x402Middleware } from "../../sdk/src/server/index.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { restCall } from "../support/rest.js";

/** Prices of the paid API's routes, in base units (6 decimals). */
const PRICES = { x402: 30_000n, x402Dear: 500_000n, mpp: 10_000n } as const;
/** The longest a `/slow` request waits before answering. */
const MAX_SLOW_MS = 30_000;

let db: FreshDatabase | null = null;
let system: System | null = null;
const servers: Server[] = [];

/** What reached the paid API, per path: every request, those carrying a payment, handler runs. */
const counters = {
  hits: new Map<string, number>(),
  paymentAttempts: new Map<string, number>(),
  served: new Map<string, number>(),
};

function bump(map: Map<string, number>, key: string): number {
  const next = (map.get(key) ?? 0) + 1;
  map.set(key, next);
  return next;
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}

async function readText(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/** The request body as the handler echoes it: JSON when it parses, else the text; null when empty. */
function parseBody(text: string): unknown {
  if (text === "") return null;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

async function registerAgent(apiUrl: string, apiKey: string, agentId: string): Promise<string> {
  const created = await restCall(apiUrl, "POST", "/v1/agents", { key: apiKey, body: { agentId } });
  if (created.status !== 201) throw new Error(`agent ${agentId}: ${created.status} ${created.text}`);
  return String(created.body.address);
}

/**
 * The paid API: one node:http origin whose routes are gated by the TypeScript middleware.
 *
 * - `/x402/<any>`: x402 at 0.03 usdc; `/x402/drop-once/<any>` cuts the connection instead of
 *   answering the first time its handler runs (the payment settled, the answer is lost);
 * - `/x402-dear/<any>`: x402 at 0.5 usdc;
 * - `/mpp/<any>`: MPP at 0.01 usdc with sessions (`/mpp/pay` is its payment endpoint);
 * - `/free`: no payment; `/unknown`: a 402 in a protocol nobody speaks; `/slow?ms=`: answers late;
 * - `/counters`: what reached each path (for the tests' "no payment attempt" assertions).
 */
async function startPaidApi(sys: System, sellerKey: string, payTo: { x402: string; mpp: string }): Promise<string> {
  const gateway = { facilitatorUrl: sys.apiUrl, apiKey: sellerKey };
  const x402 = x402Middleware({ ...gateway, amount: PRICES.x402, token: "usdc", network: sys.network, payTo: payTo.x402 });
  const dear = x402Middleware({ ...gateway, amount: PRICES.x402Dear, token: "usdc", network: sys.network, payTo: payTo.x402 });
  const mpp = mppMiddleware({ ...gateway, amount: PRICES.mpp, paymentMethods: ["stablecoin"], sessionSupported: true, payTo: payTo.mpp });

  const paidHandler = (req: NodeRequest, res: ServerResponse, path: string): void => {
    const served = bump(counters.served, path);
    if (path.startsWith("/x402/drop-once/") && served === 1) {
      res.socket?.destroy();
      return;
    }
    readText(req).then(
      (text) => {
        const payment = req.payment as { txHash: string };
        send(res, 200, { content: `paid ${path}`, method: req.method, body: parseBody(text), txHash: payment.txHash });
      },
      () => res.socket?.destroy(),
    );
  };

  const server = createServer((incoming, res) => {
    const req = incoming as NodeRequest;
    const url = new URL(req.url ?? "/", "http://paid.local");
    const path = url.pathname;
    bump(counters.hits, path);
    if (req.headers["x-payment"] !== undefined || req.headers["x-mpp-session"] !== undefined) bump(counters.paymentAttempts, path);
    if (path === "/free") return send(res, 200, { free: true }, { "x-free": "yes" });
    if (path === "/unknown") return send(res, 402, { protocol: "lightning/9", invoice: "lnbc1..." });
    if (path === "/counters") {
      return send(res, 200, {
        hits: Object.fromEntries(counters.hits),
        paymentAttempts: Object.fromEntries(counters.paymentAttempts),
        served: Object.fromEntries(counters.served),
      });
    }
    if (path === "/slow") {
      const waitMs = Math.min(Number(url.searchParams.get("ms") ?? "2000") || 0, MAX_SLOW_MS);
      const timer = setTimeout(() => send(res, 200, { slow: true }), waitMs);
      res.on("close", () => clearTimeout(timer));
      return;
    }
    let gate: NodeMiddleware | null = null;
    if (path.startsWith("/x402/")) gate = x402;
    else if (path.startsWith("/x402-dear/")) gate = dear;
    else if (path.startsWith("/mpp/")) gate = mpp;
    if (gate === null) return send(res, 404, { error: "not_found" });
    gate(req, res, (error?: unknown) => {
      if (error !== undefined) return send(res, 500, { error: String(error) });
      paidHandler(req, res, path);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  servers.push(server);
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

// ------------------------------------------------------------------ the TypeScript client's side

/** One client operation of a cross-language scenario; amounts are decimal strings. */
type Step =
  | { do: "fund"; usdc: string; idempotencyKey?: string }
  | { do: "withdraw"; to: string; usdc: string }
  | { do: "balance" }
  | { do: "setPolicy"; fields: Record<string, unknown> }
  | { do: "getPolicy" }
  | { do: "pay"; endpoint: string; method?: string; body?: unknown; idempotencyKey?: string };

type Outcome = { ok: true; value: unknown } | { ok: false; error: Record<string, unknown> };

/** `{ usdc: "0.5" }` of a scenario → the TypeScript client's `{ usdc: 0.5 }`. */
function money(value: unknown): { usdc: number } | null {
  if (value === null) return null;
  const usdc = (value as { usdc: string }).usdc;
  return { usdc: Number(usdc) };
}

function policyFields(fields: Record<string, unknown>): PolicyFields {
  const out: Record<string, unknown> = { ...fields };
  for (const name of ["dailyBudget", "perCallLimit"]) if (name in fields) out[name] = money(fields[name]);
  return out as PolicyFields;
}

/** Money the TypeScript client returned, as the decimal string both languages compare. */
function decimal(value: { usdc: number }): string {
  return unitsToDecimal(usdcToUnits(value.usdc));
}

/** An error as both languages describe it: the spec 7 class and its fields. */
function describeError(error: unknown): Record<string, unknown> {
  if (!(error instanceof ServiceError)) return { class: error instanceof Error ? error.name : "unknown", message: String(error) };
  const described: Record<string, unknown> = { class: error.name, code: error.code ?? null, status: error.status ?? null };
  if (error instanceof PolicyViolationError) {
    described.reason = error.reason;
    described.reasonCode = error.reasonCode;
  }
  if (error instanceof DomainNotAllowedError) described.domain = error.domain;
  if (error instanceof InsufficientFundsError) described.currentBalance = decimal(error.currentBalance);
  if (error instanceof PaymentProtocolError) described.endpoint = error.endpoint;
  return described;
}

function describePayment(result: PaymentResult): Record<string, unknown> {
  if (!result.paid) return { paid: false, status: result.status, data: result.data };
  return {
    paid: true,
    status: result.status,
    protocol: result.protocol,
    amountPaid: decimal(result.amountPaid),
    txHash: result.txHash,
    sessionId: result.sessionId ?? null,
    data: result.data,
  };
}

async function runStep(client: Client, step: Step): Promise<unknown> {
  switch (step.do) {
    case "fund": {
      const operation = await client.wallet.fund(
        { usdc: Number(step.usdc) },
        step.idempotencyKey === undefined ? {} : { idempotencyKey: step.idempotencyKey },
      );
      return { kind: operation.kind, status: operation.status, amount: decimal(operation.amount) };
    }
    case "withdraw": {
      const operation = await client.wallet.withdraw({ to: step.to, usdc: Number(step.usdc) });
      return { kind: operation.kind, status: operation.status, amount: decimal(operation.amount) };
    }
    case "balance":
      return decimal(await client.wallet.balance());
    case "setPolicy":
      await client.policies.set(policyFields(step.fields));
      return null;
    case "getPolicy": {
      const policy = await client.policies.get();
      return {
        dailyBudget: policy.dailyBudget === null ? null : decimal(policy.dailyBudget),
        perCallLimit: policy.perCallLimit === null ? null : decimal(policy.perCallLimit),
        blockedDomains: policy.blockedDomains,
        usedToday: decimal(policy.usedToday),
      };
    }
    case "pay":
      return describePayment(
        await client.pay({
          endpoint: step.endpoint,
          ...(step.method === undefined ? {} : { method: step.method }),
          ...(step.body === undefined ? {} : { body: step.body }),
          ...(step.idempotencyKey === undefined ? {} : { idempotencyKey: step.idempotencyKey }),
        }),
      );
  }
}

function clientFor(sys: System, apiKey: string, agentId: string): Client {
  return new Client({ agentId, apiKey, baseUrl: sys.apiUrl, retryBaseDelayMs: 10, explorerRpcUrl: sys.localnet.info.rpcUrl });
}

async function steps(sys: System, apiKey: string, agentId: string, list: Step[]): Promise<Outcome[]> {
  const client = clientFor(sys, apiKey, agentId);
  const outcomes: Outcome[] = [];
  for (const step of list) {
    try {
      outcomes.push({ ok: true, value: await runStep(client, step) });
    } catch (error) {
      outcomes.push({ ok: false, error: describeError(error) });
    }
  }
  return outcomes;
}

async function chain(sys: System, apiKey: string, agentId: string, txHash: string): Promise<unknown> {
  const transactions: Transaction[] = await clientFor(sys, apiKey, agentId).transactions.getChain(txHash);
  const totalUnits = transactions.reduce((sum, tx) => sum + usdcToUnits(tx.amountPaid.usdc), 0n);
  return {
    transactions: transactions.map((tx) => ({ ...tx, amountPaid: decimal(tx.amountPaid) })),
    totals: {
      amount: unitsToDecimal(totalUnits),
      transactionCount: transactions.length,
      agentCount: new Set(transactions.map((tx) => tx.agentId)).size,
    },
  };
}

// ------------------------------------------------------------------ process

function write(line: unknown): void {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

let stopping: Promise<void> | null = null;
function stop(code: number): Promise<void> {
  stopping ??= (async () => {
    for (const server of servers) {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    await system?.stop().catch((error: unknown) => process.stderr.write(`system stop: ${String(error)}\n`));
    await db?.drop().catch((error: unknown) => process.stderr.write(`database drop: ${String(error)}\n`));
    process.exit(code);
  })();
  return stopping;
}

async function main(): Promise<void> {
  process.on("SIGTERM", () => void stop(0));
  process.on("SIGINT", () => void stop(0));
  db = await createFreshDatabase();
  const sys = await startSystem({
    databaseUrl: db.url,
    port: 0,
    allowPrivateNetworks: true,
    pollIntervalMs: 50,
    logger: pino({ level: process.env.LOG_LEVEL ?? "silent" }, process.stderr),
  });
  system = sys;
  const buyerKey = (await sys.createAccount("python buyer")).apiKey;
  const otherBuyerKey = (await sys.createAccount("python other buyer")).apiKey;
  const sellerKey = (await sys.createAccount("python seller")).apiKey;
  const sellers = {
    x402: await registerAgent(sys.apiUrl, sellerKey, "x402-seller"),
    mpp: await registerAgent(sys.apiUrl, sellerKey, "mpp-seller"),
    python: await registerAgent(sys.apiUrl, sellerKey, "python-seller"),
  };
  const paidApi = await startPaidApi(sys, sellerKey, sellers);

  const input = createInterface({ input: process.stdin });
  input.on("line", (line) => {
    if (line.trim() === "") return;
    let request: { id: unknown; op: string; [key: string]: unknown };
    try {
      request = JSON.parse(line) as typeof request;
    } catch {
      write({ id: null, ok: false, error: { message: "not a JSON line" } });
      return;
    }
    const apiKey = typeof request.apiKey === "string" ? request.apiKey : buyerKey;
    const agentId = String(request.agentId);
    let work: Promise<unknown>;
    if (request.op === "steps") work = steps(sys, apiKey, agentId, request.steps as Step[]);
    else if (request.op === "chain") work = chain(sys, apiKey, agentId, String(request.txHash));
    else work = Promise.reject(new Error(`unknown op ${request.op}`));
    work.then(
      (result) => write({ id: request.id, ok: true, result }),
      (error: unknown) => write({ id: request.id, ok: false, error: describeError(error) }),
    );
  });
  input.on("close", () => void stop(0));

  write({
    ready: {
      apiUrl: sys.apiUrl,
      rpcUrl: sys.localnet.info.rpcUrl,
      network: sys.network,
      token: sys.token,
      buyerKey,
      otherBuyerKey,
      sellerKey,
      sellers,
      paidApi,
      // The one error registry (api/shared/errors.ts): the Python client's copy is checked against it.
      errorCodes: Object.keys(ERROR_CODES),
      prices: { x402: unitsToDecimal(PRICES.x402), x402Dear: unitsToDecimal(PRICES.x402Dear), mpp: unitsToDecimal(PRICES.mpp) },
    },
  });
}

main().catch((error: unknown) => {
  process.stderr.write(`system fixture failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  void stop(1);
});
