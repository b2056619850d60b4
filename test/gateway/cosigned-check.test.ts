/**
 * The rules a payer's own transfer must pass before the gateway's fee payer co-signs it
 * (api/gateway/cosigned/check.ts): x402 `exact` positional layout and MPP charge layout, the fee
 * payer's isolation, the one other signer and its signature, mint, decimals, destination, source,
 * amount, memos. Offline: transactions are built and signed here with web3.js.
 */
import { createTransferCheckedInstruction, getAssociatedTokenAddressSync } from "@solana/spl-token";
import {
  ComputeBudgetProgram,
  Keypair,
  PublicKey,
  SystemProgram,
  type TransactionInstruction,
  TransactionMessage,
  VersionedTransaction,
} from "@solana/web3.js";
import { describe, expect, it } from "vitest";
import { checkTransferTransaction, MEMO_PROGRAM, type TransferTerms } from "../../api/gateway/cosigned/check.js";

const feePayer = Keypair.generate();
const payer = Keypair.generate();
const payTo = Keypair.generate().publicKey;
const mint = Keypair.generate().publicKey;
const BLOCKHASH = Keypair.generate().publicKey.toBase58();
const terms: TransferTerms = {
  feePayer: feePayer.publicKey.toBase58(),
  mint: mint.toBase58(),
  decimals: 6,
  tokenProgram: "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA",
  payTo: payTo.toBase58(),
  amountUnits: 50_000n,
};

const limit = (units = 20_000) => ComputeBudgetProgram.setComputeUnitLimit({ units });
const price = (microLamports = 1) => ComputeBudgetProgram.setComputeUnitPrice({ microLamports });
const memo = (text: string) => ({ programId: new PublicKey(MEMO_PROGRAM), keys: [], data: Buffer.from(text) }) as TransactionInstruction;

function transfer(
  options: { amount?: bigint; decimals?: number; authority?: PublicKey; to?: PublicKey; mintKey?: PublicKey; source?: PublicKey } = {},
) {
  const authority = options.authority ?? payer.publicKey;
  const mintKey = options.mintKey ?? mint;
  const source = options.source ?? getAssociatedTokenAddressSync(mintKey, authority, true);
  const destination = getAssociatedTokenAddressSync(mintKey, options.to ?? payTo, true);
  return createTransferCheckedInstruction(source, mintKey, destination, authority, options.amount ?? 50_000n, options.decimals ?? 6);
}

function wire(instructions: TransactionInstruction[], options: { fee?: PublicKey; signers?: Keypair[] } = {}): string {
  const message = new TransactionMessage({
    payerKey: options.fee ?? feePayer.publicKey,
    recentBlockhash: BLOCKHASH,
    instructions,
  }).compileToV0Message();
  const transaction = new VersionedTransaction(message);
  transaction.sign(options.signers ?? [payer]);
  return Buffer.from(transaction.serialize()).toString("base64");
}

const exact = (extra: TransactionInstruction[] = []) => [limit(), price(), transfer(), ...extra];

describe("the x402 exact layout", () => {
  it("accepts the official client's transaction and names the payer", () => {
    const checked = checkTransferTransaction(wire(exact([memo("a1b2c3")])), terms, "x402-exact");
    expect(checked).toMatchObject({ ok: true, payer: payer.publicKey.toBase58(), blockhash: BLOCKHASH });
  });

  it("accepts a compute limit of exactly 200,000 units, the bound of both layouts", () => {
    expect(checkTransferTransaction(wire([limit(200_000), price(5_000_000), transfer()]), terms, "x402-exact")).toMatchObject({ ok: true });
  });

  it.each([
    [
      "no compute limit first",
      [price(), limit(), transfer()],
      "invalid_exact_svm_payload_transaction_instructions_compute_limit_instruction",
    ],
    ["too few instructions", [limit(), transfer()], "invalid_exact_svm_payload_transaction_instructions_length"],
    [
      "a price over 5 lamports per unit",
      [limit(), price(5_000_001), transfer()],
      "invalid_exact_svm_payload_transaction_instructions_compute_price_instruction_too_high",
    ],
    [
      "a compute limit over 200,000 units",
      [limit(200_001), price(), transfer()],
      "invalid_exact_svm_payload_transaction_instructions_compute_limit_instruction_too_high",
    ],
    [
      "a 1.4M-unit compute limit",
      [limit(1_400_000), price(), transfer()],
      "invalid_exact_svm_payload_transaction_instructions_compute_limit_instruction_too_high",
    ],
    ["no transfer at index 2", [limit(), price(), memo("x"), transfer()], "invalid_exact_svm_payload_no_transfer_instruction"],
    [
      "a system transfer after the payment",
      exact([SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: payTo, lamports: 1 })]),
      "invalid_exact_svm_payload_unknown_optional_instruction",
    ],
    ["another amount", [limit(), price(), transfer({ amount: 49_999n })], "invalid_exact_svm_payload_amount_mismatch"],
    ["another mint", [limit(), price(), transfer({ mintKey: Keypair.generate().publicKey })], "invalid_exact_svm_payload_mint_mismatch"],
    ["other decimals", [limit(), price(), transfer({ decimals: 9 })], "invalid_exact_svm_payload_mint_mismatch"],
    ["another payee", [limit(), price(), transfer({ to: Keypair.generate().publicKey })], "invalid_exact_svm_payload_recipient_mismatch"],
    [
      "a source that is not the payer's token account",
      [limit(), price(), transfer({ source: Keypair.generate().publicKey })],
      "invalid_exact_svm_payload_transaction",
    ],
  ] as const)("refuses %s", (_name, instructions, reason) => {
    const checked = checkTransferTransaction(wire([...instructions]), terms, "x402-exact");
    expect(checked).toMatchObject({ ok: false, reason });
  });

  it("requires the seller's memo exactly once when the requirement names one", () => {
    const withMemo = { ...terms, memo: "order-17" };
    expect(checkTransferTransaction(wire(exact([memo("order-17")])), withMemo, "x402-exact").ok).toBe(true);
    expect(checkTransferTransaction(wire(exact([memo("order-18")])), withMemo, "x402-exact")).toMatchObject({
      reason: "invalid_exact_svm_payload_memo_mismatch",
    });
    expect(checkTransferTransaction(wire(exact()), withMemo, "x402-exact")).toMatchObject({
      reason: "invalid_exact_svm_payload_memo_count",
    });
  });
});

