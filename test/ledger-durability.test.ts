/**
 * The local ledger keeps its chain across restarts and crashes: the real `localnet`
 * process on a ledger directory, payment traffic through its RPC, then a SIGKILL in the middle of
 * the traffic (or a clean stop) and a restart on the same directory.
 */
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BorshCoder } from "@coral-xyz/anchor";
import { createTransferCheckedInstruction } from "@solana/spl-token";
import { type BlockhashWithExpiryBlockHeight, type Connection, Transaction, type TransactionInstruction } from "@solana/web3.js";
import bs58 from "bs58";
import { afterEach, describe, expect, it } from "vitest";
import {
  associatedTransferAccounts,
  endpointHash,
  PAYMENT_LEDGER_IDL,
  payerStatePda,
  recordPaymentInstruction,
  PAYMENT_LEDGER_PROGRAM_ID,
} from "../programs/payment_ledger/ts/index.js";
import { type AgentWallet, createAgentWallet, type LedgerAccess, ledgerAccess, tokenBalanceUnits } from "../scripts/agent-wallets.js";
import { type Localnet, startLocalnet } from "../scripts/localnet.js";
import { pollUntil } from "./support/poll.js";

const USDC = 1_000_000n;
const FUNDING_UNITS = 100n * USDC;
const ENDPOINT_HASH = endpointHash("api.example.com/v1/quote");
const WORKERS = 6;
/** Replies received before the kill: enough traffic to span many slots. */
const KILL_AFTER_ACKS = 150;
/** Every n-th payment is above the payer's balance and sent without preflight: included, failed. */
const FAILING_EVERY = 9;

const accountsCoder = new BorshCoder(PAYMENT_LEDGER_IDL);

const dirs: string[] = [];
const running: Localnet[] = [];

async function ledgerDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "apg-durable-ledger-"));
  dirs.push(dir);
  return dir;
}

async function start(dir: string): Promise<Localnet> {
  const localnet = await startLocalnet({ ledgerDir: dir });
  running.push(localnet);
  return localnet;
}

afterEach(async () => {
  await Promise.all(running.splice(0).map((localnet) => localnet.stop()));
  await Promise.all(dirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});

/** A JSON-RPC call without web3.js, for answers compared as they come. */
async function rpc(localnet: Localnet, method: string, params: unknown[]): Promise<unknown> {
  const response = await fetch(localnet.rpcUrl, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  });
  const body = (await response.json()) as { result?: unknown; error?: unknown };
  if (body.error !== undefined) throw new Error(`${method}: ${JSON.stringify(body.error)}`);
  return body.result;
}

function blockOf(localnet: Localnet, slot: number): Promise<unknown> {
  return rpc(localnet, "getBlock", [slot, { transactionDetails: "signatures", maxSupportedTransactionVersion: 0 }]);
}

interface Sent {
  readonly signature: string;
  readonly agent: number;
  readonly kind: "transfer" | "record";
  readonly amountUnits: bigint;
  readonly paymentId: bigint | null;
  readonly meantToFail: boolean;
  /** The sendTransaction reply arrived (before the kill). */
  acked: boolean;
  /** What getSignatureStatuses said before the kill, when it answered in time. */
  seen: { slot: number; failed: boolean } | null;
}

interface World {
  readonly localnet: Localnet;
  readonly ledger: LedgerAccess;
  readonly agents: AgentWallet[];
  readonly service: AgentWallet;
}

async function world(dir: string): Promise<World> {
  const localnet = await start(dir);
  const ledger = ledgerAccess(localnet);
  const agents: AgentWallet[] = [];
  for (let i = 0; i < WORKERS; i += 1) agents.push(await createAgentWallet(ledger, { usdcUnits: FUNDING_UNITS }));
  return { localnet, ledger, agents, service: await createAgentWallet(ledger) };
}

/**
 * Concurrent payments, one worker per agent: SPL transfers and atomic record_payment, some of them
 * failing on purpose. Resolves when every worker stopped: after `stopAfterAcks` replies, or when the
 * ledger went away (its sends fail).
 */
