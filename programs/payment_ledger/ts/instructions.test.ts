import { BorshCoder } from "@coral-xyz/anchor";
import { TOKEN_PROGRAM_ID } from "@solana/spl-token";
import { getAssociatedTokenAddressSync } from "@solana/spl-token";
import { Keypair, SystemProgram, SYSVAR_INSTRUCTIONS_PUBKEY, type TransactionInstruction } from "@solana/web3.js";
import { describe, expect, it } from "vitest";
import { endpointHash } from "./endpoint-hash.js";
import { PAYMENT_LEDGER_IDL, PAYMENT_LEDGER_PROGRAM_ID } from "./idl.js";
import {
  associatedTransferAccounts,
  channelAccounts,
  closeChannelInstruction,
  forceCloseChannelInstruction,
  initializeInstruction,
  openChannelInstruction,
  openInvocationInstruction,
  recordAttestedPaymentInstruction,
  recordPaymentInstruction,
  refundChannelInstruction,
  settleChannelInstruction,
  settlementComputeUnits,
  topUpChannelInstruction,
  U64_MAX,
} from "./instructions.js";
import { channelPda, configPda, escrowPda, eventAuthorityPda, invocationPda, payerStatePda } from "./pda.js";

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
      programId: PAYMENT_LEDGER_PROGRAM_ID,
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
    expect(keys[3]).toBe(configPda(PAYMENT_LEDGER_PROGRAM_ID).address.toBase58());
    expect(keys[4]).toBe(payerStatePda(payer, PAYMENT_LEDGER_PROGRAM_ID).address.toBase58());
    expect(keys[9]).toBe(TOKEN_PROGRAM_ID.toBase58());
    expect(keys[10]).toBe(SystemProgram.programId.toBase58());
    expect(keys[11]).toBe(eventAuthorityPda(PAYMENT_LEDGER_PROGRAM_ID).address.toBase58());
    expect(keys[12]).toBe(PAYMENT_LEDGER_PROGRAM_ID.toBase58());
  });

  it("record_payment without a transfer or invocation passes the program id for each absent account", async () => {
    const instruction = await recordPaymentInstruction({
      programId: PAYMENT_LEDGER_PROGRAM_ID,
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
    await expect(
      recordPaymentInstruction({
        programId: PAYMENT_LEDGER_PROGRAM_ID,
        ...base,
        amountUnits: U64_MAX + 1n,
        endpointHash: new Uint8Array(32),
      }),
    ).rejects.toThrow(RangeError);
    await expect(
      recordPaymentInstruction({ programId: PAYMENT_LEDGER_PROGRAM_ID, ...base, amountUnits: -1n, endpointHash: new Uint8Array(32) }),
    ).rejects.toThrow(RangeError);
    await expect(
      recordPaymentInstruction({ programId: PAYMENT_LEDGER_PROGRAM_ID, ...base, endpointHash: new Uint8Array(31) }),
    ).rejects.toThrow(RangeError);
  });

  it("record_attested_payment is signed by the authority alone and always names its settlement", async () => {
    const reference = Uint8Array.from({ length: 64 }, (_, i) => 255 - i);
    const hash = endpointHash("api.example.com/v1/report");
    const instruction = await recordAttestedPaymentInstruction({
      programId: PAYMENT_LEDGER_PROGRAM_ID,
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
    expect(instruction.keys[4]?.pubkey.equals(payerStatePda(payer, PAYMENT_LEDGER_PROGRAM_ID).address)).toBe(true);
    const base = { authority, payer, payee, paymentId: 1n, amountUnits: 1n, protocol: "x402", endpointHash: hash } as const;
    await expect(
      recordAttestedPaymentInstruction({ programId: PAYMENT_LEDGER_PROGRAM_ID, ...base, settlementReference: new Uint8Array(63) }),
    ).rejects.toThrow(RangeError);
  });

  it("open_invocation derives the invocation account from the parent signature and sub-agent", async () => {
    const parentSignature = Uint8Array.from({ length: 64 }, (_, i) => i);
    const instruction = await openInvocationInstruction({
      programId: PAYMENT_LEDGER_PROGRAM_ID,
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
    expect(instruction.keys[3]?.pubkey.equals(invocationPda(parentSignature, payee, PAYMENT_LEDGER_PROGRAM_ID).address)).toBe(true);
  });

  it("initialize names the treasury and the settlement mint", async () => {
    const treasury = Keypair.generate().publicKey;
    const instruction = await initializeInstruction({ programId: PAYMENT_LEDGER_PROGRAM_ID, authority, settlementMint: mint, treasury });
    const decoded = coder.instruction.decode(instruction.data);
    expect(decoded?.name).toBe("initialize");
    expect(String((decoded!.data as { args: { treasury: unknown } }).args.treasury)).toBe(treasury.toBase58());
    expectIdlAccounts(instruction, "initialize");
  });
});

describe("channel instruction builders", () => {
  const channel = channelAccounts({ programId: PAYMENT_LEDGER_PROGRAM_ID, payer, payee, mint, channelId: new Uint8Array(32).fill(3) });
  const search = endpointHash("api.example.com/v1/search");
  const quote = endpointHash("api.example.com/v1/quote");
  type Decoded = Record<string, unknown>;
  const argsOf = (instruction: TransactionInstruction, name: string): Decoded => {
    const decoded = coder.instruction.decode(instruction.data);
    expect(decoded?.name).toBe(name);
    return decoded!.data as Decoded;
  };
  const keyNamed = (instruction: TransactionInstruction, name: string, account: string) => {
    const accounts = PAYMENT_LEDGER_IDL.instructions.find((candidate) => candidate.name === name)!.accounts as { name: string }[];
    return instruction.keys[accounts.findIndex((candidate) => candidate.name === account)]!.pubkey.toBase58();
  };

  it("the channel and its escrow are the program's PDAs", () => {
    expect(channel.channel.equals(channelPda(payer, payee, new Uint8Array(32).fill(3), PAYMENT_LEDGER_PROGRAM_ID).address)).toBe(true);
    expect(channel.escrow.equals(escrowPda(channel.channel, PAYMENT_LEDGER_PROGRAM_ID).address)).toBe(true);
    expect(channel.tokenProgram.equals(TOKEN_PROGRAM_ID)).toBe(true);
  });

  it("open_channel binds payer, payee, mint, deposit, expiry and delay, signed by authority and payer", async () => {
    const instruction = await openChannelInstruction({
      authority,
      channel,
      depositUnits: 9_007_199_254_740_993n,
      expiresAt: 1_767_229_200n,
      withdrawDelaySeconds: 600n,
      protocol: "mpp",
    });
    const { args } = argsOf(instruction, "open_channel") as { args: Decoded };
    expect(args.channel_id).toEqual(new Array(32).fill(3));
    expect([String(args.deposit), String(args.expires_at), String(args.withdraw_delay)]).toEqual(["9007199254740993", "1767229200", "600"]);
    expect(args.protocol).toEqual({ Mpp: {} });
    expectIdlAccounts(instruction, "open_channel");
    expect(keyNamed(instruction, "open_channel", "channel")).toBe(channel.channel.toBase58());
    expect(keyNamed(instruction, "open_channel", "escrow")).toBe(channel.escrow.toBase58());
    expect(keyNamed(instruction, "open_channel", "payer_token")).toBe(getAssociatedTokenAddressSync(mint, payer, true).toBase58());
    const signers = instruction.keys.filter((meta) => meta.isSigner).map((meta) => meta.pubkey.toBase58());
    expect(signers).toEqual([authority.toBase58(), payer.toBase58()]);
    const base = { authority, channel, expiresAt: 1n, withdrawDelaySeconds: 1n, protocol: "x402" } as const;
    await expect(openChannelInstruction({ ...base, depositUnits: U64_MAX + 1n })).rejects.toThrow(RangeError);
    await expect(openChannelInstruction({ ...base, depositUnits: 1n, expiresAt: 1n << 63n })).rejects.toThrow(RangeError);
    const shortId = { ...channel, channelId: new Uint8Array(31) };
    await expect(openChannelInstruction({ ...base, channel: shortId, depositUnits: 1n })).rejects.toThrow(RangeError);
  });

  it("settle_channel sends each endpoint hash once and reads the voucher signature from the instructions sysvar", async () => {
    const instruction = await settleChannelInstruction({
      settler: payee,
      channel,
      settlement: {
        cumulativeUnits: 600n,
        sequence: 3n,
        charges: [
          { paymentId: 7n, amountUnits: 100n, endpointHash: search },
          { paymentId: 8n, amountUnits: 200n, endpointHash: quote },
          { paymentId: 10n, amountUnits: 300n, endpointHash: search },
        ],
      },
    });
    const { args } = argsOf(instruction, "settle_channel") as { args: Decoded };
    expect([String(args.cumulative_amount), String(args.sequence)]).toEqual(["600", "3"]);
    expect(args.endpoints).toEqual([Array.from(search), Array.from(quote)]);
    const charges = (args.charges as Decoded[]).map((charge) => [String(charge.payment_id), String(charge.amount), charge.endpoint]);
    expect(charges).toEqual([
      ["7", "100", 0],
      ["8", "200", 1],
      ["10", "300", 0],
    ]);
    expectIdlAccounts(instruction, "settle_channel");
    expect(keyNamed(instruction, "settle_channel", "instructions")).toBe(SYSVAR_INSTRUCTIONS_PUBKEY.toBase58());
    expect(keyNamed(instruction, "settle_channel", "payee_token")).toBe(getAssociatedTokenAddressSync(mint, payee, true).toBase58());
    expect(keyNamed(instruction, "settle_channel", "invocation")).toBe(PAYMENT_LEDGER_PROGRAM_ID.toBase58());

    const tooMany = Array.from({ length: 257 }, (_, i) => ({
      paymentId: BigInt(i + 1),
      amountUnits: 1n,
      endpointHash: endpointHash(`api.example.com/v1/${i}`),
    }));
    await expect(
      settleChannelInstruction({ settler: payee, channel, settlement: { cumulativeUnits: 257n, sequence: 257n, charges: tooMany } }),
    ).rejects.toThrow(RangeError);
  });

  it("close_channel may carry a final settlement or none", async () => {
    const request = await closeChannelInstruction({ signer: payer, channel });
    expect((argsOf(request, "close_channel") as { final_settlement: unknown }).final_settlement).toBeNull();
    expectIdlAccounts(request, "close_channel");
    const final = await closeChannelInstruction({
      signer: payee,
      channel,
      finalSettlement: { cumulativeUnits: 5n, sequence: 1n, charges: [{ paymentId: 1n, amountUnits: 5n, endpointHash: quote }] },
    });
    const { final_settlement: settlement } = argsOf(final, "close_channel") as { final_settlement: Decoded };
    expect(String(settlement.cumulative_amount)).toBe("5");
  });

  it("top up, refund and force-close name the payer's token account and the rent payer", async () => {
    const topUp = await topUpChannelInstruction({ channel, amountUnits: 42n });
    expect(String((argsOf(topUp, "top_up_channel") as { amount: unknown }).amount)).toBe("42");
    expectIdlAccounts(topUp, "top_up_channel");
    const rentPayer = authority;
    for (const [build, name] of [
      [refundChannelInstruction, "refund_channel"],
      [forceCloseChannelInstruction, "force_close_channel"],
    ] as const) {
      const instruction = await build({ signer: payer, channel, rentPayer });
      argsOf(instruction, name);
      expectIdlAccounts(instruction, name);
      expect(keyNamed(instruction, name, "rent_payer")).toBe(rentPayer.toBase58());
      expect(keyNamed(instruction, name, "payer_token")).toBe(getAssociatedTokenAddressSync(mint, payer, true).toBase58());
      expect(keyNamed(instruction, name, "config")).toBe(configPda(PAYMENT_LEDGER_PROGRAM_ID).address.toBase58());
    }
  });

  it("a settlement's compute request covers the flat native charge per event", () => {
    expect(settlementComputeUnits(1)).toBeGreaterThan(60_255);
    expect(settlementComputeUnits(25)).toBeGreaterThan(540_255);
    expect(settlementComputeUnits(25)).toBeLessThanOrEqual(1_400_000);
  });
});
