/**
 * A custodial settlement the node refused before sending is failed but still followed until its
 * blockhash expires (api/gateway/settlement/reconciliation.ts, `settlements.watch`): when its
 * signed bytes land after all, the row becomes confirmed, and the chain holds its PaymentRecorded
 * (record_payment records in the same transaction). Real ledger, real Postgres.
 *
 * How it is built: two settlements prepared against a balance that covers one; the second is
 * refused at the send (insufficient funds). The gateway hands its bytes to nobody; the test takes
 * them from the gateway's row after refilling the wallet and broadcasts them with preflight
 * skipped, standing in for any way the bytes could still reach the chain.
 */
import { Keypair } from "@solana/web3.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LedgerInvocations } from "../../api/gateway/invocations/index.js";
import { Settlement, type SettlePaymentInput } from "../../api/gateway/settlement/index.js";
import {
  AgentWallets,
  createAgentWallet,
  generateWalletEncryptionKey,
  keystoreFromEnv,
  LocalTreasuryFundingSource,
} from "../../api/gateway/wallets/index.js";
import { InsufficientFundsError, localSettlementLedger, type SettlementLedger, tokenBalanceUnits } from "../../api/gateway/chain/index.js";
import { createAccount } from "../../api/shared/keys.js";
import { type Localnet, startLocalnet } from "../../scripts/localnet.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { recordedPayments } from "../support/ledger-events.js";
import { pollUntil } from "../support/poll.js";

const USDC = 1_000_000n;

let localnet: Localnet;
let db: FreshDatabase;
let ledger: SettlementLedger;
let wallets: AgentWallets;
let settlement: Settlement;

beforeAll(async () => {
  [localnet, db] = await Promise.all([startLocalnet(), createFreshDatabase()]);
  ledger = localSettlementLedger(localnet);
  const keystore = keystoreFromEnv({ WALLET_ENCRYPTION_KEY: generateWalletEncryptionKey() });
  wallets = new AgentWallets({ pool: db.pool, keystore, ledger, fundingSource: LocalTreasuryFundingSource.fromLocalnet(ledger, localnet) });
  settlement = new Settlement({ pool: db.pool, wallets, ledger, invocations: new LedgerInvocations({ pool: db.pool, wallets, ledger }) });
  const accountId = await createAccount(db.pool, "late landing");
  await createAgentWallet(db.pool, keystore, { accountId, agentId: "late" });
});

afterAll(async () => {
  await localnet?.stop();
  await db?.drop();
});

const row = async (signature: string) =>
  (await db.pool.query("SELECT status, watch, error, slot FROM settlements WHERE signature = $1", [signature])).rows[0];

describe("a settlement refused at the send", () => {
  it("is followed while its blockhash is valid; landing late, its row becomes confirmed and nothing else changes", async () => {
    await wallets.fund("late", USDC);
    const payee = Keypair.generate().publicKey;
    const payment: SettlePaymentInput = {
      agentId: "late",
      payee: payee.toBase58(),
      amountUnits: 600_000n,
      protocol: "x402",
      rail: "stablecoin",
      endpoint: "api.example.com/v1/late",
    };
    const first = await settlement.prepareSettlement(payment);
    const second = await settlement.prepareSettlement(payment);
    await settlement.completeSettlement(first);
    expect(await settlement.completeSettlement(second).catch((e: unknown) => e)).toBeInstanceOf(InsufficientFundsError);
    expect(await row(second.signed.signature)).toMatchObject({ status: "failed", watch: true });

    // Still refused on chain while the wallet is short: the reconciler leaves it watched.
    await settlement.reconcilePending();
    expect(await row(second.signed.signature)).toMatchObject({ status: "failed", watch: true });

    await wallets.fund("late", USDC);
    const wire = (await db.pool.query("SELECT transaction FROM settlements WHERE signature = $1", [second.signed.signature])).rows[0]
      .transaction;
    await ledger.connection.sendRawTransaction(Buffer.from(wire, "base64"), { skipPreflight: true });
    await pollUntil(
      async () => (await ledger.connection.getSignatureStatus(second.signed.signature)).value?.confirmationStatus === "confirmed",
      {
        timeoutMs: 10_000,
        intervalMs: 50,
        what: "the late settlement to land",
      },
    );

    const report = await settlement.reconcilePending();
    expect(report.confirmed).toContain(second.signed.signature);
    expect(await row(second.signed.signature)).toMatchObject({ status: "confirmed", watch: false, error: null });
    const events = await recordedPayments(ledger.connection, second.signed.signature);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ paymentId: second.paymentId, amountUnits: 600_000n });
    expect(await tokenBalanceUnits(ledger, payee)).toBe(1_200_000n);
    expect(await wallets.balance("late")).toBe(2n * USDC - 1_200_000n);
    // Another pass changes nothing.
    expect((await settlement.reconcilePending()).confirmed).toEqual([]);
  });
});
