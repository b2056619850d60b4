/**
 * record_payment throughput and latency through the TypeScript path (build + sign +
 * sendTransaction + confirmation over the websocket), against a plain SPL Token TransferChecked
 * sent the same way, on one local ledger started for the run.
 *
 *   npm run bench:ledger [-- --count 2000 --concurrency 16 --max-seconds 120]
 *
 * Each run is bounded by its count and by --max-seconds; the bench stops by itself.
 */
import { setTimeout as delay } from "node:timers/promises";
import { parseArgs } from "node:util";
import { AnchorProvider, Wallet } from "@coral-xyz/anchor";
import { createTransferCheckedInstruction } from "@solana/spl-token";
import { type BlockhashWithExpiryBlockHeight, Connection, Transaction, type TransactionInstruction } from "@solana/web3.js";
import {
  associatedTransferAccounts,
  endpointHash,
  recordPaymentInstruction,
  PAYMENT_LEDGER_PROGRAM_ID,
} from "../../programs/payment_ledger/ts/index.js";
import { type AgentWallet, createAgentWallet, type LedgerAccess } from "../../scripts/agent-wallets.js";
import { startLocalnet } from "../../scripts/localnet.js";

const { values: flags } = parseArgs({
  options: {
    count: { type: "string", default: "2000" },
    concurrency: { type: "string", default: "16" },
    warmup: { type: "string", default: "50" },
    "max-seconds": { type: "string", default: "120" },
    "skip-preflight": { type: "boolean", default: false },
  },
});
const COUNT = positive(flags.count, "count");
const CONCURRENCY = positive(flags.concurrency, "concurrency");
const WARMUP = Number(flags.warmup);
const MAX_RUN_MS = positive(flags["max-seconds"], "max-seconds") * 1000;
const SKIP_PREFLIGHT = flags["skip-preflight"];
const BLOCKHASH_MAX_AGE_MS = 2_000;
const ENDPOINT_HASH = endpointHash("api.example.com/v1/quote");

function positive(text: string, name: string): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value <= 0) throw new Error(`--${name} must be a positive integer, got ${text}`);
  return value;
}

interface Sample {
  /** Build + sign + sendTransaction + confirmation. */
  readonly latencyMs: number;
  /** sendTransaction alone (preflight simulation and execution on the ledger). */
  readonly sendMs: number;
  readonly ok: boolean;
}

interface RunResult {
  readonly op: string;
  readonly mode: string;
  readonly samples: readonly Sample[];
  readonly elapsedMs: number;
  readonly firstError: string | null;
}

/**
 * Builds the instruction of a worker's transaction. `sequence` is unique across the whole bench,
 * so no two transactions are identical even under one blockhash.
 */
type Build = (worker: number, sequence: number) => Promise<{ instruction: TransactionInstruction; signer: AgentWallet }>;

/** A recent blockhash shared by all workers, refreshed like a gateway would (not per transaction). */
class BlockhashCache {
  private current: { value: BlockhashWithExpiryBlockHeight; fetchedAtMs: number } | null = null;
  private pending: Promise<BlockhashWithExpiryBlockHeight> | null = null;
  constructor(private readonly connection: Connection) {}

  async get(): Promise<BlockhashWithExpiryBlockHeight> {
    if (this.current !== null && performance.now() - this.current.fetchedAtMs < BLOCKHASH_MAX_AGE_MS) {
      return this.current.value;
    }
    this.pending ??= this.connection.getLatestBlockhash("confirmed").then((value) => {
      this.current = { value, fetchedAtMs: performance.now() };
      this.pending = null;
      return value;
    });
    return this.pending;
  }
}

let sequence = 0;

