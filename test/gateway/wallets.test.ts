/**
 * Agent wallets on the real local ledger and a fresh Postgres: sealed keys, funding from the
 * treasury, balances read from the chain, withdrawals and their refusals.
 */
import {
  ACCOUNT_SIZE,
  createAssociatedTokenAccountIdempotentInstruction,
  createInitializeAccount3Instruction,
  createTransferCheckedInstruction,
  getAssociatedTokenAddressSync,
  TOKEN_PROGRAM_ID,
} from "@solana/spl-token";
import { Keypair, PublicKey, SystemProgram, sendAndConfirmTransaction, Transaction } from "@solana/web3.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAccount } from "../../api/shared/keys.js";
import {
  AgentWallets,
  createAgentWallet,
  generateWalletEncryptionKey,
  type Keystore,
  keystoreFromEnv,
  LocalTreasuryFundingSource,
  resealStaleWalletKeys,
} from "../../api/gateway/wallets/index.js";
import {
  IdempotencyConflictError,
  InsufficientFundsError,
  InvalidAddressError,
  localSettlementLedger,
  type SettlementLedger,
  signTransaction,
  tokenBalanceUnits,
  WalletExistsError,
  WalletKeyError,
} from "../../api/gateway/chain/index.js";
import { type Localnet, startLocalnet } from "../../scripts/localnet.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";

const USDC = 1_000_000n;
const KEY_V1 = generateWalletEncryptionKey();
const KEY_V2 = generateWalletEncryptionKey();

let localnet: Localnet;
let db: FreshDatabase;
let ledger: SettlementLedger;
let keystore: Keystore;
let wallets: AgentWallets;
let accountId: string;

beforeAll(async () => {
  [localnet, db] = await Promise.all([startLocalnet(), createFreshDatabase()]);
  ledger = localSettlementLedger(localnet);
  keystore = keystoreFromEnv({ WALLET_ENCRYPTION_KEY: KEY_V1 });
  wallets = new AgentWallets({
    pool: db.pool,
    keystore,
    ledger,
    fundingSource: LocalTreasuryFundingSource.fromLocalnet(ledger, localnet),
  });
  accountId = await createAccount(db.pool, "wallets test");
});

afterAll(async () => {
  await localnet?.stop();
  await db?.drop();
});

/** Puts `victim`'s sealed key into `thief`'s row, as someone with write access to the table could. */
async function moveSealedKey(pool: FreshDatabase["pool"], victim: string, thief: string): Promise<void> {
  await pool.query(
    `UPDATE agent_wallets t SET ciphertext = v.ciphertext, nonce = v.nonce
     FROM agent_wallets v WHERE t.agent_id = $1 AND v.agent_id = $2`,
    [thief, victim],
  );
}

async function treasuryUnits(): Promise<bigint> {
  return BigInt((await ledger.connection.getTokenAccountBalance(localnet.info.treasuryToken, "confirmed")).value.amount);
}

