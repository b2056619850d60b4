/**
 * The operator's path of docs/deploy.md on the local ledger started alone, as if it were a remote
 * cluster (no program config until `init-cluster`; reached only through its RPC URL): init-cluster
 * with an env file, a fresh empty database, then the gateway, the indexer and the query service
 * as three separate processes started from that env file. Then real payments to a paid API built
 * with the SDK's x402Middleware (the TypeScript client, and the Python client from python/.venv:
 * `bash scripts/python.sh setup`), what an orchestrator reads (/healthz, /readyz, /metrics), and
 * SIGTERM of the gateway with wallet fundings and payments in flight: each one finishes or is
 * refused (503, the SDK's PaymentError), none is half-done; after a restart the refused ones are
 * retried with their idempotency keys and the chain, the tables, the REST answers, GraphQL on the
 * query service and the /metrics payment counters agree: nothing lost, nothing twice.
 */
import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { execFile } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { appendFile, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { getAssociatedTokenAddressSync } from "@solana/spl-token";
import { Connection, Keypair, PublicKey } from "@solana/web3.js";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Localnet, startLocalnet } from "../../scripts/localnet.js";
import { Client, PaymentError } from "../../sdk/src/index.js";
import { type NodeRequest, x402Middleware } from "../../sdk/src/server/index.js";
import { testServerUrl } from "../support/database-server.js";
import { pollUntil } from "../support/poll.js";
import { healthy, ROOT, runEntry, type Service, startService, writeEnvFile } from "./support/services.js";
import { freePort } from "../support/process-env.js";

const HOST = "127.0.0.1";
const FUNDINGS_IN_FLIGHT = 6;
/** 0.1 USDC per funding in flight, 1 USDC first. */
const FIRST_UNITS = 1_000_000n;
const IN_FLIGHT_UNITS = 100_000n;
/** The paid API's price per call (0.01 USDC), and the payer agent's funding (1 USDC). */
const PRICE_UNITS = 10_000n;
const PAYER_UNITS = 1_000_000n;
const PAYMENTS_IN_FLIGHT = 6;
const PYTHON = resolve(ROOT, "python/.venv/bin/python");

let localnet: Localnet;
let dir: string;
let envFile: string;
let adminUrl: string;
let databaseName: string;
let databaseUrl: string;
let gatewayPort: number;
let queryPort: number;
const services: Service[] = [];
let apiKey: string;
let walletAddress: string;
let payerAddress: string;
/** The paid API (the SDK's x402Middleware settling through the gateway) and the address it is paid to. */
let paidApi: Server;
let paidUrl: string;
const payee = Keypair.generate().publicKey;
/**
 * While set, the paid API holds each `/in-flight/<n>` request carrying a payment (authorized by
 * the gateway, not yet settled) until the promise it returns resolves.
 */
let holdPayment: ((index: number) => Promise<void>) | null = null;
/** Calls the paid API has made to the gateway's facilitator. */
let settlesSent = 0;
/** Payments that succeeded (SDK and Python), each by its ledger transaction. */
const paid = new Set<string>();

function start(name: string, args: readonly string[], env: Record<string, string> = {}): Service {
  return startService(services, envFile, name, args, env);
}