async function run(
  op: string,
  mode: string,
  count: number,
  concurrency: number,
  build: Build,
  access: LedgerAccess,
  blockhashes: BlockhashCache,
): Promise<RunResult> {
  const { connection } = access.provider;
  const authority = access.keypairs.authority;
  const samples: Sample[] = [];
  let next = 0;
  let firstError: string | null = null;
  const started = performance.now();
  const deadline = started + MAX_RUN_MS;

  async function worker(id: number): Promise<void> {
    for (;;) {
      if (next >= count || performance.now() > deadline) return;
      next += 1;
      sequence += 1;
      const seq = sequence;
      const t0 = performance.now();
      let ok = false;
      let sendMs = Number.NaN;
      try {
        const { instruction, signer } = await build(id, seq);
        const latest = await blockhashes.get();
        const tx = new Transaction({ feePayer: authority.publicKey, ...latest }).add(instruction);
        tx.sign(authority, signer.keypair);
        const sendStart = performance.now();
        const signature = await connection.sendRawTransaction(tx.serialize(), { skipPreflight: SKIP_PREFLIGHT });
        sendMs = performance.now() - sendStart;
        const result = await connection.confirmTransaction({ signature, ...latest }, "confirmed");
        if (result.value.err !== null) throw new Error(`${signature}: ${JSON.stringify(result.value.err)}`);
        ok = true;
      } catch (error) {
        firstError ??= error instanceof Error ? error.message : String(error);
      }
      samples.push({ latencyMs: performance.now() - t0, sendMs, ok });
    }
  }

  await Promise.all(Array.from({ length: concurrency }, (_, id) => worker(id)));
  return { op, mode, samples, elapsedMs: performance.now() - started, firstError };
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

function row(result: RunResult): Record<string, string | number> {
  const ok = result.samples.filter((sample) => sample.ok);
  const latencies = ok.map((sample) => sample.latencyMs).sort((a, b) => a - b);
  const sends = ok.map((sample) => sample.sendMs).sort((a, b) => a - b);
  return {
    op: result.op,
    mode: result.mode,
    sent: result.samples.length,
    failed: result.samples.length - ok.length,
    tx_per_s: Number(((ok.length * 1000) / result.elapsedMs).toFixed(1)),
    latency_ms_p50: Number(percentile(latencies, 50).toFixed(2)),
    latency_ms_p99: Number(percentile(latencies, 99).toFixed(2)),
    send_ms_p50: Number(percentile(sends, 50).toFixed(2)),
  };
}

async function main(): Promise<void> {
  console.log(
    `bench: ${COUNT} tx per run, sequential and ${CONCURRENCY} in flight, warmup ${WARMUP}, ` +
      `preflight ${SKIP_PREFLIGHT ? "off" : "on"}, at most ${MAX_RUN_MS / 1000} s per run`,
  );
  const localnet = await startLocalnet();
  try {
    const connection = new Connection(localnet.rpcUrl, { commitment: "confirmed", wsEndpoint: localnet.wsUrl });
    const provider = new AnchorProvider(connection, new Wallet(localnet.keypairs.authority), { commitment: "confirmed" });
    const access: LedgerAccess = { provider, info: localnet.info, keypairs: localnet.keypairs };
    const blockhashes = new BlockhashCache(connection);

    // One paying agent per worker, so payment ids of a payer stay in order; one service wallet.
    const fundingUnits = 1_000_000_000n; // 1,000 USDC: amounts below are a few units each
    const agents: AgentWallet[] = [];
    for (let i = 0; i < CONCURRENCY; i += 1) agents.push(await createAgentWallet(access, { usdcUnits: fundingUnits }));
    const service = await createAgentWallet(access);
    const nextPaymentId = agents.map(() => 0n);

    const transfer: Build = async (worker, seq) => {
      const agent = agents[worker]!;
      return {
        // Amounts differ per transaction so two transfers under one blockhash never share a signature.
        instruction: createTransferCheckedInstruction(
          agent.tokenAccount,
          localnet.info.mint,
          service.tokenAccount,
          agent.publicKey,
          BigInt(seq),
          localnet.info.decimals,
        ),
        signer: agent,
      };
    };
    const record: Build = async (worker, seq) => {
      const agent = agents[worker]!;
      nextPaymentId[worker]! += 1n;
      return {
        instruction: await recordPaymentInstruction({
          programId: PAYMENT_LEDGER_PROGRAM_ID,
          authority: localnet.info.authority,
          payer: agent.publicKey,
          payee: service.publicKey,
          paymentId: nextPaymentId[worker]!,
          amountUnits: BigInt(seq),
          protocol: "x402",
          rail: "stablecoin",
          endpointHash: ENDPOINT_HASH,
          transfer: associatedTransferAccounts(agent.publicKey, service.publicKey, localnet.info.mint),
        }),
        signer: agent,
      };
    };

    // Warm up both paths (JIT, connections, the payer state accounts) before measuring.
    if (WARMUP > 0) {
      await run("warmup", "-", WARMUP, CONCURRENCY, transfer, access, blockhashes);
      await run("warmup", "-", WARMUP, CONCURRENCY, record, access, blockhashes);
    }

    const results: RunResult[] = [];
    for (const [mode, concurrency] of [
      ["sequential", 1],
      [`${CONCURRENCY} in flight`, CONCURRENCY],
    ] as const) {
      for (const [op, build] of [
        ["SPL TransferChecked (baseline)", transfer],
        ["record_payment (atomic x402)", record],
      ] as const) {
        const result = await run(op, mode, COUNT, concurrency, build, access, blockhashes);
        results.push(result);
        console.log(`${op}, ${mode}: ${result.samples.length} sent in ${(result.elapsedMs / 1000).toFixed(1)} s`);
        if (result.firstError !== null) console.log(`  first error: ${result.firstError}`);
      }
    }
    console.table(results.map(row));
    // web3.js follows each websocket confirmation with a getSignatureStatus it never awaits; let
    // the last ones finish before the ledger goes away.
    await delay(1_500);
  } finally {
    await localnet.stop();
  }
}

main().then(
  // web3.js keeps reconnecting its websocket to the stopped ledger; the bench is done.
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
