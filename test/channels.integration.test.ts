/**
 * Payment channels of payment_ledger on the real local ledger, driven through the TypeScript
 * binding over JSON-RPC: vouchers signed in TypeScript, verified by the ledger's ed25519
 * precompile, settled by the program, and read back by the indexer into its event store and
 * payment rows. Every test opens its own channel between fresh wallets.
 */
import { randomBytes } from "node:crypto";
import type { AnchorProvider } from "@coral-xyz/anchor";
import { ComputeBudgetProgram, type Keypair, Transaction, type TransactionInstruction } from "@solana/web3.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { IngestPipeline } from "../indexer/pipeline.js";
import { RpcSource } from "../indexer/sources/rpc.js";
import { verifyChainAgainstStore } from "../indexer/verify.js";
import {
  advanceVoucher,
  type ChannelAccounts,
  type ChannelCharge,
  type ChannelSettlement,
  channelAccounts,
  closeChannelInstruction,
  decodeChannelAccount,
  decodeTransactionEvents,
  endpointHash,
  eventsNamed,
  findLedgerError,
  openChannelInstruction,
  PAYMENT_LEDGER_PROGRAM_ID,
  refundChannelInstruction,
  settleChannelInstruction,
  settlementComputeUnits,
  signVoucher,
  type Voucher,
  voucherMessage,
  voucherSignatureInstruction,
} from "../programs/payment_ledger/ts/index.js";
import { type AgentWallet, createAgentWallet, type LedgerAccess, ledgerAccess, tokenBalanceUnits } from "../scripts/agent-wallets.js";
import { type Localnet, startLocalnet } from "../scripts/localnet.js";
import { createFreshDatabase, type FreshDatabase } from "./indexer/fresh-database.js";

const USDC = 1_000_000n;
const SEARCH = endpointHash("api.example.com/v1/search");
const QUOTE = endpointHash("api.example.com/v1/quote");

let localnet: Localnet;
let provider: AnchorProvider;
let ledger: LedgerAccess;
let db: FreshDatabase;
let source: RpcSource;
let pipeline: IngestPipeline;

beforeAll(async () => {
  localnet = await startLocalnet();
  ledger = ledgerAccess(localnet);
  provider = ledger.provider;
  db = await createFreshDatabase();
  source = new RpcSource({ rpcUrl: localnet.rpcUrl, programId: PAYMENT_LEDGER_PROGRAM_ID, name: "rpc-channels" });
  pipeline = new IngestPipeline({
    pool: db.pool,
    programId: PAYMENT_LEDGER_PROGRAM_ID,
    cluster: localnet.rpcUrl,
    lookup: (signature) => source.transaction(signature),
  });
});

afterAll(async () => {
  await db?.drop();
  await localnet?.stop();
});

/** A channel between two fresh wallets, and the payer's running voucher for it. */
interface OpenChannel {
  readonly agent: AgentWallet;
  readonly service: AgentWallet;
  readonly accounts: ChannelAccounts;
  readonly opened: string;
  voucher: Voucher;
  nextPaymentId: bigint;
}

function send(instructions: TransactionInstruction[], signers: Keypair[]): Promise<string> {
  return provider.sendAndConfirm(new Transaction().add(...instructions), signers, { commitment: "confirmed" });
}

async function openChannel(depositUnits: bigint): Promise<OpenChannel> {
  const agent = await createAgentWallet(ledger, { usdcUnits: 10n * USDC });
  const service = await createAgentWallet(ledger);
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
        depositUnits,
        expiresAt: now + 3_600n,
        withdrawDelaySeconds: 600n,
        protocol: "mpp",
      }),
    ],
    [agent.keypair],
  );
  const state = await channelState(accounts);
  return { agent, service, accounts, opened, voucher: state.settled, nextPaymentId: 1n };
}

async function channelState(accounts: ChannelAccounts) {
  const info = await provider.connection.getAccountInfo(accounts.channel, "confirmed");
  if (info === null) throw new Error("no channel account");
  return decodeChannelAccount(info.data);
}

