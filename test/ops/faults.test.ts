/**
 * Faults an operator will meet, on the deployment of docs/deploy.md (the local ledger started
 * alone, `init-cluster`, the gateway, the indexer and the query service as three processes from
 * one env file) under steady SDK payment traffic to a paid API built with x402Middleware:
 * - PostgreSQL restarted: this file runs its own server (scripts/embedded-postgres.ts), so
 *   stopping it touches no other test;
 * - the RPC endpoint unreachable for 30 s: the services reach the ledger through a TCP proxy of
 *   this test, cut and restored;
 * - a full disk on the webhook receiver: it stores each delivery in a small tmpfs of its own
 *   (mounted by this test, as root), filled, then freed.
 * The services ride each out without a restart of their own: /readyz goes red and then green;
 * each payment succeeded or failed with the SDK's typed error; afterwards a failed one is resumed
 * with its idempotency key, or, when its settlement failed for good (reservation released), made
 * again as a new payment. Then the chain, the tables, REST, GraphQL (the indexer caught up) and
 * the /metrics payment counters agree: nothing lost, nothing paid twice.
 */
import { randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import { type AddressInfo, createServer as createTcpServer, type Server as TcpServer, type Socket, connect } from "node:net";
import { execFileSync } from "node:child_process";
import { appendFile, chmod, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { getAssociatedTokenAddressSync } from "@solana/spl-token";
import { Connection, Keypair, PublicKey } from "@solana/web3.js";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type EmbeddedPostgres, startEmbeddedPostgres } from "../../scripts/embedded-postgres.js";
import { type Localnet, startLocalnet } from "../../scripts/localnet.js";
import { Client, PaymentError, ServiceError } from "../../sdk/src/index.js";
import { type NodeRequest, x402Middleware } from "../../sdk/src/server/index.js";
import { pollUntil } from "../support/poll.js";
import { healthy, runEntry, type Service, startService, writeEnvFile } from "./support/services.js";
import { freePort } from "../support/process-env.js";

const HOST = "127.0.0.1";
const PRICE_UNITS = 10_000n;
const PAYER_UNITS = 20_000_000n;
const WORKERS = 2;

let localnet: Localnet;
let dir: string;
let postgres: EmbeddedPostgres;
let postgresPort: number;
let envFile: string;
let databaseUrl: string;
let gatewayPort: number;
let queryPort: number;
const services: Service[] = [];
let apiKey: string;
let payerAddress: string;
let paidApi: Server;
let paidUrl: string;
const payee = Keypair.generate().publicKey;

/**
 * A TCP proxy between the services and the ledger (its JSON-RPC port and, one above, its
 * websocket port, as web3.js derives it): `cut()` drops every connection and refuses new ones,
 * as an unreachable RPC endpoint does; `restore()` lets them through again.
 */
class RpcProxy {
  readonly #servers: TcpServer[] = [];
  readonly #sockets = new Set<Socket>();
  #cut = false;

  static async start(target: URL): Promise<{ proxy: RpcProxy; url: string }> {
    const proxy = new RpcProxy();
    for (;;) {
      const port = await freePort();
      try {
        await proxy.#listen(port, Number(target.port));
        await proxy.#listen(port + 1, Number(target.port) + 1);
        return { proxy, url: `http://${HOST}:${port}` };
      } catch {
        proxy.close();
        proxy.#servers.length = 0;
      }
    }
  }

  cut(): void {
    this.#cut = true;
    for (const socket of this.#sockets) socket.destroy();
  }

  restore(): void {
    this.#cut = false;
  }

  close(): void {
    this.cut();
    for (const server of this.#servers) server.close();
  }

  #listen(port: number, targetPort: number): Promise<void> {
    const server = createTcpServer((inbound) => {
      if (this.#cut) return inbound.destroy();
      const outbound = connect(targetPort, HOST);
      for (const socket of [inbound, outbound]) {
        this.#sockets.add(socket);
        socket.on("close", () => this.#sockets.delete(socket));
        socket.on("error", () => undefined);
      }
      inbound.pipe(outbound).pipe(inbound);
      inbound.on("close", () => outbound.destroy());
      outbound.on("close", () => inbound.destroy());
    });
    this.#servers.push(server);
    return new Promise((listening, failed) => {
      server.once("error", failed);
      server.listen(port, HOST, () => listening());
    });
  }
}

let rpcProxy: RpcProxy;

function start(name: string, args: readonly string[], env: Record<string, string> = {}): Service {
  return startService(services, envFile, name, args, env);
}

async function rest(method: string, path: string, body?: unknown): Promise<{ status: number; text: string }> {
  const headers: Record<string, string> = { authorization: `Bearer ${apiKey}` };
  if (body !== undefined) headers["content-type"] = "application/json";
  if (method === "POST") headers["idempotency-key"] = randomUUID();
  const response = await fetch(`http://${HOST}:${gatewayPort}${path}`, {
    method,
    headers,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: response.status, text: await response.text() };
}

async function chainUnits(owner: PublicKey): Promise<bigint> {
  const connection = new Connection(localnet.rpcUrl, "confirmed");
  const account = getAssociatedTokenAddressSync(localnet.info.mint, owner, true);
  const balance = await connection.getTokenAccountBalance(account).catch(() => null);
  return balance === null ? 0n : BigInt(balance.value.amount);
}

/** The last /readyz answer of each port, for a failure's message. */
const lastReady = new Map<number, string>();
const ready = async (port: number): Promise<number> =>
  fetch(`http://${HOST}:${port}/readyz`, { signal: AbortSignal.timeout(5_000) }).then(
    async (response) => {
      lastReady.set(port, `${response.status} ${await response.text()}`);
      return response.status;
    },
    (error: unknown) => {
      lastReady.set(port, String(error));
      return 0;
    },
  );
const readyState = (): string =>
  [
    ...[...lastReady.entries()].map(([port, answer]) => `${port}: ${answer}`),
    ...services.filter((s) => s.child.exitCode !== null).map((s) => `${s.name} exited ${s.child.exitCode}:\n${s.output.slice(-3_000)}`),
  ].join("\n");

function sdk(maxRetries: number): Client {
  return new Client({ agentId: "payer", apiKey, baseUrl: `http://${HOST}:${gatewayPort}`, maxRetries, retryBaseDelayMs: 50 });
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "apg-faults-"));
  // The server may run as the `postgres` user (scripts/embedded-postgres.ts): it must reach its data directory.
  await chmod(dir, 0o755);
  postgres = await startEmbeddedPostgres({ dataDir: join(dir, "pg"), durable: false });
  postgresPort = postgres.port;
  const admin = new pg.Client({ connectionString: postgres.url });
  await admin.connect();
  await admin.query("CREATE DATABASE apg_faults");
  await admin.end();
  const url = new URL(postgres.url);
  url.pathname = "/apg_faults";
  databaseUrl = url.toString();
  localnet = await startLocalnet({ uninitialized: true });
  const proxied = await RpcProxy.start(new URL(localnet.rpcUrl));
  rpcProxy = proxied.proxy;
  [gatewayPort, queryPort] = [await freePort(), await freePort()];
  envFile = await writeEnvFile(dir, { databaseUrl, rpcUrl: proxied.url, localnet, logLevel: "warn" });
  const init = await runEntry(["scripts/admin.ts", "init-cluster", "--env-file", envFile]);
  expect(init.code, init.stderr).toBe(0);
  const printed = init.stdout.split("\n").filter((line) => /^(SOLANA_GENESIS_HASH|SETTLEMENT_MINT_DECIMALS)=/.test(line));
  await appendFile(envFile, `${printed.join("\n")}\n`);

  // The webhook receiver of the full-disk fault listens on loopback.
  const gateway = start("gateway", ["api/gateway/main.ts"], { PORT: String(gatewayPort), WEBHOOK_ALLOW_LOOPBACK: "true" });
  await healthy(gateway, gatewayPort);
  start("indexer", ["indexer/cli.ts", "run"]);
  const query = start("query", ["api/query/main.ts"], { PORT: String(queryPort) });
  await healthy(query, queryPort);

  const created = await runEntry(["api/gateway/admin.ts", "create-account", "faults"], { DATABASE_URL: databaseUrl });
  expect(created.code, created.stderr).toBe(0);
  apiKey = (JSON.parse(created.stdout) as { apiKey: string }).apiKey;
  const payer = await rest("POST", "/v1/agents", { agentId: "payer" });
  expect(payer.status, payer.text).toBe(201);
  payerAddress = (JSON.parse(payer.text) as { address: string }).address;
  expect((await rest("POST", "/v1/agents/payer/wallet/fund", { usdc: Number(PAYER_UNITS) / 1e6 })).status).toBe(200);
  const seller = await runEntry(["api/gateway/admin.ts", "create-account", "seller"], { DATABASE_URL: databaseUrl });
  expect(seller.code, seller.stderr).toBe(0);
  const gate = x402Middleware({
    facilitatorUrl: `http://${HOST}:${gatewayPort}`,
    apiKey: (JSON.parse(seller.stdout) as { apiKey: string }).apiKey,
    amount: PRICE_UNITS,
    token: "usdc",
    network: "solana-localnet",
    payTo: payee.toBase58(),
  });
  paidApi = createServer((incoming, res) => {
    const req = incoming as NodeRequest;
    gate(req, res, (error?: unknown) => {
      res.writeHead(error === undefined ? 200 : 500, { "content-type": "application/json" });
      res.end(JSON.stringify(error === undefined ? { data: "paid" } : { error: String(error) }));
    });
  });
  await new Promise<void>((listening) => paidApi.listen(0, HOST, listening));
  paidUrl = `http://${HOST}:${(paidApi.address() as AddressInfo).port}`;
}, 180_000);

afterAll(async () => {
  paidApi?.closeAllConnections();
  await new Promise((closed) => (paidApi === undefined ? closed(undefined) : paidApi.close(closed)));
  for (const service of services) {
    if (service.child.exitCode === null && service.child.signalCode === null) {
      service.child.kill("SIGKILL");
      await service.exited;
    }
  }
  rpcProxy?.close();
  receiver?.server.closeAllConnections();
  receiver?.server.close();
  if (receiver !== undefined) execFileSync("umount", [receiver.disk]);
  await localnet?.stop();
  await postgres?.stop();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

interface Payment {
  readonly key: string;
  readonly endpoint: string;
  txHash: string | null;
}

/** Every payment made in this file, across the faults (the end checks count them all). */
const payments: Payment[] = [];

/**
 * Steady traffic: `WORKERS` loops each paying one call after another with the SDK (no retries);
 * a failed payment keeps its key for the retry after the fault, its error is kept.
 */
function traffic(label: string): { readonly failed: unknown[]; readonly started: () => number; stop(): Promise<void> } {
  const failed: unknown[] = [];
  let stopping = false;
  let started = 0;
  const client = sdk(0);
  const worker = async (w: number): Promise<void> => {
    for (let n = 0; !stopping; n += 1) {
      const payment: Payment = { key: randomUUID(), endpoint: `${paidUrl}/${label}/w${w}/${n}`, txHash: null };
      payments.push(payment);
      started += 1;
      await client.pay({ endpoint: payment.endpoint, idempotencyKey: payment.key }).then(
        (result) => {
          if (result.paid) payment.txHash = result.txHash;
        },
        (error: unknown) => {
          failed.push(error);
          return new Promise((later) => setTimeout(later, 100));
        },
      );
    }
  };
  const workers = Array.from({ length: WORKERS }, (_, w) => worker(w));
  return {
    failed,
    started: () => started,
    async stop() {
      stopping = true;
      await Promise.all(workers);
    },
  };
}

/**
 * After a fault: each failed payment retried with its key (and its request) is paid, once; then
 * the chain, the tables, REST, GraphQL (once the indexer caught up) and /metrics agree.
 */
async function retryAndCheck(): Promise<void> {
  const retrying = sdk(3);
  for (const payment of payments) {
    if (payment.txHash === null) payment.txHash = await resolvePayment(retrying, payment);
  }
  const txHashes = new Set(payments.map((payment) => payment.txHash));
  expect(txHashes.size).toBe(payments.length);
  const made = payments.length;

  const payerUnits = PAYER_UNITS - BigInt(made) * PRICE_UNITS;
  expect(await chainUnits(payee)).toBe(BigInt(made) * PRICE_UNITS);
  expect(await chainUnits(new PublicKey(payerAddress))).toBe(payerUnits);
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    const settlements = await db.query<{ signature: string }>(
      "SELECT signature FROM settlements WHERE status = 'confirmed' AND payee = $1 ORDER BY signature",
      [payee.toBase58()],
    );
    expect(settlements.rows.map((row) => row.signature)).toEqual([...txHashes].sort());
    const reservations = await db.query<{ status: string; n: number }>(
      `SELECT r.status, count(*)::int AS n FROM spend_reservations r JOIN agents a ON a.agent_id = r.agent_id
       WHERE a.wallet_address = $1 AND r.status <> 'released' GROUP BY r.status ORDER BY r.status`,
      [payerAddress],
    );
    expect(reservations.rows).toEqual([{ status: "settled", n: made }]);
  } finally {
    await db.end();
  }
  const balance = await rest("GET", "/v1/agents/payer/wallet/balance");
  expect(JSON.parse(balance.text)).toEqual({ usdc: Number(payerUnits) / 1e6 });
  await pollUntil(
    async () => {
      const graphql = await fetch(`http://${HOST}:${queryPort}/graphql`, {
        method: "POST",
        headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
        body: JSON.stringify({ query: "{ agents { agentId balance } }" }),
      });
      const body = (await graphql.json()) as { data?: { agents: Array<{ agentId: string; balance: string }> } };
      return body.data?.agents[0]?.balance === (Number(payerUnits) / 1e6).toFixed(6);
    },
    { timeoutMs: 30_000, intervalMs: 250, what: "the payer's balance on GraphQL (the indexer caught up)" },
  );
  const metrics = await (await fetch(`http://${HOST}:${gatewayPort}/metrics`)).text();
  expect(metrics).toContain(`apg_payments{protocol="x402",outcome="settled"} ${made}`);
}

/**
 * Settles what a failed payment left, as a client following the SDK's typed errors would: resumed
 * with its key (the same authorization and payload); `PAYMENT_OUTCOME_UNKNOWN` (the facilitator
 * sent it, the outcome is not known yet) is asked again until the gateway learns the outcome;
 * `PAYMENT_SETTLED_ANSWER_LOST` is looked up instead of paid again; only a payment that failed for
 * good (its reservation released: nothing can land) is made again, with a new key.
 */
async function resolvePayment(client: Client, payment: Payment): Promise<string> {
  const deadline = Date.now() + 90_000;
  const errors: string[] = [];
  for (;;) {
    try {
      const resumed = await client.pay({ endpoint: payment.endpoint, idempotencyKey: payment.key });
      expect(resumed.paid, JSON.stringify(resumed)).toBe(true);
      if (resumed.paid) return resumed.txHash;
    } catch (error) {
      expect(error, String(error)).toBeInstanceOf(PaymentError);
      const code = (error as PaymentError).code;
      errors.push(`${code ?? "-"}: ${(error as Error).message}`);
      if (code === "PAYMENT_SETTLED_ANSWER_LOST") return settledTxHash(payment.endpoint);
      if (code !== "PAYMENT_OUTCOME_UNKNOWN") break;
      expect(Date.now() < deadline, `still unknown after 90 s:\n${errors.join("\n")}`).toBe(true);
      await new Promise((later) => setTimeout(later, 500));
    }
  }
  const again = await client.pay({ endpoint: payment.endpoint, idempotencyKey: randomUUID() });
  expect(again.paid, `${JSON.stringify(again)}\n${errors.join("\n")}`).toBe(true);
  if (!again.paid) throw new Error("unreachable");
  return again.txHash;
}

/** The transaction of the one reservation for `endpoint` the gateway closed as settled (each payment here has its own endpoint). */
async function settledTxHash(endpoint: string): Promise<string> {
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    const rows = await db.query<{ tx_hash: string }>("SELECT tx_hash FROM spend_reservations WHERE endpoint = $1 AND status = 'settled'", [
      endpoint,
    ]);
    expect(rows.rows, endpoint).toHaveLength(1);
    return rows.rows[0]!.tx_hash;
  } finally {
    await db.end();
  }
}

/**
 * A webhook receiver that keeps each delivery as a file named by its `webhook-id` on a disk of
 * its own (a 256 KiB tmpfs): a write that fails (ENOSPC) answers 507 with `Retry-After: 1`, as a
 * receiver out of space does, so the dispatcher retries it later.
 */
interface Receiver {
  readonly server: Server;
  readonly url: string;
  readonly disk: string;
  /** Answers per status. */
  readonly answers: Map<number, number>;
  /**
   * The files on its disk, listed between two writes: a write that fails leaves an empty file
   * for a moment before it is removed, which a listing taken meanwhile would report.
   */
  stored(): Promise<string[]>;
}
let receiver: Receiver | undefined;

async function startReceiver(): Promise<Receiver> {
  const disk = join(dir, "receiver-disk");
  await mkdir(disk);
  execFileSync("mount", ["-t", "tmpfs", "-o", "size=256k", "tmpfs", disk]);
  const answers = new Map<number, number>();
  // The disk's writes (with a failed write's removal) and listings, one at a time.
  let diskQueue: Promise<unknown> = Promise.resolve();
  const onDisk = <T>(step: () => Promise<T>): Promise<T> => {
    const run = diskQueue.then(step);
    diskQueue = run.catch(() => undefined);
    return run;
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const id = String(req.headers["webhook-id"] ?? "");
      const answer = (status: number): void => {
        answers.set(status, (answers.get(status) ?? 0) + 1);
        res.writeHead(status, status === 507 ? { "retry-after": "1" } : {});
        res.end();
      };
      if (!/^[A-Za-z0-9_-]+$/.test(id)) return answer(400);
      // A write that ran out of space leaves an empty file behind: removed, so the retry writes it whole.
      const file = join(disk, id);
      void onDisk(() =>
        writeFile(file, Buffer.concat(chunks), { flag: "wx" }).then(
          () => 204,
          (error: NodeJS.ErrnoException) => (error.code === "EEXIST" ? 409 : rm(file, { force: true }).then(() => 507)),
        ),
      ).then(answer);
    });
  });
  await new Promise<void>((listening) => server.listen(0, HOST, listening));
  return {
    server,
    url: `http://${HOST}:${(server.address() as AddressInfo).port}/hooks`,
    disk,
    answers,
    stored: () => onDisk(() => readdir(disk)),
  };
}

