/**
 * Transactions a payee builds itself, on the real program and ledger, signed with its own key:
 * a final settlement, close and refund in one v0 transaction whose event authority comes from an
 * address lookup table the payee made, a refund aimed at another token account of the agent, and
 * one transaction settling the channels of two agents of two accounts. Each ends with chain =
 * event store = read models, `verify` reporting exactly what the store misses, and GraphQL naming
 * each payment's own channel.
 */
import { randomBytes } from "node:crypto";
import { ACCOUNT_SIZE, createInitializeAccount3Instruction, TOKEN_PROGRAM_ID } from "@solana/spl-token";
import {
  type AddressLookupTableAccount,
  AddressLookupTableProgram,
  ComputeBudgetProgram,
  Keypair,
  type PublicKey,
  SystemProgram,
  SYSVAR_INSTRUCTIONS_PUBKEY,
  Transaction,
  type TransactionInstruction,
  TransactionMessage,
  VersionedTransaction,
} from "@solana/web3.js";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServer, createApiServer } from "../../api/query/server.js";
import { heldBalanceUnits, localSettlementLedger, tokenBalanceUnits } from "../../api/gateway/chain/ledger.js";
import { createAccount, issueApiKey, registerAgent } from "../../api/shared/keys.js";
import { IngestPipeline } from "../../indexer/pipeline.js";
import { RpcSource, toRawTransaction } from "../../indexer/sources/rpc.js";
import type { RawTransaction } from "../../indexer/sources/source.js";
import { verifyChainAgainstStore, verifyProjections } from "../../indexer/verify.js";
import {
  advanceVoucher,
  type ChannelAccounts,
  type ChannelCharge,
  channelAccounts,
  closeChannelInstruction,
  decodeChannelAccount,
  endpointHash,
  eventAuthorityPda,
  openChannelInstruction,
  PAYMENT_LEDGER_PROGRAM_ID,
  refundChannelInstruction,
  settleChannelInstruction,
  settlementComputeUnits,
  signVoucher,
  type Voucher,
  voucherMessage,
  voucherSignatureInstruction,
} from "../../programs/payment_ledger/ts/index.js";
import { type AgentWallet, createAgentWallet, type LedgerAccess, ledgerAccess } from "../../scripts/agent-wallets.js";
import { type Localnet, startLocalnet } from "../../scripts/localnet.js";
import { createClient } from "../api/client.js";
import { pollUntil } from "../support/poll.js";
import { createFreshDatabase, type FreshDatabase } from "./fresh-database.js";

const USDC = 1_000_000n;
const SEARCH = endpointHash("api.example.com/v1/search");

let localnet: Localnet;
let ledger: LedgerAccess;
let db: FreshDatabase;
let source: RpcSource;
let pipeline: IngestPipeline;

beforeAll(async () => {
  [localnet, db] = await Promise.all([startLocalnet(), createFreshDatabase()]);
  ledger = ledgerAccess(localnet);
  source = new RpcSource({ rpcUrl: localnet.rpcUrl, programId: PAYMENT_LEDGER_PROGRAM_ID, name: "rpc-payee" });
  pipeline = new IngestPipeline({
    pool: db.pool,
    programId: PAYMENT_LEDGER_PROGRAM_ID,
    cluster: localnet.rpcUrl,
    lookup: (signature) => source.transaction(signature),
  });
}, 120_000);

afterAll(async () => {
  await db?.drop();
  await localnet?.stop();
});

/**
 * A node that answers `getTransaction` without `loadedAddresses` (as the local ledger did, and an
 * RPC provider may): a stand-in for such a provider, reading the real ledger and dropping the field.
 */
class NodeWithoutLoadedAddresses extends RpcSource {
  override async transaction(signature: string): Promise<RawTransaction | null> {
    const tx = await this.connection.getTransaction(signature, { commitment: "confirmed", maxSupportedTransactionVersion: 0 });
    if (tx === null) return null;
    const meta = tx.meta === null ? null : { ...tx.meta, loadedAddresses: undefined };
    return toRawTransaction({ ...tx, meta }, "confirmed");
  }
}

