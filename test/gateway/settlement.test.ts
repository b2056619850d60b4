/**
 * Settlement on the real local ledger and a fresh Postgres: record_payment with the atomic
 * transfer, payment ids under concurrency, invocation budgets at the gateway and on-chain, typed
 * refusals, and reconciliation of settlements a crash left pending.
 */
import { randomBytes } from "node:crypto";
import { Keypair, PublicKey } from "@solana/web3.js";
import bs58 from "bs58";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAccount } from "../../api/shared/keys.js";
import { LedgerInvocations } from "../../api/gateway/invocations/index.js";
import { Settlement, type SettlePaymentInput } from "../../api/gateway/settlement/index.js";
import {
  AgentWallets,
  createAgentWallet,
  generateWalletEncryptionKey,
  keystoreFromEnv,
  LocalTreasuryFundingSource,
} from "../../api/gateway/wallets/index.js";
import {
  BudgetExceededError,
  InsufficientFundsError,
  localSettlementLedger,
  PaymentError,
  type SettlementLedger,
  tokenBalanceUnits,
} from "../../api/gateway/chain/index.js";
import { endpointHash } from "../../programs/payment_ledger/ts/index.js";
import { type Localnet, startLocalnet } from "../../scripts/localnet.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { recordedPayments } from "../support/ledger-events.js";
import { pollUntil } from "../support/poll.js";

const USDC = 1_000_000n;
const ENDPOINT = "api.example.com/v1/quote";

let localnet: Localnet;
let db: FreshDatabase;
let ledger: SettlementLedger;
let wallets: AgentWallets;
let settlement: Settlement;
let accountId: string;

beforeAll(async () => {
  [localnet, db] = await Promise.all([startLocalnet(), createFreshDatabase()]);
  ledger = localSettlementLedger(localnet);
  const keystore = keystoreFromEnv({ WALLET_ENCRYPTION_KEY: generateWalletEncryptionKey() });
  const fundingSource = LocalTreasuryFundingSource.fromLocalnet(ledger, localnet);
  wallets = new AgentWallets({ pool: db.pool, keystore, ledger, fundingSource });
  settlement = new Settlement({ pool: db.pool, wallets, ledger, invocations: new LedgerInvocations({ pool: db.pool, wallets, ledger }) });
  accountId = await createAccount(db.pool, "settlement test");
  const create = (agentId: string) => createAgentWallet(db.pool, keystore, { accountId, agentId });
  await Promise.all(["s-pay", "s-many", "s-orch", "s-sub", "s-poor", "s-crash", "s-card", "s-dup"].map(create));
});

afterAll(async () => {
  await localnet?.stop();
  await db?.drop();
});

const serviceWallet = (): PublicKey => Keypair.generate().publicKey;

function payment(agentId: string, payee: PublicKey, amountUnits: bigint, extra: Partial<SettlePaymentInput> = {}): SettlePaymentInput {
  return { agentId, payee: payee.toBase58(), amountUnits, protocol: "x402", rail: "stablecoin", endpoint: ENDPOINT, ...extra };
}

async function settlementRow(signature: string) {
  const rows = await db.pool.query("SELECT agent_id, payment_id, status, error, slot FROM settlements WHERE signature = $1", [signature]);
  return rows.rows[0];
}

const paymentEvents = (signature: string) => recordedPayments(ledger.connection, signature);

