/**
 * Bench (d): a paid request on an open channel session, on loopback, next to the same
 * request unpaid, interleaved in the same run:
 *
 * - payee overhead: the request carrying a voucher the gateway already signed (the payee checks
 *   it locally and journals it) against the same handler without the middleware; with the file
 *   journal (fdatasync per request, group commit) and with the in-memory one;
 * - client end to end: `client.pay` with `channelSessions` (one `POST /v1/channels/{c}/vouchers`
 *   round trip to the gateway + the paid request) against a plain `fetch` of the unpaid route;
 * - settlement on chain per charge at batch sizes 1, 10 and 100 (transactions and lamports of
 *   the gateway's settle_channel transactions, from the ledger), next to one record_payment
 *   settlement (`Settlement.settlePayment`: transfer + record in one transaction).
 */
import { spawn } from "node:child_process";
import { mkdtemp } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { internalAgentId } from "../../api/shared/agent-ids.js";
import { PAYMENT_LEDGER_PROGRAM_ID } from "../../programs/payment_ledger/ts/index.js";
import type { System } from "../../scripts/system.js";
import { Client } from "../../sdk/src/client.js";
import {
  ChannelBook,
  FileVoucherJournal,
  MemoryVoucherJournal,
  mppMiddleware,
  type NodeRequest,
  type VoucherJournal,
} from "../../sdk/src/server/index.js";
import type { GatewayClient } from "../../test/gateway/support/gateway-payer.js";
import { type Stats, stats } from "./latency.js";
import { fundedAgent } from "./setup.js";

const PRICE_UNITS = 1_000n;
const REPO = resolve(fileURLToPath(import.meta.url), "..", "..", "..");
const BODY = JSON.stringify({ report: "x".repeat(200) });

export interface ChannelRun {
  readonly unpaidFile: Stats;
  readonly paidFile: Stats;
  readonly unpaidMemory: Stats;
  readonly paidMemory: Stats;
  readonly unpaidClient: Stats;
  readonly paidClient: Stats;
  /** Per pair (paid − the unpaid request right before it): load that hits both cancels out. */
  readonly overheadFile: Stats;
  /** The file journal with the payee in its own process (not sharing the system's event loop). */
  readonly overheadOwnProcess: Stats;
  readonly paidOwnProcess: Stats;
  readonly unpaidOwnProcess: Stats;
  readonly overheadMemory: Stats;
  readonly overheadClient: Stats;
  readonly settlement: ReadonlyArray<{ batch: number; transactions: number; lamports: number; charges: number }>;
  readonly recordPayment: { transactions: number; lamports: number };
  readonly journalSyncs: number;
  readonly problems: readonly string[];
}

interface Api {
  readonly origin: string;
  readonly book: ChannelBook;
  close(): Promise<void>;
}

/** The payee as a process of its own (test/sdk/support/channel-payee.ts, file journal, price PRICE_UNITS). */
async function startPayeeProcess(system: System, serverKey: string, payTo: string): Promise<{ origin: string; close(): Promise<void> }> {
  const journal = join(await mkdtemp(join(tmpdir(), "bench-payee-")), "vouchers.log");
  const child = spawn(process.execPath, ["--import", "tsx", join(REPO, "test/sdk/support/channel-payee.ts")], {
    cwd: REPO,
    stdio: ["ignore", "pipe", "inherit"],
    env: {
      ...process.env,
      PAY_TO: payTo,
      GATEWAY_URL: system.apiUrl,
      PAYEE_KEY: serverKey,
      RPC_URL: system.localnet.info.rpcUrl,
      PROGRAM_ID: PAYMENT_LEDGER_PROGRAM_ID.toBase58(),
      MINT: system.token,
      VOUCHER_JOURNAL: journal,
      PRICE_UNITS: PRICE_UNITS.toString(),
    },
  });
  const origin = await new Promise<string>((resolveOrigin, reject) => {
    const timer = setTimeout(() => reject(new Error("the payee process did not start")), 60_000);
    createInterface({ input: child.stdout! }).on("line", (line) => {
      if (!line.startsWith("listening ")) return;
      clearTimeout(timer);
      resolveOrigin(line.slice("listening ".length));
    });
    child.once("exit", (code) => reject(new Error(`the payee process exited with ${code}`)));
  });
  return {
    origin,
    close: () =>
      new Promise((resolveClose) => {
        child.once("exit", () => resolveClose());
        child.kill("SIGTERM");
      }),
  };
}

