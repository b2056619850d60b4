/**
 * The channel read model from a channel's real life on the local ledger: opened, topped up,
 * settled by the payee, closed cooperatively with a final voucher and refunded in one transaction
 * (the shapes docs/ledger.md section 5 describes), backfilled by the real RPC source and pipeline.
 * The synthetic events of channels.test.ts mimic these transactions; this checks they match.
 */
import { randomBytes } from "node:crypto";
import type { AnchorProvider } from "@coral-xyz/anchor";
import { ComputeBudgetProgram, type Keypair, Transaction, type TransactionInstruction } from "@solana/web3.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { withTransaction } from "../../indexer/db/database.js";
import { IngestPipeline } from "../../indexer/pipeline.js";
import { RpcSource } from "../../indexer/sources/rpc.js";
import { rebuildProjections } from "../../indexer/store/rebuild.js";
import {
  advanceVoucher,
  type ChannelCharge,
  channelAccounts,
  closeChannelInstruction,
  decodeChannelAccount,
  endpointHash,
  openChannelInstruction,
  PAYMENT_LEDGER_PROGRAM_ID,
  refundChannelInstruction,
  settleChannelInstruction,
  settlementComputeUnits,
  signVoucher,
  topUpChannelInstruction,
  type Voucher,
  voucherMessage,
  voucherSignatureInstruction,
} from "../../programs/payment_ledger/ts/index.js";
import { createAgentWallet, type LedgerAccess, ledgerAccess } from "../../scripts/agent-wallets.js";
import { type Localnet, startLocalnet } from "../../scripts/localnet.js";
import { createFreshDatabase, type FreshDatabase } from "./fresh-database.js";
import { projectionSnapshot, snapshotDifference } from "./read-models.js";

const USDC = 1_000_000n;
const SEARCH = endpointHash("api.example.com/v1/search");

let localnet: Localnet;
let provider: AnchorProvider;
let ledger: LedgerAccess;
let db: FreshDatabase;

beforeAll(async () => {
  localnet = await startLocalnet();
  ledger = ledgerAccess(localnet);
  provider = ledger.provider;
  db = await createFreshDatabase();
}, 120_000);

afterAll(async () => {
  await db?.drop();
  await localnet?.stop();
});

function send(instructions: TransactionInstruction[], signers: Keypair[]): Promise<string> {
  return provider.sendAndConfirm(new Transaction().add(...instructions), signers, { commitment: "confirmed" });
}

describe("channel read model on the local ledger", () => {
  it("a real channel's open, top up, settlement and cooperative close project as the chain recorded them", async () => {
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
          depositUnits: 2n * USDC,
          expiresAt: now + 3_600n,
          withdrawDelaySeconds: 600n,
          protocol: "x402",
        }),
      ],
      [agent.keypair],
    );
    await send([await topUpChannelInstruction({ channel: accounts, amountUnits: USDC })], [agent.keypair]);

    const info = await provider.connection.getAccountInfo(accounts.channel, "confirmed");
    let voucher: Voucher = decodeChannelAccount(info!.data).settled;
    let nextPaymentId = 1n;
    const sign = (amounts: readonly bigint[]) => {
      const charges: ChannelCharge[] = amounts.map((amountUnits) => ({ paymentId: nextPaymentId++, amountUnits, endpointHash: SEARCH }));
      voucher = advanceVoucher(voucher, charges);
      const message = voucherMessage(accounts.channel, voucher);
      return {
        settlement: { cumulativeUnits: voucher.cumulativeUnits, sequence: voucher.sequence, charges },
        message,
        signature: signVoucher(agent.keypair, message),
      };
    };

    const first = sign([10_000n, 20_000n]);
    const settled = await send(
      [
        ComputeBudgetProgram.setComputeUnitLimit({ units: settlementComputeUnits(2) }),
        voucherSignatureInstruction(agent.publicKey, first.message, first.signature),
        await settleChannelInstruction({ settler: service.publicKey, channel: accounts, settlement: first.settlement }),
      ],
      [service.keypair],
    );
    const last = sign([5_000n]);
    const closed = await send(
      [
        voucherSignatureInstruction(agent.publicKey, last.message, last.signature),
        await closeChannelInstruction({ signer: service.publicKey, channel: accounts, finalSettlement: last.settlement }),
        await refundChannelInstruction({ signer: service.publicKey, channel: accounts, rentPayer: localnet.info.authority }),
      ],
      [service.keypair],
    );

    const source = new RpcSource({ rpcUrl: localnet.rpcUrl, programId: PAYMENT_LEDGER_PROGRAM_ID, name: "rpc-channel-model" });
    const pipeline = new IngestPipeline({
      pool: db.pool,
      programId: PAYMENT_LEDGER_PROGRAM_ID,
      cluster: localnet.rpcUrl,
      lookup: (signature) => source.transaction(signature),
    });
    const openedTx = await provider.connection.getTransaction(opened, { commitment: "confirmed", maxSupportedTransactionVersion: 0 });
    await pipeline.backfill(source, { fromSlot: BigInt(openedTx!.slot), toSlot: await source.currentSlot("confirmed") });

    const address = accounts.channel.toBase58();
    const row = await db.pool.query(
      `SELECT payer, payee, protocol, status, deposit_units::text, settled_units::text, sequence::text, settlement_count,
              refunded_units::text, forced, open_tx, close_requested_tx, close_tx
       FROM channels WHERE address = $1`,
      [address],
    );
    expect(row.rows).toEqual([
      {
        payer: agent.publicKey.toBase58(),
        payee: service.publicKey.toBase58(),
        protocol: "x402",
        status: "closed",
        deposit_units: "3000000",
        settled_units: "35000",
        sequence: "3",
        settlement_count: 2,
        refunded_units: (3n * USDC - 35_000n).toString(),
        forced: false,
        open_tx: opened,
        close_requested_tx: closed,
        close_tx: closed,
      },
    ]);
    const settlements = await db.pool.query(
      "SELECT tx_hash, delta_units::text, sequence::text, charge_count FROM channel_settlements WHERE channel = $1 ORDER BY sequence",
      [address],
    );
    expect(settlements.rows).toEqual([
      { tx_hash: settled, delta_units: "30000", sequence: "2", charge_count: 2 },
      { tx_hash: closed, delta_units: "5000", sequence: "3", charge_count: 1 },
    ]);
    // Every charge's payment row is linked to its channel and the settlement that carried it.
    const charges = await db.pool.query(
      `SELECT t.payment_id::text, t.amount_units::text, p.settlement_tx
       FROM transactions t LEFT JOIN channel_payments p USING (event_id)
       WHERE t.agent = $1 ORDER BY t.payment_id`,
      [agent.publicKey.toBase58()],
    );
    expect(charges.rows).toEqual([
      { payment_id: "1", amount_units: "10000", settlement_tx: settled },
      { payment_id: "2", amount_units: "20000", settlement_tx: settled },
      { payment_id: "3", amount_units: "5000", settlement_tx: closed },
    ]);

    const projected = await projectionSnapshot(db.pool);
    await withTransaction(db.pool, (client) => rebuildProjections(client, { cluster: localnet.rpcUrl }));
    expect(snapshotDifference(await projectionSnapshot(db.pool), projected)).toEqual({});
  }, 120_000);
});
