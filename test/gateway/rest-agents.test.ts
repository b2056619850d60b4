/**
 * Agents listing (spec 2.5 / 4.7 `agents.list`) on the real local ledger, a fresh Postgres and
 * real HTTP on loopback: REST, GraphQL and the SDK answer a balance for every agent of an account
 * of any size (batched chain reads, 0 for a wallet never funded), and REST pages by cursor.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { Keypair } from "@solana/web3.js";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createAccount, issueApiKey, registerAgent } from "../../api/keys.js";
import { createApiServer, type ApiServer } from "../../api/server.js";
import {
  AgentWallets,
  generateWalletEncryptionKey,
  keystoreFromEnv,
  LocalTreasuryFundingSource,
  localSettlementLedger,
  type SettlementLedger,
} from "../../api/wallets/index.js";
import { SecretBox } from "../../api/webhooks/index.js";
import { type Localnet, startLocalnet } from "../../scripts/localnet.js";
import { Client } from "../../sdk/src/index.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";

/** More than the old 200-agent cutoff past which every balance was null. */
const BULK_AGENTS = 250;

let localnet: Localnet;
let db: FreshDatabase;
let ledger: SettlementLedger;
let server: ApiServer;
let baseUrl: string;
let apiKey: string;

beforeAll(async () => {
  [localnet, db] = await Promise.all([startLocalnet(), createFreshDatabase()]);
  ledger = localSettlementLedger(localnet);
  const keystore = keystoreFromEnv({ WALLET_ENCRYPTION_KEY: generateWalletEncryptionKey() });
  const wallets = new AgentWallets({ pool: db.pool, keystore, ledger, fundingSource: LocalTreasuryFundingSource.fromLocalnet(ledger, localnet) });
  server = createApiServer({
    pool: db.pool,
    liveFeed: false,
    logger: pino({ level: "silent" }),
    gateway: { wallets, keystore, secretBox: new SecretBox(randomBytes(32)) },
  });
  baseUrl = `http://127.0.0.1:${await server.listen(0)}`;
  const accountId = await createAccount(db.pool, "many agents");
  apiKey = (await issueApiKey(db.pool, accountId)).apiKey;
  // Registering needs no chain transaction: these wallets have no token account at all.
  for (let i = 0; i < BULK_AGENTS; i++) {
    await registerAgent(db.pool, accountId, { agentId: `bulk-${String(i).padStart(3, "0")}`, walletAddress: Keypair.generate().publicKey.toBase58() });
  }
  for (const agentId of ["funded", "never-funded"]) {
    expect((await call("POST", "/v1/agents", { agentId }, randomUUID())).status).toBe(201);
  }
  expect((await call("POST", "/v1/agents/funded/wallet/fund", { usdc: 1.000001 }, randomUUID())).status).toBe(200);
}, 240_000);

afterAll(async () => {
  await server?.close();
  await localnet?.stop();
  await db?.drop();
});

async function call(method: string, path: string, body?: unknown, idem?: string) {
  const headers: Record<string, string> = { authorization: `Bearer ${apiKey}` };
  if (idem !== undefined) headers["idempotency-key"] = idem;
  if (body !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(`${baseUrl}${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const text = await response.text();
  return { status: response.status, text, body: text === "" ? null : JSON.parse(text) };
}

const ALL = BULK_AGENTS + 2;

describe("agents.list balances", () => {
  it("REST: every agent of a 252-agent account has a balance, read in one RPC call per 100 wallets", async () => {
    const batched = vi.spyOn(ledger.connection, "getMultipleAccountsInfo");
    const single = vi.spyOn(ledger.connection, "getAccountInfo");
    try {
      const page = await call("GET", "/v1/agents?limit=500");
      expect(page.status).toBe(200);
      expect(page.body.agents).toHaveLength(ALL);
      expect(page.body.nextCursor).toBeNull();
      expect(page.body.agents.filter((agent: { balance: unknown }) => agent.balance === null)).toEqual([]);
      const byId = new Map(page.body.agents.map((agent: { agentId: string }) => [agent.agentId, agent]));
      expect(byId.get("funded")).toMatchObject({ balance: { usdc: 1.000001 } });
      expect(page.text).toContain('"balance":{"usdc":1.000001}');
      expect(byId.get("never-funded")).toMatchObject({ balance: { usdc: 0 } });
      expect(byId.get("bulk-249")).toMatchObject({ balance: { usdc: 0 } });
      expect(batched).toHaveBeenCalledTimes(Math.ceil(ALL / 100));
      expect(single).not.toHaveBeenCalled();
    } finally {
      batched.mockRestore();
      single.mockRestore();
    }
  });

  it("REST pages by cursor: 100 by default, each agent exactly once, in agent id order", async () => {
    const seen: string[] = [];
    let after: string | null = null;
    for (let pages = 1; ; pages++) {
      const answer = await call("GET", `/v1/agents${after === null ? "" : `?after=${encodeURIComponent(after)}`}`);
      expect(answer.status).toBe(200);
      expect(answer.body.agents.length).toBeLessThanOrEqual(100);
      seen.push(...answer.body.agents.map((agent: { agentId: string }) => agent.agentId));
      after = answer.body.nextCursor;
      if (after === null) {
        expect(pages).toBe(Math.ceil(ALL / 100));
        break;
      }
      expect(after).toBe(seen[seen.length - 1]);
    }
    expect(seen).toHaveLength(ALL);
    expect(new Set(seen).size).toBe(ALL);
    expect(seen).toEqual([...seen].sort());
  });

  it("REST rejects a bad page size or cursor with a typed 400", async () => {
    for (const query of ["limit=0", "limit=501", "limit=ten", "after=has%20space", "after="]) {
      const answer = await call("GET", `/v1/agents?${query}`);
      expect(answer.status, query).toBe(400);
      expect(answer.body.code, query).toBe("BAD_USER_INPUT");
    }
  });

  it("GraphQL agents { balance } is an exact decimal for every agent, 0 for a wallet never funded", async () => {
    const answer = await call("POST", "/graphql", { query: "{ agents { agentId balance balanceUnits } }" });
    expect(answer.body.errors).toBeUndefined();
    const agents: { agentId: string; balance: string | null; balanceUnits: string | null }[] = answer.body.data.agents;
    expect(agents).toHaveLength(ALL);
    expect(agents.filter((agent) => agent.balance === null || agent.balanceUnits === null)).toEqual([]);
    expect(agents.find((agent) => agent.agentId === "funded")).toEqual({ agentId: "funded", balance: "1.000001", balanceUnits: "1000001" });
    expect(agents.find((agent) => agent.agentId === "never-funded")).toMatchObject({ balance: "0.000000", balanceUnits: "0" });
  });

  it("SDK agents.list follows the pages and returns every agent with a { usdc: number } balance", async () => {
    const client = new Client({ agentId: "funded", apiKey, baseUrl });
    const agents = await client.agents.list();
    expect(agents).toHaveLength(ALL);
    expect(agents.every((agent) => agent.balance !== null && typeof agent.balance.usdc === "number")).toBe(true);
    expect(agents.find((agent) => agent.agentId === "funded")?.balance).toEqual({ usdc: 1.000001 });
    expect(agents.find((agent) => agent.agentId === "never-funded")?.balance).toEqual({ usdc: 0 });
  });
});