async function startApi(system: System, serverKey: string, payTo: string, journal: VoucherJournal, batch: number): Promise<Api> {
  const book = new ChannelBook({
    payTo,
    facilitatorUrl: system.apiUrl,
    apiKey: serverKey,
    ledger: { rpcUrl: system.localnet.info.rpcUrl, programId: PAYMENT_LEDGER_PROGRAM_ID.toBase58() },
    mint: system.token,
    journal,
    settlement: { maxCharges: batch, maxUnits: 1n << 62n, intervalMs: 0 },
  });
  await book.start();
  const middleware = mppMiddleware({
    amount: PRICE_UNITS,
    paymentMethods: ["stablecoin"],
    sessionSupported: true,
    payTo,
    facilitatorUrl: system.apiUrl,
    apiKey: serverKey,
    channels: book,
  });
  const server: Server = createServer((req, res) => {
    const send = () => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(BODY);
    };
    if (req.url?.startsWith("/free")) return send();
    middleware(req as NodeRequest, res, send);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    book,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await book.stop();
    },
  };
}

async function gateway(client: GatewayClient, method: string, path: string, body?: unknown): Promise<Record<string, unknown>> {
  const response = await fetch(`${client.gatewayUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${client.apiKey}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const answer = (await response.json()) as Record<string, unknown>;
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${JSON.stringify(answer)}`);
  return answer;
}

/** The session challenge of a route (its 402), echoed in every credential. */
async function challengeOf(url: string): Promise<Record<string, string>> {
  const response = await fetch(url);
  const header = response.headers.get("www-authenticate") ?? "";
  const session = header.split(/,\s*(?=Payment )/).find((part) => part.includes('intent="session"'));
  if (session === undefined) throw new Error(`no session challenge at ${url}: ${response.status} ${header}`);
  return Object.fromEntries([...session.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1]!, m[2]!]));
}

function credential(challenge: Record<string, string>, action: "open" | "voucher", voucher: Record<string, unknown>): string {
  const channel = voucher.channel as string;
  const payload = {
    action,
    channelId: channel,
    voucher: {
      channelId: channel,
      cumulativeAmount: voucher.cumulativeUnits,
      sequence: voucher.sequence,
      paymentId: voucher.paymentId,
      amount: voucher.amountUnits,
      endpoint: voucher.endpoint,
      digest: voucher.digest,
    },
    signer: voucher.signer,
    signature: voucher.signature,
    signatureType: "ed25519",
  };
  return Buffer.from(JSON.stringify({ challenge, payload })).toString("base64url");
}

async function timedFetch(url: string, headers: Record<string, string> = {}): Promise<[number, number]> {
  const started = performance.now();
  const response = await fetch(url, { headers });
  await response.arrayBuffer();
  return [response.status, performance.now() - started];
}

async function openChannel(client: GatewayClient, agentId: string, payTo: string, origin: string, depositUnits: bigint): Promise<string> {
  const opened = await gateway(client, "POST", `/v1/agents/${agentId}/channels`, {
    payee: payTo,
    serviceOrigin: origin,
    deposit: (Number(depositUnits) / 1e6).toFixed(6),
    protocol: "mpp",
    withdrawDelaySeconds: 1,
  });
  return opened.channel as string;
}

/** Payee overhead: N pre-signed vouchers presented in order, each paired with an unpaid request. */
async function payeeOverhead(
  system: System,
  client: GatewayClient,
  serverKey: string,
  payTo: string,
  journal: VoucherJournal | "own process",
  agentId: string,
  requests: number,
  warmup: number,
  problems: string[],
) {
  const api =
    journal === "own process"
      ? { ...(await startPayeeProcess(system, serverKey, payTo)), book: undefined }
      : await startApi(system, serverKey, payTo, journal, 1_000_000);
  const paid: number[] = [];
  const unpaid: number[] = [];
  try {
    const url = `${api.origin}/paid`;
    const challenge = await challengeOf(url);
    const channel = await openChannel(client, agentId, payTo, api.origin, PRICE_UNITS * BigInt(requests + warmup + 1));
    const vouchers: Record<string, unknown>[] = [];
    for (let i = 0; i < requests + warmup; i++) {
      vouchers.push(await gateway(client, "POST", `/v1/channels/${channel}/vouchers`, { endpoint: url, amount: "0.001" }));
    }
    for (let i = 0; i < vouchers.length; i++) {
      const [freeStatus, free_ms] = await timedFetch(`${api.origin}/free`);
      const [status, paid_ms] = await timedFetch(url, {
        authorization: `Payment ${credential(challenge, i === 0 ? "open" : "voucher", vouchers[i]!)}`,
      });
      if (status !== 200 || freeStatus !== 200) problems.push(`payee overhead request ${i}: ${status}`);
      if (i < warmup) continue;
      unpaid.push(free_ms);
      paid.push(paid_ms);
    }
    await api.book?.flush(channel);
    await gateway(client, "POST", `/v1/channels/${channel}/close`, {});
  } finally {
    await api.close();
  }
  return { paid: stats(paid), unpaid: stats(unpaid), overhead: stats(paid.map((p, i) => p - unpaid[i]!)) };
}

