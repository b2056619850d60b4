/**
 * The seller's side: a new agent can be paid at once, because its token account is opened when it
 * is registered (api/gateway/settlement/payee-account.ts), the service paying the rent within the
 * account's quota of new payee token accounts. Real ledger, real gateway over HTTP, fresh Postgres.
 */
import { randomBytes } from "node:crypto";
import { getAssociatedTokenAddressSync, unpackAccount } from "@solana/spl-token";
import { PublicKey } from "@solana/web3.js";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createGatewayServer } from "../../api/gateway/server.js";
import { AgentTokenAccounts } from "../../api/gateway/settlement/index.js";
import { payeeAccountsCreatedToday } from "../../api/gateway/settlement/store.js";
import { AgentWallets, generateWalletEncryptionKey, keystoreFromEnv, LocalTreasuryFundingSource } from "../../api/gateway/wallets/index.js";
import { localSettlementLedger, type SettlementLedger } from "../../api/gateway/chain/index.js";
import { SecretBox } from "../../api/gateway/webhooks/index.js";
import type { ApiServer } from "../../api/query/server.js";
import { createAccount, issueApiKey } from "../../api/shared/keys.js";
import { type Localnet, startLocalnet } from "../../scripts/localnet.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { restCall } from "../support/rest.js";

const QUOTA = 2;
let localnet: Localnet;
let db: FreshDatabase;
let ledger: SettlementLedger;
let server: ApiServer;
let base: string;
let apiKey: string;

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
    gateway: {
      wallets,
      keystore,
      secretBox: new SecretBox(randomBytes(32)),
      tokenAccounts: new AgentTokenAccounts({ pool: db.pool, ledger, payeeAccountQuota: QUOTA }),
    },
  });
  base = `http://127.0.0.1:${await server.listen(0)}`;
  apiKey = (await issueApiKey(db.pool, await createAccount(db.pool, "sellers"))).apiKey;
}, 240_000);

afterAll(async () => {
  await server?.close();
  await localnet?.stop();
  await db?.drop();
});

async function register(agentId: string): Promise<PublicKey> {
  const created = await restCall(base, "POST", "/v1/agents", { key: apiKey, body: { agentId } });
  expect(created.status).toBe(201);
  return new PublicKey(created.body.address);
}

describe("a new agent's token account", () => {
  it("exists on the ledger as soon as the agent is registered: the agent's own account for the settlement mint, empty", async () => {
    const owner = await register("seller-1");
    const address = getAssociatedTokenAddressSync(ledger.mint, owner, true);
    const info = await ledger.connection.getAccountInfo(address, "confirmed");
    expect(info).not.toBeNull();
    const account = unpackAccount(address, info!);
    expect(account.owner.toBase58()).toBe(owner.toBase58());
    expect(account.mint.toBase58()).toBe(ledger.mint.toBase58());
    expect(account.amount).toBe(0n);
    const { rows } = await db.pool.query("SELECT address, signature FROM agent_token_accounts");
    expect(rows).toEqual([{ address: address.toBase58(), signature: expect.any(String) }]);
  });

  it("counts against the account's payee-token-account quota; past it the agent is still registered, without an account", async () => {
    await register("seller-2");
    const third = await register("seller-3");
    expect(await ledger.connection.getAccountInfo(getAssociatedTokenAddressSync(ledger.mint, third, true), "confirmed")).toBeNull();
    const { rows } = await db.pool.query<{ agent_id: string }>("SELECT agent_id FROM agents ORDER BY created_at");
    expect(rows).toHaveLength(3);
    // The settlements of this account see the same quota used up.
    expect(await payeeAccountsCreatedToday(db.pool, rows[0]!.agent_id)).toBe(QUOTA);
  });
});
