/**
 * The Yellowstone source, driven through the production napi client (`@triton-one/yellowstone-grpc`)
 * against a TEST DOUBLE of a Yellowstone gRPC server (test/support/geyser-double.ts) that serves
 * what a real local ledger executed: real payments, recorded by the real program.
 */
import type { AnchorProvider } from "@coral-xyz/anchor";
import { type Keypair, type PublicKey, Transaction, type TransactionInstruction } from "@solana/web3.js";
import YellowstoneModule, { CommitmentLevel, type SubscribeUpdate } from "@triton-one/yellowstone-grpc";
import bs58 from "bs58";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RawTransaction, SlotUpdate, SourceUpdate } from "../indexer/sources/source.js";
import { ReplayUnavailableError } from "../indexer/sources/source.js";
import { normalizeTransaction, replayUnavailableFrom, YellowstoneSource } from "../indexer/sources/yellowstone.js";
import {
  associatedTransferAccounts,
  decodeEventInstructionData,
  endpointHash,
  invocationPda,
  type LedgerEvent,
  openInvocationInstruction,
  PAYMENT_LEDGER_PROGRAM_ID,
  recordPaymentInstruction,
} from "../programs/payment_ledger/ts/index.js";
import {
  type AgentWallet,
  createAgentWallet,
  type LedgerAccess,
  ledgerAccess,
  type PaymentTerms,
  recordPayment as recordLedgerPayment,
} from "../scripts/agent-wallets.js";
import { type Localnet, startLocalnet } from "../scripts/localnet.js";
import { GeyserDouble } from "./support/geyser-double.js";
import { pollUntil } from "./support/poll.js";

const USDC = 1_000_000n;
const PROGRAM_ID = PAYMENT_LEDGER_PROGRAM_ID.toBase58();

let localnet: Localnet;
let provider: AnchorProvider;
let ledger: LedgerAccess;
let double: GeyserDouble;
const doubles: GeyserDouble[] = [];

async function startDouble(options: { retentionSlots?: number; pingIntervalMs?: number } = {}): Promise<GeyserDouble> {
  const started = await GeyserDouble.start({ rpcUrl: localnet.rpcUrl, ...options });
  doubles.push(started);
  return started;
}

beforeAll(async () => {
  localnet = await startLocalnet();
  ledger = ledgerAccess(localnet);
  provider = ledger.provider;
  double = await startDouble({ retentionSlots: 100_000 });
});

afterAll(async () => {
  for (const d of doubles) await d.stop();
  await localnet?.stop();
});

// ---- helpers ---------------------------------------------------------------------------------

function sourceFor(server: GeyserDouble): YellowstoneSource {
  return new YellowstoneSource({ endpoint: server.endpoint, programId: PROGRAM_ID });
}

/** Follows until `done` holds for what has arrived (or the timeout aborts, failing the test). */
async function follow(
  source: YellowstoneSource,
  fromSlot: bigint,
  done: (updates: SourceUpdate[]) => boolean,
  options: { timeoutMs?: number; onUpdate?: (update: SourceUpdate, all: SourceUpdate[]) => void } = {},
): Promise<SourceUpdate[]> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), options.timeoutMs ?? 20_000);
  const updates: SourceUpdate[] = [];
  try {
    for await (const update of source.follow(fromSlot, controller.signal)) {
      updates.push(update);
      options.onUpdate?.(update, updates);
      if (done(updates)) return updates;
    }
  } finally {
    clearTimeout(timer);
  }
  throw new Error(`follow ended before the expected updates arrived (${updates.length} updates)`);
}

const transactions = (updates: SourceUpdate[]): RawTransaction[] =>
  updates.flatMap((u) => (u.kind === "transaction" ? [u.transaction] : []));
const slotUpdates = (updates: SourceUpdate[]): SlotUpdate[] => updates.flatMap((u) => (u.kind === "slot" ? [u.slot] : []));
const confirmedThrough = (slot: bigint) => (updates: SourceUpdate[]) =>
  slotUpdates(updates).some((s) => s.status === "confirmed" && s.slot >= slot);

