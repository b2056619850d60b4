/**
 * Local state that outlives the process, on the whole real system (scripts/system.ts):
 * one ledger directory and one database, and the system stopped and started again on them.
 *
 * - A clean stop between payments: everything made before is still served (REST, GraphQL, the
 *   ledger's RPC), new payments continue the same history with the same custodial wallets, and
 *   `indexer verify` over the whole range finds no difference.
 * - The ledger process SIGKILLed during a payment load: after a restart every payment a client
 *   was told had landed is on the ledger and in the index, the gateway's settled reservations
 *   account for every unit that left each wallet (none half-applied), and `indexer verify` agrees.
 */
import { spawn } from "node:child_process";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Keypair, PublicKey } from "@solana/web3.js";
import { pino } from "pino";
import { afterAll, describe, expect, it } from "vitest";
import { generateWalletEncryptionKey } from "../../api/gateway/wallets/index.js";
import { tokenBalanceUnits } from "../../api/gateway/chain/ledger.js";
import { SecretBox } from "../../api/shared/secret-box.js";
import { freePortPair } from "../../scripts/localnet.js";
import { startSystem, type System } from "../../scripts/system.js";
import { Client, type PaidResult, usdcToUnits } from "../../sdk/src/index.js";
import { type PaidApi, startPaidApi } from "../gateway/support/paid-api.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { agentKey } from "../support/agent-keys.js";
import { pollUntil } from "../support/poll.js";
import { restCall } from "../support/rest.js";

const PRICE_UNITS = 50_000n; // 0.05 usdc
const FUND_USDC = 2;
const INDEX_DEADLINE_MS = 30_000;

/** The state one test's systems share, and what runs on it now. */
interface Run {
  readonly db: FreshDatabase;
  readonly ledgerDir: string;
  readonly env: Record<string, string>;
  readonly payee: PublicKey;
  /** The ledger's RPC port, the same at every start: explorer links name the RPC URL. */
  readonly rpcPort: number;
  system: System | null;
  paid: PaidApi | null;
  apiKey: string;
}

const runs: Run[] = [];

async function newRun(): Promise<Run> {
  const ledgerDir = await mkdtemp(join(tmpdir(), "apg-restart-"));
  await chmod(ledgerDir, 0o700);
  const run: Run = {
    db: await createFreshDatabase(),
    ledgerDir,
    // The keys outlive the process with the state they sealed (scripts/local-state.ts does this for npm start).
    env: { WALLET_ENCRYPTION_KEY: generateWalletEncryptionKey(), WEBHOOK_SECRETS_KEY: SecretBox.generateKey() },
    payee: Keypair.generate().publicKey,
    rpcPort: await freePortPair(),
    system: null,
    paid: null,
    apiKey: "",
  };
  runs.push(run);
  return run;
}

/** Starts the system on the run's state, and a paid API settling through its facilitator. */
async function start(run: Run): Promise<System> {
  const system = await startSystem({
    databaseUrl: run.db.url,
    port: 0,
    localnet: { ledgerDir: run.ledgerDir, rpcPort: run.rpcPort },
    env: run.env,
    allowPrivateNetworks: true,
    reconcileIntervalMs: 200,
    logger: pino({ level: "silent" }),
  });
  run.system = system;
  run.paid = await startPaidApi(() => ({
    x402: {
      facilitator: system.facilitator,
      terms: { scheme: "exact", network: system.network, token: system.token, amountUnits: PRICE_UNITS, payTo: run.payee.toBase58() },
    },
  }));
  return system;
}

async function stop(run: Run): Promise<void> {
  await run.paid?.close();
  await run.system?.stop();
  run.paid = null;
  run.system = null;
}

function client(run: Run, agentId: string, options: { timeout?: number; maxRetries?: number } = {}): Client {
  return new Client({ agentId, apiKey: run.apiKey, baseUrl: run.system!.apiUrl, retryBaseDelayMs: 10, ...options });
}

async function rest(run: Run, method: string, path: string, body?: unknown): Promise<Record<string, unknown>> {
  const answer = await restCall(run.system!.apiUrl, method, path, { key: run.apiKey, body });
  if (answer.status >= 300) throw new Error(`${method} ${path}: ${answer.status} ${answer.text}`);
  return answer.text === "" ? {} : (answer.body as Record<string, unknown>);
}

