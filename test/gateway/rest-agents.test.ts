/**
 * Agents listing (spec 2.5 / 4.7 `agents.list`) on the real local ledger, a fresh Postgres and
 * real HTTP on loopback: REST, GraphQL and the SDK answer a balance for every agent of an account
 * of any size (batched chain reads, 0 for a wallet never funded), and REST pages by cursor.
 * Archiving (`DELETE /v1/agents/{agentId}`): refused while the agent could still move money unless
 * forced; afterwards it cannot authorize, be charged or be funded, leaves the listings, and its
 * history stays readable.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { Keypair } from "@solana/web3.js";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createAccount, issueApiKey, registerAgent } from "../../api/shared/keys.js";
import { SpendPolicyChargeGate } from "../../api/gateway/mpp/charge-policy.js";
import { putPolicy } from "../../api/shared/policy/index.js";
import type { ApiServer } from "../../api/query/server.js";
import { createGatewayServer } from "../../api/gateway/server.js";
import { AgentWallets, generateWalletEncryptionKey, keystoreFromEnv, LocalTreasuryFundingSource } from "../../api/gateway/wallets/index.js";
import { localSettlementLedger, type SettlementLedger } from "../../api/gateway/chain/index.js";
import { SecretBox } from "../../api/gateway/webhooks/index.js";
import { type Localnet, startLocalnet } from "../../scripts/localnet.js";
import { Client, ServiceError } from "../../sdk/src/index.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { type RestAnswer, restCall } from "../support/rest.js";
import { agentKey } from "../support/agent-keys.js";

/** More than the old 200-agent cutoff past which every balance was null. */
const BULK_AGENTS = 250;

let localnet: Localnet;
let db: FreshDatabase;
let ledger: SettlementLedger;
let server: ApiServer;
let baseUrl: string;
let apiKey: string;
let otherKey: string;
/** The archiving tests' account: they register agents, and the listing tests count every agent of apiKey's. */
let archiveKey: string;

