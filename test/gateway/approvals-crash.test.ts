/**
 * The gateway process (`api/gateway/main.ts`, as an operator runs it, on a local ledger) killed
 * with SIGKILL while approvals are pending, then started again: the approvals that fell due while
 * nothing ran, and those due later, are each decided exactly once by the restarted gateway's
 * timeout loop (`expired` by `timeout`, one `approval.decided`, the reservation released), and a
 * resume of one answers 403 APPROVAL_EXPIRED. The loop keeps no state but the rows, so the restart
 * simply finds what is due.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { Keypair } from "@solana/web3.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Localnet, startLocalnet } from "../../scripts/localnet.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { pollUntil } from "../support/poll.js";
import { freePort, gatewayProcessEnv } from "../support/process-env.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const HOST = "127.0.0.1";
const START_TIMEOUT_MS = 45_000;
const ENDPOINT = "https://api.example.com/v1/report";

let localnet: Localnet;
let db: FreshDatabase;
let keyDir: string;
let env: NodeJS.ProcessEnv;
let baseUrl: string;
let gateway: ChildProcess | undefined;
let output = "";

const tail = (): string => output.slice(-8_000);

/** Starts `api/gateway/main.ts` and resolves once it listens. */
async function startGatewayProcess(): Promise<ChildProcess> {
  const child = spawn(process.execPath, ["--import", "tsx", "api/gateway/main.ts"], { cwd: ROOT, env, stdio: "pipe" });
  let mine = "";
  const keep = (chunk: Buffer): void => {
    mine += chunk.toString("utf8");
    output += chunk.toString("utf8");
  };
  child.stdout!.on("data", keep);
  child.stderr!.on("data", keep);
  await pollUntil(
    async () => {
      if (child.exitCode !== null) throw new Error(`api/gateway/main.ts exited with ${child.exitCode}:\n${tail()}`);
      return mine.includes("gateway listening");
    },
    { timeoutMs: START_TIMEOUT_MS, intervalMs: 100, what: () => `the gateway to listen; its output:\n${tail()}` },
  );
  return child;
}

async function kill(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise<void>((done) => child.once("exit", () => done()));
  child.kill("SIGKILL");
  await gone;
}

async function call(method: string, path: string, apiKey: string, body?: unknown, idem?: string): Promise<{ status: number; body: any }> {
  const headers: Record<string, string> = { authorization: `Bearer ${apiKey}` };
  if (body !== undefined) headers["content-type"] = "application/json";
  if (method === "POST") headers["idempotency-key"] = idem ?? randomUUID();
  const response = await fetch(`${baseUrl}${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const text = await response.text();
  return { status: response.status, body: text === "" ? null : JSON.parse(text) };
}

beforeAll(async () => {
  [localnet, db] = await Promise.all([startLocalnet(), createFreshDatabase()]);
  keyDir = await mkdtemp(join(tmpdir(), "apg-approvals-crash-"));
  const port = await freePort();
  baseUrl = `http://${HOST}:${port}`;
  env = { ...(await gatewayProcessEnv({ localnet, databaseUrl: db.url, keyDir, port, host: HOST })), GATEWAY_PUBLIC_URL: baseUrl };
}, 120_000);

afterAll(async () => {
  if (gateway !== undefined) await kill(gateway);
  await localnet?.stop();
  await db?.drop();
  if (keyDir !== undefined) await rm(keyDir, { recursive: true, force: true });
});

