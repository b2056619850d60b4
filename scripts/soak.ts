/**
 * `npm run soak -- [--minutes 5] [--workers 4]`: a bounded soak of the deployment docs/deploy.md
 * describes. It starts a disposable PostgreSQL and the local ledger alone, runs `init-cluster`,
 * then the gateway, the indexer and the query service as three processes from one env file, and
 * keeps steady x402 payment traffic on them (SDK clients paying a paid API built with
 * x402Middleware) for the set time. It reports throughput, the p99 payment latency of the first
 * and the last fifth of the run (its drift), and each process's resident memory after warm-up
 * and at the end (its growth). Not part of `npm test`; everything it starts is stopped at the end.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { appendFile, chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Keypair } from "@solana/web3.js";
import pg from "pg";
import { Client } from "../sdk/src/index.js";
import { type NodeRequest, x402Middleware } from "../sdk/src/server/index.js";
import { startEmbeddedPostgres } from "./embedded-postgres.js";
import { startLocalnet } from "./localnet.js";
import { TYPESCRIPT_LOADER } from "./typescript/loader.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const HOST = "127.0.0.1";
/** 0.001 USDC a call; the payer is funded for far more calls than a soak makes. */
const PRICE_UNITS = 1_000n;
const FUND_USDC = 50;
const MEMORY_SAMPLE_MS = 5_000;

function option(name: string, fallback: number): number {
  const at = process.argv.indexOf(`--${name}`);
  if (at === -1) return fallback;
  const value = Number(process.argv[at + 1]);
  if (!Number.isFinite(value) || value <= 0) {
    process.stderr.write(`soak: --${name} must be a positive number\n`);
    process.exit(2);
  }
  return value;
}

function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, HOST, () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolvePort(port));
    });
  });
}

async function keypairFile(dir: string, name: string, keypair: Keypair): Promise<string> {
  const path = join(dir, `${name}.json`);
  await writeFile(path, JSON.stringify(Array.from(keypair.secretKey)), { mode: 0o600 });
  return path;
}

function run(args: readonly string[], env: Record<string, string> = {}): Promise<string> {
  return new Promise((done, failed) => {
    execFile(
      process.execPath,
      [...TYPESCRIPT_LOADER, ...args],
      { cwd: ROOT, env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", ...env } },
      (error, stdout, stderr) => (error === null ? done(stdout) : failed(new Error(`${args.join(" ")}: ${stderr}`))),
    );
  });
}

/** Resident memory of a process, in MiB (Linux /proc). */
function rssMiB(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8")
    .split("\n")
    .find((l) => l.startsWith("VmRSS:"));
  return line === undefined ? Number.NaN : Number(line.split(/\s+/)[1]) / 1024;
}

function p99(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.99) - 1)]!;
}