async function settlementCost(
  system: System,
  client: GatewayClient,
  serverKey: string,
  payTo: string,
  agentId: string,
  batch: number,
  problems: string[],
): Promise<{ batch: number; transactions: number; lamports: number; charges: number }> {
  const api = await startApi(system, serverKey, payTo, new MemoryVoucherJournal(), batch);
  try {
    const url = `${api.origin}/paid`;
    const challenge = await challengeOf(url);
    const channel = await openChannel(client, agentId, payTo, api.origin, PRICE_UNITS * BigInt(batch + 1));
    for (let i = 0; i < batch; i++) {
      const voucher = await gateway(client, "POST", `/v1/channels/${channel}/vouchers`, { endpoint: url, amount: "0.001" });
      const [status] = await timedFetch(url, { authorization: `Payment ${credential(challenge, i === 0 ? "open" : "voucher", voucher)}` });
      if (status !== 200) problems.push(`settlement batch ${batch}, request ${i}: ${status}`);
    }
    await api.book.flush(channel);
    const state = api.book.state(channel)!;
    if (state.confirmedSequence !== BigInt(batch)) problems.push(`batch ${batch}: confirmed ${state.confirmedSequence}`);
    let lamports = 0;
    for (const signature of state.settlementTxs) {
      const tx = await system.ledger.connection.getTransaction(signature, { commitment: "confirmed", maxSupportedTransactionVersion: 0 });
      lamports += tx?.meta?.fee ?? Number.NaN;
    }
    await gateway(client, "POST", `/v1/channels/${channel}/close`, {});
    return { batch, transactions: state.settlementTxs.length, lamports, charges: batch };
  } finally {
    await api.close();
  }
}

export async function runChannelSession(
  system: System,
  client: GatewayClient,
  serverKey: string,
  requests: number,
  warmup: number,
  accountId: string,
): Promise<ChannelRun> {
  const problems: string[] = [];
  const agentId = "bench-channel";
  await fundedAgent(client, agentId, 50);
  const payTo = (await gateway({ gatewayUrl: client.gatewayUrl, apiKey: serverKey }, "POST", "/v1/agents", { agentId: "bench-till" }))
    .address as string;

  const fileJournal = new FileVoucherJournal(join(await mkdtemp(join(tmpdir(), "bench-journal-")), "vouchers.log"));
  const file = await payeeOverhead(system, client, serverKey, payTo, fileJournal, agentId, requests, warmup, problems);
  const memory = await payeeOverhead(system, client, serverKey, payTo, new MemoryVoucherJournal(), agentId, requests, warmup, problems);
  const own = await payeeOverhead(system, client, serverKey, payTo, "own process", agentId, requests, warmup, problems);

  // The client end to end, with the file journal.
  const api = await startApi(
    system,
    serverKey,
    payTo,
    new FileVoucherJournal(join(await mkdtemp(join(tmpdir(), "bench-client-")), "v.log")),
    1_000_000,
  );
  const paidClient: number[] = [];
  const unpaidClient: number[] = [];
  try {
    const payer = new Client({
      agentId,
      apiKey: client.apiKey,
      baseUrl: client.gatewayUrl,
      protocolPreference: "mpp",
      channelSessions: { depositMultiple: requests + warmup + 10, withdrawDelaySeconds: 1 },
    });
    for (let i = 0; i < requests + warmup; i++) {
      const [, free_ms] = await timedFetch(`${api.origin}/free`);
      const started = performance.now();
      const result = await payer.pay({ endpoint: `${api.origin}/paid` });
      const paid_ms = performance.now() - started;
      if (!result.paid) problems.push(`client request ${i} was not paid`);
      // The first pays the 402 and the open: not a request on an open session.
      if (i < Math.max(warmup, 1)) continue;
      unpaidClient.push(free_ms);
      paidClient.push(paid_ms);
    }
    await payer.closeChannelSessions();
  } finally {
    await api.close();
  }

  const settlement = [];
  for (const batch of [1, 10, 100]) settlement.push(await settlementCost(system, client, serverKey, payTo, agentId, batch, problems));
  const recorded = await system.settlement.settlePayment({
    agentId: internalAgentId(accountId, agentId),
    payee: payTo,
    amountUnits: PRICE_UNITS,
    protocol: "mpp",
    rail: "stablecoin",
    endpoint: "127.0.0.1/paid",
  });
  const tx = await system.ledger.connection.getTransaction(recorded.txHash, { commitment: "confirmed", maxSupportedTransactionVersion: 0 });
  return {
    unpaidFile: file.unpaid,
    paidFile: file.paid,
    unpaidMemory: memory.unpaid,
    paidMemory: memory.paid,
    unpaidClient: stats(unpaidClient),
    paidClient: stats(paidClient),
    overheadFile: file.overhead,
    overheadOwnProcess: own.overhead,
    paidOwnProcess: own.paid,
    unpaidOwnProcess: own.unpaid,
    overheadMemory: memory.overhead,
    overheadClient: stats(paidClient.map((p, i) => p - unpaidClient[i]!)),
    settlement,
    recordPayment: { transactions: 1, lamports: tx?.meta?.fee ?? Number.NaN },
    journalSyncs: fileJournal.syncs,
    problems,
  };
}