async function statuses(ids: readonly string[]): Promise<Record<string, number>> {
  const { rows } = await db.pool.query<{ status: string; n: number }>(
    "SELECT status, count(*)::int AS n FROM approvals WHERE id = ANY ($1::uuid[]) GROUP BY 1",
    [ids],
  );
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

describe("approvals across a gateway crash", () => {
  it("a gateway SIGKILLed with approvals pending decides each exactly once after restart", async () => {
    gateway = await startGatewayProcess();
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ["--import", "tsx", "api/gateway/admin.ts", "create-account", "approvals-crash"],
      { cwd: ROOT, env },
    );
    const apiKey = (JSON.parse(stdout) as { apiKey: string }).apiKey;
    for (const [agentId, timeout] of [
      ["soon", "3s"],
      ["later", "20s"],
    ] as const) {
      expect((await call("POST", "/v1/agents", apiKey, { agentId })).status).toBe(201);
      const policy = await call("PUT", `/v1/policies/${agentId}`, apiKey, { approval: { above: { usdc: 0 }, timeout } });
      expect(policy.status).toBe(200);
    }
    const hold = async (agentId: string, idem: string): Promise<string> => {
      const x402 = {
        scheme: "exact",
        network: "solana-localnet",
        token: localnet.info.mint.toBase58(),
        amount: "10000",
        payTo: Keypair.generate().publicKey.toBase58(),
        resource: ENDPOINT,
      };
      const held = await call("POST", `/v1/agents/${agentId}/payments/authorize`, apiKey, { endpoint: ENDPOINT, x402 }, idem);
      expect(held.status, JSON.stringify(held.body)).toBe(202);
      expect(held.body.approval.status).toBe("pending");
      return held.body.approval.id;
    };
    const soonKeys = Array.from({ length: 6 }, () => randomUUID());
    const soon = await Promise.all(soonKeys.map((key) => hold("soon", key)));
    const later = await Promise.all(Array.from({ length: 6 }, () => hold("later", randomUUID())));
    const all = [...soon, ...later];
    const requested = await db.pool.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM gateway_events WHERE type = 'approval.requested' AND (payload->>'decideUrl') LIKE $1",
      [`${baseUrl}/v1/approvals/%/decide?token=%`],
    );
    expect(requested.rows[0]!.n).toBe(all.length);

    // Killed with everything pending; the "soon" ones fall due while no gateway runs.
    await kill(gateway);
    expect(await statuses(all)).toEqual({ pending: all.length });
    await delay(3_500);
    expect(await statuses(soon)).toEqual({ pending: soon.length });

    gateway = await startGatewayProcess();
    await pollUntil(async () => ((await statuses(soon)).expired ?? 0) === soon.length, {
      timeoutMs: 20_000,
      intervalMs: 100,
      what: () => `the restarted gateway expiring the due approvals; its output:\n${tail()}`,
    });
    // Killed again mid-way (the later ones still pending), restarted once more: they too are decided once.
    expect((await statuses(later)).pending).toBe(later.length);
    await kill(gateway);
    gateway = await startGatewayProcess();
    await pollUntil(async () => ((await statuses(all)).expired ?? 0) === all.length, {
      timeoutMs: 30_000,
      intervalMs: 200,
      what: () => `the restarted gateway expiring every approval; its output:\n${tail()}`,
    });

    const { rows } = await db.pool.query<{ id: string; decided_by: string; events: number; reservation: string }>(
      `SELECT a.id, a.decided_by, r.status AS reservation,
              (SELECT count(*)::int FROM gateway_events e WHERE e.type = 'approval.decided' AND e.payload->>'approvalId' = a.id::text) AS events
       FROM approvals a JOIN spend_reservations r ON r.id = a.reservation_id WHERE a.id = ANY ($1::uuid[])`,
      [all],
    );
    expect(rows).toHaveLength(all.length);
    for (const row of rows) expect(row, row.id).toMatchObject({ decided_by: "timeout", events: 1, reservation: "released" });

    // The caller's resume after the restart: the typed refusal, nothing signed.
    const x402 = {
      scheme: "exact",
      network: "solana-localnet",
      token: localnet.info.mint.toBase58(),
      amount: "10000",
      payTo: Keypair.generate().publicKey.toBase58(),
      resource: ENDPOINT,
    };
    const resumed = await call("POST", "/v1/agents/soon/payments/authorize", apiKey, { endpoint: ENDPOINT, x402 }, soonKeys[0]);
    expect(resumed.status).toBe(403);
    expect(resumed.body).toMatchObject({ code: "APPROVAL_EXPIRED", approvalId: soon[0] });
  }, 180_000);
});
