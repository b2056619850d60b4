/**
 * The traffic the query-service tests read, made through the REAL program on a local ledger and
 * projected by the REAL indexer into a fresh database. Two accounts (A, B) and their agents;
 * a payment tree four levels deep (root + 3) with a foreign branch (B's agent under A's root);
 * payments spread over 40 days; rejections written as the gateway writes them.
 *
 * The local ledger cannot move its clock back, so the backfill goes through a source that sets
 * the block time of the spread payments to chosen instants (the transactions themselves are the
 * ledger's, byte for byte); every other payment keeps its real block time.
 */
import type { AnchorProvider } from "@coral-xyz/anchor";
import { type Keypair, type PublicKey, Transaction, type TransactionInstruction } from "@solana/web3.js";
import bs58 from "bs58";
import { createAccount, issueApiKey, registerAgent } from "../../api/shared/keys.js";
import { recordRejection } from "../../api/gateway/payments/rejections.js";
import { IngestPipeline } from "../../indexer/pipeline.js";
import { RpcSource } from "../../indexer/sources/rpc.js";
import type { ChainSource, RawTransaction, SlotRange, SourceUpdate } from "../../indexer/sources/source.js";
import {
  endpointHash,
  invocationPda,
  openInvocationInstruction,
  PAYMENT_LEDGER_PROGRAM_ID,
} from "../../programs/payment_ledger/ts/index.js";
import { type AgentWallet, createAgentWallet, type LedgerAccess, ledgerAccess, recordPayment } from "../../scripts/agent-wallets.js";
import { type Localnet, startLocalnet } from "../../scripts/localnet.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";

export const USDC = 1_000_000n;
export const MINUTE_S = 60;
export const HOUR_S = 3_600;
export const DAY_S = 86_400;

export const QUOTE = "api.example.com/v1/quote";
export const SEARCH = "search.example.org/v2/find";
/** Never registered in `endpoints`: shows as its hash. */
export const UNKNOWN = "tools.example.net/run";
export const DOMAINS: Record<string, string> = { [QUOTE]: "api.example.com", [SEARCH]: "search.example.org" };

export const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString("hex");

/** What the test sent, the basis of every expectation. */
export interface SentPayment {
  readonly txHash: string;
  readonly agentId: string;
  readonly account: "A" | "B";
  readonly amountUnits: bigint;
  readonly protocol: "x402" | "mpp";
  readonly endpoint: string;
  /** Unix seconds chosen for spread payments; null = the ledger's real time (within the test run). */
  readonly atSeconds: number | null;
  readonly parentTxHash: string | null;
}

export interface SentRejection {
  readonly agentId: string;
  readonly account: "A" | "B";
  readonly amountUnits: bigint;
  readonly endpoint: string;
  readonly domain: string;
  readonly protocol: "x402" | "mpp" | null;
  readonly reasonCode: string;
  readonly atSeconds: number;
}

export interface World {
  readonly localnet: Localnet;
  readonly ledger: LedgerAccess;
  readonly db: FreshDatabase;
  /** The instant the API's clock is pinned to (whole seconds). */
  readonly now: Date;
  readonly nowSeconds: number;
  readonly keys: { A: string; B: string };
  readonly accounts: { A: string; B: string };
  readonly wallets: Record<string, AgentWallet>;
  readonly payments: SentPayment[];
  readonly rejections: SentRejection[];
  readonly tree: { root: string; c1: string; c2: string; g1: string; gg1: string; foreign: string };
  readonly invocations: { first: PublicKey; foreign: PublicKey };
  /** Records one more payment on the ledger (real time) and appends it to `payments`. */
  pay(agentId: string, amountUnits: bigint, protocol: "x402" | "mpp", endpoint: string): Promise<string>;
  /** Runs the indexer over the slots written since the last ingest (it notifies the live feed). */
  ingestNew(): Promise<void>;
  stop(): Promise<void>;
}

/** Backfills through RPC, with chosen block times for some signatures. */
class RetimedSource implements ChainSource {
  readonly name: string;
  constructor(
    private readonly inner: RpcSource,
    private readonly times: ReadonlyMap<string, number>,
  ) {
    this.name = inner.name;
  }
  async *backfill(range: SlotRange, signal?: AbortSignal): AsyncIterable<RawTransaction> {
    for await (const raw of this.inner.backfill(range, signal)) {
      const at = this.times.get(raw.signature);
      yield at === undefined ? raw : { ...raw, blockTime: at };
    }
  }
  follow(fromSlot: bigint, signal: AbortSignal): AsyncIterable<SourceUpdate> {
    return this.inner.follow(fromSlot, signal);
  }
}