async function call(
  port: number,
  method: string,
  path: string,
  body?: unknown,
  idempotencyKey = randomUUID(),
): Promise<{ status: number; text: string }> {
  const headers: Record<string, string> = { authorization: `Bearer ${apiKey}` };
  if (body !== undefined) headers["content-type"] = "application/json";
  if (method === "POST") headers["idempotency-key"] = idempotencyKey;
  const response = await fetch(`http://${HOST}:${port}${path}`, {
    method,
    headers,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: response.status, text: await response.text() };
}

async function chainUnits(owner: PublicKey = new PublicKey(walletAddress)): Promise<bigint> {
  const connection = new Connection(localnet.rpcUrl, "confirmed");
  const account = getAssociatedTokenAddressSync(localnet.info.mint, owner, true);
  const balance = await connection.getTokenAccountBalance(account).catch(() => null);
  return balance === null ? 0n : BigInt(balance.value.amount);
}

/** The paid API a service would run: node:http gated by the SDK's x402Middleware, settling through the gateway. */
async function startPaidApi(sellerKey: string): Promise<void> {
  const gate = x402Middleware({
    facilitatorUrl: `http://${HOST}:${gatewayPort}`,
    apiKey: sellerKey,
    amount: PRICE_UNITS,
    token: "usdc",
    network: "solana-localnet",
    payTo: payee.toBase58(),
    fetch: (url, init) => {
      settlesSent += 1;
      return fetch(url, init);
    },
  });
  const serve = (req: NodeRequest, res: ServerResponse): void =>
    gate(req, res, (error?: unknown) => {
      res.writeHead(error === undefined ? 200 : 500, { "content-type": "application/json" });
      res.end(
        JSON.stringify(
          error === undefined ? { data: "paid", txHash: (req.payment as { txHash: string }).txHash } : { error: String(error) },
        ),
      );
    });
  paidApi = createServer((incoming, res) => {
    const req = incoming as NodeRequest;
    const inFlight = /^\/in-flight\/(\d+)$/.exec(req.url ?? "");
    const hold = holdPayment;
    if (hold === null || inFlight === null || req.headers["x-payment"] === undefined) return serve(req, res);
    void hold(Number(inFlight[1])).then(() => serve(req, res));
  });
  await new Promise<void>((listening) => paidApi.listen(0, HOST, listening));
  paidUrl = `http://${HOST}:${(paidApi.address() as AddressInfo).port}`;
}

/** The TypeScript SDK's client for the payer agent, against the gateway process. */
function sdk(maxRetries = 3): Client {
  return new Client({ agentId: "payer", apiKey, baseUrl: `http://${HOST}:${gatewayPort}`, maxRetries, retryBaseDelayMs: 50 });
}

/** One payment with the Python client (python/.venv, the package as installed from a wheel). */
async function pythonPay(): Promise<{ kind: string; txHash: string | null }> {
  const script = [
    "import json, sys",
    "from agent_payment_gateway import Client",
    "client = Client(agent_id='payer', api_key=sys.argv[1], base_url=sys.argv[2], explorer_rpc_url=sys.argv[4])",
    "result = client.pay(sys.argv[3])",
    "print(json.dumps({'kind': type(result).__name__, 'txHash': getattr(result, 'tx_hash', None)}))",
  ].join("\n");
  const args = ["-c", script, apiKey, `http://${HOST}:${gatewayPort}`, `${paidUrl}/python`, localnet.rpcUrl];
  return new Promise((answered, failed) => {
    execFile(PYTHON, args, { timeout: 60_000 }, (error, stdout, stderr) => {
      if (error !== null) failed(new Error(`python payment failed: ${stderr}`));
      else answered(JSON.parse(stdout.trim().split("\n").at(-1)!) as { kind: string; txHash: string | null });
    });
  });
}

/** What the tables say about the payer's payments: settled reservations and confirmed settlements. */
async function payerRows(): Promise<{ reservations: Record<string, number>; settlements: string[] }> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const reservations = await client.query<{ status: string; n: number }>(
      `SELECT r.status, count(*)::int AS n FROM spend_reservations r JOIN agents a ON a.agent_id = r.agent_id
       WHERE a.wallet_address = $1 GROUP BY r.status`,
      [payerAddress],
    );
    const settlements = await client.query<{ signature: string }>(
      "SELECT signature FROM settlements WHERE status = 'confirmed' AND payee = $1 ORDER BY signature",
      [payee.toBase58()],
    );
    return {
      reservations: Object.fromEntries(reservations.rows.map((row) => [row.status, row.n])),
      settlements: settlements.rows.map((row) => row.signature),
    };
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  localnet = await startLocalnet({ uninitialized: true });
  dir = await mkdtemp(join(tmpdir(), "apg-operator-"));
  adminUrl = await testServerUrl();
  databaseName = `apg_operator_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${databaseName}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${databaseName}`;
  databaseUrl = url.toString();
  [gatewayPort, queryPort] = [await freePort(), await freePort()];
  // docs/deploy.md: the env file from .env.example's variables; init-cluster prints the rest.
  envFile = await writeEnvFile(dir, { databaseUrl, rpcUrl: localnet.rpcUrl, localnet, logLevel: "info" });
}, 120_000);

