/**
 * The operator's path of docs/deploy.md on the local ledger started alone, as if it were a remote
 * cluster (no program config until `init-cluster`; reached only through its RPC URL): init-cluster
 * with an env file, a fresh empty database, then the gateway, the indexer and the query service
 * as three separate processes started from that env file. Then what an orchestrator reads
 * (/healthz, /readyz, /metrics) and SIGTERM of the gateway with wallet fundings in flight: each
 * one finishes or is refused with 503, none is half-done; after a restart the refused ones are
 * retried with their idempotency keys and the chain, the REST answer and GraphQL on the query
 * service agree on the exact balance.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { appendFile, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { getAssociatedTokenAddressSync } from "@solana/spl-token";
import { Connection, PublicKey } from "@solana/web3.js";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Localnet, startLocalnet } from "../../scripts/localnet.js";
import { testServerUrl } from "../support/database-server.js";
import { pollUntil } from "../support/poll.js";
import { freePort, writeKeypairFile } from "../support/process-env.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const HOST = "127.0.0.1";
const START_TIMEOUT_MS = 60_000;
const FUNDINGS_IN_FLIGHT = 6;
/** 0.1 USDC per funding in flight, 1 USDC first. */
const FIRST_UNITS = 1_000_000n;
const IN_FLIGHT_UNITS = 100_000n;

interface Service {
  readonly name: string;
  child: ChildProcess;
  output: string;
  exited: Promise<number | null>;
}

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

const baseEnv = (): Record<string, string> => ({ PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "" });