async function paymentLoad(
  { ledger, agents, service }: World,
  options: {
    stopAfterAcks: number;
    /** Payment ids and amounts start above this, so a second load repeats none of the first. */
    base?: number;
    onAck?: (acks: number, sent: Sent) => void;
  },
): Promise<Sent[]> {
  const { connection } = ledger.provider;
  const { info, keypairs } = ledger;
  const sent: Sent[] = [];
  let acks = 0;
  let stopped = false;
  let latest: { value: BlockhashWithExpiryBlockHeight; atMs: number } | null = null;
  const blockhash = async (): Promise<BlockhashWithExpiryBlockHeight> => {
    if (latest === null || Date.now() - latest.atMs > 2_000) latest = { value: await connection.getLatestBlockhash(), atMs: Date.now() };
    return latest.value;
  };
  const base = options.base ?? 0;
  let sequence = base;

  async function worker(index: number): Promise<void> {
    const agent = agents[index]!;
    let paymentId = BigInt(base);
    while (!stopped) {
      sequence += 1;
      const kind = sequence % 2 === 0 ? "transfer" : "record";
      const meantToFail = kind === "record" && sequence % FAILING_EVERY === 0;
      // Distinct amounts: no two transactions share a signature, and each is identifiable.
      const amountUnits = meantToFail ? FUNDING_UNITS * 10n : BigInt(sequence);
      let instruction: TransactionInstruction;
      let id: bigint | null = null;
      if (kind === "transfer") {
        instruction = createTransferCheckedInstruction(
          agent.tokenAccount,
          info.mint,
          service.tokenAccount,
          agent.publicKey,
          amountUnits,
          info.decimals,
        );
      } else {
        paymentId += 1n;
        id = paymentId;
        instruction = await recordPaymentInstruction({
          programId: PAYMENT_LEDGER_PROGRAM_ID,
          authority: info.authority,
          payer: agent.publicKey,
          payee: service.publicKey,
          paymentId: id,
          amountUnits,
          protocol: "x402",
          rail: "stablecoin",
          endpointHash: ENDPOINT_HASH,
          transfer: associatedTransferAccounts(agent.publicKey, service.publicKey, info.mint),
        });
      }
      let tx: Transaction;
      try {
        tx = new Transaction({ feePayer: keypairs.authority.publicKey, ...(await blockhash()) }).add(instruction);
      } catch {
        return; // the ledger is gone
      }
      tx.sign(keypairs.authority, agent.keypair);
      const record: Sent = {
        signature: bs58.encode(tx.signature!),
        agent: index,
        kind,
        amountUnits,
        paymentId: id,
        meantToFail,
        acked: false,
        seen: null,
      };
      sent.push(record);
      try {
        await connection.sendRawTransaction(tx.serialize(), { skipPreflight: meantToFail });
      } catch {
        return; // refused by a dying ledger, or never answered: its fate is read after the restart
      }
      if (stopped) return;
      record.acked = true;
      acks += 1;
      if (acks >= options.stopAfterAcks) stopped = true;
      options.onAck?.(acks, record);
      try {
        const status = (await connection.getSignatureStatuses([record.signature])).value[0];
        if (status !== null && status !== undefined) record.seen = { slot: status.slot, failed: status.err !== null };
      } catch {
        return;
      }
    }
  }

  await Promise.all(agents.map((_, index) => worker(index)));
  return sent;
}

interface Landed {
  readonly sent: Sent;
  readonly slot: number;
  readonly failed: boolean;
}

/** What the (restarted) ledger holds of the transactions sent. */
async function landed(connection: Connection, sent: readonly Sent[]): Promise<Landed[]> {
  const found: Landed[] = [];
  for (const one of sent) {
    const tx = await connection.getTransaction(one.signature, { commitment: "confirmed", maxSupportedTransactionVersion: 0 });
    if (tx !== null) found.push({ sent: one, slot: tx.slot, failed: tx.meta?.err !== null });
  }
  return found;
}

async function payerState(connection: Connection, payer: AgentWallet): Promise<{ count: number; highest: bigint } | null> {
  const account = await connection.getAccountInfo(payerStatePda(payer.publicKey, PAYMENT_LEDGER_PROGRAM_ID).address, "confirmed");
  if (account === null) return null;
  const state = accountsCoder.accounts.decode<{ payment_count: { toString(): string }; highest_payment_id: { toString(): string } }>(
    "PayerState",
    account.data,
  );
  return { count: Number(state.payment_count.toString()), highest: BigInt(state.highest_payment_id.toString()) };
}

/**
 * Token balances, payer states, address histories and blocks are exactly what the transactions
 * the ledger holds imply: nothing half-applied, nothing applied that is not in the history.
 */
