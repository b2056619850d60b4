import { BorshCoder } from "@coral-xyz/anchor";
import { TOKEN_PROGRAM_ID } from "@solana/spl-token";
import { Keypair, SystemProgram, type TransactionInstruction } from "@solana/web3.js";
import { describe, expect, it } from "vitest";
import { endpointHash } from "./endpoint-hash.js";
import { PAYMENT_LEDGER_IDL, PAYMENT_LEDGER_PROGRAM_ID } from "./idl.js";
import {
  associatedTransferAccounts,
  initializeInstruction,
  openInvocationInstruction,
  recordAttestedPaymentInstruction,
  recordPaymentInstruction,
  U64_MAX,
} from "./instructions.js";
import { configPda, eventAuthorityPda, invocationPda, payerStatePda } from "./pda.js";

const coder = new BorshCoder(PAYMENT_LEDGER_IDL);
const authority = Keypair.generate().publicKey;
const payer = Keypair.generate().publicKey;
const payee = Keypair.generate().publicKey;
const mint = Keypair.generate().publicKey;

/** Accounts in IDL order with the flags the IDL declares, so a reordering in Rust shows up here. */
function expectIdlAccounts(instruction: TransactionInstruction, name: string): void {
  const idlInstruction = PAYMENT_LEDGER_IDL.instructions.find((candidate) => candidate.name === name);
  const idlAccounts = (idlInstruction?.accounts ?? []) as { signer?: boolean; writable?: boolean; optional?: boolean }[];
  expect(instruction.keys).toHaveLength(idlAccounts.length);
  instruction.keys.forEach((meta, i) => {
    const declared = idlAccounts[i]!;
    if (declared.optional === true && meta.pubkey.equals(PAYMENT_LEDGER_PROGRAM_ID)) return;
    expect(meta.isSigner, `${name} account ${i} signer`).toBe(declared.signer === true);
    expect(meta.isWritable, `${name} account ${i} writable`).toBe(declared.writable === true);
  });
}