async function main(): Promise<void> {
  const minutes = option("minutes", 5);
  const workers = option("workers", 4);
  const dir = await mkdtemp(join(tmpdir(), "apg-soak-"));
  await chmod(dir, 0o755);
  const children: ChildProcess[] = [];
  const postgres = await startEmbeddedPostgres({ dataDir: join(dir, "pg"), durable: false });
  const localnet = await startLocalnet({ uninitialized: true });
  let paidServer: ReturnType<typeof createServer> | undefined;
  try {
    const admin = new pg.Client({ connectionString: postgres.url });
    await admin.connect();
    await admin.query("CREATE DATABASE apg_soak");
    await admin.end();
    const url = new URL(postgres.url);
    url.pathname = "/apg_soak";
    const databaseUrl = url.toString();
    const [gatewayPort, queryPort] = [await freePort(), await freePort()];
    const envFile = join(dir, "apg.env");
    await writeFile(
      envFile,
      [
        `DATABASE_URL=${databaseUrl}`,
        `SOLANA_RPC_URL=${localnet.rpcUrl}`,
        "SOLANA_NETWORK=solana-localnet",
        `PROGRAM_ID=${localnet.info.programId.toBase58()}`,
        `SETTLEMENT_MINT=${localnet.info.mint.toBase58()}`,
        `LEDGER_AUTHORITY_KEYPAIR=${await keypairFile(dir, "authority", localnet.keypairs.authority)}`,
        `TREASURY_KEYPAIR=${await keypairFile(dir, "treasury", localnet.keypairs.treasury)}`,
        `WALLET_ENCRYPTION_KEY=${randomBytes(32).toString("base64")}`,
        `WEBHOOK_SECRETS_KEY=${randomBytes(32).toString("base64")}`,
        `HOST=${HOST}`,
        "LOG_LEVEL=warn",
        "",
      ].join("\n"),
    );
    const init = await run(["scripts/admin.ts", "init-cluster", "--env-file", envFile]);
    await appendFile(
      envFile,
      `${init
        .split("\n")
        .filter((l) => /^(SOLANA_GENESIS_HASH|SETTLEMENT_MINT_DECIMALS)=/.test(l))
        .join("\n")}\n`,
    );

    const start = (name: string, args: readonly string[], port?: number): { name: string; child: ChildProcess } => {
      const child = spawn(process.execPath, [...TYPESCRIPT_LOADER, ...args, "--env-file", envFile], {
        cwd: ROOT,
        env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", ...(port === undefined ? {} : { PORT: String(port) }) },
        stdio: ["ignore", "ignore", "inherit"],
      });
      children.push(child);
      return { name, child };
    };
    const healthy = async (port: number): Promise<void> => {
      for (let tries = 0; tries < 300; tries += 1) {
        if (
          await fetch(`http://${HOST}:${port}/healthz`).then(
            (r) => r.ok,
            () => false,
          )
        )
          return;
        await new Promise((later) => setTimeout(later, 200));
      }
      throw new Error(`no /healthz on ${port}`);
    };
    const processes = [start("gateway", ["api/gateway/main.ts"], gatewayPort)];
    await healthy(gatewayPort);
    processes.push(start("indexer", ["indexer/cli.ts", "run"]), start("query", ["api/query/main.ts"], queryPort));
    await healthy(queryPort);

    const apiKey = (
      JSON.parse(await run(["api/gateway/admin.ts", "create-account", "soak"], { DATABASE_URL: databaseUrl })) as { apiKey: string }
    ).apiKey;
    const sellerKey = (
      JSON.parse(await run(["api/gateway/admin.ts", "create-account", "seller"], { DATABASE_URL: databaseUrl })) as { apiKey: string }
    ).apiKey;
    const post = (path: string, body: unknown): Promise<Response> =>
      fetch(`http://${HOST}:${gatewayPort}${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json", "idempotency-key": randomUUID() },
        body: JSON.stringify(body),
      });
    if ((await post("/v1/agents", { agentId: "payer" })).status !== 201) throw new Error("could not register the payer");
    if ((await post("/v1/agents/payer/wallet/fund", { usdc: FUND_USDC })).status !== 200) throw new Error("could not fund the payer");
    const payee = (await (await post("/v1/agents", { agentId: "payee" })).json()) as { address: string };

    const gate = x402Middleware({
      facilitatorUrl: `http://${HOST}:${gatewayPort}`,
      apiKey: sellerKey,
      amount: PRICE_UNITS,
      token: "usdc",
      network: "solana-localnet",
      payTo: payee.address,
    });
    paidServer = createServer((incoming, res) =>
      gate(incoming as NodeRequest, res, () => {
        res.writeHead(200, { "content-type": "application/json" }).end('{"data":"paid"}');
      }),
    );
    await new Promise<void>((listening) => paidServer!.listen(0, HOST, listening));
    const paidUrl = `http://${HOST}:${(paidServer.address() as AddressInfo).port}`;

    const durationMs = minutes * 60_000;
    process.stderr.write(`soak: ${workers} workers paying for ${minutes} min\n`);
    const startedAt = performance.now();
    const samples: Array<{ at: number; ms: number }> = [];
    let failures = 0;
    const memory: Array<{ at: number; rss: Record<string, number> }> = [];
    const sampleMemory = (): void => {
      memory.push({ at: performance.now() - startedAt, rss: Object.fromEntries(processes.map((p) => [p.name, rssMiB(p.child.pid!)])) });
    };
    sampleMemory();
    const sampler = setInterval(sampleMemory, MEMORY_SAMPLE_MS);
    const client = new Client({ agentId: "payer", apiKey, baseUrl: `http://${HOST}:${gatewayPort}`, maxRetries: 0 });
    await Promise.all(
      Array.from({ length: workers }, async (_, w) => {
        for (let n = 0; performance.now() - startedAt < durationMs; n += 1) {
          const begun = performance.now();
          const paid = await client.pay({ endpoint: `${paidUrl}/w${w}/${n}` }).then(
            (result) => result.paid,
            () => false,
          );
          if (paid) samples.push({ at: begun - startedAt, ms: performance.now() - begun });
          else failures += 1;
        }
      }),
    );
    clearInterval(sampler);
    sampleMemory();

    const fifth = durationMs / 5;
    const first = samples.filter((s) => s.at < fifth).map((s) => s.ms);
    const last = samples.filter((s) => s.at >= durationMs - fifth).map((s) => s.ms);
    // Memory after warm-up: the first sample past the first fifth.
    const warm = memory.find((m) => m.at >= fifth) ?? memory[0]!;
    const end = memory.at(-1)!;
    const report = {
      minutes,
      workers,
      payments: samples.length,
      failures,
      throughputPerSecond: Number((samples.length / (durationMs / 1_000)).toFixed(2)),
      p99Ms: { firstFifth: Math.round(p99(first)), lastFifth: Math.round(p99(last)), whole: Math.round(p99(samples.map((s) => s.ms))) },
      rssMiB: Object.fromEntries(
        processes.map((p) => [
          p.name,
          {
            afterWarmup: Math.round(warm.rss[p.name]!),
            end: Math.round(end.rss[p.name]!),
            growth: Math.round(end.rss[p.name]! - warm.rss[p.name]!),
          },
        ]),
      ),
    };
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  } finally {
    paidServer?.closeAllConnections();
    paidServer?.close();
    for (const child of children) if (child.exitCode === null) child.kill("SIGTERM");
    await Promise.all(children.map((child) => (child.exitCode === null ? new Promise((exited) => child.once("exit", exited)) : null)));
    await localnet.stop();
    await postgres.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`soak failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