async function expectConsistent(world: World, connection: Connection, present: readonly Landed[]): Promise<void> {
  const succeeded = present.filter((one) => !one.failed);
  for (const [index, agent] of world.agents.entries()) {
    const mine = succeeded.filter((one) => one.sent.agent === index);
    const spent = mine.reduce((sum, one) => sum + one.sent.amountUnits, 0n);
    expect(await tokenBalanceUnits(world.ledger.provider, agent.tokenAccount)).toBe(FUNDING_UNITS - spent);
    const records = mine.filter((one) => one.sent.kind === "record");
    const state = await payerState(connection, agent);
    if (records.length === 0) {
      expect(state).toBeNull();
    } else {
      const highest = records.reduce((max, one) => (one.sent.paymentId! > max ? one.sent.paymentId! : max), 0n);
      expect(state).toEqual({ count: records.length, highest });
    }
    // The agent's token account history: its funding transaction, then exactly what landed.
    const history = await connection.getSignaturesForAddress(agent.tokenAccount, { limit: 1_000 }, "confirmed");
    const ours = present.filter((one) => one.sent.agent === index).map((one) => one.sent.signature);
    expect(history.length).toBe(ours.length + 1);
    expect(new Set(history.slice(0, ours.length).map((entry) => entry.signature))).toEqual(new Set(ours));
  }
  const received = succeeded.reduce((sum, one) => sum + one.sent.amountUnits, 0n);
  expect(await tokenBalanceUnits(world.ledger.provider, world.service.tokenAccount)).toBe(received);
  // Every landed transaction is in the block of its slot.
  const slots = [...new Set(present.map((one) => one.slot))];
  for (const slot of slots) {
    const block = (await blockOf(world.localnet, slot)) as { signatures: string[] };
    const expected = present.filter((one) => one.slot === slot).map((one) => one.sent.signature);
    expect(block.signatures).toEqual(expect.arrayContaining(expected));
  }
}