describe("instruction builders", () => {
  it("record_payment encodes its arguments exactly as the IDL declares them", async () => {
    const hash = endpointHash("api.example.com/v1/quote");
    const instruction = await recordPaymentInstruction({
      authority,
      payer,
      payee,
      paymentId: U64_MAX,
      amountUnits: 9_007_199_254_740_993n,
      protocol: "x402",
      rail: "stablecoin",
      endpointHash: hash,
      transfer: associatedTransferAccounts(payer, payee, mint),
    });
    expect(instruction.programId.equals(PAYMENT_LEDGER_PROGRAM_ID)).toBe(true);
    const decoded = coder.instruction.decode(instruction.data);
    expect(decoded?.name).toBe("record_payment");
    const args = (decoded!.data as { args: Record<string, unknown> }).args;
    expect(String(args.payment_id)).toBe(U64_MAX.toString());
    expect(String(args.amount)).toBe("9007199254740993");
    expect(args.protocol).toEqual({ X402: {} });
    expect(args.rail).toEqual({ Stablecoin: {} });
    expect(args.endpoint_hash).toEqual(Array.from(hash));
    expect(args.settlement_reference).toBeNull();
    expectIdlAccounts(instruction, "record_payment");
    const keys = instruction.keys.map((meta) => meta.pubkey.toBase58());
    expect(keys[3]).toBe(configPda().address.toBase58());
    expect(keys[4]).toBe(payerStatePda(payer).address.toBase58());
    expect(keys[9]).toBe(TOKEN_PROGRAM_ID.toBase58());
    expect(keys[10]).toBe(SystemProgram.programId.toBase58());
    expect(keys[11]).toBe(eventAuthorityPda().address.toBase58());
    expect(keys[12]).toBe(PAYMENT_LEDGER_PROGRAM_ID.toBase58());
  });

  it("record_payment without a transfer or invocation passes the program id for each absent account", async () => {
    const instruction = await recordPaymentInstruction({
      authority,
      payer,
      payee,
      paymentId: 1n,
      amountUnits: 1n,
      protocol: "mpp",
      rail: "card",
      endpointHash: new Uint8Array(32),
      settlementReference: new Uint8Array(64).fill(9),
    });
    const optional = instruction.keys.slice(5, 10);
    expect(optional.every((meta) => meta.pubkey.equals(PAYMENT_LEDGER_PROGRAM_ID))).toBe(true);
    const args = (coder.instruction.decode(instruction.data)!.data as { args: Record<string, unknown> }).args;
    expect(args.settlement_reference).toEqual(new Array(64).fill(9));
  });

  it("amounts outside u64 and hashes of the wrong size are refused before encoding", async () => {
    const base = { authority, payer, payee, paymentId: 1n, amountUnits: 1n, protocol: "x402", rail: "card" } as const;
    await expect(recordPaymentInstruction({ ...base, amountUnits: U64_MAX + 1n, endpointHash: new Uint8Array(32) })).rejects.toThrow(
      RangeError,
    );
    await expect(recordPaymentInstruction({ ...base, amountUnits: -1n, endpointHash: new Uint8Array(32) })).rejects.toThrow(RangeError);
    await expect(recordPaymentInstruction({ ...base, endpointHash: new Uint8Array(31) })).rejects.toThrow(RangeError);
  });

  it("record_attested_payment is signed by the authority alone and always names its settlement", async () => {
    const reference = Uint8Array.from({ length: 64 }, (_, i) => 255 - i);
    const hash = endpointHash("api.example.com/v1/report");
    const instruction = await recordAttestedPaymentInstruction({
      authority,
      payer,
      payee,
      paymentId: 7n,
      amountUnits: 50_000n,
      protocol: "mpp",
      endpointHash: hash,
      settlementReference: reference,
    });
    const decoded = coder.instruction.decode(instruction.data);
    expect(decoded?.name).toBe("record_attested_payment");
    const args = (decoded!.data as { args: Record<string, unknown> }).args;
    expect([String(args.payment_id), String(args.amount)]).toEqual(["7", "50000"]);
    expect(args.protocol).toEqual({ Mpp: {} });
    expect(args.endpoint_hash).toEqual(Array.from(hash));
    expect(args.settlement_reference).toEqual(Array.from(reference));
    expectIdlAccounts(instruction, "record_attested_payment");
    const signers = instruction.keys.filter((meta) => meta.isSigner).map((meta) => meta.pubkey.toBase58());
    expect(signers).toEqual([authority.toBase58()]);
    expect(instruction.keys[1]?.pubkey.equals(payer)).toBe(true);
    expect(instruction.keys[4]?.pubkey.equals(payerStatePda(payer).address)).toBe(true);
    const base = { authority, payer, payee, paymentId: 1n, amountUnits: 1n, protocol: "x402", endpointHash: hash } as const;
    await expect(recordAttestedPaymentInstruction({ ...base, settlementReference: new Uint8Array(63) })).rejects.toThrow(RangeError);
  });

  it("open_invocation derives the invocation account from the parent signature and sub-agent", async () => {
    const parentSignature = Uint8Array.from({ length: 64 }, (_, i) => i);
    const instruction = await openInvocationInstruction({
      authority,
      invoker: payer,
      parentSignature,
      subAgent: payee,
      budgetUnits: 5_000_000n,
    });
    const decoded = coder.instruction.decode(instruction.data);
    expect(decoded?.name).toBe("open_invocation");
    const args = (decoded!.data as { args: Record<string, unknown> }).args;
    expect(String(args.budget)).toBe("5000000");
    expect(args.parent_signature).toEqual(Array.from(parentSignature));
    expectIdlAccounts(instruction, "open_invocation");
    expect(instruction.keys[3]?.pubkey.equals(invocationPda(parentSignature, payee).address)).toBe(true);
  });

  it("initialize names the treasury and the settlement mint", async () => {
    const treasury = Keypair.generate().publicKey;
    const instruction = await initializeInstruction({ authority, settlementMint: mint, treasury });
    const decoded = coder.instruction.decode(instruction.data);
    expect(decoded?.name).toBe("initialize");
    expect(String((decoded!.data as { args: { treasury: unknown } }).args.treasury)).toBe(treasury.toBase58());
    expectIdlAccounts(instruction, "initialize");
  });
});