/** Events the program emitted through emit_cpi! (its self-invocations among the inner instructions). */
function eventsOf(tx: RawTransaction): LedgerEvent[] {
  return tx.innerInstructions.flatMap((group) =>
    group.instructions.flatMap((ix) => {
      if (tx.accountKeys[ix.programIdIndex] !== PROGRAM_ID) return [];
      const event = decodeEventInstructionData(ix.data);
      return event === null ? [] : [event];
    }),
  );
}

const x402 = (paymentId: bigint, amountUnits: bigint): PaymentTerms => ({
  paymentId,
  amountUnits,
  protocol: "x402",
  rail: "stablecoin",
  endpointHash: endpointHash("api.example.com/v1/quote"),
});

function send(instruction: TransactionInstruction, signers: Keypair[]): Promise<string> {
  return provider.sendAndConfirm(new Transaction().add(instruction), signers);
}

function recordPayment(payer: AgentWallet, payee: AgentWallet, terms: PaymentTerms, invocation?: PublicKey): Promise<string> {
  return recordLedgerPayment(ledger, payer, payee, terms, invocation);
}

async function slotOf(signature: string): Promise<bigint> {
  const tx = await provider.connection.getTransaction(signature, { commitment: "confirmed", maxSupportedTransactionVersion: 0 });
  if (tx === null) throw new Error(`no transaction ${signature}`);
  return BigInt(tx.slot);
}