describe("the fee payer co-signs only a transfer it takes no part in", () => {
  it("refuses another fee payer", () => {
    const other = Keypair.generate();
    const checked = checkTransferTransaction(wire(exact(), { fee: other.publicKey }), terms, "x402-exact");
    expect(checked).toMatchObject({ ok: false, reason: "invalid_exact_svm_fee_payer_mismatch" });
  });

  it("refuses the fee payer as the transfer's authority or in any instruction", () => {
    const asAuthority = [limit(), price(), transfer({ authority: feePayer.publicKey })];
    const signedByFeePayer = wire(asAuthority, { signers: [feePayer] });
    expect(checkTransferTransaction(signedByFeePayer, terms, "x402-exact")).toMatchObject({
      reason: "invalid_exact_svm_payload_transaction_fee_payer_transferring_funds",
    });
    const inMemo = { ...memo("x"), keys: [{ pubkey: feePayer.publicKey, isSigner: false, isWritable: false }] } as TransactionInstruction;
    expect(checkTransferTransaction(wire(exact([inMemo])), terms, "x402-exact")).toMatchObject({
      reason: "invalid_exact_svm_payload_transaction_fee_payer_transferring_funds",
    });
  });

  it("refuses a payer signature that does not verify, and a third signer", () => {
    const bytes = Buffer.from(wire(exact()), "base64");
    const transaction = VersionedTransaction.deserialize(bytes);
    transaction.signatures[1] = new Uint8Array(64).fill(7);
    const forged = Buffer.from(transaction.serialize()).toString("base64");
    expect(checkTransferTransaction(forged, terms, "x402-exact")).toMatchObject({ reason: "invalid_exact_svm_payload_signature_invalid" });

    const third = Keypair.generate();
    const extraSigner = { ...memo("x"), keys: [{ pubkey: third.publicKey, isSigner: true, isWritable: false }] } as TransactionInstruction;
    const checked = checkTransferTransaction(wire(exact([extraSigner]), { signers: [payer, third] }), terms, "x402-exact");
    expect(checked).toMatchObject({ reason: "invalid_exact_svm_payload_excessive_signers" });
  });

  it("refuses what is not a wire transaction", () => {
    expect(checkTransferTransaction("not base64!", terms, "x402-exact")).toMatchObject({
      reason: "invalid_exact_svm_payload_transaction_could_not_be_decoded",
    });
    expect(checkTransferTransaction(Buffer.from("hello").toString("base64"), terms, "x402-exact")).toMatchObject({ ok: false });
  });
});

describe("the MPP charge layout", () => {
  it("accepts price before limit (the @solana/mpp client's order) and refuses it as x402 exact", () => {
    const charge = wire([price(), limit(200_000), transfer()]);
    expect(checkTransferTransaction(charge, terms, "mpp-charge")).toMatchObject({ ok: true, payer: payer.publicKey.toBase58() });
    expect(checkTransferTransaction(charge, terms, "x402-exact")).toMatchObject({ ok: false });
  });

  it.each([
    [
      "a compute limit over 200 000 units",
      [price(), limit(200_001), transfer()],
      "invalid_exact_svm_payload_transaction_instructions_compute_limit_instruction_too_high",
    ],
    ["two transfers", [price(), limit(), transfer(), transfer()], "invalid_exact_svm_payload_transaction_instructions_length"],
    ["no transfer", [price(), limit()], "invalid_exact_svm_payload_no_transfer_instruction"],
    [
      "a memo the charge did not ask for",
      [price(), limit(), transfer(), memo("x")],
      "invalid_exact_svm_payload_unknown_optional_instruction",
    ],
  ] as const)("refuses %s", (_name, instructions, reason) => {
    const signers = instructions.some((ix) => ix.keys.some((key) => key.pubkey.equals(payer.publicKey))) ? [payer] : [];
    expect(checkTransferTransaction(wire([...instructions], { signers }), terms, "mpp-charge")).toMatchObject({ ok: false, reason });
  });

  it("accepts the externalId memo when the charge names one", () => {
    const charge = wire([price(), limit(), transfer(), memo("inv-9")]);
    expect(checkTransferTransaction(charge, { ...terms, memo: "inv-9" }, "mpp-charge").ok).toBe(true);
  });
});
