/**
 * Two gateway processes behind one PostgreSQL ("beyond one machine"): the in-process
 * system (`startSystem`: ledger, indexer, gateway A) and a second gateway, `api/gateway/main.ts` as
 * its own OS process (gateway B), on the same database, the same ledger and the same keys, as a
 * deployment runs stateless gateway replicas behind a load balancer.
 *
 * 200 x402 payments of ONE agent race across both: even flows authorize and complete on A and are
 * settled by a paid API that uses A as its facilitator, odd flows do all of it on B. The spend policy
 * is a per-agent lock in PostgreSQL (api/shared/policy/store.ts), not in a process, so it must hold
 * exactly as it does for one process: no overspend, no payment twice, every refusal recorded, and the
 * ledger, the reservation table, the listing and the indexed payments agree.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Keypair, PublicKey } from "@solana/web3.js";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateWalletEncryptionKey } from "../../api/gateway/wallets/index.js";
import { tokenBalanceUnits } from "../../api/gateway/chain/ledger.js";
import { parseJson } from "../../api/shared/http/json.js";
import { parseMoneyObject } from "../../api/shared/http/money.js";
import { SecretBox } from "../../api/shared/secret-box.js";
import { type System, startSystem } from "../../scripts/system.js";
import { type FacilitatedApi, startFacilitatedApi } from "../gateway/support/facilitated-api.js";
import { type GatewayClient, type PayOutcome, payThroughGateway } from "../gateway/support/gateway-payer.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { agentKey } from "../support/agent-keys.js";
import { pollUntil } from "../support/poll.js";
import { freePort, writeKeypairFile } from "../support/process-env.js";
import { mulberry32 } from "../support/random.js";
import { type RestAnswer, restCall } from "../support/rest.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const HOST = "127.0.0.1";
const USDC = 1_000_000n;
const SEED = 0x5ca1_e002;
const FLOWS = 200;
const START_TIMEOUT_MS = 60_000;
const INDEX_DEADLINE_MS = 90_000;
const OUTPUT_TAIL_CHARS = 8_000;

let db: FreshDatabase;
let system: System;
let keyDir: string;
let second: ChildProcess | undefined;
let secondExited: Promise<number | null>;
let secondOutput = "";
let gatewayA: GatewayClient;
let gatewayB: GatewayClient;
let serverKey: string;
const apis: FacilitatedApi[] = [];

beforeAll(async () => {
  db = await createFreshDatabase();
  keyDir = await mkdtemp(join(tmpdir(), "apg-two-gateways-"));
  const keys = { WALLET_ENCRYPTION_KEY: generateWalletEncryptionKey(), WEBHOOK_SECRETS_KEY: SecretBox.generateKey() };
  system = await startSystem({
    databaseUrl: db.url,
    port: 0,
    allowPrivateNetworks: true,
    env: keys,
    logger: pino({ level: "warn" }),
  });

  const port = await freePort();
  const { localnet } = system;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ...keys,
    DATABASE_URL: db.url,
    SOLANA_RPC_URL: localnet.rpcUrl,
    SOLANA_NETWORK: system.network,
    SOLANA_GENESIS_HASH: localnet.info.genesisHash,
    PROGRAM_ID: localnet.info.programId.toBase58(),
    SETTLEMENT_MINT: localnet.info.mint.toBase58(),
    SETTLEMENT_MINT_DECIMALS: String(localnet.info.decimals),
    LEDGER_AUTHORITY_KEYPAIR: await writeKeypairFile(keyDir, "authority", localnet.keypairs.authority),
    TREASURY_KEYPAIR: await writeKeypairFile(keyDir, "treasury", localnet.keypairs.treasury),
    EXPLORER_CLUSTER: localnet.rpcUrl,
    PORT: String(port),
    HOST,
    LOG_LEVEL: "warn",
  };
  delete env.SMTP_URL;
  const child = spawn(process.execPath, ["--import", "tsx", "api/gateway/main.ts"], { cwd: ROOT, env, stdio: "pipe" });
  second = child;
  const collect = (chunk: Buffer): void => {
    secondOutput = (secondOutput + chunk.toString("utf8")).slice(-OUTPUT_TAIL_CHARS);
  };
  child.stdout.on("data", collect);
  child.stderr.on("data", collect);
  secondExited = new Promise((resolveExit) => child.once("exit", (code) => resolveExit(code)));
  const secondUrl = `http://${HOST}:${port}`;
  // LOG_LEVEL=warn hides the "listening" line: poll the port until it answers.
  await pollUntil(
    async () => {
      if (child.exitCode !== null) throw new Error(`gateway B exited with ${child.exitCode}:\n${secondOutput}`);
      return fetch(`${secondUrl}/v1/agents`).then(
        (response) => response.status === 401,
        () => false,
      );
    },
    { timeoutMs: START_TIMEOUT_MS, intervalMs: 200, what: () => `gateway B on ${secondUrl}; its output:\n${secondOutput}` },
  );

  const agents = await system.createAccount("two gateways");
  gatewayA = { gatewayUrl: system.apiUrl, apiKey: agents.apiKey };
  gatewayB = { gatewayUrl: secondUrl, apiKey: agents.apiKey };
  serverKey = (await system.createAccount("paid API")).apiKey;
}, 180_000);

afterAll(async () => {
  await Promise.all(apis.map((api) => api.close()));
  if (second !== undefined && second.exitCode === null && second.signalCode === null) {
    second.kill("SIGTERM");
    await secondExited;
  }
  await system?.stop();
  await db?.drop();
  if (keyDir !== undefined) await rm(keyDir, { recursive: true, force: true });
});

function call(gateway: GatewayClient, method: string, path: string, body?: unknown): Promise<RestAnswer> {
  return restCall(gateway.gatewayUrl, method, path, { key: gateway.apiKey, body, lenientJson: true });
}

const balance = (owner: PublicKey): Promise<bigint> => tokenBalanceUnits(system.ledger, owner);
const sum = (values: readonly bigint[]): bigint => values.reduce((a, b) => a + b, 0n);

/** Every transaction of the agent in the listing (all pages), as gateway B answers it. */
async function listed(agentId: string, status?: "rejected"): Promise<{ txHash: string | null; id: string; amountUnits: bigint }[]> {
  const out: { txHash: string | null; id: string; amountUnits: bigint }[] = [];
  let after: string | null = null;
  for (let page = 0; page < 20; page += 1) {
    const query = new URLSearchParams({ agentId, limit: "200" });
    if (status !== undefined) query.set("status", status);
    if (after !== null) query.set("after", after);
    const answer = await call(gatewayB, "GET", `/v1/transactions?${query}`);
    expect(answer.status, answer.text).toBe(200);
    const body = parseJson(answer.text) as {
      transactions: { txHash: string | null; id: string; amountPaid: Parameters<typeof parseMoneyObject>[0] }[];
      pageInfo: { hasNextPage: boolean; endCursor: string | null };
    };
    for (const tx of body.transactions)
      out.push({ txHash: tx.txHash, id: tx.id, amountUnits: parseMoneyObject(tx.amountPaid, "amountPaid") });
    if (!body.pageInfo.hasNextPage) return out;
    after = body.pageInfo.endCursor;
  }
  throw new Error("more than 20 pages of transactions");
}

