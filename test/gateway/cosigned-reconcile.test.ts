/**
 * A co-signed transfer whose process died after sending it and before recording it
 * (api/gateway/cosigned/cosigned.ts): the claimed row is all that is left; the reconciler finds
 * the transfer landed, records it once with record_attested_payment, and the indexer verifies
 * the record. Presenting the same transaction again is refused: it is consumed.
 */
import { createTransferCheckedInstruction, getAssociatedTokenAddressSync } from "@solana/spl-token";
import { ComputeBudgetProgram, type Keypair, PublicKey, TransactionMessage, VersionedTransaction } from "@solana/web3.js";
import bs58 from "bs58";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { claimCosignedTransfer, cosignedTransfer } from "../../api/gateway/cosigned/store.js";
import { outsidePayer, recordsReferencing, fundTokens, verifiedRecord } from "../interop/official-client-support.js";
import { fundedAgent, startTestSystem, type TestSystem, tokenBalanceUnits } from "../sdk/server-support.js";
import { pollUntil } from "../support/poll.js";

const PRICE = 30_000n;
let test: TestSystem;
let accountId: string;
let payTo: string;
let payer: Keypair;

beforeAll(async () => {
  test = await startTestSystem();
  const seller = await test.system.createAccount("seller");
  accountId = seller.accountId;
  payTo = await fundedAgent(test.system, seller.apiKey, "till", 0);
  await fundTokens(test, new PublicKey(payTo), 0n);
  payer = await outsidePayer(test, 100_000n);
}, 180_000);

afterAll(async () => {
  await test?.stop();
});

/** The payer's transfer as an x402 exact client builds it, partially signed. */
async function payerTransaction(): Promise<string> {
  const mint = test.system.localnet.info.mint;
  const { blockhash } = await test.connection.getLatestBlockhash("confirmed");
  const transfer = createTransferCheckedInstruction(
    getAssociatedTokenAddressSync(mint, payer.publicKey, true),
    mint,
    getAssociatedTokenAddressSync(mint, new PublicKey(payTo), true),
    payer.publicKey,
    PRICE,
    6,
  );
  const message = new TransactionMessage({
    payerKey: test.system.feePayer.publicKey,
    recentBlockhash: blockhash,
    instructions: [
      ComputeBudgetProgram.setComputeUnitLimit({ units: 20_000 }),
      ComputeBudgetProgram.setComputeUnitPrice({ microLamports: 1 }),
      transfer,
    ],
  }).compileToV0Message();
  const transaction = new VersionedTransaction(message);
  transaction.sign([payer]);
  return Buffer.from(transaction.serialize()).toString("base64");
}

describe("co-signed transfers left by a crash", () => {
  it("a transfer sent but never recorded is recorded once by the reconciler, and cannot be presented again", async () => {
    const wire = await payerTransaction();
    const payment = {
      protocol: "x402" as const,
      accountId,
      endpoint: "https://api.example.com/report",
      transaction: wire,
      layout: "x402-exact" as const,
      payTo,
      amountUnits: PRICE,
    };
    expect(await test.system.cosigned.verify(payment)).toMatchObject({ ok: true, payer: payer.publicKey.toBase58() });

    // What settle does up to the send, then the process "dies": claimed, co-signed, sent, nothing more.
    const transaction = VersionedTransaction.deserialize(Buffer.from(wire, "base64"));
    transaction.sign([test.system.feePayer]);
    const signature = bs58.encode(transaction.signatures[0]!);
    const claimed = await claimCosignedTransfer(test.system.pool, {
      signature,
      payerSignature: Buffer.from(transaction.signatures[1]!).toString("hex"),
      protocol: "x402",
      accountId,
      payer: payer.publicKey.toBase58(),
      payee: payTo,
      mint: test.system.token,
      amountUnits: PRICE,
      endpoint: "api.example.com/report",
      transaction: Buffer.from(transaction.serialize()).toString("base64"),
      lastValidBlockHeight: (await test.connection.getLatestBlockhash("confirmed")).lastValidBlockHeight,
      record: "attest",
    });
    expect(claimed).toBe(true);
    await test.connection.sendRawTransaction(transaction.serialize());
    await pollUntil(async () => (await test.connection.getSignatureStatus(signature)).value?.confirmationStatus === "confirmed", {
      timeoutMs: 10_000,
      intervalMs: 50,
      what: "the transfer to land",
    });
    expect(await tokenBalanceUnits(test, payTo)).toBe(PRICE);

    await test.system.cosigned.reconcilePending();
    const row = await cosignedTransfer(test.system.pool, signature);
    expect(row).toMatchObject({ status: "confirmed", recordStatus: "confirmed" });
    const record = await verifiedRecord(test, signature);
    expect(record).toMatchObject({ txHash: row!.recordSignature, agent: payer.publicKey.toBase58(), payee: payTo, amountUnits: PRICE });

    // Another pass finds nothing left to do; the same transaction presented again is consumed.
    await test.system.cosigned.reconcilePending();
    expect(await test.system.cosigned.settle(payment)).toEqual({
      ok: false,
      reason: "duplicate_settlement",
      detail: "this transaction was already settled",
      payer: payer.publicKey.toBase58(),
    });
    expect(await test.system.cosigned.verify(payment)).toMatchObject({ ok: false, reason: "duplicate_settlement" });
    expect(await recordsReferencing(test, signature)).toBe(1);
    expect(await tokenBalanceUnits(test, payTo)).toBe(PRICE);
  });
});
