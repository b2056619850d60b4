/**
 * A gateway process settling payments is killed (SIGKILL) at an arbitrary moment; after
 * `reconcilePending`, Postgres and the chain agree exactly: every payment on the chain is a
 * confirmed settlement row with the same id and signature, every other row is failed and its
 * transaction is not on the chain, and the balances moved by exactly the recorded amounts.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { Keypair, PublicKey } from "@solana/web3.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAccount } from "../../api/shared/keys.js";
import { LedgerInvocations } from "../../api/gateway/invocations/index.js";
import { Settlement } from "../../api/gateway/settlement/index.js";
import {
  AgentWallets,
  createAgentWallet,
  generateWalletEncryptionKey,
  keystoreFromEnv,
  LocalTreasuryFundingSource,
} from "../../api/gateway/wallets/index.js";
import { localSettlementLedger, type SettlementLedger, tokenBalanceUnits } from "../../api/gateway/chain/index.js";
import { decodeTransactionEvents, eventsNamed, PAYMENT_LEDGER_PROGRAM_ID } from "../../programs/payment_ledger/ts/index.js";
import { type Localnet, startLocalnet } from "../../scripts/localnet.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { pollUntil } from "../support/poll.js";

const USDC = 1_000_000n;
const REPO = resolve(fileURLToPath(import.meta.url), "..", "..", "..");
const KEY = generateWalletEncryptionKey();
const KILL_AFTER_SETTLED = 6;

/** The gateway process: four lanes settling payments of one agent until it is killed. */
const WORKER = `
import { settlementLedgerFromEnv } from "./api/gateway/chain/index.js";
import { LedgerInvocations } from "./api/gateway/invocations/index.js";
import { AgentWallets, keystoreFromEnv } from "./api/gateway/wallets/index.js";
import { Settlement } from "./api/gateway/settlement/index.js";
import { createPool } from "./indexer/db/database.js";
const env = process.env;
const ledger = await settlementLedgerFromEnv(env);
const pool = createPool(env.DATABASE_URL);
const fundingSource = { fund: async () => { throw new Error("no funding in the worker"); } };
const wallets = new AgentWallets({ pool, keystore: keystoreFromEnv(env), ledger, fundingSource });
const settlement = new Settlement({ pool, wallets, ledger, invocations: new LedgerInvocations({ pool, wallets, ledger }) });
let n = 0;
async function lane() {
  for (;;) {
    n += 1;
    const result = await settlement.settlePayment({
      agentId: env.AGENT_ID, payee: env.PAYEE, amountUnits: BigInt(1000 + n),
      protocol: "x402", rail: "stablecoin", endpoint: "api.example.com/v1/crash",
    });
    process.stdout.write("settled " + result.paymentId + "\\n");
  }
}
await Promise.all([lane(), lane(), lane(), lane()]);
`;

let localnet: Localnet;
let db: FreshDatabase;
let ledger: SettlementLedger;
let wallets: AgentWallets;
let settlement: Settlement;
let worker: ChildProcess | undefined;

beforeAll(async () => {
  [localnet, db] = await Promise.all([startLocalnet(), createFreshDatabase()]);
  ledger = localSettlementLedger(localnet);
  const keystore = keystoreFromEnv({ WALLET_ENCRYPTION_KEY: KEY });
  const fundingSource = LocalTreasuryFundingSource.fromLocalnet(ledger, localnet);
  wallets = new AgentWallets({ pool: db.pool, keystore, ledger, fundingSource });
  settlement = new Settlement({ pool: db.pool, wallets, ledger, invocations: new LedgerInvocations({ pool: db.pool, wallets, ledger }) });
  const accountId = await createAccount(db.pool, "crash test");
  await createAgentWallet(db.pool, keystore, { accountId, agentId: "crash-agent" });
  await wallets.fund("crash-agent", 100n * USDC);
});

afterAll(async () => {
  worker?.kill("SIGKILL");
  await localnet?.stop();
  await db?.drop();
});

/** The worker's sessions name themselves, so the test can wait for the server to end them. */
const WORKER_APPLICATION = "settlement-crash-worker";

function withApplicationName(url: string, name: string): string {
  const parsed = new URL(url);
  parsed.searchParams.set("application_name", name);
  return parsed.toString();
}

/**
 * Waits until the server has ended every session of the killed worker. A backend may still be
 * executing what the worker sent just before the kill (a COMMIT of a pending settlement row);
 * reading the table before it ends could miss a row that appears afterwards.
 */
async function workerSessionsGone(): Promise<void> {
  let open = 0;
  await pollUntil(
    async () => {
      const { rows } = await db.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1", [
        WORKER_APPLICATION,
      ]);
      open = rows[0]!.n;
      return open === 0;
    },
    { timeoutMs: 20_000, intervalMs: 50, what: () => `the killed worker's sessions to end (${open} still open)` },
  );
}