async function graphql(run: Run, query: string): Promise<Record<string, unknown>> {
  const answer = await fetch(`${run.system!.apiUrl}/graphql`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${run.apiKey}` },
    body: JSON.stringify({ query }),
  });
  const json = (await answer.json()) as { data?: Record<string, unknown>; errors?: unknown };
  if (json.errors !== undefined) throw new Error(JSON.stringify(json.errors));
  return json.data!;
}

/** A registered, funded agent and its client. */
async function fundedAgent(run: Run, agentId: string): Promise<Client> {
  await rest(run, "POST", "/v1/agents", { agentId });
  const sdk = client(run, agentId);
  expect((await sdk.wallet.fund({ usdc: FUND_USDC })).status).toBe("confirmed");
  return sdk;
}

async function walletUnits(run: Run, sdk: Client): Promise<bigint> {
  const { address } = await sdk.wallet.get();
  return tokenBalanceUnits(run.system!.ledger, new PublicKey(address));
}

async function settledUnits(run: Run, agentId: string): Promise<{ units: bigint; txHashes: string[] }> {
  const { rows } = await run.system!.pool.query<{ amount_units: string; tx_hash: string }>(
    "SELECT amount_units, tx_hash FROM spend_reservations WHERE agent_id = $1 AND status = 'settled'",
    [await agentKey(run.system!.pool, agentId)],
  );
  return { units: rows.reduce((sum, row) => sum + BigInt(row.amount_units), 0n), txHashes: rows.map((row) => row.tx_hash) };
}

/** `indexer verify` over every slot, as an operator runs it: exit code and its last line. */
function indexerVerify(run: Run): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        "indexer/cli.ts",
        "verify",
        "--from-slot",
        "0",
        "--rpc-url",
        run.system!.localnet.rpcUrl,
        "--program-id",
        run.system!.localnet.info.programId.toBase58(),
      ],
      { env: { ...process.env, DATABASE_URL: run.db.url }, stdio: ["ignore", "pipe", "pipe"] },
    );
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString("utf8");
    });
    child.on("exit", (code) => resolve({ code, output }));
  });
}

async function rpc<T>(run: Run, method: string, params: unknown[]): Promise<T> {
  const answer = await fetch(run.system!.localnet.rpcUrl, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  });
  return ((await answer.json()) as { result: T }).result;
}

async function indexed(sdk: Client, txHashes: readonly string[]): Promise<void> {
  await pollUntil(
    async () => {
      const listed = new Set((await sdk.transactions.list({ limit: 100 })).map((t) => t.txHash));
      return txHashes.every((hash) => listed.has(hash));
    },
    { timeoutMs: INDEX_DEADLINE_MS, intervalMs: 100, what: "payments indexed" },
  );
}

afterAll(async () => {
  for (const run of runs) {
    await stop(run).catch(() => undefined);
    await run.db.drop();
    await rm(run.ledgerDir, { recursive: true, force: true });
  }
});

describe("a restart keeps the local state", () => {
  it("between payments: what was made is still served, payments continue the history, and verify finds no difference", async () => {
    const run = await newRun();
    let system = await start(run);
    expect(system.localnet.info.resumed).toBe(false);
    run.apiKey = (await system.createAccount("restart")).apiKey;
    const buyer = await fundedAgent(run, "buyer");
    await rest(run, "PUT", "/v1/policies/buyer", { dailyBudget: { usdc: 10 }, perCallLimit: { usdc: 1 } });
    const first = (await buyer.pay({ endpoint: `${run.paid!.origin}/x402/one` })) as PaidResult;
    expect(first.paid).toBe(true);
    await indexed(buyer, [first.txHash]);
    const slotBefore = await rpc<number>(run, "getSlot", []);
    const genesis = await rpc<string>(run, "getGenesisHash", []);

    await stop(run);
    system = await start(run);
    expect(system.localnet.info.resumed).toBe(true);
    expect(await rpc<string>(run, "getGenesisHash", [])).toBe(genesis);
    expect(await rpc<number>(run, "getSlot", [])).toBeGreaterThan(slotBefore);

    // REST: the account's key, the agent, its policy, its wallet and its payment.
    const again = client(run, "buyer");
    expect((await rest(run, "GET", "/v1/policies/buyer")).perCallLimit).toEqual({ usdc: 1 });
    expect(await again.wallet.balance()).toEqual({ usdc: FUND_USDC - 0.05 });
    expect((await again.transactions.get(first.txHash)).amountPaid).toEqual({ usdc: 0.05 });
    // GraphQL: the same payment.
    const data = await graphql(run, `{ transaction(txHash: "${first.txHash}") { txHash amountPaidUnits } }`);
    expect(data.transaction).toEqual({ txHash: first.txHash, amountPaidUnits: PRICE_UNITS.toString() });
    // The ledger's RPC: the transaction, with the slot it had.
    const onChain = await rpc<{ slot: number; meta: { err: unknown } } | null>(run, "getTransaction", [
      first.txHash,
      { encoding: "json", maxSupportedTransactionVersion: 0 },
    ]);
    expect(onChain?.meta.err).toBeNull();
    expect(onChain!.slot).toBeLessThanOrEqual(slotBefore);

    // The custodial wallet still signs (its key was sealed with the kept key): a second payment.
    const second = (await again.pay({ endpoint: `${run.paid!.origin}/x402/two` })) as PaidResult;
    expect(second.paid).toBe(true);
    await indexed(again, [first.txHash, second.txHash]);
    expect(await again.wallet.balance()).toEqual({ usdc: FUND_USDC - 0.1 });
    expect(await walletUnits(run, again)).toBe(usdcToUnits(FUND_USDC) - 2n * PRICE_UNITS);
    expect((await settledUnits(run, "buyer")).units).toBe(2n * PRICE_UNITS);

    const verify = await indexerVerify(run);
    expect(verify.output).toContain("no differences");
    expect(verify.code).toBe(0);
  });

  it("a SIGKILLed ledger loses no confirmed payment and half-applies none; tables, answers and verify agree", async () => {
    const run = await newRun();
    const system = await start(run);
    run.apiKey = (await system.createAccount("ledger kill")).apiKey;
    const agents = ["kill-a", "kill-b", "kill-c"];
    for (const agentId of agents) await fundedAgent(run, agentId);

    // Three agents paying until the ledger dies under them; the kill comes after a few
    // payments have landed, while others are in flight.
    const landed: { agentId: string; txHash: string }[] = [];
    let killed = false;
    // Two loops per agent: six payments in flight at any moment.
    const loops = [...agents, ...agents].map(async (agentId, loop) => {
      const sdk = client(run, agentId, { timeout: 5_000, maxRetries: 0 });
      for (let call = 0; call < 30 && !killed; call += 1) {
        try {
          const result = (await sdk.pay({ endpoint: `${run.paid!.origin}/x402/${agentId}/${loop}/${call}` })) as PaidResult;
          if (result.paid) landed.push({ agentId, txHash: result.txHash });
        } catch {
          // Payments in flight when the ledger dies fail; what matters is what landed.
        }
      }
    });
    await pollUntil(() => landed.length >= 4, { timeoutMs: 60_000, intervalMs: 20, what: "payments before the kill" });
    process.kill(system.localnet.pid, "SIGKILL");
    killed = true;
    await Promise.all(loops);
    expect(landed.length).toBeGreaterThanOrEqual(4);

    await stop(run);
    await start(run);
    expect(run.system!.localnet.info.resumed).toBe(true);

    // Every payment a client was told had landed is on the ledger, successful.
    for (const { txHash } of landed) {
      const onChain = await rpc<{ meta: { err: unknown } } | null>(run, "getTransaction", [
        txHash,
        { encoding: "json", maxSupportedTransactionVersion: 0 },
      ]);
      expect(onChain, txHash).not.toBeNull();
      expect(onChain!.meta.err).toBeNull();
    }
    // Per agent, once the reconciler has resolved what was in flight: the units that left the
    // wallet on chain are exactly the settled reservations, each settled one is indexed, and the
    // client's own answers (balance, transactions) say the same.
    for (const agentId of agents) {
      const sdk = client(run, agentId);
      const funded = usdcToUnits(FUND_USDC);
      await pollUntil(async () => funded - (await walletUnits(run, sdk)) === (await settledUnits(run, agentId)).units, {
        timeoutMs: 60_000,
        intervalMs: 200,
        what: `${agentId}: settled reservations account for the wallet`,
      });
      const settled = await settledUnits(run, agentId);
      expect(settled.units % PRICE_UNITS === 0n).toBe(true);
      for (const { txHash } of landed.filter((payment) => payment.agentId === agentId)) expect(settled.txHashes).toContain(txHash);
      await indexed(sdk, settled.txHashes);
      const listed = await sdk.transactions.list({ limit: 100 });
      const indexedUnits = listed.filter((t) => t.status !== "rejected").reduce((sum, t) => sum + usdcToUnits(t.amountPaid.usdc), 0n);
      expect(indexedUnits).toBe(settled.units);
      expect(usdcToUnits((await sdk.wallet.balance()).usdc)).toBe(funded - settled.units);
    }

    const verify = await indexerVerify(run);
    expect(verify.output).toContain("no differences");
    expect(verify.code).toBe(0);
  });
});