/** Fills the receiver's disk with one file, leaving less than one delivery's room. */
async function fillDisk(disk: string): Promise<string> {
  const filler = join(disk, "filler");
  await writeFile(filler, Buffer.alloc(256 * 1024)).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== "ENOSPC") throw error;
  });
  const probe = join(disk, "probe");
  await writeFile(probe, Buffer.alloc(4096)).then(
    () => expect.fail("the receiver's disk still has room"),
    (error: NodeJS.ErrnoException) => expect(error.code).toBe("ENOSPC"),
  );
  await rm(probe, { force: true });
  return filler;
}

function expectTyped(failed: readonly unknown[]): void {
  expect(failed.length).toBeGreaterThan(0);
  for (const error of failed) expect(error instanceof PaymentError || error instanceof ServiceError, String(error)).toBe(true);
}

describe("faults with payments in flight", () => {
  it("PostgreSQL restarted under payment traffic: the services reconnect, /readyz goes red then green, nothing lost or paid twice", async () => {
    const load = traffic("pg");
    await pollUntil(() => load.started() >= 4, { timeoutMs: 30_000, intervalMs: 20, what: "payments under way" });
    await postgres.stop();
    await pollUntil(async () => (await ready(gatewayPort)) === 503 && (await ready(queryPort)) === 503, {
      timeoutMs: 30_000,
      intervalMs: 100,
      what: () => `/readyz red on both services; last answers:\n${readyState()}`,
    });
    postgres = await startEmbeddedPostgres({ dataDir: join(dir, "pg"), port: postgresPort, durable: false });
    await pollUntil(async () => (await ready(gatewayPort)) === 200 && (await ready(queryPort)) === 200, {
      timeoutMs: 60_000,
      intervalMs: 200,
      what: () => `/readyz green again on both services; last answers:\n${readyState()}`,
    });
    const afterRestart = load.started();
    await pollUntil(() => load.started() >= afterRestart + 4, { timeoutMs: 30_000, intervalMs: 20, what: "payments after the restart" });
    await load.stop();
    for (const service of services) expect(service.child.exitCode, `${service.name}:\n${service.output}`).toBeNull();
    expectTyped(load.failed);
    await retryAndCheck();
  });

  it("the RPC endpoint unreachable for 30 s under payment traffic: typed failures, /readyz red then green, the indexer catches up", async () => {
    const load = traffic("rpc");
    await pollUntil(() => load.started() >= 4, { timeoutMs: 30_000, intervalMs: 20, what: "payments under way" });
    rpcProxy.cut();
    const cutAt = Date.now();
    await pollUntil(async () => (await ready(gatewayPort)) === 503 && (await ready(queryPort)) === 503, {
      timeoutMs: 20_000,
      intervalMs: 200,
      what: () => `/readyz red on both services; last answers:\n${readyState()}`,
    });
    expect(JSON.parse(lastReady.get(gatewayPort)!.slice(4)).checks.rpc.ok).toBe(false);
    await new Promise((later) => setTimeout(later, Math.max(0, cutAt + 30_000 - Date.now())));
    rpcProxy.restore();
    await pollUntil(async () => (await ready(gatewayPort)) === 200 && (await ready(queryPort)) === 200, {
      timeoutMs: 60_000,
      intervalMs: 200,
      what: () => `/readyz green again on both services; last answers:\n${readyState()}`,
    });
    const afterRestore = load.started();
    await pollUntil(() => load.started() >= afterRestore + 4, { timeoutMs: 30_000, intervalMs: 20, what: "payments after the outage" });
    await load.stop();
    for (const service of services) expect(service.child.exitCode, `${service.name}:\n${service.output}`).toBeNull();
    expectTyped(load.failed);
    await retryAndCheck();
  }, 150_000);
  it("a full disk on the webhook receiver under payment traffic: deliveries back off, nothing dropped, nothing twice", async () => {
    const hooks = await startReceiver();
    receiver = hooks;
    const filler = await fillDisk(hooks.disk);
    const endpoint = await rest("POST", "/v1/webhooks", { url: hooks.url, eventTypes: ["policy.violation"] });
    expect(endpoint.status, endpoint.text).toBe(201);
    // Refusals of a second agent are the events (policy.violation); the payer's traffic runs beside them.
    expect((await rest("POST", "/v1/agents", { agentId: "refused" })).status).toBe(201);
    const blocked = await rest("PUT", "/v1/policies/refused", { blockedDomains: ["blocked.example"] });
    expect(blocked.status, blocked.text).toBe(200);
    // The payments run beside the refusals that fill the outbox, then stop: the payer's funds are
    // for every fault of this file.
    const load = traffic("disk");
    const REFUSALS = 12;
    for (let n = 0; n < REFUSALS; n += 1) {
      const refused = await rest("POST", "/v1/agents/refused/payments/domain-check", { endpoint: `https://blocked.example/${n}` });
      expect(refused.status, refused.text).toBe(403);
    }
    await pollUntil(() => load.started() >= 4, { timeoutMs: 30_000, intervalMs: 20, what: "payments under way" });
    await load.stop();
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    try {
      type Delivery = { event_id: string; status: string; attempts: number };
      let seen: Delivery[] = [];
      const deliveries = async (): Promise<Delivery[]> => {
        seen = (
          await db.query<Delivery>(
            `SELECT d.event_id, d.status, d.attempts FROM event_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id
             WHERE w.url = $1 ORDER BY d.event_id`,
            [hooks.url],
          )
        ).rows;
        return seen;
      };
      // Every event is refused by the full disk at least twice: retried, never given up or dropped.
      await pollUntil(async () => (await deliveries()).filter((row) => row.attempts >= 2).length === REFUSALS, {
        timeoutMs: 60_000,
        intervalMs: 250,
        what: () => `every delivery tried twice against the full disk: ${JSON.stringify(seen)}`,
      });
      const whileFull = await deliveries();
      expect(whileFull).toHaveLength(REFUSALS);
      expect(
        whileFull.filter((row) => row.status !== "pending"),
        JSON.stringify(whileFull),
      ).toEqual([]);
      expect(await hooks.stored()).toEqual(["filler"]);
      expect(hooks.answers.get(507)).toBeGreaterThanOrEqual(2 * REFUSALS);
      expect(hooks.answers.get(204)).toBeUndefined();

      await rm(filler);
      await pollUntil(async () => (await deliveries()).every((row) => row.status === "delivered"), {
        timeoutMs: 60_000,
        intervalMs: 250,
        what: () => `every delivery delivered once the disk has room: ${JSON.stringify(seen)}`,
      });
      // One file per event, named by its webhook-id (the event id): nothing dropped, nothing twice
      // (a second delivery of one event would have found its file: 409).
      expect(hooks.answers.get(409)).toBeUndefined();
      expect(hooks.answers.get(204)).toBe(REFUSALS);
      const stored = (await hooks.stored()).sort();
      expect(stored).toEqual(whileFull.map((row) => row.event_id).sort());
      for (const id of stored) {
        const body = JSON.parse(await readFile(join(hooks.disk, id), "utf8")) as { event: string; agentId: string };
        expect(body).toMatchObject({ event: "policy.violation", agentId: "refused" });
      }
      const recorded = await db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM gateway_events WHERE type = 'policy.violation' AND payload->>'agentId' = 'refused'",
      );
      expect(recorded.rows[0]!.n).toBe(REFUSALS);
    } finally {
      await db.end();
    }
    for (const service of services) expect(service.child.exitCode, `${service.name}:\n${service.output}`).toBeNull();
    await retryAndCheck();
  }, 150_000);
});