/** Starts the worker and SIGKILLs it a random moment after it has settled a few payments. */
function runAndKill(payee: string): Promise<number> {
  return new Promise((resolveRun, rejectRun) => {
    const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", WORKER], {
      cwd: REPO,
      stdio: ["ignore", "pipe", "pipe"],
      env: {
        ...process.env,
        SOLANA_RPC_URL: localnet.rpcUrl,
        SETTLEMENT_MINT: localnet.info.mint.toBase58(),
        PROGRAM_ID: localnet.info.programId.toBase58(),
        LEDGER_AUTHORITY_KEYPAIR: join(localnet.ledgerDir, "authority.json"),
        DATABASE_URL: withApplicationName(db.url, WORKER_APPLICATION),
        WALLET_ENCRYPTION_KEY: KEY,
        AGENT_ID: "crash-agent",
        PAYEE: payee,
      },
    });
    worker = child;
    let stderr = "";
    child.stderr!.on("data", (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-4_000);
    });
    let settled = 0;
    let killing = false;
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      rejectRun(new Error(`worker settled only ${settled} payments in time\n${stderr}`));
    }, 45_000);
    createInterface({ input: child.stdout! }).on("line", (line) => {
      if (!line.startsWith("settled ")) return;
      settled += 1;
      if (settled < KILL_AFTER_SETTLED || killing) return;
      killing = true;
      // A random moment on purpose: the kill must land anywhere in a settlement, not at a chosen step.
      setTimeout(() => child.kill("SIGKILL"), Math.floor(Math.random() * 200));
    });
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      if (signal === "SIGKILL" && killing) resolveRun(settled);
      else rejectRun(new Error(`worker exited on its own (code ${code}, signal ${signal})\n${stderr}`));
    });
  });
}

/** PaymentRecorded events of `payer` on the chain: payment id → signature. */
async function paymentsOnChain(payer: string): Promise<Map<bigint, string>> {
  const { connection } = ledger;
  const signatures = await connection.getSignaturesForAddress(new PublicKey(payer), { limit: 1_000 }, "confirmed");
  const found = new Map<bigint, string>();
  for (const entry of signatures) {
    if (entry.err !== null) continue;
    const tx = await connection.getTransaction(entry.signature, {
      commitment: "confirmed",
      maxSupportedTransactionVersion: 0,
    });
    for (const event of eventsNamed(decodeTransactionEvents(tx!, PAYMENT_LEDGER_PROGRAM_ID), "PaymentRecorded")) {
      if (event.payer.toBase58() !== payer) continue;
      expect(found.has(event.paymentId), `payment id ${event.paymentId} recorded twice`).toBe(false);
      found.set(event.paymentId, entry.signature);
    }
  }
  return found;
}

describe("settlement across a crash", () => {
  it("a gateway killed mid-settlement loses and duplicates nothing once reconciled", async () => {
    const payee = Keypair.generate().publicKey;
    const settledBeforeKill = await runAndKill(payee.toBase58());
    expect(settledBeforeKill).toBeGreaterThanOrEqual(KILL_AFTER_SETTLED);
    await workerSessionsGone();

    const left = await db.pool.query("SELECT status, count(*)::int AS n FROM settlements GROUP BY 1");
    if (process.env.CRASH_TEST_VERBOSE === "1") console.log("after the kill:", JSON.stringify(left.rows));
    // Reconcile until nothing is pending (never-sent rows resolve once their blockhash expires).
    let pending: readonly string[] = [];
    await pollUntil(
      async () => {
        pending = (await settlement.reconcilePending()).pending;
        return pending.length === 0;
      },
      { timeoutMs: 40_000, intervalMs: 1_000, what: () => `nothing pending (still pending: ${pending.join(", ")})` },
    );

    const rows = await db.pool.query<{ payment_id: string; signature: string; status: string; amount_units: string }>(
      "SELECT payment_id, signature, status, amount_units FROM settlements WHERE agent_id = 'crash-agent' ORDER BY payment_id",
    );
    expect(rows.rows.length).toBeGreaterThanOrEqual(settledBeforeKill);
    const payer = (await wallets.address("crash-agent")).toBase58();
    const onChain = await paymentsOnChain(payer);

    const confirmed = rows.rows.filter((row) => row.status === "confirmed");
    const failed = rows.rows.filter((row) => row.status === "failed");
    expect(confirmed.length + failed.length).toBe(rows.rows.length);
    // Exactly the confirmed rows are on the chain, under the same id and signature.
    expect(new Map(confirmed.map((row) => [BigInt(row.payment_id), row.signature]))).toEqual(onChain);
    const failedStatuses = await ledger.connection.getSignatureStatuses(
      failed.map((row) => row.signature),
      { searchTransactionHistory: true },
    );
    for (const status of failedStatuses.value) expect(status === null || status.err !== null).toBe(true);

    const paidUnits = confirmed.reduce((sum, row) => sum + BigInt(row.amount_units), 0n);
    expect(await wallets.balance("crash-agent")).toBe(100n * USDC - paidUnits);
    expect(await tokenBalanceUnits(ledger, payee)).toBe(paidUnits);

    // The gateway carries on with a fresh id.
    const maxId = rows.rows.reduce((max, row) => (BigInt(row.payment_id) > max ? BigInt(row.payment_id) : max), 0n);
    const next = await settlement.settlePayment({
      agentId: "crash-agent",
      payee: payee.toBase58(),
      amountUnits: 1n,
      protocol: "mpp",
      rail: "stablecoin",
      endpoint: "api.example.com/v1/after",
    });
    expect(next.paymentId).toBe(maxId + 1n);
  });
});
