/**
 * The gateway's own entry point (`api/gateway/main.ts`, `npm run gateway`) as an operator runs it
 * against any cluster: a separate process configured only by the environment its header lists,
 * here pointed at a local ledger and a fresh database. An account made with `api/gateway/admin.ts`
 * creates an agent, funds it from the treasury, reads the balance over REST and over GraphQL on the
 * same port, and SIGTERM stops the process with exit code 0; without a cluster it exits 2, naming
 * the missing variable (test/ops/misconfiguration.test.ts has the whole table).
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Localnet, startLocalnet } from "../../scripts/localnet.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { pollUntil } from "../support/poll.js";
import { freePort, gatewayProcessEnv } from "../support/process-env.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const HOST = "127.0.0.1";
const START_TIMEOUT_MS = 45_000;
const STOP_TIMEOUT_MS = 15_000;
/** The process's output kept for a failure message. */
const OUTPUT_TAIL_CHARS = 8_000;

let localnet: Localnet;
let db: FreshDatabase;
let keyDir: string;
let env: NodeJS.ProcessEnv;
let gateway: ChildProcess | undefined;
let output = "";
let exited: Promise<number | null>;
let baseUrl: string;

const tail = (): string => output.slice(-OUTPUT_TAIL_CHARS);

async function call(method: string, path: string, apiKey: string, body?: unknown): Promise<{ status: number; text: string }> {
  const headers: Record<string, string> = { authorization: `Bearer ${apiKey}` };
  if (body !== undefined) headers["content-type"] = "application/json";
  if (method === "POST") headers["idempotency-key"] = randomUUID();
  const response = await fetch(`${baseUrl}${path}`, {
    method,
    headers,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: response.status, text: await response.text() };
}

beforeAll(async () => {
  [localnet, db] = await Promise.all([startLocalnet(), createFreshDatabase()]);
  keyDir = await mkdtemp(join(tmpdir(), "apg-gateway-main-"));
  const port = await freePort();
  baseUrl = `http://${HOST}:${port}`;
  env = await gatewayProcessEnv({ localnet, databaseUrl: db.url, keyDir, port, host: HOST });

  const child = spawn(process.execPath, ["--import", "tsx", "api/gateway/main.ts"], { cwd: ROOT, env, stdio: "pipe" });
  gateway = child;
  child.stdout.on("data", (chunk: Buffer) => {
    output += chunk.toString("utf8");
  });
  child.stderr.on("data", (chunk: Buffer) => {
    output += chunk.toString("utf8");
  });
  exited = new Promise((resolveExit) => child.once("exit", (code) => resolveExit(code)));
  await pollUntil(
    async () => {
      if (child.exitCode !== null) throw new Error(`api/gateway/main.ts exited with ${child.exitCode} before listening:\n${tail()}`);
      return output.includes("gateway listening");
    },
    { timeoutMs: START_TIMEOUT_MS, intervalMs: 100, what: () => `api/gateway/main.ts to listen on ${baseUrl}; its output:\n${tail()}` },
  );
});

afterAll(async () => {
  if (gateway !== undefined && gateway.exitCode === null && gateway.signalCode === null) {
    gateway.kill("SIGKILL");
    await exited;
  }
  await localnet?.stop();
  await db?.drop();
  if (keyDir !== undefined) await rm(keyDir, { recursive: true, force: true });
});

describe("api/gateway/main.ts on a cluster given by the environment", () => {
  let apiKey: string;

  it("serves an account made by admin.ts create-account", async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ["--import", "tsx", "api/gateway/admin.ts", "create-account", "main-entry-point"],
      { cwd: ROOT, env },
    );
    const created = JSON.parse(stdout) as { accountId: string; apiKey: string };
    expect(created.apiKey).toMatch(/^apg_/);
    apiKey = created.apiKey;
    expect((await call("GET", "/v1/agents", apiKey)).status).toBe(200);
  });

  it("creates an agent, funds it from the treasury and reads its balance over REST", async () => {
    const agent = await call("POST", "/v1/agents", apiKey, { agentId: "researcher" });
    expect(agent.status, agent.text).toBe(201);
    expect(JSON.parse(agent.text)).toMatchObject({ agentId: "researcher", network: "solana-localnet" });

    const funded = await call("POST", "/v1/agents/researcher/wallet/fund", apiKey, { usdc: 2.5 });
    expect(funded.status, funded.text).toBe(200);
    expect((await call("GET", "/v1/agents/researcher/wallet/balance", apiKey)).text).toBe('{"usdc":2.5}');
  });

  it("answers GraphQL on the same port, with the balance read from the same cluster", async () => {
    const answer = await call("POST", "/graphql", apiKey, { query: "{ agents { agentId balance } }" });
    expect(answer.status, answer.text).toBe(200);
    expect(JSON.parse(answer.text)).toEqual({ data: { agents: [{ agentId: "researcher", balance: "2.500000" }] } });
  });

  it("stops on SIGTERM with exit code 0", async () => {
    gateway!.kill("SIGTERM");
    const code = await Promise.race([
      exited,
      new Promise<"timeout">((resolveTimeout) => setTimeout(() => resolveTimeout("timeout"), STOP_TIMEOUT_MS)),
    ]);
    expect(code, `exit after SIGTERM; output:\n${tail()}`).toBe(0);
  });

  it("refuses to start without a cluster: exit code 2, naming the missing variable", async () => {
    const { SOLANA_RPC_URL: _omitted, ...withoutCluster } = env;
    const failed = await promisify(execFile)(process.execPath, ["--import", "tsx", "api/gateway/main.ts"], {
      cwd: ROOT,
      env: withoutCluster,
    }).then(
      () => ({ code: 0, stderr: "" }),
      (error: { code?: number; stderr?: string }) => ({ code: error.code, stderr: error.stderr ?? "" }),
    );
    expect(failed.code).toBe(2);
    expect(failed.stderr).toContain("gateway: SOLANA_RPC_URL: not set; expected an http(s):// URL");
  });
});
