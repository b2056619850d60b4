/**
 * Channel sessions end to end on loopback: the SDK client pays a `mppMiddleware` route
 * offering the MPP `session` intent, from a payment_ledger channel the gateway opened for the
 * agent; the payee accepts each voucher locally and settles in batches through the gateway; the
 * client closes. Then ledger, tables and answers must agree. And a payee SIGKILLed after it
 * accepted vouchers and before it presented them replays its journal when restarted and settles
 * them, exactly once.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { PublicKey } from "@solana/web3.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PAYMENT_LEDGER_PROGRAM_ID } from "../../programs/payment_ledger/ts/index.js";
import { Client, type PaidResult } from "../../sdk/src/client.js";
import {
  ChannelBook,
  FileVoucherJournal,
  MemoryVoucherJournal,
  mppMiddleware,
  type MppPayment,
  type NodeRequest,
  x402Middleware,
  type X402Payment,
} from "../../sdk/src/server/index.js";
import { pollUntil } from "../support/poll.js";
import { fundedAgent, rest, serve, type Served, startTestSystem, type TestSystem, tokenBalanceUnits } from "./server-support.js";

const REPO = resolve(fileURLToPath(import.meta.url), "..", "..", "..");
const PRICE_UNITS = 10_000n;

let test: TestSystem;
let buyerKey: string;
let sellerKey: string;
let payTo: string;
const children: ChildProcess[] = [];
const servers: Served[] = [];

beforeAll(async () => {
  test = await startTestSystem();
  buyerKey = (await test.system.createAccount("buyer")).apiKey;
  sellerKey = (await test.system.createAccount("seller")).apiKey;
  payTo = await fundedAgent(test.system, sellerKey, "till", 0);
}, 180_000);

afterAll(async () => {
  for (const child of children) child.kill("SIGKILL");
  for (const server of servers) await server.close();
  await test?.stop();
});

function client(agentId: string): Client {
  return new Client({
    agentId,
    apiKey: buyerKey,
    baseUrl: test.system.apiUrl,
    protocolPreference: "mpp",
    explorerRpcUrl: test.system.localnet.info.rpcUrl,
    channelSessions: { depositMultiple: 20, withdrawDelaySeconds: 1 },
  });
}

function ledgerOptions() {
  return { rpcUrl: test.system.localnet.info.rpcUrl, programId: PAYMENT_LEDGER_PROGRAM_ID.toBase58() };
}

async function channelRows(channel: string) {
  const session = await test.system.pool.query<{ status: string; settled_cumulative: string; accepted_sequence: string }>(
    "SELECT status, settled_cumulative::text, accepted_sequence::text FROM channel_sessions WHERE channel = $1",
    [channel],
  );
  const charges = await test.system.pool.query<{ status: string; n: number }>(
    "SELECT status, count(*)::int AS n FROM channel_charges WHERE channel = $1 GROUP BY status ORDER BY status",
    [channel],
  );
  return { session: session.rows[0], charges: Object.fromEntries(charges.rows.map((r) => [r.status, r.n])) };
}

describe("a channel session paid by the SDK client", () => {
  it("N paid requests on one channel, settled in batches by the payee, closed by the client: ledger, tables and answers agree", async () => {
    const agentAddress = await fundedAgent(test.system, buyerKey, "session-buyer", 2);
    const journalDir = await mkdtemp(join(tmpdir(), "payee-"));
    const book = new ChannelBook({
      payTo,
      facilitatorUrl: test.system.apiUrl,
      apiKey: sellerKey,
      ledger: ledgerOptions(),
      mint: test.system.token,
      journal: new FileVoucherJournal(join(journalDir, "vouchers.log")),
      settlement: { maxCharges: 4, intervalMs: 0 },
    });
    await book.start();
    let runs = 0;
    const middleware = mppMiddleware({
      amount: PRICE_UNITS,
      paymentMethods: ["stablecoin"],
      sessionSupported: true,
      payTo,
      facilitatorUrl: test.system.apiUrl,
      apiKey: sellerKey,
      channels: book,
    });
    const served = await serve((req, res) =>
      middleware(req as NodeRequest, res, () => {
        runs += 1;
        const payment = (req as NodeRequest).payment as MppPayment;
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ sequence: payment.channel?.sequence.toString() ?? null, payer: payment.payer }));
      }),
    );
    servers.push(served);
    const payeeBefore = await tokenBalanceUnits(test, payTo);
    const agentBefore = await tokenBalanceUnits(test, agentAddress);

    const buyer = client("session-buyer");
    const N = 10;
    const results: PaidResult[] = [];
    for (let i = 0; i < N; i++) {
      const result = await buyer.pay({ endpoint: `${served.origin}/v1/search?q=${i}` });
      expect(result.paid).toBe(true);
      results.push(result as PaidResult);
    }
    expect(runs).toBe(N);
    const channel = results[0]!.channel!.address;
    expect(results.map((r) => r.channel!.address)).toEqual(new Array(N).fill(channel));
    expect(results.map((r) => r.channel!.sequence)).toEqual(Array.from({ length: N }, (_, i) => i + 1));
    expect(results.map((r) => (r.data as { payer: string }).payer)).toEqual(new Array(N).fill(agentAddress));
    expect(results.at(-1)!.channel!.cumulative).toEqual({ usdc: 0.1 });

    // Batches of 4: two presentations during the run; the rest at close.
    await book.flush();
    const settledBeforeClose = book.state(channel)!;
    expect(settledBeforeClose.confirmedSequence).toBe(10n);
    expect(settledBeforeClose.settlementTxs.length).toBeGreaterThanOrEqual(2);

    const closed = await buyer.closeChannelSessions();
    expect(closed).toEqual([{ channel, settledCumulative: { usdc: 0.1 }, refunded: { usdc: 0.1 }, closeTx: expect.any(String) }]);

    // The ledger: the payee got exactly N charges, the agent the rest of its deposit back.
    expect(await tokenBalanceUnits(test, payTo)).toBe(payeeBefore + BigInt(N) * PRICE_UNITS);
    expect(await tokenBalanceUnits(test, agentAddress)).toBe(agentBefore - BigInt(N) * PRICE_UNITS);
    expect(await test.connection.getAccountInfo(new PublicKey(channel), "confirmed")).toBeNull();
    // The tables.
    expect(await channelRows(channel)).toEqual({
      session: { status: "closed", settled_cumulative: "100000", accepted_sequence: "10" },
      charges: { settled: N },
    });
    // The answers.
    const view = await rest(test.system, buyerKey, "GET", `/v1/channels/${channel}`);
    expect(view.status).toBe(200);
    expect(view.body).toMatchObject({ status: "closed", settledCumulativeUnits: "100000", refundedUnits: "100000" });
    // GraphQL, once the indexer has the close: the chain's view (deposit, settled, refunded) and
    // the gateway's (every charge, now settled by a settlement transaction the payee confirmed).
    let lastGraph = "";
    const graph = await pollUntil(
      async () => {
        const answer = await rest(test.system, buyerKey, "POST", "/graphql", {
          query: `query ($a: String!) { channel(address: $a) {
            status onChain depositUnits acceptedUnits settledUnits refundedUnits acceptedUnsettledUnits signedSequence
            charges(first: 50) { nodes { sequence amountUnits status settlementTx chainStatus } } } }`,
          variables: { a: channel },
        });
        lastGraph = answer.text;
        const found = (answer.body as { data?: { channel?: Record<string, any> | null } }).data?.channel;
        return found?.status === "closed" && found.charges.nodes.every((c: { chainStatus: unknown }) => c.chainStatus !== null)
          ? found
          : undefined;
      },
      {
        timeoutMs: 30_000,
        intervalMs: 100,
        what: () => `the closed channel in GraphQL with every charge indexed; last answer: ${lastGraph}`,
      },
    );
    expect(graph).toMatchObject({
      onChain: true,
      depositUnits: "200000",
      acceptedUnits: "100000",
      settledUnits: "100000",
      refundedUnits: "100000",
      acceptedUnsettledUnits: "0",
      signedSequence: "10",
    });
    expect(graph.charges.nodes).toHaveLength(N);
    const settlementTxs = new Set(settledBeforeClose.settlementTxs);
    for (const charge of graph.charges.nodes) {
      expect(charge).toMatchObject({ amountUnits: "10000", status: "settled" });
      expect(settlementTxs.has(charge.settlementTx), `charge ${charge.sequence} settled by ${charge.settlementTx}`).toBe(true);
    }
    // A client without channelSessions pays the same route as before (the extra challenge is skipped).
    await fundedAgent(test.system, buyerKey, "plain-buyer", 1);
    const plain = new Client({ agentId: "plain-buyer", apiKey: buyerKey, baseUrl: test.system.apiUrl, protocolPreference: "mpp" });
    const runsBefore = runs;
    const old = (await plain.pay({ endpoint: `${served.origin}/v1/search` })) as PaidResult;
    expect(old.paid).toBe(true);
    expect(old.channel).toBeUndefined();
    expect(runs).toBe(runsBefore + 1);
    await book.stop();
  });
});

describe("a paid request whose answer is lost", () => {
  it("retires its channel (the payee may hold a voucher the next one cannot follow): a new channel pays, and both are closed", async () => {
    await fundedAgent(test.system, buyerKey, "lossy-buyer", 2);
    const book = new ChannelBook({
      payTo,
      facilitatorUrl: test.system.apiUrl,
      apiKey: sellerKey,
      ledger: ledgerOptions(),
      mint: test.system.token,
      journal: new MemoryVoucherJournal(),
      settlement: { intervalMs: 0 },
    });
    await book.start();
    const middleware = mppMiddleware({
      amount: PRICE_UNITS,
      paymentMethods: ["stablecoin"],
      sessionSupported: true,
      payTo,
      facilitatorUrl: test.system.apiUrl,
      apiKey: sellerKey,
      channels: book,
    });
    let served = 0;
    const api = await serve((req, res) =>
      middleware(req as NodeRequest, res, () => {
        served += 1;
        res.writeHead(200, { "content-type": "application/json" });
        res.end("{}");
      }),
    );
    servers.push(api);
    const payeeBefore = await tokenBalanceUnits(test, payTo);
    let paidRequests = 0;
    // The second paid request reaches the payee (which serves it), but its answer never arrives.
    const lossy = async (input: string | URL, init?: RequestInit): Promise<Response> => {
      const response = await fetch(input, init);
      const headers = new Headers(init?.headers);
      if (String(input).startsWith(api.origin) && headers.get("authorization")?.startsWith("Payment ") && ++paidRequests === 2) {
        await response.arrayBuffer();
        throw new TypeError("fetch failed: connection reset");
      }
      return response;
    };
    const buyer = new Client({
      agentId: "lossy-buyer",
      apiKey: buyerKey,
      baseUrl: test.system.apiUrl,
      protocolPreference: "mpp",
      explorerRpcUrl: test.system.localnet.info.rpcUrl,
      maxRetries: 0,
      fetch: lossy,
      channelSessions: { depositMultiple: 20, withdrawDelaySeconds: 1 },
    });
    const first = (await buyer.pay({ endpoint: `${api.origin}/data` })) as PaidResult;
    await expect(buyer.pay({ endpoint: `${api.origin}/data` })).rejects.toThrow(/got no answer; channel .* is retired/);
    const third = (await buyer.pay({ endpoint: `${api.origin}/data` })) as PaidResult;
    expect(served).toBe(3);
    expect(third.channel!.address).not.toBe(first.channel!.address);
    expect(third.channel!.sequence).toBe(1);

    const closed = await buyer.closeChannelSessions();
    expect(closed.map((c) => [c.channel, c.settledCumulative])).toEqual([
      [first.channel!.address, { usdc: 0.02 }],
      [third.channel!.address, { usdc: 0.01 }],
    ]);
    expect(await tokenBalanceUnits(test, payTo)).toBe(payeeBefore + 3n * PRICE_UNITS);
    await book.stop();
  });
});

describe("x402 v2 upto over the same channel", () => {
  it("the client pays an x402Middleware route with channel vouchers in PAYMENT-SIGNATURE; the payee settles them", async () => {
    const agentAddress = await fundedAgent(test.system, buyerKey, "upto-buyer", 2);
    const book = new ChannelBook({
      payTo,
      facilitatorUrl: test.system.apiUrl,
      apiKey: sellerKey,
      ledger: ledgerOptions(),
      mint: test.system.token,
      journal: new MemoryVoucherJournal(),
      settlement: { intervalMs: 0 },
    });
    await book.start();
    const payments: X402Payment[] = [];
    const middleware = x402Middleware({
      amount: PRICE_UNITS.toString(),
      token: "usdc",
      payTo,
      facilitatorUrl: test.system.apiUrl,
      apiKey: sellerKey,
      channels: book,
    });
    const served = await serve((req, res) =>
      middleware(req as NodeRequest, res, () => {
        payments.push((req as NodeRequest).payment as X402Payment);
        res.writeHead(200, { "content-type": "application/json" });
        res.end("{}");
      }),
    );
    servers.push(served);
    const payeeBefore = await tokenBalanceUnits(test, payTo);
    const buyer = client("upto-buyer");
    const results: PaidResult[] = [];
    for (let i = 0; i < 3; i++) results.push((await buyer.pay({ endpoint: `${served.origin}/quote` })) as PaidResult);
    expect(results.map((r) => [r.protocol, r.channel?.sequence])).toEqual([
      ["x402", 1],
      ["x402", 2],
      ["x402", 3],
    ]);
    expect(payments.map((p) => [p.payer, p.channel?.sequence])).toEqual([
      [agentAddress, 1n],
      [agentAddress, 2n],
      [agentAddress, 3n],
    ]);
    await book.flush();
    expect(await tokenBalanceUnits(test, payTo)).toBe(payeeBefore + 3n * PRICE_UNITS);
    const [closed] = await buyer.closeChannelSessions();
    expect(closed).toMatchObject({ settledCumulative: { usdc: 0.03 } });
    await book.stop();
  });
});

// ---------------------------------------------------------------- crash

interface Payee {
  readonly child: ChildProcess;
  readonly origin: string;
  readonly settledAtStart: bigint;
}

function startPayee(journal: string, channel: string | undefined): Promise<Payee> {
  return new Promise((resolveStart, rejectStart) => {
    const child = spawn(process.execPath, ["--import", "tsx", join(REPO, "test/sdk/support/channel-payee.ts")], {
      cwd: REPO,
      stdio: ["ignore", "pipe", "pipe"],
      env: {
        ...process.env,
        PAY_TO: payTo,
        GATEWAY_URL: test.system.apiUrl,
        PAYEE_KEY: sellerKey,
        RPC_URL: test.system.localnet.info.rpcUrl,
        PROGRAM_ID: PAYMENT_LEDGER_PROGRAM_ID.toBase58(),
        MINT: test.system.token,
        VOUCHER_JOURNAL: journal,
        PRICE_UNITS: PRICE_UNITS.toString(),
        ...(channel === undefined ? {} : { CHANNEL: channel }),
      },
    });
    children.push(child);
    let stderr = "";
    child.stderr!.on("data", (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-4_000);
    });
    let settledAtStart = 0n;
    const timer = setTimeout(() => rejectStart(new Error(`the payee did not start\n${stderr}`)), 60_000);
    createInterface({ input: child.stdout! }).on("line", (line) => {
      if (line.startsWith("settled ")) settledAtStart = BigInt(line.slice("settled ".length));
      if (!line.startsWith("listening ")) return;
      clearTimeout(timer);
      resolveStart({ child, origin: line.slice("listening ".length), settledAtStart });
    });
    child.once("exit", (code, signal) => {
      if (signal !== "SIGKILL") rejectStart(new Error(`the payee exited (code ${code}, signal ${signal})\n${stderr}`));
    });
  });
}

function kill(payee: Payee): Promise<void> {
  return new Promise((resolveKill) => {
    payee.child.once("exit", () => resolveKill());
    payee.child.kill("SIGKILL");
  });
}

describe("a payee killed before it settled", () => {
  it("replays its journal when restarted and settles the accepted vouchers exactly once", async () => {
    await fundedAgent(test.system, buyerKey, "crash-buyer", 2);
    const journal = join(await mkdtemp(join(tmpdir(), "payee-crash-")), "vouchers.log");
    const payeeBefore = await tokenBalanceUnits(test, payTo);
    const first = await startPayee(journal, undefined);
    const buyer = client("crash-buyer");
    const N = 5;
    let channel = "";
    for (let i = 0; i < N; i++) {
      const paid = (await buyer.pay({ endpoint: `${first.origin}/paid` })) as PaidResult;
      channel = paid.channel!.address;
    }
    await kill(first); // accepted, durable in the journal, never presented
    expect((await channelRows(channel)).session).toMatchObject({ accepted_sequence: "0", settled_cumulative: "0" });
    expect(await tokenBalanceUnits(test, payTo)).toBe(payeeBefore);

    const second = await startPayee(journal, channel);
    expect(second.settledAtStart).toBe(BigInt(N));
    expect((await channelRows(channel)).session).toMatchObject({ accepted_sequence: "5", settled_cumulative: "50000" });
    expect(await tokenBalanceUnits(test, payTo)).toBe(payeeBefore + BigInt(N) * PRICE_UNITS);
    const settlementTxs = (await rest(test.system, buyerKey, "GET", `/v1/channels/${channel}`)).body.settlementTxs;

    // Killed again and restarted: the journal says confirmed, nothing is presented twice.
    await kill(second);
    const third = await startPayee(journal, channel);
    expect(third.settledAtStart).toBe(BigInt(N));
    expect((await rest(test.system, buyerKey, "GET", `/v1/channels/${channel}`)).body.settlementTxs).toEqual(settlementTxs);
    await kill(third);

    // The client closes; the service it paid is gone, the gateway closes anyway.
    const [closed] = await buyer.closeChannelSessions();
    expect(closed).toMatchObject({ channel, settledCumulative: { usdc: 0.05 } });
    expect(await tokenBalanceUnits(test, payTo)).toBe(payeeBefore + BigInt(N) * PRICE_UNITS);
    expect(await channelRows(channel)).toMatchObject({ charges: { settled: N } });
  });
});
