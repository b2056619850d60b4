/**
 * REST wallet routes on the real local ledger and a fresh Postgres: fund, balance, withdraw, and
 * the Idempotency-Key over effects that leave Postgres — 50 concurrent funding requests with one
 * key move money once, and a key left `in_progress` by a crash resolves to the first operation.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { TOKEN_PROGRAM_ID } from "@solana/spl-token";
import { Keypair } from "@solana/web3.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createGatewayHandler } from "../../api/gateway/http/index.js";
import { createAccount, issueApiKey } from "../../api/shared/keys.js";
import { AgentWallets, generateWalletEncryptionKey, keystoreFromEnv, LocalTreasuryFundingSource } from "../../api/gateway/wallets/index.js";
import { localSettlementLedger } from "../../api/gateway/chain/index.js";
import { SecretBox } from "../../api/gateway/webhooks/index.js";
import { type Localnet, startLocalnet } from "../../scripts/localnet.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { type RestAnswer, restCall } from "../support/rest.js";
import { agentKey } from "../support/agent-keys.js";

let localnet: Localnet;
let db: FreshDatabase;
let handle: (request: Request) => Promise<Response | null>;
let apiKey: string;
let serial = 0;

beforeAll(async () => {
  [localnet, db] = await Promise.all([startLocalnet(), createFreshDatabase()]);
  const ledger = localSettlementLedger(localnet);
  const keystore = keystoreFromEnv({ WALLET_ENCRYPTION_KEY: generateWalletEncryptionKey() });
  const wallets = new AgentWallets({
    pool: db.pool,
    keystore,
    ledger,
    fundingSource: LocalTreasuryFundingSource.fromLocalnet(ledger, localnet),
  });
  handle = createGatewayHandler({ pool: db.pool, wallets, keystore, secretBox: new SecretBox(randomBytes(32)) });
  apiKey = (await issueApiKey(db.pool, await createAccount(db.pool, "wallets REST"))).apiKey;
});

afterAll(async () => {
  await localnet?.stop();
  await db?.drop();
});

function call(method: string, path: string, options: { raw?: string; idem?: string } = {}): Promise<RestAnswer> {
  return restCall(handle, method, path, { key: apiKey, ...options });
}

/** A new agent whose wallet was funded with `usdc` (the JSON number as written): what a test starts from. */
async function fundedAgent(usdc: string): Promise<string> {
  const agentId = `w-${++serial}`;
  expect((await call("POST", "/v1/agents", { raw: `{"agentId":"${agentId}"}`, idem: randomUUID() })).status).toBe(201);
  const funded = await call("POST", `/v1/agents/${agentId}/wallet/fund`, { raw: `{"usdc":${usdc}}`, idem: randomUUID() });
  expect(funded.status, funded.text).toBe(200);
  return agentId;
}

async function fundings(agentId: string): Promise<number> {
  const { rows } = await db.pool.query("SELECT count(*)::int AS n FROM wallet_operations WHERE agent_id = $1 AND kind = 'fund'", [
    await agentKey(db.pool, agentId),
  ]);
  return rows[0].n;
}