describe("a durable local ledger", () => {
  it("a SIGKILL during a payment load loses no confirmed payment and half-applies none", async () => {
    const dir = await ledgerDir();
    const before = await world(dir);
    const { localnet } = before;
    let highestSlotSeen = 0;
    let earlyBlock: { slot: number; block: unknown } | null = null;
    let earlyBlockRead: Promise<void> | null = null;
    const ackedEarly: Sent[] = [];
    let killedAt: number | null = null;
    const sent = await paymentLoad(before, {
      stopAfterAcks: Number.POSITIVE_INFINITY,
      onAck: (acks, one) => {
        ackedEarly.push(one);
        // Halfway, a block from the first acknowledged payments (closed by now), as a client saw it.
        if (acks === KILL_AFTER_ACKS / 2) {
          const first = ackedEarly.find((s) => s.seen !== null);
          if (first !== undefined) {
            const slot = first.seen!.slot;
            earlyBlockRead = blockOf(localnet, slot).then((block) => {
              earlyBlock = { slot, block };
            });
          }
        }
        if (acks === KILL_AFTER_ACKS) {
          killedAt = acks;
          process.kill(localnet.pid, "SIGKILL");
        }
        if (one.seen !== null) highestSlotSeen = Math.max(highestSlotSeen, one.seen.slot);
      },
    });
    // Also the refused / unanswered sends show the kill happened mid-load.
    await localnet.stop();
    expect(killedAt).toBe(KILL_AFTER_ACKS);
    const acked = sent.filter((one) => one.acked);
    expect(acked.length).toBeGreaterThanOrEqual(KILL_AFTER_ACKS);
    for (const one of acked) if (one.seen !== null) highestSlotSeen = Math.max(highestSlotSeen, one.seen.slot);
    await earlyBlockRead;
    expect(earlyBlock).not.toBeNull();
    const { slot: earlySlot, block: blockBefore } = earlyBlock!;

    const after = await start(dir);
    expect(after.info.resumed).toBe(true);
    expect(after.info.genesisHash).toBe(localnet.info.genesisHash);
    expect(after.info.mint.equals(localnet.info.mint)).toBe(true);
    expect(after.info.startSlot).toBeGreaterThanOrEqual(highestSlotSeen);
    const restarted: World = { ...before, localnet: after, ledger: ledgerAccess(after) };
    const { connection } = restarted.ledger.provider;
    expect(await rpc(after, "getGenesisHash", [])).toBe(localnet.info.genesisHash);

    const present = await landed(connection, sent);
    const presentSignatures = new Map(present.map((one) => [one.sent.signature, one]));
    for (const one of acked) {
      const found = presentSignatures.get(one.signature);
      expect(found, `acknowledged ${one.signature} survives`).toBeDefined();
      expect(found!.failed).toBe(one.meantToFail);
      if (one.seen !== null) expect({ slot: found!.slot, failed: found!.failed }).toEqual(one.seen);
    }
    expect(present.some((one) => one.failed)).toBe(true);
    expect(await blockOf(after, earlySlot)).toEqual(blockBefore);
    await expectConsistent(restarted, connection, present);

    // And it goes on: a new payment lands after the restart.
    const more = await paymentLoad(restarted, { stopAfterAcks: 3, base: 1_000_000 });
    const moreLanded = await landed(connection, more);
    expect(moreLanded.filter((one) => one.sent.acked)).toHaveLength(more.filter((one) => one.acked).length);
    expect(more.some((one) => one.acked)).toBe(true);
    expect(Math.min(...moreLanded.map((one) => one.slot))).toBeGreaterThanOrEqual(highestSlotSeen);
  }, 180_000);

  it("a clean stop and restart keeps every transaction, slot and balance", async () => {
    const dir = await ledgerDir();
    const before = await world(dir);
    expect(before.localnet.info.resumed).toBe(false);
    const sent = await paymentLoad(before, { stopAfterAcks: 40 });
    const { connection } = before.ledger.provider;
    const present = await landed(connection, sent);
    const epoch = (await rpc(before.localnet, "getEpochInfo", [])) as { absoluteSlot: number; transactionCount: number };
    await before.localnet.stop();
    expect(existsSync(join(dir, "chain.wal"))).toBe(true);

    const after = await start(dir);
    expect(after.info.resumed).toBe(true);
    expect(after.info.replayedTransactions).toBe(epoch.transactionCount);
    expect(after.info.startSlot).toBeGreaterThanOrEqual(epoch.absoluteSlot);
    const restarted: World = { ...before, localnet: after, ledger: ledgerAccess(after) };
    const again = await landed(restarted.ledger.provider.connection, sent);
    expect(again).toEqual(present);
    await expectConsistent(restarted, restarted.ledger.provider.connection, again);
    // info.json and the keypair files are written again for this run (ports may differ).
    const info = JSON.parse(readFileSync(join(dir, "info.json"), "utf8")) as { rpcUrl: string; resumed: boolean };
    expect(info).toMatchObject({ rpcUrl: after.rpcUrl, resumed: true });
  }, 180_000);

  it("a second ledger process on the same directory is refused, naming the directory and the holder", async () => {
    const dir = await ledgerDir();
    const first = await start(dir);
    const refusal = await startLocalnet({ ledgerDir: dir }).then(
      () => null,
      (error: unknown) => (error instanceof Error ? error.message : String(error)),
    );
    expect(refusal).toContain(`ledger dir ${dir} is in use by another localnet (pid ${first.pid})`);
    expect(await rpc(first, "getHealth", [])).toBe("ok");
  });

  it("the ledger ends with the process that started it, even when that process is SIGKILLed", async () => {
    const dir = await ledgerDir();
    // A parent process that starts a ledger and reports its pid, as `npm start` does.
    const script = [
      `import { startLocalnet } from ${JSON.stringify(join(process.cwd(), "scripts", "localnet.ts"))};`,
      `const localnet = await startLocalnet({ ledgerDir: ${JSON.stringify(dir)} });`,
      `console.log("ledger " + localnet.pid);`,
      "setInterval(() => {}, 1_000);",
    ].join("\n");
    const parent = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "--eval", script], {
      stdio: ["ignore", "pipe", "inherit"],
      env: process.env,
    });
    try {
      const ledgerPid = await new Promise<number>((resolvePid, reject) => {
        let out = "";
        parent.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
          out += chunk;
          const match = /ledger (\d+)/.exec(out);
          if (match !== null) resolvePid(Number(match[1]));
        });
        parent.once("exit", (code) => reject(new Error(`parent exited (${code}) before the ledger was ready`)));
      });
      expect(alive(ledgerPid)).toBe(true);
      parent.kill("SIGKILL");
      await pollUntil(() => !alive(ledgerPid), { timeoutMs: 10_000, intervalMs: 50, what: `ledger ${ledgerPid} to end with its parent` });
      // The orphan is gone and so is its hold on the directory: the chain resumes here.
      const resumed = await start(dir);
      expect(resumed.info.resumed).toBe(true);
    } finally {
      parent.kill("SIGKILL");
    }
  }, 60_000);
});

/** Whether `pid` is a live process (a zombie waiting to be reaped counts as ended). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
}