beforeAll(async () => {
  [localnet, db] = await Promise.all([startLocalnet(), createFreshDatabase()]);
  ledger = localSettlementLedger(localnet);
  const keystore = keystoreFromEnv({ WALLET_ENCRYPTION_KEY: generateWalletEncryptionKey() });
  const wallets = new AgentWallets({
    pool: db.pool,
    keystore,
    ledger,
    fundingSource: LocalTreasuryFundingSource.fromLocalnet(ledger, localnet),
  });
  server = createGatewayServer({
    pool: db.pool,
    liveFeed: false,
    logger: pino({ level: "silent" }),
    gateway: { wallets, keystore, secretBox: new SecretBox(randomBytes(32)) },
  });
  baseUrl = `http://127.0.0.1:${await server.listen(0)}`;
  const accountId = await createAccount(db.pool, "many agents");
  apiKey = (await issueApiKey(db.pool, accountId)).apiKey;
  otherKey = (await issueApiKey(db.pool, await createAccount(db.pool, "another account"))).apiKey;
  archiveKey = (await issueApiKey(db.pool, await createAccount(db.pool, "archives"))).apiKey;
  // Registering needs no chain transaction: these wallets have no token account at all.
  for (let i = 0; i < BULK_AGENTS; i++) {
    await registerAgent(db.pool, accountId, {
      agentId: `bulk-${String(i).padStart(3, "0")}`,
      walletAddress: Keypair.generate().publicKey.toBase58(),
    });
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

function call(method: string, path: string, body?: unknown, idem?: string, key = apiKey): Promise<RestAnswer> {
  return restCall(baseUrl, method, path, { key, body, idem });
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

const ENDPOINT = "https://api.example.com/v1/data";
const requirement = (amount: string) => ({
  scheme: "exact",
  network: ledger.network,
  token: ledger.mint.toBase58(),
  amount,
  payTo: Keypair.generate().publicKey.toBase58(),
  resource: ENDPOINT,
});

/** `sql` over the agent's rows: `$1` is its internal key, what gateway tables reference. */
async function count(sql: string, agentId: string): Promise<number> {
  return (await db.pool.query(sql, [await agentKey(db.pool, agentId)])).rows[0].n;
}

describe("archiving an agent", () => {
  // Calls in the archives' account unless a key is given.
  const call = (method: string, path: string, body?: unknown, idem?: string, key = archiveKey): Promise<RestAnswer> =>
    restCall(baseUrl, method, path, { key, body, idem });

  async function register(agentId: string): Promise<void> {
    expect((await call("POST", "/v1/agents", { agentId }, randomUUID())).status).toBe(201);
  }

  it("is refused with 409 AGENT_NOT_EMPTY while the wallet holds funds, and archives once it is withdrawn", async () => {
    await register("saver");
    expect((await call("POST", "/v1/agents/saver/wallet/fund", { usdc: 0.25 }, randomUUID())).status).toBe(200);
    const refused = await call("DELETE", "/v1/agents/saver");
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ code: "AGENT_NOT_EMPTY", agentId: "saver", openReservations: 0, currentBalance: { usdc: 0.25 } });
    expect((await call("GET", "/v1/agents/saver")).body.archivedAt).toBeNull();

    const to = Keypair.generate().publicKey.toBase58();
    expect((await call("POST", "/v1/agents/saver/wallet/withdraw", { to, usdc: 0.25 }, randomUUID())).status).toBe(200);
    const archived = await call("DELETE", "/v1/agents/saver");
    expect(archived.status).toBe(200);
    expect(archived.body).toMatchObject({ agentId: "saver", balance: { usdc: 0 } });
    expect(Date.parse(archived.body.archivedAt)).not.toBeNaN();
    // Archiving again answers the same archive; it does not move the time.
    const again = await call("DELETE", "/v1/agents/saver");
    expect(again.status).toBe(200);
    expect(again.body.archivedAt).toBe(archived.body.archivedAt);
  });

  it("is refused while a payment reservation is open, and allowed once it is released", async () => {
    await register("reserver");
    const authorized = await call("POST", "/v1/agents/reserver/payments/authorize", { endpoint: ENDPOINT, x402: requirement("1000") });
    expect(authorized.status).toBe(200);
    const refused = await call("DELETE", "/v1/agents/reserver");
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ code: "AGENT_NOT_EMPTY", openReservations: 1, currentBalance: { usdc: 0 } });
    expect((await call("POST", `/v1/agents/reserver/payments/${authorized.body.reservationId}/release`)).status).toBe(200);
    expect((await call("DELETE", "/v1/agents/reserver")).status).toBe(200);
  });

  it("force archives a funded agent, whose funds stay withdrawable", async () => {
    await register("forced");
    expect((await call("POST", "/v1/agents/forced/wallet/fund", { usdc: 0.5 }, randomUUID())).status).toBe(200);
    const archived = await call("DELETE", "/v1/agents/forced?force=true");
    expect(archived.status).toBe(200);
    expect(archived.body).toMatchObject({ agentId: "forced", balance: { usdc: 0.5 } });
    const to = Keypair.generate().publicKey.toBase58();
    expect((await call("POST", "/v1/agents/forced/wallet/withdraw", { to, usdc: 0.5 }, randomUUID())).status).toBe(200);
    expect((await call("GET", "/v1/agents/forced/wallet/balance")).text).toBe('{"usdc":0}');
  });

  it("an archived agent cannot be funded, authorize a payment or be charged on an MPP session (typed refusals, nothing stored)", async () => {
    await register("retired");
    expect((await call("DELETE", "/v1/agents/retired")).status).toBe(200);
    const fund = await call("POST", "/v1/agents/retired/wallet/fund", { usdc: 1 }, randomUUID());
    expect(fund.status).toBe(409);
    expect(fund.body).toMatchObject({ code: "AGENT_ARCHIVED", agentId: "retired" });
    expect(await count("SELECT count(*)::int AS n FROM wallet_operations WHERE agent_id = $1", "retired")).toBe(0);

    const pay = await call(
      "POST",
      "/v1/agents/retired/payments/authorize",
      { endpoint: ENDPOINT, x402: requirement("1000") },
      randomUUID(),
    );
    expect(pay.status).toBe(409);
    expect(pay.body).toMatchObject({ code: "AGENT_ARCHIVED" });
    expect(await count("SELECT count(*)::int AS n FROM spend_reservations WHERE agent_id = $1", "retired")).toBe(0);

    const client = await db.pool.connect();
    try {
      await client.query("BEGIN");
      const wallet = (await call("GET", "/v1/agents/retired")).body.address;
      const admission = await new SpendPolicyChargeGate(db.pool).admit(client, {
        agentId: await agentKey(db.pool, "retired"),
        payer: wallet,
        parentTxHash: null,
        amountUnits: 1000n,
        endpoint: ENDPOINT,
        rail: "stablecoin",
        sessionId: "session-1",
      });
      expect(admission).toMatchObject({ admitted: false, reasonCode: "agent_archived" });
    } finally {
      await client.query("ROLLBACK");
      client.release();
    }
    expect(await count("SELECT count(*)::int AS n FROM spend_reservations WHERE agent_id = $1", "retired")).toBe(0);
  });

  it("a concurrent authorize and archive never leave an archived agent with a reservation made after the archive", async () => {
    await register("racer");
    const authorizing = Array.from({ length: 8 }, () =>
      call("POST", "/v1/agents/racer/payments/authorize", { endpoint: ENDPOINT, x402: requirement("1000") }, randomUUID()),
    );
    const [archive, ...payments] = await Promise.all([call("DELETE", "/v1/agents/racer"), ...authorizing]);
    const authorized = payments.filter((answer) => answer.status === 200).length;
    expect(payments.every((answer) => answer.status === 200 || answer.body.code === "AGENT_ARCHIVED")).toBe(true);
    expect(await count("SELECT count(*)::int AS n FROM spend_reservations WHERE agent_id = $1", "racer")).toBe(authorized);
    if (archive.status === 200) {
      // Every reservation would have blocked the archive: none may exist beside it.
      expect(authorized).toBe(0);
    } else {
      // Refused because of the reservations committed before it; authorizations that committed
      // after the refusal are legitimate, so the count it saw is at most the final one.
      expect(archive.body).toMatchObject({ code: "AGENT_NOT_EMPTY" });
      expect(archive.body.openReservations).toBeGreaterThanOrEqual(1);
      expect(archive.body.openReservations).toBeLessThanOrEqual(authorized);
    }
  });

  it("an archived agent leaves agents.list (REST, GraphQL, SDK) unless includeArchived, and keeps its history", async () => {
    await register("historian");
    await putPolicy(db.pool, await agentKey(db.pool, "historian"), { perCallLimitUnits: 1_000n });
    const rejected = await call(
      "POST",
      "/v1/agents/historian/payments/authorize",
      { endpoint: ENDPOINT, x402: requirement("5000") },
      randomUUID(),
    );
    expect(rejected.status).toBe(403);
    expect((await call("DELETE", "/v1/agents/historian")).status).toBe(200);

    const ids = (body: { agents: { agentId: string }[] }) => body.agents.map((agent) => agent.agentId);
    expect(ids((await call("GET", "/v1/agents?limit=500")).body)).not.toContain("historian");
    const withArchived = await call("GET", "/v1/agents?limit=500&includeArchived=true");
    expect(withArchived.body.agents.find((agent: { agentId: string }) => agent.agentId === "historian")?.archivedAt).toEqual(
      expect.any(String),
    );
    expect((await call("GET", "/v1/agents?includeArchived=yes")).status).toBe(400);

    const graphql = async (query: string) =>
      (await call("POST", "/graphql", { query })).body.data.agents.map((agent: { agentId: string }) => agent);
    expect((await graphql("{ agents { agentId } }")).map((agent: { agentId: string }) => agent.agentId)).not.toContain("historian");
    const archivedInGraphql = (await graphql("{ agents(includeArchived: true) { agentId archivedAt } }")).find(
      (agent: { agentId: string }) => agent.agentId === "historian",
    );
    expect(archivedInGraphql.archivedAt).toEqual(expect.any(String));

    const sdk = new Client({ agentId: "historian", apiKey: archiveKey, baseUrl });
    expect((await sdk.agents.list()).map((agent) => agent.agentId)).not.toContain("historian");
    expect((await sdk.agents.list({ includeArchived: true })).map((agent) => agent.agentId)).toContain("historian");

    // History: the agent, its rejection, its policy and its wallet stay readable.
    expect((await call("GET", "/v1/agents/historian")).status).toBe(200);
    const history = await call("GET", "/v1/transactions?agentId=historian&status=rejected&limit=10");
    expect(history.status).toBe(200);
    expect(history.body.transactions).toHaveLength(1);
    expect((await call("GET", "/v1/policies/historian")).status).toBe(200);
    expect((await call("GET", "/v1/agents/historian/wallet")).status).toBe(200);
  });

  it("the SDK archives with agents.archive, and its refusal is a typed ServiceError", async () => {
    await register("sdk-archived");
    expect((await call("POST", "/v1/agents/sdk-archived/wallet/fund", { usdc: 0.1 }, randomUUID())).status).toBe(200);
    const sdk = new Client({ agentId: "sdk-archived", apiKey: archiveKey, baseUrl, maxRetries: 0 });
    const refused = await sdk.agents.archive("sdk-archived").catch((caught: unknown) => caught);
    expect(refused).toBeInstanceOf(ServiceError);
    expect((refused as ServiceError).code).toBe("AGENT_NOT_EMPTY");
    const archived = await sdk.agents.archive("sdk-archived", { force: true });
    expect(archived).toMatchObject({ agentId: "sdk-archived", balance: { usdc: 0.1 } });
    expect(archived.archivedAt).toEqual(expect.any(String));
  });

  it("another account's agent, or none, is 404; an archived id cannot be registered again", async () => {
    expect((await call("DELETE", "/v1/agents/funded", undefined, undefined, otherKey)).status).toBe(404);
    expect((await call("DELETE", "/v1/agents/nobody")).status).toBe(404);
    expect((await call("DELETE", "/v1/agents/has%20space")).status).toBe(400);
    expect((await call("DELETE", "/v1/agents/funded?force=maybe", undefined, undefined, apiKey)).status).toBe(400);
    expect((await call("GET", "/v1/agents/funded", undefined, undefined, apiKey)).body.archivedAt).toBeNull();
    await register("once");
    expect((await call("DELETE", "/v1/agents/once")).status).toBe(200);
    const reused = await call("POST", "/v1/agents", { agentId: "once" }, randomUUID());
    expect(reused.status).toBe(409);
    expect(reused.body.code).toBe("AGENT_EXISTS");
  });
});