export async function buildWorld(): Promise<World> {
  const localnet = await startLocalnet();
  const ledger = ledgerAccess(localnet);
  const provider: AnchorProvider = ledger.provider;
  const db = await createFreshDatabase();
  const nowSeconds = Math.floor(Date.now() / 1000) + 5 * MINUTE_S;
  const now = new Date(nowSeconds * 1000);

  const accountA = await createAccount(db.pool, "account A");
  const accountB = await createAccount(db.pool, "account B");
  const keyA = (await issueApiKey(db.pool, accountA)).apiKey;
  const keyB = (await issueApiKey(db.pool, accountB)).apiKey;

  const service = await createAgentWallet(ledger);
  const wallets: Record<string, AgentWallet> = { service };
  const owner: Record<string, "A" | "B"> = {};
  for (const [agentId, account] of [
    ["a-orch", "A"],
    ["a-sub", "A"],
    ["a-subsub", "A"],
    ["a-spender", "A"],
    ["b-agent", "B"],
  ] as const) {
    const wallet = await createAgentWallet(ledger, { usdcUnits: 10n * USDC });
    wallets[agentId] = wallet;
    owner[agentId] = account;
    await registerAgent(db.pool, account === "A" ? accountA : accountB, {
      agentId,
      walletAddress: wallet.publicKey.toBase58(),
      name: `${agentId} name`,
    });
  }

  const payments: SentPayment[] = [];
  const nextId = new Map<string, bigint>();
  const times = new Map<string, number>();
  const send = (instruction: TransactionInstruction, signers: Keypair[]): Promise<string> =>
    provider.sendAndConfirm(new Transaction().add(instruction), signers, { commitment: "confirmed" });

  async function pay(
    agentId: string,
    amountUnits: bigint,
    protocol: "x402" | "mpp",
    endpoint: string,
    options: { atSeconds?: number; invocation?: PublicKey; parent?: string } = {},
  ): Promise<string> {
    const paymentId = (nextId.get(agentId) ?? 0n) + 1n;
    nextId.set(agentId, paymentId);
    const txHash = await recordPayment(
      ledger,
      wallets[agentId]!,
      service,
      { paymentId, amountUnits, protocol, rail: protocol === "mpp" ? "card" : "stablecoin", endpointHash: endpointHash(endpoint) },
      options.invocation,
    );
    if (options.atSeconds !== undefined) times.set(txHash, options.atSeconds);
    payments.push({
      txHash,
      agentId,
      account: owner[agentId]!,
      amountUnits,
      protocol,
      endpoint,
      atSeconds: options.atSeconds ?? null,
      parentTxHash: options.parent ?? null,
    });
    return txHash;
  }

  async function openInvocation(invokerId: string, parent: string, subAgentId: string, budgetUnits: bigint): Promise<PublicKey> {
    const parentSignature = bs58.decode(parent);
    await send(
      await openInvocationInstruction({
        programId: PAYMENT_LEDGER_PROGRAM_ID,
        authority: localnet.info.authority,
        invoker: wallets[invokerId]!.publicKey,
        parentSignature,
        subAgent: wallets[subAgentId]!.publicKey,
        budgetUnits,
      }),
      [wallets[invokerId]!.keypair],
    );
    return invocationPda(parentSignature, wallets[subAgentId]!.publicKey, PAYMENT_LEDGER_PROGRAM_ID).address;
  }

  // The tree (real block times): root by a-orch; a-sub twice under it; a-subsub under a-sub's
  // second payment; a-sub again under that (depth 3); B's agent under the root (foreign branch).
  const root = await pay("a-orch", 100_000n, "x402", QUOTE);
  const first = await openInvocation("a-orch", root, "a-sub", 3n * USDC);
  const c1 = await pay("a-sub", 1_000_000n, "x402", QUOTE, { invocation: first, parent: root });
  const c2 = await pay("a-sub", 1_500_000n, "mpp", SEARCH, { invocation: first, parent: root });
  const second = await openInvocation("a-sub", c2, "a-subsub", USDC);
  const g1 = await pay("a-subsub", 250_000n, "x402", UNKNOWN, { invocation: second, parent: c2 });
  const third = await openInvocation("a-subsub", g1, "a-sub", USDC / 2n);
  const gg1 = await pay("a-sub", 50_000n, "x402", QUOTE, { invocation: third, parent: g1 });
  const foreignInvocation = await openInvocation("a-orch", root, "b-agent", USDC);
  const foreign = await pay("b-agent", 300_000n, "x402", QUOTE, { invocation: foreignInvocation, parent: root });
  const foreignChild = foreign;

  // Spread over 40 days (chosen block times), by one agent of each account.
  const ago = (seconds: number): { atSeconds: number } => ({ atSeconds: nowSeconds - seconds });
  await pay("a-spender", 200_000n, "x402", QUOTE, ago(10 * MINUTE_S));
  await pay("a-spender", 300_000n, "mpp", SEARCH, ago(3 * HOUR_S));
  await pay("a-spender", 400_000n, "x402", SEARCH, ago(2 * DAY_S));
  await pay("a-spender", 500_000n, "mpp", QUOTE, ago(10 * DAY_S));
  await pay("a-spender", 600_000n, "x402", QUOTE, ago(40 * DAY_S));
  await pay("a-spender", 700_000n, "x402", SEARCH, ago(20 * HOUR_S + 30 * MINUTE_S));
  await pay("b-agent", 900_000n, "mpp", SEARCH, ago(30 * MINUTE_S));
  await pay("b-agent", 800_000n, "x402", QUOTE, ago(5 * DAY_S));

  // The gateway's knowledge of endpoint texts (UNKNOWN stays a hash).
  for (const endpoint of [QUOTE, SEARCH]) {
    await db.pool.query("INSERT INTO endpoints (endpoint_hash, endpoint, domain) VALUES ($1, $2, $3)", [
      hex(endpointHash(endpoint)),
      endpoint,
      DOMAINS[endpoint],
    ]);
  }

  const rejections: SentRejection[] = [];
  for (const [agentId, seconds, reasonCode, endpoint, protocol, amountUnits] of [
    ["a-spender", 5 * MINUTE_S, "per_call_limit_exceeded", QUOTE, "x402", 5n * USDC],
    ["a-spender", 2 * HOUR_S, "domain_not_allowed", SEARCH, null, 10_000n],
    ["a-spender", 3 * DAY_S, "per_call_limit_exceeded", SEARCH, "mpp", 7n * USDC],
    ["a-orch", 7 * MINUTE_S, "rate_limit_exceeded", QUOTE, "x402", 1_000n],
    ["b-agent", 4 * MINUTE_S, "daily_budget_exceeded", SEARCH, "mpp", 2n * USDC],
  ] as const) {
    const account = owner[agentId]!;
    const domain = DOMAINS[endpoint]!;
    await recordRejection(db.pool, {
      agentId,
      amountUnits,
      endpoint,
      domain,
      protocol,
      reasonCode,
      reason: `${reasonCode}: requested ${amountUnits} units`,
      at: new Date((nowSeconds - seconds) * 1000),
    });
    rejections.push({ agentId, account, amountUnits, endpoint, domain, protocol, reasonCode, atSeconds: nowSeconds - seconds });
  }

  const rpc = new RpcSource({ rpcUrl: localnet.rpcUrl, programId: PAYMENT_LEDGER_PROGRAM_ID, name: "rpc-api-test" });
  const pipeline = new IngestPipeline({ pool: db.pool, programId: PAYMENT_LEDGER_PROGRAM_ID, cluster: localnet.rpcUrl, batchSize: 8 });
  let lastSlot = await rpc.currentSlot("confirmed");
  await pipeline.backfill(new RetimedSource(rpc, times), { fromSlot: 0n, toSlot: lastSlot });

  return {
    localnet,
    ledger,
    db,
    now,
    nowSeconds,
    keys: { A: keyA, B: keyB },
    accounts: { A: accountA, B: accountB },
    wallets,
    payments,
    rejections,
    tree: { root, c1, c2, g1, gg1, foreign: foreignChild },
    invocations: { first, foreign: foreignInvocation },
    pay: (agentId, amountUnits, protocol, endpoint) => pay(agentId, amountUnits, protocol, endpoint),
    async ingestNew() {
      const toSlot = await rpc.currentSlot("confirmed");
      await pipeline.backfill(rpc, { fromSlot: lastSlot + 1n, toSlot });
      lastSlot = toSlot;
    },
    async stop() {
      await db.drop();
      await localnet.stop();
    },
  };
}