describe("agent wallets", () => {
  it("creating a wallet registers the agent with its address and stores only the sealed key", async () => {
    const { address } = await createAgentWallet(db.pool, keystore, { accountId, agentId: "w-create", name: "Creator" });
    const agent = await db.pool.query("SELECT account_id, name, wallet_address FROM agents WHERE agent_id = 'w-create'");
    expect(agent.rows[0]).toEqual({ account_id: accountId, name: "Creator", wallet_address: address });

    const keypair = await wallets.keypair("w-create");
    expect(keypair.publicKey.toBase58()).toBe(address);
    const seed = Buffer.from(keypair.secretKey.subarray(0, 32));
    const secretForms = [seed.toString("hex"), seed.toString("base64"), Buffer.from(keypair.secretKey).toString("hex")];
    // No column of any gateway table holds the key in a readable form.
    const dump = await db.pool.query<{ row: string }>(
      `SELECT row_to_json(w)::text AS row FROM agent_wallets w
       UNION ALL SELECT encode(ciphertext, 'hex') FROM agent_wallets
       UNION ALL SELECT encode(ciphertext, 'base64') FROM agent_wallets`,
    );
    for (const { row } of dump.rows) for (const secret of secretForms) expect(row).not.toContain(secret);
    const stored = await db.pool.query<{ ciphertext: Buffer }>("SELECT ciphertext FROM agent_wallets WHERE agent_id = 'w-create'");
    expect(stored.rows[0]!.ciphertext.includes(seed)).toBe(false);

    const again = createAgentWallet(db.pool, keystore, { accountId, agentId: "w-create" });
    await expect(again).rejects.toBeInstanceOf(WalletExistsError);
  });

  it("a sealed key moved to another agent's row, or opened with another key, does not decrypt", async () => {
    await createAgentWallet(db.pool, keystore, { accountId, agentId: "w-victim" });
    await createAgentWallet(db.pool, keystore, { accountId, agentId: "w-thief" });
    await moveSealedKey(db.pool, "w-victim", "w-thief");
    await expect(wallets.keypair("w-thief")).rejects.toBeInstanceOf(WalletKeyError);

    const otherKey = new AgentWallets({
      pool: db.pool,
      keystore: keystoreFromEnv({ WALLET_ENCRYPTION_KEY: generateWalletEncryptionKey() }),
      ledger,
      fundingSource: LocalTreasuryFundingSource.fromLocalnet(ledger, localnet),
    });
    await expect(otherKey.keypair("w-victim")).rejects.toBeInstanceOf(WalletKeyError);
    expect((await wallets.keypair("w-victim")).publicKey.toBase58()).toBe((await wallets.address("w-victim")).toBase58());
  });

  it("funding moves units from the treasury and the balance is the chain's", async () => {
    const { address } = await createAgentWallet(db.pool, keystore, { accountId, agentId: "w-fund" });
    expect(await wallets.balance("w-fund")).toBe(0n);
    const before = await treasuryUnits();
    const funded = await wallets.fund("w-fund", 7n * USDC + 123n);
    expect(funded.status).toBe("confirmed");
    expect(funded.txHash).toMatch(/^[1-9A-HJ-NP-Za-km-z]{64,88}$/);
    expect(await wallets.balance("w-fund")).toBe(7n * USDC + 123n);
    expect(await treasuryUnits()).toBe(before - 7n * USDC - 123n);
    const wallet = await wallets.wallet("w-fund");
    expect(wallet).toEqual({ agentId: "w-fund", address, balanceUnits: 7n * USDC + 123n, network: "solana-localnet" });
    const tx = await ledger.connection.getTransaction(funded.txHash!, {
      commitment: "confirmed",
      maxSupportedTransactionVersion: 0,
    });
    expect(tx?.meta?.err).toBeNull();
  });

  it("funding uses the agent's account's linked source when sources are per account", async () => {
    await createAgentWallet(db.pool, keystore, { accountId, agentId: "w-linked" });
    const asked: string[] = [];
    const treasury = LocalTreasuryFundingSource.fromLocalnet(ledger, localnet);
    const perAccount = new AgentWallets({
      pool: db.pool,
      keystore,
      ledger,
      fundingSource: async (account) => {
        asked.push(account);
        return treasury;
      },
    });
    await perAccount.fund("w-linked", 42n);
    expect(asked).toEqual([accountId]);
    expect(await perAccount.balance("w-linked")).toBe(42n);
  });

  it("a retried funding with the same client reference is recognised and moves nothing again", async () => {
    await createAgentWallet(db.pool, keystore, { accountId, agentId: "w-retry" });
    const first = await wallets.fund("w-retry", USDC, { clientReference: "top-up-1" });
    const again = await wallets.fund("w-retry", USDC, { clientReference: "top-up-1" });
    expect(again).toEqual({ ...first, replayed: true });
    expect(await wallets.balance("w-retry")).toBe(USDC);
    const different = wallets.fund("w-retry", 2n * USDC, { clientReference: "top-up-1" });
    await expect(different).rejects.toBeInstanceOf(IdempotencyConflictError);
  });

  it("a withdrawal sends exactly the units to the address, signed by the agent, fee paid by the service", async () => {
    await createAgentWallet(db.pool, keystore, { accountId, agentId: "w-out" });
    await wallets.fund("w-out", 5n * USDC);
    const destination = Keypair.generate().publicKey;
    const agentAddress = await wallets.address("w-out");
    const done = await wallets.withdraw("w-out", destination.toBase58(), 2n * USDC + 1n, { clientReference: "out-1" });
    expect(done.status).toBe("confirmed");
    expect(await wallets.balance("w-out")).toBe(3n * USDC - 1n);
    expect(await tokenBalanceUnits(ledger, destination)).toBe(2n * USDC + 1n);
    // The agent holds no SOL: the authority paid the fee (and the destination account's rent).
    expect(await ledger.connection.getBalance(agentAddress, "confirmed")).toBe(0);
    const row = await db.pool.query("SELECT kind, status, signature, amount_units FROM wallet_operations WHERE client_reference = 'out-1'");
    expect(row.rows[0]).toEqual({ kind: "withdraw", status: "confirmed", signature: done.txHash, amount_units: "2000001" });
    const replay = await wallets.withdraw("w-out", destination.toBase58(), 2n * USDC + 1n, { clientReference: "out-1" });
    expect(replay).toEqual({ ...done, replayed: true });
    expect(await tokenBalanceUnits(ledger, destination)).toBe(2n * USDC + 1n);
  });

  it("tokens in another token account the wallet owns count in its balance, and a withdrawal moves them", async () => {
    const { address } = await createAgentWallet(db.pool, keystore, { accountId, agentId: "w-stray" });
    await wallets.fund("w-stray", USDC);
    // Someone else creates a second token account owned by the wallet (no owner signature needed)
    // and sends tokens there, where only the associated account used to be read.
    const owner = new PublicKey(address);
    const stray = Keypair.generate();
    const { authority, mint, decimals } = ledger;
    const treasury = localnet.keypairs.treasury;
    const space = ACCOUNT_SIZE;
    const rent = await ledger.connection.getMinimumBalanceForRentExemption(space);
    const setup = new Transaction().add(
      SystemProgram.createAccount({
        fromPubkey: authority.publicKey,
        newAccountPubkey: stray.publicKey,
        lamports: rent,
        space,
        programId: TOKEN_PROGRAM_ID,
      }),
      createInitializeAccount3Instruction(stray.publicKey, mint, owner),
      createTransferCheckedInstruction(localnet.info.treasuryToken, mint, stray.publicKey, treasury.publicKey, 2n * USDC, decimals),
    );
    await sendAndConfirmTransaction(ledger.connection, setup, [authority, stray, treasury], { commitment: "confirmed" });
    expect(await tokenBalanceUnits(ledger, owner)).toBe(USDC);
    expect(await wallets.balance("w-stray")).toBe(3n * USDC);
    expect((await wallets.wallet("w-stray")).balanceUnits).toBe(3n * USDC);

    // More than the associated account holds: the withdrawal empties the other account into it first.
    const destination = Keypair.generate().publicKey;
    const done = await wallets.withdraw("w-stray", destination.toBase58(), 2n * USDC + 500_000n);
    expect(done.status).toBe("confirmed");
    expect(await tokenBalanceUnits(ledger, destination)).toBe(2n * USDC + 500_000n);
    expect(await wallets.balance("w-stray")).toBe(500_000n);
    expect(await tokenBalanceUnits(ledger, owner)).toBe(500_000n);
    expect((await ledger.connection.getTokenAccountBalance(stray.publicKey, "confirmed")).value.amount).toBe("0");
    const more = await wallets.withdraw("w-stray", destination.toBase58(), 500_001n).catch((e: unknown) => e);
    expect(more).toBeInstanceOf(InsufficientFundsError);
    expect((more as InsufficientFundsError).currentBalanceUnits).toBe(500_000n);
  });

  it("withdrawing more than the balance is InsufficientFundsError with the balance, and nothing moves", async () => {
    await createAgentWallet(db.pool, keystore, { accountId, agentId: "w-poor" });
    await wallets.fund("w-poor", USDC);
    const destination = Keypair.generate().publicKey;
    const error = await wallets.withdraw("w-poor", destination.toBase58(), USDC + 1n).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InsufficientFundsError);
    const refused = error as InsufficientFundsError;
    expect(refused.currentBalanceUnits).toBe(USDC);
    expect(refused.currentBalance).toEqual({ usdc: "1.000000" });
    expect(refused.requestedUnits).toBe(USDC + 1n);
    expect(await wallets.balance("w-poor")).toBe(USDC);
    expect(await ledger.connection.getAccountInfo(destination, "confirmed")).toBeNull();
    expect(await tokenBalanceUnits(ledger, destination)).toBe(0n);
    const ops = await db.pool.query("SELECT count(*)::int AS n FROM wallet_operations WHERE agent_id = 'w-poor' AND kind = 'withdraw'");
    expect(ops.rows[0].n).toBe(0);
  });

  it("a withdrawal address is validated before anything is signed", async () => {
    await createAgentWallet(db.pool, keystore, { accountId, agentId: "w-addr" });
    const own = (await wallets.address("w-addr")).toBase58();
    for (const bad of ["not-an-address", "0OIl", "11111111111111111111111111111111", own, ""]) {
      await expect(wallets.withdraw("w-addr", bad, 1n)).rejects.toBeInstanceOf(InvalidAddressError);
    }
  });

  it("a withdrawal left pending by a crash after sending reconciles to confirmed from its signature", async () => {
    await createAgentWallet(db.pool, keystore, { accountId, agentId: "w-crash" });
    await wallets.fund("w-crash", USDC);
    const keypair = await wallets.keypair("w-crash");
    const destination = Keypair.generate().publicKey;
    const { mint, decimals, authority } = ledger;
    const target = getAssociatedTokenAddressSync(mint, destination, true);
    const source = getAssociatedTokenAddressSync(mint, keypair.publicKey, true);
    const transaction = new Transaction().add(
      createAssociatedTokenAccountIdempotentInstruction(authority.publicKey, target, destination, mint),
      createTransferCheckedInstruction(source, mint, target, keypair.publicKey, 250n, decimals),
    );
    const signed = signTransaction(ledger, transaction, await ledger.connection.getLatestBlockhash("confirmed"), [keypair]);
    // What withdraw() commits before sending, then the send, then the "crash".
    await db.pool.query(
      `INSERT INTO wallet_operations (agent_id, kind, amount_units, to_address, signature, last_valid_block_height, status)
       VALUES ('w-crash', 'withdraw', 250, $1, $2, $3, 'pending')`,
      [destination.toBase58(), signed.signature, signed.lastValidBlockHeight],
    );
    await ledger.connection.sendRawTransaction(Buffer.from(signed.wire, "base64"));

    expect(await wallets.reconcilePendingOperations()).toEqual({ confirmed: 1, failed: 0, pending: 0 });
    const row = await db.pool.query("SELECT status, slot IS NOT NULL AS has_slot FROM wallet_operations WHERE signature = $1", [
      signed.signature,
    ]);
    expect(row.rows).toEqual([{ status: "confirmed", has_slot: true }]);
    expect(await tokenBalanceUnits(ledger, destination)).toBe(250n);
  });

  it("rotating the key re-seals every readable wallet under the new version; the keys stay the same", async () => {
    // A database of its own: a rotation re-seals every wallet there is, so with the other tests'
    // its counts would depend on which had run, and theirs on whether it had.
    const own = await createFreshDatabase();
    try {
      const ownAccount = await createAccount(own.pool, "rotation");
      for (const agentId of ["r-1", "r-2", "r-3", "r-4", "r-5", "r-6", "r-victim", "r-thief"]) {
        await createAgentWallet(own.pool, keystore, { accountId: ownAccount, agentId });
      }
      await moveSealedKey(own.pool, "r-victim", "r-thief");
      const walletsOn = (keys: Keystore) =>
        new AgentWallets({
          pool: own.pool,
          keystore: keys,
          ledger,
          fundingSource: LocalTreasuryFundingSource.fromLocalnet(ledger, localnet),
        });
      const before = (await walletsOn(keystore).keypair("r-1")).publicKey.toBase58();
      const rotated = keystoreFromEnv({
        WALLET_ENCRYPTION_KEY: KEY_V2,
        WALLET_ENCRYPTION_KEY_VERSION: "v2",
        WALLET_ENCRYPTION_RETIRED_KEYS: `v1:${KEY_V1}`,
      });
      const first = await resealStaleWalletKeys(own.pool, rotated);
      // r-thief holds r-victim's ciphertext: reported, left as it is.
      expect(first.unreadable).toEqual(["r-thief"]);
      expect(first.resealed).toBeGreaterThan(5);
      expect(await resealStaleWalletKeys(own.pool, rotated)).toEqual({ resealed: 0, unreadable: ["r-thief"] });
      const versions = await own.pool.query("SELECT key_version, count(*)::int AS n FROM agent_wallets GROUP BY 1 ORDER BY 1");
      expect(versions.rows).toEqual([
        { key_version: "v1", n: 1 },
        { key_version: "v2", n: first.resealed },
      ]);
      // The retired key can now leave configuration.
      const onlyNew = walletsOn(keystoreFromEnv({ WALLET_ENCRYPTION_KEY: KEY_V2, WALLET_ENCRYPTION_KEY_VERSION: "v2" }));
      expect((await onlyNew.keypair("r-1")).publicKey.toBase58()).toBe(before);
    } finally {
      await own.drop();
    }
  });
});