describe("settlement", () => {
  it("a stablecoin payment moves exactly its amount and records PaymentRecorded", async () => {
    await wallets.fund("s-pay", 10n * USDC);
    const payee = serviceWallet();
    const result = await settlement.settlePayment(payment("s-pay", payee, 1_234_567n, { endpoint: `https://${ENDPOINT}?q=1` }));

    expect(result.paymentId).toBe(1n);
    expect(await wallets.balance("s-pay")).toBe(10n * USDC - 1_234_567n);
    expect(await tokenBalanceUnits(ledger, payee)).toBe(1_234_567n);

    const [event, ...more] = await paymentEvents(result.txHash);
    expect(more).toHaveLength(0);
    expect(event!.payer.toBase58()).toBe((await wallets.address("s-pay")).toBase58());
    expect(event!.payee.toBase58()).toBe(payee.toBase58());
    expect(event!).toMatchObject({
      paymentId: 1n,
      amountUnits: 1_234_567n,
      protocol: "x402",
      rail: "stablecoin",
      atomic: true,
      parent: null,
    });
    expect(Buffer.from(event!.endpointHash).equals(Buffer.from(endpointHash(ENDPOINT)))).toBe(true);
    expect(event!.slot).toBe(BigInt(result.slot));

    expect(await settlementRow(result.txHash)).toEqual({
      agent_id: "s-pay",
      payment_id: "1",
      status: "confirmed",
      error: null,
      slot: String(result.slot),
    });
    const endpoint = await db.pool.query("SELECT endpoint, domain FROM endpoints WHERE endpoint_hash = $1", [
      Buffer.from(endpointHash(ENDPOINT)).toString("hex"),
    ]);
    expect(endpoint.rows).toEqual([{ endpoint: ENDPOINT, domain: "api.example.com" }]);
  });

  it("a card payment is recorded and moves nothing", async () => {
    const payee = serviceWallet();
    const result = await settlement.settlePayment(payment("s-card", payee, 700_000n, { protocol: "mpp", rail: "card" }));
    const [event] = await paymentEvents(result.txHash);
    expect(event).toMatchObject({ protocol: "mpp", rail: "card", atomic: false, amountUnits: 700_000n, paymentId: 1n });
    expect(await wallets.balance("s-card")).toBe(0n);
    expect(await tokenBalanceUnits(ledger, payee)).toBe(0n);

    // A record naming a separate settlement (bytes or base58) moves nothing either.
    const reference = randomBytes(64);
    const named = await settlement.settlePayment(payment("s-card", payee, 5n, { settlementReference: reference }));
    const [recorded] = await paymentEvents(named.txHash);
    expect(recorded).toMatchObject({ rail: "stablecoin", atomic: false, paymentId: 2n });
    expect(Buffer.from(recorded!.settlementReference!).equals(reference)).toBe(true);
    const stored = await db.pool.query("SELECT settlement_reference FROM settlements WHERE signature = $1", [named.txHash]);
    expect(stored.rows[0].settlement_reference).toBe(bs58.encode(reference));
    expect(await wallets.agentIdForAddress((await wallets.address("s-card")).toBase58())).toBe("s-card");
  });

  it("20 concurrent settlements of one agent get 20 distinct payment ids, all confirmed, balance exact", async () => {
    await wallets.fund("s-many", 100n * USDC);
    const payee = serviceWallet();
    const amounts = Array.from({ length: 20 }, (_, i) => BigInt(i + 1) * 10_000n);
    const results = await Promise.all(amounts.map((amount) => settlement.settlePayment(payment("s-many", payee, amount))));
    const ids = results.map((r) => r.paymentId).sort((a, b) => (a < b ? -1 : 1));
    expect(ids).toEqual(Array.from({ length: 20 }, (_, i) => BigInt(i + 1)));
    expect(new Set(results.map((r) => r.txHash)).size).toBe(20);
    const total = amounts.reduce((a, b) => a + b, 0n);
    expect(await wallets.balance("s-many")).toBe(100n * USDC - total);
    expect(await tokenBalanceUnits(ledger, payee)).toBe(total);
    const statuses = await db.pool.query("SELECT status, count(*)::int AS n FROM settlements WHERE agent_id = 's-many' GROUP BY status");
    expect(statuses.rows).toEqual([{ status: "confirmed", n: 20 }]);
  });

  it("payments under an invocation may sum to its budget; one unit more is BudgetExceededError and moves nothing", async () => {
    await wallets.fund("s-orch", 5n * USDC);
    await wallets.fund("s-sub", 5n * USDC);
    const service = serviceWallet();
    const subAddress = await wallets.address("s-sub");
    const parent = await settlement.settlePayment(payment("s-orch", subAddress, USDC / 10n));
    const budgetUnits = 3n * USDC;
    const terms = { invokerAgentId: "s-orch", parentTxHash: parent.txHash, subAgentId: "s-sub", budgetUnits };
    const opened = await settlement.openInvocation(terms);
    const under = (amountUnits: bigint) => payment("s-sub", service, amountUnits, { invocation: opened.invocation });

    const before = await wallets.balance("s-sub");
    for (const amount of [USDC, 1_500_000n]) {
      const paid = await settlement.settlePayment(under(amount));
      const [event] = await paymentEvents(paid.txHash);
      expect(event!.parent?.invocation.toBase58()).toBe(opened.invocation);
      expect(bs58.encode(event!.parent!.parentSignature)).toBe(parent.txHash);
    }
    // Two payments that each fit what is left pass the gateway's check; the chain admits one.
    const last = await settlement.prepareSettlement(under(500_000n));
    const racing = await settlement.prepareSettlement(under(1n));
    await settlement.completeSettlement(last);
    const onChain = await settlement.completeSettlement(racing).catch((e: unknown) => e);
    expect(onChain).toBeInstanceOf(BudgetExceededError);
    expect(onChain).toMatchObject({ budgetUnits, spentUnits: budgetUnits, requestedUnits: 1n });
    expect((await settlementRow(racing.signed.signature))?.status).toBe("failed");
    expect((await settlementRow(racing.signed.signature))?.error).toBe("InvocationBudgetExceeded");
    // Now the gateway refuses before signing anything.
    const count = await db.pool.query("SELECT count(*)::int AS n FROM settlements WHERE agent_id = 's-sub'");
    await expect(settlement.settlePayment(under(1n))).rejects.toBeInstanceOf(BudgetExceededError);
    expect((await db.pool.query("SELECT count(*)::int AS n FROM settlements WHERE agent_id = 's-sub'")).rows).toEqual(count.rows);

    expect(await wallets.balance("s-sub")).toBe(before - budgetUnits);
    expect(await tokenBalanceUnits(ledger, service)).toBe(budgetUnits);
    const state = await settlement.invocationState(new PublicKey(opened.invocation));
    expect(state).toMatchObject({ budgetUnits, spentUnits: budgetUnits, subAgent: subAddress.toBase58() });

    // A retried open (its first answer lost) finds the invocation it opened, past its payments.
    expect(await settlement.openInvocation(terms)).toEqual(opened);
    await expect(settlement.openInvocation({ ...terms, budgetUnits: budgetUnits + 1n })).rejects.toThrow(/other terms/);
    // Only the invoker's own confirmed payment can be a parent.
    await expect(settlement.openInvocation({ ...terms, invokerAgentId: "s-sub", subAgentId: "s-orch" })).rejects.toThrow(
      /not a confirmed payment of agent s-sub/,
    );
  });

  it("paying more than the balance is InsufficientFundsError with the balance, at the gateway and on-chain", async () => {
    await wallets.fund("s-poor", USDC);
    const payee = serviceWallet();
    const atGateway = await settlement.settlePayment(payment("s-poor", payee, USDC + 1n)).catch((e: unknown) => e);
    expect(atGateway).toBeInstanceOf(InsufficientFundsError);
    expect((atGateway as InsufficientFundsError).currentBalanceUnits).toBe(USDC);
    expect((await db.pool.query("SELECT count(*)::int AS n FROM settlements WHERE agent_id = 's-poor'")).rows[0].n).toBe(0);

    // Both fit the balance alone; together they do not: the program refuses the second.
    const first = await settlement.prepareSettlement(payment("s-poor", payee, 600_000n));
    const second = await settlement.prepareSettlement(payment("s-poor", payee, 600_000n));
    await settlement.completeSettlement(first);
    const onChain = await settlement.completeSettlement(second).catch((e: unknown) => e);
    expect(onChain).toBeInstanceOf(InsufficientFundsError);
    expect((onChain as InsufficientFundsError).currentBalanceUnits).toBe(400_000n);
    expect(await wallets.balance("s-poor")).toBe(400_000n);
    expect(await tokenBalanceUnits(ledger, payee)).toBe(600_000n);
  });

  it("any other refusal of the program is a PaymentError naming it", async () => {
    const payee = serviceWallet();
    await settlement.settlePayment(payment("s-dup", payee, 5n, { rail: "other" }));
    // A database restored from a backup taken before that payment re-issues id 1 (the settlements
    // key would refuse a reuse it knows of); the chain's replay window refuses it.
    await db.pool.query("DELETE FROM settlements WHERE agent_id = 's-dup'");
    await db.pool.query("UPDATE agent_wallets SET next_payment_id = 1 WHERE agent_id = 's-dup'");
    // (Another amount: the same bytes under the same blockhash would be the same transaction.)
    const error = await settlement.settlePayment(payment("s-dup", payee, 6n, { rail: "other" })).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PaymentError);
    expect((error as PaymentError).detail).toMatchObject({ ledgerError: "DuplicatePaymentId", ledgerCode: 6003 });
  });

  it("after a crash, a pending settlement that was sent reconciles to confirmed and one never sent to failed", async () => {
    await wallets.fund("s-crash", 2n * USDC);
    const payee = serviceWallet();
    const sent = await settlement.prepareSettlement(payment("s-crash", payee, 300_000n));
    const unsent = await settlement.prepareSettlement(payment("s-crash", payee, 400_000n));
    // The process "crashes" right after sending the first: nobody marks it.
    await ledger.connection.sendRawTransaction(Buffer.from(sent.signed.wire, "base64"));
    expect((await settlementRow(sent.signed.signature))?.status).toBe("pending");

    const early = await settlement.reconcilePending();
    expect(early.confirmed).toContain(sent.signed.signature);
    expect(early.pending).toContain(unsent.signed.signature);
    expect(await settlement.findSettlement(sent.signed.signature)).toMatchObject({
      status: "confirmed",
      paymentId: sent.paymentId,
      amountUnits: 300_000n,
      agentId: "s-crash",
    });

    // The unsent one fails only once its blockhash can no longer land.
    let report = early;
    await pollUntil(
      async () => {
        if (!report.failed.includes(unsent.signed.signature)) report = await settlement.reconcilePending();
        return report.failed.includes(unsent.signed.signature);
      },
      { timeoutMs: 45_000, intervalMs: 1_000, what: "the unsent settlement to fail once its blockhash expired" },
    );
    expect(report.failed).toContain(unsent.signed.signature);
    const finalHeight = await ledger.connection.getBlockHeight("finalized");
    expect(finalHeight).toBeGreaterThan(unsent.signed.lastValidBlockHeight);
    expect(await settlementRow(unsent.signed.signature)).toMatchObject({ status: "failed", error: "expired" });
    // Exactly the sent payment moved; the expired one can never land now.
    expect(await wallets.balance("s-crash")).toBe(2n * USDC - 300_000n);
    expect(await tokenBalanceUnits(ledger, payee)).toBe(300_000n);
    await expect(ledger.connection.sendRawTransaction(Buffer.from(unsent.signed.wire, "base64"))).rejects.toThrow();
    // The next payment takes a fresh id: nothing is reused.
    const next = await settlement.settlePayment(payment("s-crash", payee, 1n));
    expect(next.paymentId).toBe(unsent.paymentId + 1n);
  });
});