function send(instructions: TransactionInstruction[], signers: Keypair[]): Promise<string> {
  return ledger.provider.sendAndConfirm(new Transaction().add(...instructions), signers, { commitment: "confirmed" });
}

async function slotOf(signature: string): Promise<bigint> {
  const tx = await ledger.provider.connection.getTransaction(signature, { commitment: "confirmed", maxSupportedTransactionVersion: 0 });
  return BigInt(tx!.slot);
}

/** A channel of `agent` to `service`, opened by the service authority, with a voucher signer. */
async function openChannel(agent: AgentWallet, service: AgentWallet, deposit: bigint) {
  const accounts = channelAccounts({
    programId: PAYMENT_LEDGER_PROGRAM_ID,
    payer: agent.publicKey,
    payee: service.publicKey,
    mint: localnet.info.mint,
    channelId: randomBytes(32),
  });
  const now = BigInt(Math.floor(Date.now() / 1000));
  const opened = await send(
    [
      await openChannelInstruction({
        authority: localnet.info.authority,
        channel: accounts,
        depositUnits: deposit,
        expiresAt: now + 3_600n,
        withdrawDelaySeconds: 600n,
        protocol: "x402",
      }),
    ],
    [agent.keypair],
  );
  const info = await ledger.provider.connection.getAccountInfo(accounts.channel, "confirmed");
  let voucher: Voucher = decodeChannelAccount(info!.data).settled;
  let nextPaymentId = 1n;
  /** The agent signs a voucher for `amounts`; the settlement and its signature instruction. */
  const sign = (amounts: readonly bigint[]) => {
    const charges: ChannelCharge[] = amounts.map((amountUnits) => ({ paymentId: nextPaymentId++, amountUnits, endpointHash: SEARCH }));
    voucher = advanceVoucher(voucher, charges);
    const message = voucherMessage(accounts.channel, voucher);
    return {
      settlement: { cumulativeUnits: voucher.cumulativeUnits, sequence: voucher.sequence, charges },
      verify: voucherSignatureInstruction(agent.publicKey, message, signVoucher(agent.keypair, message)),
    };
  };
  return { accounts, opened, sign };
}

/** A lookup table of `owner` holding `addresses`, made with the ALT program, once it is usable. */
async function lookupTable(owner: AgentWallet, addresses: PublicKey[]): Promise<AddressLookupTableAccount> {
  const { connection } = ledger.provider;
  const [create, table] = AddressLookupTableProgram.createLookupTable({
    authority: owner.publicKey,
    payer: owner.publicKey,
    recentSlot: await connection.getSlot("finalized"),
  });
  const extend = AddressLookupTableProgram.extendLookupTable({
    lookupTable: table,
    authority: owner.publicKey,
    payer: owner.publicKey,
    addresses,
  });
  const extendedAt = await slotOf(await send([create, extend], [owner.keypair]));
  // Addresses added in a slot are usable from the next one.
  await pollUntil(async () => BigInt(await connection.getSlot("confirmed")) > extendedAt, {
    timeoutMs: 10_000,
    intervalMs: 50,
    what: "the slot after the table was extended",
  });
  return (await connection.getAddressLookupTable(table, { commitment: "confirmed" })).value!;
}

/** A v0 transaction of `instructions` using `tables`, signed by `payer` alone, sent and confirmed. */
async function sendV0(instructions: TransactionInstruction[], payer: AgentWallet, tables: AddressLookupTableAccount[]) {
  const { connection } = ledger.provider;
  const latest = await connection.getLatestBlockhash("confirmed");
  const message = new TransactionMessage({ payerKey: payer.publicKey, recentBlockhash: latest.blockhash, instructions }).compileToV0Message(
    tables,
  );
  const tx = new VersionedTransaction(message);
  tx.sign([payer.keypair]);
  const signature = await connection.sendRawTransaction(tx.serialize());
  const confirmed = await connection.confirmTransaction({ signature, ...latest }, "confirmed");
  expect(confirmed.value.err).toBeNull();
  return { signature, message };
}

async function channelRow(accounts: ChannelAccounts) {
  const row = await db.pool.query("SELECT status, settled_units::text, refunded_units::text, close_tx FROM channels WHERE address = $1", [
    accounts.channel.toBase58(),
  ]);
  return row.rows[0];
}