type Flow = PayOutcome & { readonly amountUnits: bigint; readonly via: "A" | "B" };

describe("two gateway processes on one database", () => {
  it("race 200 payments of one agent: the policy holds across processes; ledger, tables, listing and index agree", async () => {
    const agentId = "two-gateway-racer";
    const BUDGET = 2n * USDC;
    const RATE = 150;
    expect((await call(gatewayA, "POST", "/v1/agents", { agentId })).status).toBe(201);
    expect((await call(gatewayB, "POST", `/v1/agents/${agentId}/wallet/fund`, { usdc: 3 })).status).toBe(200);
    const set = await call(gatewayA, "PUT", `/v1/policies/${agentId}`, {
      dailyBudget: { usdc: 2 },
      rateLimit: { calls: RATE, window: "1h" },
    });
    expect(set.status, set.text).toBe(200);
    const wallet = JSON.parse((await call(gatewayB, "GET", `/v1/agents/${agentId}/wallet`)).text) as { address: string };
    const payerAddress = new PublicKey(wallet.address);

    // One payee, two paid APIs: each settles through a different gateway process.
    const payee = Keypair.generate().publicKey;
    const terms = { scheme: "exact", network: system.network, token: system.token, payTo: payee.toBase58() } as const;
    const apiA = await startFacilitatedApi({ gatewayUrl: gatewayA.gatewayUrl, apiKey: serverKey, terms });
    const apiB = await startFacilitatedApi({ gatewayUrl: gatewayB.gatewayUrl, apiKey: serverKey, terms });
    apis.push(apiA, apiB);

    // 0.005–0.030 usdc: about 115 fit the budget on average, so the budget decides most refusals
    // and the rate limit can only bind if the small amounts come first.
    const random = mulberry32(SEED);
    const amounts = Array.from({ length: FLOWS }, () => 5_000n + BigInt(Math.floor(random() * 25_001)));
    const before = { payer: await balance(payerAddress), payee: await balance(payee) };

    const flows: Flow[] = await Promise.all(
      amounts.map(async (amountUnits, i) => {
        const via = i % 2 === 0 ? "A" : "B";
        const [gateway, api] = via === "A" ? [gatewayA, apiA] : [gatewayB, apiB];
        const outcome = await payThroughGateway(gateway, agentId, `${api.origin}/x402/price/${amountUnits}/call-${i}`);
        return { ...outcome, amountUnits, via };
      }),
    );
    const unpaid = flows.filter((f) => f.kind === "unpaid");
    expect(
      unpaid.length,
      JSON.stringify(unpaid.slice(0, 2), (_, v: unknown) => (typeof v === "bigint" ? String(v) : v)),
    ).toBe(0);
    const paid = flows.filter((f): f is Flow & { kind: "paid" } => f.kind === "paid");
    const refused = flows.filter((f): f is Flow & { kind: "refused" } => f.kind === "refused");
    expect(paid.length + refused.length).toBe(FLOWS);
    const acceptedUnits = sum(paid.map((p) => p.amountUnits));

    // Both processes took payments and refused some: the race really ran across them.
    for (const via of ["A", "B"] as const) {
      expect(paid.filter((p) => p.via === via).length, `paid via ${via}`).toBeGreaterThan(0);
      expect(refused.filter((p) => p.via === via).length, `refused via ${via}`).toBeGreaterThan(0);
    }
    // No overspend: within the budget and the rate limit, and a limit was reached.
    expect(acceptedUnits).toBeLessThanOrEqual(BUDGET);
    expect(paid.length).toBeLessThanOrEqual(RATE);
    for (const f of refused) {
      expect(f.status).toBe(403);
      expect(["daily_budget_exceeded", "rate_limit_exceeded"]).toContain(f.problem.reasonCode);
    }
    const smallestRefusedByBudget = refused
      .filter((f) => f.problem.reasonCode === "daily_budget_exceeded")
      .reduce<bigint | null>((min, f) => (min === null || f.amountUnits < min ? f.amountUnits : min), null);
    expect(paid.length === RATE || (smallestRefusedByBudget !== null && smallestRefusedByBudget > 0n)).toBe(true);

    // No payment twice: every completed flow has its own ledger transaction and a settled reservation.
    for (const p of paid) {
      expect(p.completeStatus, JSON.stringify(p.completeBody)).toBe(200);
      expect(p.completeBody).toMatchObject({ reservationId: p.reservationId, status: "settled", txHash: p.txHash });
    }
    expect(new Set(paid.map((p) => p.txHash)).size).toBe(paid.length);
    const reservations = await system.pool.query<{ status: string; n: number; units: string }>(
      "SELECT status, count(*)::int AS n, sum(amount_units)::text AS units FROM spend_reservations WHERE agent_id = $1 GROUP BY status",
      [await agentKey(system.pool, agentId)],
    );
    expect(reservations.rows).toEqual([{ status: "settled", n: paid.length, units: acceptedUnits.toString() }]);

    // Every refusal recorded once, whichever process refused it.
    const rejected = await listed(agentId, "rejected");
    expect(rejected).toHaveLength(refused.length);
    const rejectedIds = new Map(rejected.map((tx) => [tx.id, tx.amountUnits]));
    for (const f of refused) expect(rejectedIds.get(`rejection:${String(f.problem.rejectionId)}`)).toBe(f.amountUnits);

    // The ledger moved exactly the accepted sum; the indexer shows exactly the settled payments.
    expect(before.payer - (await balance(payerAddress))).toBe(acceptedUnits);
    expect((await balance(payee)) - before.payee).toBe(acceptedUnits);
    let indexedCount = 0;
    const indexed = await pollUntil(
      async () => {
        const chain = (await listed(agentId)).filter((tx) => !tx.id.startsWith("rejection:"));
        indexedCount = chain.length;
        return chain.length >= paid.length ? chain : undefined;
      },
      { timeoutMs: INDEX_DEADLINE_MS, intervalMs: 200, what: () => `${paid.length} indexed payments (have ${indexedCount})` },
    );
    expect(new Map(indexed.map((tx) => [tx.txHash, tx.amountUnits]))).toEqual(new Map(paid.map((p) => [p.txHash, p.amountUnits])));

    // Both processes report the same usage.
    for (const gateway of [gatewayA, gatewayB]) {
      const policy = parseJson((await call(gateway, "GET", `/v1/policies/${agentId}`)).text) as {
        usedToday: Parameters<typeof parseMoneyObject>[0];
      };
      expect(parseMoneyObject(policy.usedToday, "usedToday")).toBe(acceptedUnits);
    }
    console.info(
      `two gateways: ${paid.length} paid (${paid.filter((p) => p.via === "A").length} via A), ${refused.length} refused, ` +
        `${acceptedUnits} of ${BUDGET} units`,
    );
  }, 300_000);
});