afterAll(async () => {
  paidApi?.closeAllConnections();
  await new Promise((closed) => (paidApi === undefined ? closed(undefined) : paidApi.close(closed)));
  for (const service of services) {
    if (service.child.exitCode === null && service.child.signalCode === null) {
      service.child.kill("SIGKILL");
      await service.exited;
    }
  }
  await localnet?.stop();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  if (databaseName !== undefined) {
    const admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${databaseName} WITH (FORCE)`);
    await admin.end();
  }
});

describe("the operator's path: init-cluster, three processes from one env file, probes, metrics, SIGTERM", () => {
  it("init-cluster initializes the cluster and prints the variables the env file still lacks", async () => {
    const init = await runEntry(["scripts/admin.ts", "init-cluster", "--env-file", envFile]);
    expect(init.code, init.stderr).toBe(0);
    const printed = init.stdout.split("\n").filter((line) => /^(SOLANA_GENESIS_HASH|SETTLEMENT_MINT_DECIMALS)=/.test(line));
    expect(printed).toEqual([`SOLANA_GENESIS_HASH=${localnet.info.genesisHash}`, `SETTLEMENT_MINT_DECIMALS=${localnet.info.decimals}`]);
    await appendFile(envFile, `${printed.join("\n")}\n`);
  });

  it("starts the gateway, the indexer and the query service as separate processes from the env file", async () => {
    const gateway = start("gateway", ["api/gateway/main.ts"], { PORT: String(gatewayPort) });
    await healthy(gateway, gatewayPort);
    start("indexer", ["indexer/cli.ts", "run"]);
    const query = start("query", ["api/query/main.ts"], { PORT: String(queryPort) });
    await healthy(query, queryPort);

    const created = await runEntry(["api/gateway/admin.ts", "create-account", "operator"], { DATABASE_URL: databaseUrl });
    expect(created.code, created.stderr).toBe(0);
    apiKey = (JSON.parse(created.stdout) as { apiKey: string }).apiKey;
    const agent = await call(gatewayPort, "POST", "/v1/agents", { agentId: "ops-agent" });
    expect(agent.status, agent.text).toBe(201);
    walletAddress = (JSON.parse(agent.text) as { address: string }).address;
    const funded = await call(gatewayPort, "POST", "/v1/agents/ops-agent/wallet/fund", { usdc: 1 });
    expect(funded.status, funded.text).toBe(200);
    expect(await chainUnits()).toBe(FIRST_UNITS);

    const payer = await call(gatewayPort, "POST", "/v1/agents", { agentId: "payer" });
    expect(payer.status, payer.text).toBe(201);
    payerAddress = (JSON.parse(payer.text) as { address: string }).address;
    expect((await call(gatewayPort, "POST", "/v1/agents/payer/wallet/fund", { usdc: 1 })).status).toBe(200);
    const seller = await runEntry(["api/gateway/admin.ts", "create-account", "seller"], { DATABASE_URL: databaseUrl });
    expect(seller.code, seller.stderr).toBe(0);
    await startPaidApi((JSON.parse(seller.stdout) as { apiKey: string }).apiKey);
  });

  it("pays a paid API built with the SDK's middleware: once with the TypeScript client, once with the Python client", async () => {
    const ts = await sdk().pay({ endpoint: `${paidUrl}/typescript` });
    expect(ts.paid, JSON.stringify(ts)).toBe(true);
    if (!ts.paid) return;
    expect(ts.data).toEqual({ data: "paid", txHash: ts.txHash });
    paid.add(ts.txHash);
    const py = await pythonPay();
    expect(py.kind).toBe("PaidResult");
    paid.add(py.txHash!);
    expect(paid.size).toBe(2);
    expect(await chainUnits(payee)).toBe(2n * PRICE_UNITS);
    expect(await chainUnits(new PublicKey(payerAddress))).toBe(PAYER_UNITS - 2n * PRICE_UNITS);
    const rows = await payerRows();
    expect(rows).toEqual({ reservations: { settled: 2 }, settlements: [...paid].sort() });
  });

  it("answers /readyz green on both services once the indexer has caught up, with every check named", async () => {
    for (const port of [gatewayPort, queryPort]) {
      await pollUntil(async () => (await fetch(`http://${HOST}:${port}/readyz`)).status === 200, {
        timeoutMs: 30_000,
        intervalMs: 250,
        what: `/readyz on ${port}`,
      });
    }
    const gateway = (await (await fetch(`http://${HOST}:${gatewayPort}/readyz`)).json()) as {
      ready: boolean;
      checks: Record<string, { ok: boolean }>;
    };
    expect(gateway.ready).toBe(true);
    expect(Object.keys(gateway.checks).sort()).toEqual(["database", "indexerLag", "programConfig", "rpc"]);
  });

  it("exposes Prometheus metrics whose counters match what was done, with no per-agent label", async () => {
    const text = await (await fetch(`http://${HOST}:${gatewayPort}/metrics`)).text();
    expect(text).toContain('apg_http_requests_total{route="/v1/agents/{agentId}/wallet/fund",method="POST",status="200"} 2');
    expect(text).toContain('apg_http_requests_total{route="/v1/agents",method="POST",status="201"} 2');
    expect(text).toMatch(/^apg_indexer_slot_lag \d+$/m);
    expect(text).toMatch(/^apg_webhook_backlog \d+$/m);
    expect(text).toMatch(/^apg_db_pool_connections\{state="total"\} \d+$/m);
    expect(text).not.toContain("ops-agent");
    expect(text).not.toContain(walletAddress);
    expect(text).not.toContain(payerAddress);
  });

  it("on SIGTERM finishes the fundings and payments in flight or refuses them, exits 0, and a restart completes the rest exactly once", async () => {
    const gateway = services.find((s) => s.name === "gateway")!;
    const keys = Array.from({ length: FUNDINGS_IN_FLIGHT }, () => randomUUID());
    const payKeys = Array.from({ length: PAYMENTS_IN_FLIGHT }, () => randomUUID());
    const inFlight = keys.map((key) => call(gatewayPort, "POST", "/v1/agents/ops-agent/wallet/fund", { usdc: 0.1 }, key));
    // Every payment is authorized and held at the paid API before it settles; then the even ones
    // settle as SIGTERM arrives (in flight: they finish) and the odd ones just after (the draining
    // gateway refuses them). No retries: a refused payment fails now and is retried after the restart.
    let arrived = 0;
    let allArrived!: () => void;
    const arrival = new Promise<void>((resolveArrival) => {
      allArrived = resolveArrival;
    });
    let releaseEven!: () => void;
    let releaseOdd!: () => void;
    const even = new Promise<void>((release) => {
      releaseEven = release;
    });
    const odd = new Promise<void>((release) => {
      releaseOdd = release;
    });
    holdPayment = (index) => {
      arrived += 1;
      if (arrived === PAYMENTS_IN_FLIGHT) allArrived();
      return index % 2 === 0 ? even : odd;
    };
    const client = sdk(0);
    const paying = payKeys.map((key, index) =>
      client.pay({ endpoint: `${paidUrl}/in-flight/${index}`, idempotencyKey: key }).then(
        (result) => (result.paid ? { txHash: result.txHash } : { error: new Error(`not paid: ${result.status}`) }),
        (error: unknown) => ({ error }),
      ),
    );
    await arrival;
    const before = settlesSent;
    releaseEven();
    // SIGTERM once the even ones' settle requests are on their way to the gateway.
    await pollUntil(() => settlesSent >= before + PAYMENTS_IN_FLIGHT / 2, { timeoutMs: 5_000, intervalMs: 1, what: "settle calls" });
    await new Promise((resolveSoon) => setTimeout(resolveSoon, 20));
    gateway.child.kill("SIGTERM");
    setTimeout(releaseOdd, 100);
    const answers = await Promise.all(inFlight);
    const payments = await Promise.all(paying);
    holdPayment = null;
    expect(await gateway.exited, gateway.output).toBe(0);
    for (const answer of answers) expect([200, 503], answer.text).toContain(answer.status);
    const done = answers.filter((answer) => answer.status === 200).length;
    // Nothing half-done: the chain moved exactly the fundings that answered 200 and the payments that succeeded.
    expect(await chainUnits()).toBe(FIRST_UNITS + BigInt(done) * IN_FLIGHT_UNITS);
    const succeeded = payments.flatMap((payment) => ("txHash" in payment && payment.txHash !== undefined ? [payment.txHash] : []));
    for (const txHash of succeeded) paid.add(txHash);
    expect(succeeded.length).toBeGreaterThan(0);
    expect(succeeded.length).toBeLessThan(PAYMENTS_IN_FLIGHT);
    expect(await chainUnits(payee)).toBe(BigInt(paid.size) * PRICE_UNITS);
    // A refused one is the SDK's typed PaymentError naming the paid API's 503.
    for (const payment of payments) {
      if (!("error" in payment)) continue;
      expect(payment.error, String(payment.error)).toBeInstanceOf(PaymentError);
      expect(String(payment.error)).toContain("503");
    }

    const restarted = start("gateway", ["api/gateway/main.ts"], { PORT: String(gatewayPort) });
    await healthy(restarted, gatewayPort);
    // Every funding retried with its key: the done ones replay, the refused ones happen once.
    for (const key of keys) {
      const retried = await call(gatewayPort, "POST", "/v1/agents/ops-agent/wallet/fund", { usdc: 0.1 }, key);
      expect(retried.status, retried.text).toBe(200);
    }
    // Every failed payment retried with its idempotency key: paid now, once.
    for (const [index, payment] of payments.entries()) {
      if (!("error" in payment)) continue;
      const retried = await sdk().pay({ endpoint: `${paidUrl}/in-flight/${index}`, idempotencyKey: payKeys[index]! });
      expect(retried.paid, JSON.stringify(retried)).toBe(true);
      if (retried.paid) paid.add(retried.txHash);
    }
    const made = 2 + PAYMENTS_IN_FLIGHT;
    expect(paid.size).toBe(made);

    // Ledger = tables = answers.
    const expected = FIRST_UNITS + BigInt(FUNDINGS_IN_FLIGHT) * IN_FLIGHT_UNITS;
    expect(await chainUnits()).toBe(expected);
    expect(await chainUnits(payee)).toBe(BigInt(made) * PRICE_UNITS);
    const payerUnits = PAYER_UNITS - BigInt(made) * PRICE_UNITS;
    expect(await chainUnits(new PublicKey(payerAddress))).toBe(payerUnits);
    expect(await payerRows()).toEqual({ reservations: { settled: made }, settlements: [...paid].sort() });
    const rest = await call(gatewayPort, "GET", "/v1/agents/ops-agent/wallet/balance");
    expect(JSON.parse(rest.text)).toEqual({ usdc: 1.6 });
    const payerRest = await call(gatewayPort, "GET", "/v1/agents/payer/wallet/balance");
    expect(JSON.parse(payerRest.text)).toEqual({ usdc: Number(payerUnits) / 1e6 });
    await pollUntil(
      async () => {
        const graphql = await fetch(`http://${HOST}:${queryPort}/graphql`, {
          method: "POST",
          headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
          body: JSON.stringify({ query: "{ agents { agentId balance } }" }),
        });
        const body = (await graphql.json()) as { data: { agents: Array<{ agentId: string; balance: string }> } };
        const balances = Object.fromEntries(body.data.agents.map((agent) => [agent.agentId, agent.balance]));
        return balances["ops-agent"] === "1.600000" && balances.payer === `0.${String(payerUnits).padStart(6, "0")}`;
      },
      { timeoutMs: 30_000, intervalMs: 250, what: "GraphQL balances on the query service" },
    );
    // /metrics counts exactly the payments made, all settled, none left reserved.
    const metrics = await (await fetch(`http://${HOST}:${gatewayPort}/metrics`)).text();
    expect(metrics).toContain(`apg_payments{protocol="x402",outcome="settled"} ${made}`);
    expect(metrics).not.toMatch(/apg_payments\{protocol="x402",outcome="reserved"\} [1-9]/);
  });
});