/** `promise`, or a failure naming the step that did not finish within `ms`. */
async function within<T>(step: string, promise: Promise<T>, ms = 15_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for: ${step}`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** The transaction once the ledger serves it at `confirmed` (polled: no websocket involved). */
async function landed(
  signature: string,
  timeoutMs = 15_000,
): Promise<NonNullable<Awaited<ReturnType<typeof provider.connection.getTransaction>>>> {
  return pollUntil(() => provider.connection.getTransaction(signature, { commitment: "confirmed", maxSupportedTransactionVersion: 0 }), {
    timeoutMs,
    intervalMs: 25,
    what: `transaction ${signature} to be confirmed`,
  });
}

const confirmedSlot = async (): Promise<bigint> => BigInt(await provider.connection.getSlot("confirmed"));

interface LedgerBlock {
  blockhash: string;
  previousBlockhash: string;
  parentSlot: number;
  blockTime: number | null;
  transactions: { transaction: { signatures: string[]; message: { accountKeys: string[] } }; meta: { err: unknown } }[];
}

/** What the ledger executed in [from, to]: its successful program transactions, in chain order. */
async function ledgerProgramTransactions(
  from: bigint,
  to: bigint,
): Promise<{ signature: string; slot: bigint; blockTime: number | null }[]> {
  const slots = await provider.connection.getBlocks(Number(from), Number(to), "confirmed");
  const out: { signature: string; slot: bigint; blockTime: number | null }[] = [];
  for (const slot of slots) {
    const block = await ledgerBlock(slot);
    for (const tx of block.transactions) {
      if (tx.meta.err === null && tx.transaction.message.accountKeys.includes(PROGRAM_ID)) {
        out.push({ signature: tx.transaction.signatures[0]!, slot: BigInt(slot), blockTime: block.blockTime });
      }
    }
  }
  return out;
}

async function ledgerBlock(slot: number): Promise<LedgerBlock> {
  const response = await fetch(localnet.rpcUrl, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "getBlock",
      params: [slot, { encoding: "json", maxSupportedTransactionVersion: 0 }],
    }),
  });
  const body = (await response.json()) as { result: LedgerBlock };
  return body.result;
}

async function rejection(attempt: Promise<unknown>): Promise<unknown> {
  try {
    await attempt;
  } catch (error) {
    return error;
  }
  throw new Error("expected a rejection");
}

/** An error's message with its `cause` chain (the napi client nests the gRPC status there). */
function errorText(error: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = error; e !== undefined && e !== null; e = e instanceof Error ? e.cause : undefined) {
    parts.push(e instanceof Error ? e.message : String(e));
  }
  return parts.join(" | ");
}

// ---- rules -----------------------------------------------------------------------------------

describe("Yellowstone source (napi client) against the Geyser test double on the local ledger", () => {
  it("every program transaction the ledger executed arrives, in chain order, at its slot, with decodable PaymentRecorded events", async () => {
    const fromSlot = (await confirmedSlot()) + 1n;
    const received: SourceUpdate[] = [];
    const controller = new AbortController();
    const following = (async () => {
      for await (const update of sourceFor(double).follow(fromSlot, controller.signal)) received.push(update);
    })();

    // Real traffic: wallet setup (airdrops, token accounts: not the program's), payments, an invocation.
    const agent = await createAgentWallet(ledger, { usdcUnits: 10n * USDC });
    const subAgent = await createAgentWallet(ledger, { usdcUnits: 10n * USDC });
    const service = await createAgentWallet(ledger);
    const paid = [
      { signature: await recordPayment(agent, service, x402(1n, 1_250_000n)), payer: agent, amount: 1_250_000n },
      {
        signature: await recordPayment(agent, service, { ...x402(2n, 700_000n), protocol: "mpp", rail: "card" }),
        payer: agent,
        amount: 700_000n,
      },
    ];
    const parentSignature = bs58.decode(paid[0]!.signature);
    const opened = await send(
      await openInvocationInstruction({
        programId: PAYMENT_LEDGER_PROGRAM_ID,
        authority: localnet.info.authority,
        invoker: agent.publicKey,
        parentSignature,
        subAgent: subAgent.publicKey,
        budgetUnits: 2n * USDC,
      }),
      [agent.keypair],
    );
    const invocation = invocationPda(parentSignature, subAgent.publicKey, PAYMENT_LEDGER_PROGRAM_ID).address;
    paid.push({ signature: await recordPayment(subAgent, service, x402(1n, 400_000n), invocation), payer: subAgent, amount: 400_000n });
    const lastSlot = await slotOf(paid.at(-1)!.signature);

    try {
      await pollUntil(() => confirmedThrough(lastSlot)(received), {
        timeoutMs: 20_000,
        intervalMs: 50,
        what: `the stream to confirm through slot ${lastSlot}`,
      });
    } finally {
      controller.abort();
      await following;
    }
    expect(confirmedThrough(lastSlot)(received)).toBe(true);

    const expected = await ledgerProgramTransactions(fromSlot, lastSlot);
    const got = transactions(received).filter((tx) => tx.slot <= lastSlot);
    expect(got.map((tx) => tx.signature)).toEqual(expected.map((tx) => tx.signature));
    expect(got.map((tx) => tx.slot)).toEqual(expected.map((tx) => tx.slot));
    expect(got.map((tx) => tx.blockTime)).toEqual(expected.map((tx) => tx.blockTime));
    expect(got.map((tx) => tx.signature)).toEqual(expect.arrayContaining([...paid.map((p) => p.signature), opened]));

    for (const tx of got) {
      expect(tx.commitment).toBe("confirmed");
      expect(tx.err).toBeNull();
      expect(tx.accountKeys).toContain(PROGRAM_ID);
      expect(tx.logs?.[0]).toBe(`Program ${PROGRAM_ID} invoke [1]`);
      expect(tx.indexInBlock).not.toBeNull();
    }
    for (const payment of paid) {
      const tx = got.find((t) => t.signature === payment.signature)!;
      expect(tx.slot).toBe(await slotOf(payment.signature));
      const events = eventsOf(tx);
      expect(events).toHaveLength(1);
      const event = events[0]!;
      expect(event.name).toBe("PaymentRecorded");
      if (event.name !== "PaymentRecorded") continue;
      expect(event.data.payer.toBase58()).toBe(payment.payer.publicKey.toBase58());
      expect(event.data.amountUnits).toBe(payment.amount);
      expect(event.data.slot).toBe(tx.slot);
    }
    const invocationEvents = eventsOf(got.find((t) => t.signature === opened)!);
    expect(invocationEvents.map((e) => e.name)).toEqual(["InvocationOpened"]);
    // The atomic x402 payment moved tokens: its token balances came through, exact.
    const atomic = got.find((t) => t.signature === paid[0]!.signature)!;
    const agentIndex = atomic.accountKeys.indexOf(agent.tokenAccount.toBase58());
    const pre = atomic.preTokenBalances.find((b) => b.accountIndex === agentIndex)!;
    const post = atomic.postTokenBalances.find((b) => b.accountIndex === agentIndex)!;
    expect(pre.amount - post.amount).toBe(1_250_000n);
    expect(post.decimals).toBe(6);
  });

  it("confirmed slots carry the block hash chain, and each is later finalized", async () => {
    const fromSlot = (await confirmedSlot()) + 1n;
    const updates = await follow(sourceFor(double), fromSlot, (u) => slotUpdates(u).some((s) => s.status === "finalized"), {
      timeoutMs: 30_000,
    });
    const confirmed = slotUpdates(updates).filter((s) => s.status === "confirmed");
    expect(confirmed.length).toBeGreaterThan(2);
    for (const [i, slot] of confirmed.entries()) {
      const block = await ledgerBlock(Number(slot.slot));
      expect(slot.blockhash).toBe(block.blockhash);
      expect(slot.parent).toBe(BigInt(block.parentSlot));
      if (i > 0) expect(slot.parentBlockhash).toBe(confirmed[i - 1]!.blockhash);
    }
    const finalized = slotUpdates(updates).find((s) => s.status === "finalized")!;
    expect(finalized.slot).toBeGreaterThanOrEqual(fromSlot);
    expect(confirmed.some((s) => s.slot === finalized.slot)).toBe(true);
  });

  it("resuming from a checkpoint slot replays only the slots after it", async () => {
    const agent = await createAgentWallet(ledger, { usdcUnits: USDC });
    const service = await createAgentWallet(ledger);
    const before = await recordPayment(agent, service, x402(1n, 10n));
    const checkpoint = await slotOf(before);
    // The next payment must land in a later slot than the checkpoint (slots close every 50 ms).
    await pollUntil(async () => (await confirmedSlot()) > checkpoint, {
      timeoutMs: 10_000,
      intervalMs: 10,
      what: `a confirmed slot after ${checkpoint}`,
    });
    const after = await recordPayment(agent, service, x402(2n, 20n));
    const afterSlot = await slotOf(after);
    expect(afterSlot).toBeGreaterThan(checkpoint);
    await double.waitForSlot(afterSlot);

    // Both already executed: what arrives is replayed from the server's retention.
    const updates = await follow(sourceFor(double), checkpoint + 1n, confirmedThrough(afterSlot));
    const signatures = transactions(updates).map((tx) => tx.signature);
    expect(signatures).toContain(after);
    expect(signatures).not.toContain(before);
    expect(transactions(updates).every((tx) => tx.slot > checkpoint)).toBe(true);
    expect(slotUpdates(updates).every((s) => s.slot > checkpoint)).toBe(true);
    expect(slotUpdates(updates)[0]?.slot).toBe(checkpoint + 1n);
    expect(double.requests.at(-1)?.fromSlot).toBe(String(checkpoint + 1n));
  });

  it("a checkpoint older than the server's retention raises ReplayUnavailableError naming the first available slot", async () => {
    const short = await startDouble({ retentionSlots: 20 });
    await short.waitForSlot((await confirmedSlot()) + 25n);
    const first = short.firstAvailableSlot()!;
    const error = await rejection(follow(sourceFor(short), first - 10n, () => true));
    expect(error).toBeInstanceOf(ReplayUnavailableError);
    expect((error as ReplayUnavailableError).requestedSlot).toBe(first - 10n);
    expect((error as ReplayUnavailableError).firstAvailableSlot).toBeGreaterThanOrEqual(first);
  });

  it("a server without replay raises ReplayUnavailableError for any past slot, and still follows live from the tip", async () => {
    const noReplay = await startDouble({ retentionSlots: 0 });
    const past = (await confirmedSlot()) - 5n;
    const error = await rejection(follow(sourceFor(noReplay), past, () => true));
    expect(error).toBeInstanceOf(ReplayUnavailableError);
    expect((error as ReplayUnavailableError).firstAvailableSlot).toBeNull();

    // A slot ahead of the tip (with room for the double to advance before the source asks): nothing
    // to replay, so the stream is live, its first slot newer than anything served before.
    const before = noReplay.confirmedSlot();
    const updates = await follow(sourceFor(noReplay), before + 40n, (u) => slotUpdates(u).length >= 3);
    expect(slotUpdates(updates)[0]!.slot).toBeGreaterThan(before);
  });

  it("the server's own replay refusals (OUT_OF_RANGE, INTERNAL from_slot not supported) map to ReplayUnavailableError", async () => {
    const Client = (
      typeof YellowstoneModule === "function" ? YellowstoneModule : YellowstoneModule.default
    ) as typeof YellowstoneModule.default;
    const refusal = async (server: GeyserDouble, fromSlot: bigint): Promise<unknown> => {
      const client = new Client(server.endpoint, undefined, undefined);
      await client.connect();
      // The refusal surfaces when the stream opens, or on its first read.
      return rejection(
        client.subscribe({ ...sourceFor(server).request(fromSlot), commitment: CommitmentLevel.CONFIRMED }).then(
          (stream) =>
            new Promise<void>((resolve, reject) => {
              stream.on("data", () => undefined);
              stream.on("error", reject);
              stream.on("end", resolve);
            }),
        ),
      );
    };
    const short = doubles.find((d) => d.firstAvailableSlot() !== null && d !== double) ?? (await startDouble({ retentionSlots: 20 }));
    await short.waitForSlot((await confirmedSlot()) + 25n);
    const first = short.firstAvailableSlot()!;
    const outOfRange = replayUnavailableFrom(await refusal(short, 1n), 1n);
    expect(outOfRange).toBeInstanceOf(ReplayUnavailableError);
    expect(outOfRange?.firstAvailableSlot).toBeGreaterThanOrEqual(first);

    const noReplay = doubles.find((d) => d.firstAvailableSlot() === null) ?? (await startDouble({ retentionSlots: 0 }));
    const unsupported = replayUnavailableFrom(await refusal(noReplay, 1n), 1n);
    expect(unsupported).toBeInstanceOf(ReplayUnavailableError);
    expect(unsupported?.firstAvailableSlot).toBeNull();
  });

  it("a slot the server reports dead arrives as a dead SlotUpdate", async () => {
    let deadSlot: bigint | null = null;
    const updates = await follow(sourceFor(double), (await confirmedSlot()) + 1n, (u) => slotUpdates(u).some((s) => s.status === "dead"), {
      onUpdate: (update) => {
        if (deadSlot === null && update.kind === "slot" && update.slot.status === "confirmed") {
          deadSlot = update.slot.slot + 3n;
          double.injectDeadSlot(deadSlot, "test: slot dead");
        }
      },
    });
    const dead = slotUpdates(updates).find((s) => s.status === "dead")!;
    expect(dead.slot).toBe(deadSlot);
  });

  it("server pings are answered with the same filters, and the stream keeps delivering after them", async () => {
    const pinging = await startDouble({ retentionSlots: 1_000, pingIntervalMs: 200 });
    const updates = await follow(sourceFor(pinging), pinging.confirmedSlot() + 1n, () => pinging.pongs.length >= 3, { timeoutMs: 10_000 });
    const slotsBefore = slotUpdates(updates).length;
    // Every server ping got a reply with a fresh id, each answered by the server with a pong.
    expect(pinging.pongs).toEqual(pinging.pongs.map((_, i) => i + 1));
    const pingRequests = pinging.requests.filter((r) => r.ping !== undefined);
    for (const request of pingRequests) {
      expect(Object.keys(request.transactions)).toEqual(["program"]);
      expect(request.transactions.program?.accountInclude).toEqual([PROGRAM_ID]);
      expect(request.fromSlot).toBeUndefined();
    }
    expect(slotsBefore).toBeGreaterThan(0);

    // After the pongs, the same filters are in force: slot updates keep coming.
    const again = await follow(sourceFor(pinging), pinging.confirmedSlot() + 1n, (u) => slotUpdates(u).length >= 3);
    expect(slotUpdates(again).length).toBeGreaterThanOrEqual(3);
  });

  it("a dropped stream fails the follow, and resuming from the last confirmed slot misses no program transaction", async () => {
    const agent = await createAgentWallet(ledger, { usdcUnits: USDC });
    const service = await createAgentWallet(ledger);
    const source = sourceFor(double);
    let lastConfirmed = -1n;
    const error = await rejection(
      follow(source, (await confirmedSlot()) + 1n, () => false, {
        onUpdate: (update, all) => {
          if (update.kind === "slot" && update.slot.status === "confirmed") lastConfirmed = update.slot.slot;
          if (slotUpdates(all).length === 3) double.dropStreams();
        },
      }),
    );
    expect(errorText(error)).toMatch(/stream dropped by the test double/);
    expect(lastConfirmed).toBeGreaterThan(0n);

    // While disconnected the ledger goes on.
    const missed = await recordPayment(agent, service, x402(1n, 5n));
    const missedSlot = await slotOf(missed);
    expect(missedSlot).toBeGreaterThan(lastConfirmed);

    const resumed = await follow(source, lastConfirmed + 1n, confirmedThrough(missedSlot));
    expect(transactions(resumed).map((tx) => tx.signature)).toContain(missed);
    expect(slotUpdates(resumed)[0]!.slot).toBe(lastConfirmed + 1n);
  });

  it("a failed program transaction is left out by the source's failed:false filter, and its error decodes as RPC reports it", async () => {
    const agent = await within("fund the agent", createAgentWallet(ledger, { usdcUnits: USDC }));
    const service = await within("create the service wallet", createAgentWallet(ledger));
    const fromSlot = (await confirmedSlot()) + 1n;
    await within("record payment 1", recordPayment(agent, service, x402(1n, 10n)));
    // A duplicate payment id, sent without preflight: included with its error, as on a cluster.
    const duplicate = new Transaction().add(
      await recordPaymentInstruction({
        ...x402(1n, 20n),
        programId: PAYMENT_LEDGER_PROGRAM_ID,
        authority: localnet.info.authority,
        payer: agent.publicKey,
        payee: service.publicKey,
        transfer: associatedTransferAccounts(agent.publicKey, service.publicKey, localnet.info.mint),
      }),
    );
    const latest = await provider.connection.getLatestBlockhash("confirmed");
    duplicate.feePayer = localnet.info.authority;
    duplicate.recentBlockhash = latest.blockhash;
    duplicate.sign(localnet.keypairs.authority, agent.keypair);
    const failed = await provider.connection.sendRawTransaction(duplicate.serialize(), { skipPreflight: true });
    const onLedger = await landed(failed);
    expect(onLedger.meta?.err).not.toBeNull();
    const failedSlot = BigInt(onLedger.slot);

    const updates = await follow(sourceFor(double), fromSlot, confirmedThrough(failedSlot));
    expect(transactions(updates).map((tx) => tx.signature)).not.toContain(failed);

    // The same stream asked for failed transactions: the error arrives, decoded to the RPC form.
    // This raw napi stream is test instrumentation (the production source was checked above). Once
    // in many CI runs it delivered nothing within 15 s, cause not found; so each attempt waits 5 s
    // and a silent stream is replaced, at most three times, and the attempts are counted.
    const Client = (
      typeof YellowstoneModule === "function" ? YellowstoneModule : YellowstoneModule.default
    ) as typeof YellowstoneModule.default;
    const rawFailedStream = async (): Promise<SubscribeUpdate> => {
      const client = new Client(double.endpoint, undefined, undefined);
      await within("connect a raw client", client.connect());
      const request = sourceFor(double).request(failedSlot);
      const stream = await within(
        "open a raw stream with failed:true",
        client.subscribe({ ...request, transactions: { program: { ...request.transactions.program!, failed: true } } }),
      );
      return within(
        "the failed transaction on a failed:true stream",
        new Promise<SubscribeUpdate>((resolve, reject) => {
          stream.on("data", (update: SubscribeUpdate) => {
            const info = update.transaction?.transaction;
            if (info !== undefined && bs58.encode(info.signature) === failed) resolve(update);
          });
          stream.on("error", reject);
          stream.on("end", () => reject(new Error("stream ended")));
        }),
        5_000,
      ).finally(() => stream.destroy());
    };
    let arrived: SubscribeUpdate | undefined;
    let attempts = 0;
    while (arrived === undefined) {
      attempts += 1;
      try {
        arrived = await rawFailedStream();
      } catch (error) {
        if (attempts >= 3 || !String(error).includes("timed out")) throw error;
        console.warn(`raw failed:true stream attempt ${attempts} delivered nothing in 5 s; retrying`);
      }
    }
    const normalized = normalizeTransaction(arrived.transaction!.transaction!, BigInt(arrived.transaction!.slot), null);
    expect(normalized.err).toEqual(onLedger.meta!.err);
    expect(normalized.slot).toBe(failedSlot);
  });

  it("backfill is refused with a pointer to the RPC source", async () => {
    const iterator = sourceFor(double).backfill({ fromSlot: 0n })[Symbol.asyncIterator]();
    await expect(iterator.next()).rejects.toThrow(/not supported by Yellowstone.*RPC source/);
  });
});