/** The payer accepts paid requests: new charges and the voucher (message and signature) covering them. */
function charge(channel: OpenChannel, amounts: readonly bigint[], endpoint = SEARCH) {
  const charges: ChannelCharge[] = amounts.map((amountUnits) => ({
    paymentId: channel.nextPaymentId++,
    amountUnits,
    endpointHash: endpoint,
  }));
  channel.voucher = advanceVoucher(channel.voucher, charges);
  const message = voucherMessage(channel.accounts.channel, channel.voucher);
  const settlement: ChannelSettlement = { cumulativeUnits: channel.voucher.cumulativeUnits, sequence: channel.voucher.sequence, charges };
  return { settlement, message, signature: signVoucher(channel.agent.keypair, message) };
}

/** Settles as the payee, or as the ledger's authority acting for it (the provider's wallet). */
async function settle(channel: OpenChannel, voucher: ReturnType<typeof charge>, asAuthority = false): Promise<string> {
  const settler = asAuthority ? localnet.info.authority : channel.service.publicKey;
  return send(
    [
      ComputeBudgetProgram.setComputeUnitLimit({ units: settlementComputeUnits(voucher.settlement.charges.length) }),
      voucherSignatureInstruction(channel.agent.publicKey, voucher.message, voucher.signature),
      await settleChannelInstruction({ settler, channel: channel.accounts, settlement: voucher.settlement }),
    ],
    asAuthority ? [] : [channel.service.keypair],
  );
}

async function refusal(attempt: Promise<unknown>): Promise<unknown> {
  try {
    await attempt;
  } catch (error) {
    return error;
  }
  throw new Error("the ledger accepted a transaction it must refuse");
}

async function balances(channel: OpenChannel) {
  return {
    payer: await tokenBalanceUnits(provider, channel.agent.tokenAccount),
    payee: await tokenBalanceUnits(provider, channel.service.tokenAccount),
  };
}

async function events(signature: string) {
  const tx = await provider.connection.getTransaction(signature, { commitment: "confirmed", maxSupportedTransactionVersion: 0 });
  if (tx === null) throw new Error(`no transaction ${signature}`);
  return decodeTransactionEvents(tx, PAYMENT_LEDGER_PROGRAM_ID);
}