async function seen(signature: string) {
  const row = await db.pool.query("SELECT outcome, event_count FROM chain_transactions_seen WHERE signature = $1", [signature]);
  return row.rows[0];
}

describe("a payee's own transactions", () => {
  it("a settlement whose event authority is looked up from a table is indexed; a node hiding the lookup is caught by verify", async () => {
    const { connection } = ledger.provider;
    const agent = await createAgentWallet(ledger, { usdcUnits: 5n * USDC });
    const service = await createAgentWallet(ledger);
    const channel = await openChannel(agent, service, 2n * USDC);

    // The payee makes a lookup table holding the program's event authority, then sends its final
    // settlement, close and refund in one v0 transaction that loads the authority from it.
    const authority = eventAuthorityPda(PAYMENT_LEDGER_PROGRAM_ID).address;
    const table = await lookupTable(service, [authority]);
    const last = channel.sign([600_000n]);
    const { signature: hidden, message } = await sendV0(
      [
        last.verify,
        await closeChannelInstruction({ signer: service.publicKey, channel: channel.accounts, finalSettlement: last.settlement }),
        await refundChannelInstruction({ signer: service.publicKey, channel: channel.accounts, rentPayer: localnet.info.authority }),
      ],
      service,
      [table],
    );
    expect(message.staticAccountKeys.some((key) => key.equals(authority))).toBe(false);

    // The ledger reports the looked-up key as a validator does, and lists the transaction under it.
    const got = await connection.getTransaction(hidden, { commitment: "confirmed", maxSupportedTransactionVersion: 0 });
    expect(got?.meta?.err).toBeNull();
    expect(got?.meta?.loadedAddresses?.readonly.map((key: PublicKey) => key.toBase58())).toEqual([authority.toBase58()]);
    expect(got?.meta?.loadedAddresses?.writable).toEqual([]);
    const listed = await connection.getSignaturesForAddress(authority, { limit: 5 }, "confirmed");
    expect(listed.map((s) => s.signature)).toContain(hidden);

    const range = { fromSlot: await slotOf(channel.opened), toSlot: await source.currentSlot("confirmed") };
    // Read through a node that leaves out loadedAddresses: the transaction is unresolved, not "no events".
    const blind = new NodeWithoutLoadedAddresses({ rpcUrl: localnet.rpcUrl, programId: PAYMENT_LEDGER_PROGRAM_ID, name: "rpc-blind" });
    await pipeline.backfill(blind, range);
    expect(await seen(hidden)).toEqual({ outcome: "unresolved", event_count: 0 });
    expect(await channelRow(channel.accounts)).toEqual({ status: "open", settled_units: "0", refunded_units: null, close_tx: null });
    // verify against the real chain names the missing events and the unresolved transaction.
    const differences = await verifyChainAgainstStore(db.pool, source, pipeline, range);
    const missing = differences.filter((d) => d.kind === "missing_event").map((d) => d.detail.split(" ")[0]);
    expect(missing.sort()).toEqual(["ChannelCloseRequested", "ChannelClosed", "ChannelSettled", "PaymentRecorded"]);
    expect(differences.filter((d) => d.kind === "missing_event").every((d) => d.where.startsWith(`${hidden}/`))).toBe(true);
    expect(differences.filter((d) => d.kind === "unresolved_transaction").map((d) => d.where)).toEqual([hidden]);
    // verify through the blind node cannot vouch for the transaction either.
    const blindly = await verifyChainAgainstStore(db.pool, blind, pipeline, range);
    expect(blindly.map((d) => [d.kind, d.where])).toEqual([["unresolved_transaction", hidden]]);

    // Read again with its keys: the record is replaced and the channel is what the chain says.
    await pipeline.backfill(source, range);
    expect(await seen(hidden)).toEqual({ outcome: "indexed", event_count: 4 });
    expect(await channelRow(channel.accounts)).toEqual({
      status: "closed",
      settled_units: "600000",
      refunded_units: "1400000",
      close_tx: hidden,
    });
    const payments = await db.pool.query(
      `SELECT t.tx_hash, t.amount_units::text, p.channel FROM transactions t LEFT JOIN channel_payments p USING (event_id)
       WHERE t.agent = $1`,
      [agent.publicKey.toBase58()],
    );
    expect(payments.rows).toEqual([{ tx_hash: hidden, amount_units: "600000", channel: channel.accounts.channel.toBase58() }]);
    // The chain's money: the payee got the voucher, the agent the rest.
    const balance = async (wallet: AgentWallet) => (await connection.getTokenAccountBalance(wallet.tokenAccount, "confirmed")).value.amount;
    expect([await balance(agent), await balance(service)]).toEqual(["4400000", "600000"]);
    expect(await verifyChainAgainstStore(db.pool, source, pipeline, range)).toEqual([]);
    expect(await verifyProjections(db.pool, { cluster: localnet.rpcUrl })).toEqual([]);
  }, 120_000);

  it("a payee cannot strand the refund in another token account of the agent", async () => {
    const { connection } = ledger.provider;
    const agent = await createAgentWallet(ledger, { usdcUnits: 2n * USDC });
    const service = await createAgentWallet(ledger);
    const channel = await openChannel(agent, service, 2n * USDC);
    // The payee creates a second token account owned by the agent: no owner signature needed.
    const stray = Keypair.generate();
    const rent = await connection.getMinimumBalanceForRentExemption(ACCOUNT_SIZE);
    await send(
      [
        SystemProgram.createAccount({
          fromPubkey: service.publicKey,
          newAccountPubkey: stray.publicKey,
          lamports: rent,
          space: ACCOUNT_SIZE,
          programId: TOKEN_PROGRAM_ID,
        }),
        createInitializeAccount3Instruction(stray.publicKey, localnet.info.mint, agent.publicKey),
      ],
      [service.keypair, stray],
    );
    const last = channel.sign([600_000n]);
    const close = await closeChannelInstruction({ signer: service.publicKey, channel: channel.accounts, finalSettlement: last.settlement });
    const refund = (payerToken?: PublicKey) =>
      refundChannelInstruction({ signer: service.publicKey, channel: channel.accounts, rentPayer: localnet.info.authority, payerToken });
    const stranded = await send([last.verify, close, await refund(stray.publicKey)], [service.keypair]).catch((e: unknown) => e);
    expect(String(stranded)).toMatch(/custom program error: 0x1793\b[\s\S]*RefundNotToPayerAssociatedAccount/);
    const done = await send([last.verify, close, await refund()], [service.keypair]);

    const wallet = localSettlementLedger(localnet);
    expect(await heldBalanceUnits(wallet, agent.publicKey)).toBe(1_400_000n);
    expect(await tokenBalanceUnits(wallet, agent.publicKey)).toBe(1_400_000n);
    expect((await connection.getTokenAccountBalance(stray.publicKey, "confirmed")).value.amount).toBe("0");
    const range = { fromSlot: await slotOf(channel.opened), toSlot: await source.currentSlot("confirmed") };
    await pipeline.backfill(source, range);
    expect(await channelRow(channel.accounts)).toEqual({
      status: "closed",
      settled_units: "600000",
      refunded_units: "1400000",
      close_tx: done,
    });
    expect(await verifyChainAgainstStore(db.pool, source, pipeline, range)).toEqual([]);
    expect(await verifyProjections(db.pool, { cluster: localnet.rpcUrl })).toEqual([]);
  }, 120_000);

  it("one transaction settling the channels of two agents of two accounts attributes each payment to its own channel", async () => {
    const [a, b, service] = await Promise.all([
      createAgentWallet(ledger, { usdcUnits: 2n * USDC }),
      createAgentWallet(ledger, { usdcUnits: 2n * USDC }),
      createAgentWallet(ledger),
    ]);
    const x = await openChannel(a, service, USDC);
    const y = await openChannel(b, service, USDC);
    const [sx, sy] = [x.sign([10_000n]), y.sign([20_000n])];
    // Two settlements with their signature checks exceed a legacy transaction: the payee loads the
    // accounts both share from its lookup table.
    const shared = [
      eventAuthorityPda(PAYMENT_LEDGER_PROGRAM_ID).address,
      service.tokenAccount,
      localnet.info.mint,
      TOKEN_PROGRAM_ID,
      SYSVAR_INSTRUCTIONS_PUBKEY,
    ];
    const table = await lookupTable(service, shared);
    const { signature: both } = await sendV0(
      [
        ComputeBudgetProgram.setComputeUnitLimit({ units: 2 * settlementComputeUnits(1) }),
        sx.verify,
        await settleChannelInstruction({ settler: service.publicKey, channel: x.accounts, settlement: sx.settlement }),
        sy.verify,
        await settleChannelInstruction({ settler: service.publicKey, channel: y.accounts, settlement: sy.settlement }),
      ],
      service,
      [table],
    );
    // The payee's token account came from the table: its balances are reported under its place in
    // the full key list (static ++ loaded writable ++ loaded read-only).
    const landed = await ledger.provider.connection.getTransaction(both, { commitment: "confirmed", maxSupportedTransactionVersion: 0 });
    const txKeys = landed!.transaction.message.getAccountKeys({ accountKeysFromLookups: landed!.meta!.loadedAddresses! });
    expect(txKeys.staticAccountKeys.some((key) => key.equals(service.tokenAccount))).toBe(false);
    const payeeBalance = landed!.meta!.postTokenBalances!.find((b) => txKeys.get(b.accountIndex)!.equals(service.tokenAccount));
    expect(payeeBalance?.uiTokenAmount.amount).toBe("30000");

    const range = { fromSlot: await slotOf(x.opened), toSlot: await source.currentSlot("confirmed") };
    await pipeline.backfill(source, range);

    const payments = await db.pool.query(
      `SELECT t.agent, t.amount_units::text, p.channel, p.settlement_tx FROM transactions t JOIN channel_payments p USING (event_id)
       WHERE t.tx_hash = $1 ORDER BY t.instruction_index`,
      [both],
    );
    expect(payments.rows).toEqual([
      { agent: a.publicKey.toBase58(), amount_units: "10000", channel: x.accounts.channel.toBase58(), settlement_tx: both },
      { agent: b.publicKey.toBase58(), amount_units: "20000", channel: y.accounts.channel.toBase58(), settlement_tx: both },
    ]);
    expect(await verifyChainAgainstStore(db.pool, source, pipeline, range)).toEqual([]);
    expect(await verifyProjections(db.pool, { cluster: localnet.rpcUrl })).toEqual([]);

    // Each account reads its own payment of the shared transaction under its own channel.
    const accounts = { A: await createAccount(db.pool, "A"), B: await createAccount(db.pool, "B") };
    await registerAgent(db.pool, accounts.A, { agentId: "payee-tx-a", walletAddress: a.publicKey.toBase58() });
    await registerAgent(db.pool, accounts.B, { agentId: "payee-tx-b", walletAddress: b.publicKey.toBase58() });
    const keys = { A: (await issueApiKey(db.pool, accounts.A)).apiKey, B: (await issueApiKey(db.pool, accounts.B)).apiKey };
    const server: ApiServer = createApiServer({ pool: db.pool, databaseUrl: db.url, logger: pino({ level: "error" }) });
    try {
      const client = createClient(`http://127.0.0.1:${await server.listen(0)}`);
      const query = `query($t: String!) { transaction(txHash: $t) { amountPaidUnits channel { address settledUnits } } }`;
      expect((await client.ok(keys.A, query, { t: both })).transaction).toEqual({
        amountPaidUnits: "10000",
        channel: { address: x.accounts.channel.toBase58(), settledUnits: "10000" },
      });
      expect((await client.ok(keys.B, query, { t: both })).transaction).toEqual({
        amountPaidUnits: "20000",
        channel: { address: y.accounts.channel.toBase58(), settledUnits: "20000" },
      });
      const list = `query($a: ID!) { transactions(agentId: $a) { nodes { txHash channel { address } } } }`;
      expect((await client.ok(keys.A, list, { a: "payee-tx-a" })).transactions.nodes).toEqual([
        { txHash: both, channel: { address: x.accounts.channel.toBase58() } },
      ]);
    } finally {
      await server.close();
    }
  }, 120_000);
});