describe("wallet routes", () => {
  it("funds, reads the balance exactly, withdraws, and refuses more than the balance", async () => {
    expect((await call("POST", "/v1/agents", { raw: '{"agentId":"w1"}', idem: randomUUID() })).status).toBe(201);
    const funded = await call("POST", "/v1/agents/w1/wallet/fund", { raw: '{"usdc":2.000001}', idem: randomUUID() });
    expect(funded.status).toBe(200);
    expect(funded.body).toMatchObject({ kind: "fund", status: "confirmed", agentId: "w1" });
    expect(funded.text).toContain('"amount":{"usdc":2.000001}');
    expect((await call("GET", "/v1/agents/w1/wallet/balance")).text).toBe('{"usdc":2.000001}');
    const wallet = await call("GET", "/v1/agents/w1/wallet");
    expect(wallet.body).toMatchObject({ agentId: "w1", balance: { usdc: 2.000001 } });
    expect(typeof wallet.body.network).toBe("string");

    const to = Keypair.generate().publicKey.toBase58();
    const tooMuch = await call("POST", "/v1/agents/w1/wallet/withdraw", { raw: `{"to":"${to}","usdc":3}`, idem: randomUUID() });
    expect(tooMuch.status).toBe(422);
    expect(tooMuch.body).toMatchObject({ code: "INSUFFICIENT_FUNDS", errorClass: "InsufficientFundsError" });
    expect(tooMuch.text).toContain('"currentBalance":{"usdc":2.000001}');

    const withdrawn = await call("POST", "/v1/agents/w1/wallet/withdraw", { raw: `{"to":"${to}","usdc":0.5}`, idem: randomUUID() });
    expect(withdrawn.status).toBe(200);
    expect((await call("GET", "/v1/agents/w1/wallet/balance")).text).toBe('{"usdc":1.500001}');
  });

  it("bad amounts and addresses are 400 and move nothing", async () => {
    const agentId = await fundedAgent("1.500001");
    const before = await fundings(agentId);
    for (const raw of ['{"usdc":0.0000001}', '{"usdc":-1}', '{"usdc":"1"}', '{"usdc":0}', '{"amount":1}', "[]"]) {
      const answer = await call("POST", `/v1/agents/${agentId}/wallet/fund`, { raw, idem: randomUUID() });
      expect(answer.status, raw).toBe(400);
    }
    for (const raw of ['{"to":"not-an-address","usdc":1}', '{"usdc":1}']) {
      expect((await call("POST", `/v1/agents/${agentId}/wallet/withdraw`, { raw, idem: randomUUID() })).status, raw).toBe(400);
    }
    expect(await fundings(agentId)).toBe(before);
    expect((await call("GET", `/v1/agents/${agentId}/wallet/balance`)).text).toBe('{"usdc":1.500001}');
  });

  it("a withdrawal to the mint, a program or a sysvar is refused: the tokens could never move again", async () => {
    const agentId = await fundedAgent("1.500001");
    const mint = localnet.info.mint.toBase58();
    for (const to of [
      mint,
      TOKEN_PROGRAM_ID.toBase58(),
      "11111111111111111111111111111111",
      "SysvarRent111111111111111111111111111111111",
    ]) {
      const answer = await call("POST", `/v1/agents/${agentId}/wallet/withdraw`, { raw: `{"to":"${to}","usdc":0.1}`, idem: randomUUID() });
      expect(answer.status, to).toBe(400);
      expect(answer.body.code, to).toBe("BAD_USER_INPUT");
    }
    expect((await call("GET", `/v1/agents/${agentId}/wallet/balance`)).text).toBe('{"usdc":1.500001}');
    expect((await call("POST", "/v1/agents/nobody/wallet/fund", { raw: '{"usdc":1}' })).status).toBe(404);
  });

  it("50 concurrent funding requests with one key: one payment", async () => {
    expect((await call("POST", "/v1/agents", { raw: '{"agentId":"w50"}' })).status).toBe(201);
    const idem = randomUUID();
    const answers = await Promise.all(
      Array.from({ length: 50 }, () => call("POST", "/v1/agents/w50/wallet/fund", { raw: '{"usdc":1.25}', idem })),
    );
    expect(answers.every((a) => a.status === 200 || (a.status === 409 && a.body.code === "IDEMPOTENCY_IN_PROGRESS"))).toBe(true);
    expect(answers.some((a) => a.status === 200)).toBe(true);
    expect(new Set(answers.filter((a) => a.status === 200).map((a) => a.body.operationId)).size).toBe(1);
    // The retries after the race replay the one result.
    const retry = await call("POST", "/v1/agents/w50/wallet/fund", { raw: '{"usdc":1.25}', idem });
    expect(retry.status).toBe(200);
    expect(await fundings("w50")).toBe(1);
    expect((await call("GET", "/v1/agents/w50/wallet/balance")).text).toBe('{"usdc":1.25}');
  });

  it("a key left in_progress by a crash resolves to the first operation, never a second payment", async () => {
    const agentId = await fundedAgent("1.25");
    const idem = randomUUID();
    const first = await call("POST", `/v1/agents/${agentId}/wallet/fund`, { raw: '{"usdc":0.75}', idem });
    expect(first.status).toBe(200);
    // As if the process died after the funding landed and before the key was completed.
    await db.pool.query("UPDATE idempotency_keys SET status = 'in_progress', response_status = NULL, response_body = NULL WHERE key = $1", [
      idem,
    ]);
    const retried = await call("POST", `/v1/agents/${agentId}/wallet/fund`, { raw: '{"usdc":0.75}', idem });
    expect(retried.status).toBe(200);
    expect(retried.body.operationId).toBe(first.body.operationId);
    expect(retried.body.txHash).toBe(first.body.txHash);
    expect(await fundings(agentId)).toBe(2);
    expect((await call("GET", `/v1/agents/${agentId}/wallet/balance`)).text).toBe('{"usdc":2}');
    const changed = await call("POST", `/v1/agents/${agentId}/wallet/fund`, { raw: '{"usdc":0.76}', idem });
    expect(changed.status).toBe(422);
  });
});