function start(name: string, args: readonly string[], env: Record<string, string> = {}): Service {
  const child = spawn(process.execPath, ["--import", "tsx", ...args, "--env-file", envFile], {
    cwd: ROOT,
    env: { ...baseEnv(), ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const service: Service = {
    name,
    child,
    output: "",
    exited: new Promise((resolveExit) => child.once("exit", (code) => resolveExit(code))),
  };
  const collect = (chunk: Buffer): void => {
    service.output = (service.output + chunk.toString("utf8")).slice(-20_000);
  };
  child.stdout!.on("data", collect);
  child.stderr!.on("data", collect);
  services.push(service);
  return service;
}

async function healthy(service: Service, port: number): Promise<void> {
  await pollUntil(
    async () => {
      if (service.child.exitCode !== null) throw new Error(`${service.name} exited ${service.child.exitCode}:\n${service.output}`);
      return fetch(`http://${HOST}:${port}/healthz`).then(
        (response) => response.status === 200,
        () => false,
      );
    },
    { timeoutMs: START_TIMEOUT_MS, intervalMs: 200, what: () => `${service.name} /healthz; its output:\n${service.output}` },
  );
}

function run(args: readonly string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolveRun) => {
    execFile(
      process.execPath,
      ["--import", "tsx", ...args],
      { cwd: ROOT, env: { ...baseEnv(), ...env }, timeout: 90_000 },
      (error, stdout, stderr) => {
        resolveRun({ code: error === null ? 0 : ((error as { code?: number }).code ?? null), stdout, stderr });
      },
    );
  });
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

async function chainUnits(): Promise<bigint> {
  const connection = new Connection(localnet.rpcUrl, "confirmed");
  const account = getAssociatedTokenAddressSync(localnet.info.mint, new PublicKey(walletAddress), true);
  const balance = await connection.getTokenAccountBalance(account).catch(() => null);
  return balance === null ? 0n : BigInt(balance.value.amount);
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
  envFile = join(dir, "apg.env");
  await writeFile(
    envFile,
    [
      `DATABASE_URL=${databaseUrl}`,
      `SOLANA_RPC_URL=${localnet.rpcUrl}`,
      "SOLANA_NETWORK=solana-localnet",
      `PROGRAM_ID=${localnet.info.programId.toBase58()}`,
      `SETTLEMENT_MINT=${localnet.info.mint.toBase58()}`,
      `LEDGER_AUTHORITY_KEYPAIR=${await writeKeypairFile(dir, "authority", localnet.keypairs.authority)}`,
      `TREASURY_KEYPAIR=${await writeKeypairFile(dir, "treasury", localnet.keypairs.treasury)}`,
      `WALLET_ENCRYPTION_KEY=${randomBytes(32).toString("base64")}`,
      `WEBHOOK_SECRETS_KEY=${randomBytes(32).toString("base64")}`,
      `HOST=${HOST}`,
      "LOG_LEVEL=info",
      "",
    ].join("\n"),
  );
}, 120_000);

afterAll(async () => {
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
    const init = await run(["scripts/admin.ts", "init-cluster", "--env-file", envFile]);
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

    const created = await run(["api/gateway/admin.ts", "create-account", "operator"], { DATABASE_URL: databaseUrl });
    expect(created.code, created.stderr).toBe(0);
    apiKey = (JSON.parse(created.stdout) as { apiKey: string }).apiKey;
    const agent = await call(gatewayPort, "POST", "/v1/agents", { agentId: "ops-agent" });
    expect(agent.status, agent.text).toBe(201);
    walletAddress = (JSON.parse(agent.text) as { address: string }).address;
    const funded = await call(gatewayPort, "POST", "/v1/agents/ops-agent/wallet/fund", { usdc: 1 });
    expect(funded.status, funded.text).toBe(200);
    expect(await chainUnits()).toBe(FIRST_UNITS);
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
    expect(text).toContain('apg_http_requests_total{route="/v1/agents/{agentId}/wallet/fund",method="POST",status="200"} 1');
    expect(text).toContain('apg_http_requests_total{route="/v1/agents",method="POST",status="201"} 1');
    expect(text).toMatch(/^apg_indexer_slot_lag \d+$/m);
    expect(text).toMatch(/^apg_webhook_backlog \d+$/m);
    expect(text).toMatch(/^apg_db_pool_connections\{state="total"\} \d+$/m);
    expect(text).not.toContain("ops-agent");
    expect(text).not.toContain(walletAddress);
  });

  it("on SIGTERM finishes the fundings in flight or refuses them with 503, exits 0, and a restart completes the rest exactly once", async () => {
    const gateway = services.find((s) => s.name === "gateway")!;
    const keys = Array.from({ length: FUNDINGS_IN_FLIGHT }, () => randomUUID());
    const inFlight = keys.map((key) => call(gatewayPort, "POST", "/v1/agents/ops-agent/wallet/fund", { usdc: 0.1 }, key));
    await new Promise((resolveSoon) => setTimeout(resolveSoon, 30));
    gateway.child.kill("SIGTERM");
    const answers = await Promise.all(inFlight);
    expect(await gateway.exited, gateway.output).toBe(0);
    for (const answer of answers) expect([200, 503], answer.text).toContain(answer.status);
    const done = answers.filter((answer) => answer.status === 200).length;
    // Nothing half-done: the chain moved exactly the fundings that answered 200.
    expect(await chainUnits()).toBe(FIRST_UNITS + BigInt(done) * IN_FLIGHT_UNITS);

    const restarted = start("gateway", ["api/gateway/main.ts"], { PORT: String(gatewayPort) });
    await healthy(restarted, gatewayPort);
    // Every funding retried with its key: the done ones replay, the refused ones happen once.
    for (const key of keys) {
      const retried = await call(gatewayPort, "POST", "/v1/agents/ops-agent/wallet/fund", { usdc: 0.1 }, key);
      expect(retried.status, retried.text).toBe(200);
    }
    const expected = FIRST_UNITS + BigInt(FUNDINGS_IN_FLIGHT) * IN_FLIGHT_UNITS;
    expect(await chainUnits()).toBe(expected);
    const rest = await call(gatewayPort, "GET", "/v1/agents/ops-agent/wallet/balance");
    expect(JSON.parse(rest.text)).toEqual({ usdc: 1.6 });
    const graphql = await fetch(`http://${HOST}:${queryPort}/graphql`, {
      method: "POST",
      headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ query: "{ agents { agentId balance } }" }),
    });
    expect(await graphql.json()).toEqual({ data: { agents: [{ agentId: "ops-agent", balance: "1.600000" }] } });
  });
});