describe("payment channels on the local ledger", () => {
  it("vouchers signed in TypeScript settle, a cooperative close refunds the rest, and no unit is lost", async () => {
    const channel = await openChannel(2n * USDC);
    expect(await balances(channel)).toEqual({ payer: 8n * USDC, payee: 0n });

    const first = charge(channel, [10_000n, 20_000n]);
    const settled = await events(await settle(channel, first));
    expect(eventsNamed(settled, "ChannelSettled")[0]).toMatchObject({ cumulativeUnits: 30_000n, deltaUnits: 30_000n, sequence: 2n });
    expect(eventsNamed(settled, "PaymentRecorded").map((p) => [p.paymentId, p.amountUnits])).toEqual([
      [1n, 10_000n],
      [2n, 20_000n],
    ]);
    const state = await channelState(channel.accounts);
    expect(state.settled.cumulativeUnits).toBe(30_000n);
    expect(Buffer.from(state.settled.chargesDigest).equals(Buffer.from(channel.voucher.chargesDigest))).toBe(true);

    // The last voucher is settled by the close itself; the payee then refunds the payer at once.
    const last = charge(channel, [5_000n], QUOTE);
    const closed = await events(
      await send(
        [
          voucherSignatureInstruction(channel.agent.publicKey, last.message, last.signature),
          await closeChannelInstruction({ signer: channel.service.publicKey, channel: channel.accounts, finalSettlement: last.settlement }),
          await refundChannelInstruction({
            signer: channel.service.publicKey,
            channel: channel.accounts,
            rentPayer: localnet.info.authority,
          }),
        ],
        [channel.service.keypair],
      ),
    );
    expect(eventsNamed(closed, "ChannelClosed")[0]).toMatchObject({
      settledUnits: 35_000n,
      refundedUnits: 2n * USDC - 35_000n,
      forced: false,
    });
    expect(await balances(channel)).toEqual({ payer: 10n * USDC - 35_000n, payee: 35_000n });
    expect(await provider.connection.getAccountInfo(channel.accounts.channel, "confirmed")).toBeNull();
    expect(await provider.connection.getAccountInfo(channel.accounts.escrow, "confirmed")).toBeNull();
  });

  it("the ledger's ed25519 precompile refuses a forged voucher signature before the program runs", async () => {
    const channel = await openChannel(USDC);
    const voucher = charge(channel, [1_000n]);
    const forged = voucher.signature.slice();
    forged[0] = forged[0]! ^ 1;
    const error = await refusal(settle(channel, { ...voucher, signature: forged }));
    expect(findLedgerError(error, PAYMENT_LEDGER_PROGRAM_ID)).toBeNull(); // not the program's refusal: it never ran
    expect(String(error)).toMatch(/custom program error: 0x2|InstructionError.*Custom.*2/);
    expect(await balances(channel)).toEqual({ payer: 9n * USDC, payee: 0n });

    // A valid signature by another key, presented as that key's: the precompile passes it, the
    // program refuses a voucher not signed by the channel's payer.
    const other = await createAgentWallet(ledger, { airdropLamports: 0 });
    const wrongKey = await refusal(
      send(
        [
          voucherSignatureInstruction(other.publicKey, voucher.message, signVoucher(other.keypair, voucher.message)),
          await settleChannelInstruction({ settler: channel.service.publicKey, channel: channel.accounts, settlement: voucher.settlement }),
        ],
        [channel.service.keypair],
      ),
    );
    expect(findLedgerError(wrongKey, PAYMENT_LEDGER_PROGRAM_ID)?.errorName).toBe("VoucherSignerMismatch");

    await settle(channel, voucher);
    // The same voucher again, in another transaction (the authority settling for the payee).
    const replay = await refusal(settle(channel, voucher, true));
    expect(findLedgerError(replay, PAYMENT_LEDGER_PROGRAM_ID)?.errorName).toBe("VoucherNotIncreasing");
    expect(await balances(channel)).toEqual({ payer: 9n * USDC, payee: 1_000n });
  });

  it("the indexer stores the channel events and records every settled charge as a payment", async () => {
    const channel = await openChannel(USDC);
    const settlement = await settle(channel, charge(channel, [100_000n, 250_000n, 50_000n]));
    const toSlot = await source.currentSlot("confirmed");
    const opened = await provider.connection.getTransaction(channel.opened, { commitment: "confirmed", maxSupportedTransactionVersion: 0 });
    const range = { fromSlot: BigInt(opened!.slot), toSlot };
    await pipeline.backfill(source, range);

    const stored = await db.pool.query<{ signature: string; event_name: string }>(
      "SELECT signature, event_name FROM chain_events WHERE signature = ANY($1) ORDER BY id",
      [[channel.opened, settlement]],
    );
    expect(stored.rows.map((row) => [row.signature, row.event_name])).toEqual([
      [channel.opened, "ChannelOpened"],
      [settlement, "ChannelSettled"],
      [settlement, "PaymentRecorded"],
      [settlement, "PaymentRecorded"],
      [settlement, "PaymentRecorded"],
    ]);
    const seen = await db.pool.query<{ outcome: string }>("SELECT outcome FROM chain_transactions_seen WHERE signature = ANY($1)", [
      [channel.opened, settlement],
    ]);
    expect(seen.rows.map((row) => row.outcome)).toEqual(["indexed", "indexed"]);

    const payments = await db.pool.query<Record<string, unknown>>(
      "SELECT agent, payee, payment_id, amount_units, protocol, rail, atomic, endpoint_hash FROM transactions WHERE tx_hash = $1 ORDER BY payment_id",
      [settlement],
    );
    expect(payments.rows).toEqual(
      [
        ["1", "100000"],
        ["2", "250000"],
        ["3", "50000"],
      ].map(([paymentId, amount]) => ({
        agent: channel.agent.publicKey.toBase58(),
        payee: channel.service.publicKey.toBase58(),
        payment_id: paymentId,
        amount_units: amount,
        protocol: "mpp",
        rail: "stablecoin",
        atomic: true,
        endpoint_hash: Buffer.from(SEARCH).toString("hex"),
      })),
    );
    expect(await verifyChainAgainstStore(db.pool, source, pipeline, range)).toEqual([]);
  });
});
