/**
 * The binding drives a program deployed at any address: with a random program id, every
 * instruction names it as its program, every PDA it carries derives from it (and from nothing
 * else), optional accounts left out are encoded as it, and no key is the address the IDL declares.
 * Logs and errors are read for the given id only.
 */
import anchor, { BorshCoder } from "@coral-xyz/anchor";
import { Keypair, type PublicKey, type TransactionInstruction } from "@solana/web3.js";
import { describe, expect, it } from "vitest";
import { endpointHash } from "./endpoint-hash.js";
import { findLedgerError, ledgerErrorCode, ledgerErrorCodeFromLogs, ledgerErrorCodeFromTransactionError } from "./errors.js";
import { eventsFromLogs } from "./events.js";
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
  topUpChannelInstruction,
} from "./instructions.js";
import { channelPda, configPda, escrowPda, eventAuthorityPda, invocationPda, payerStatePda } from "./pda.js";

const { BN } = anchor;
const other = Keypair.generate().publicKey;
const authority = Keypair.generate().publicKey;
const payer = Keypair.generate().publicKey;
const payee = Keypair.generate().publicKey;
const subAgent = Keypair.generate().publicKey;
const mint = Keypair.generate().publicKey;
const parentSignature = Uint8Array.from({ length: 64 }, (_, i) => i + 1);
const channelId = Uint8Array.from({ length: 32 }, (_, i) => 200 - i);
const hash = endpointHash("api.example.com/v1/quote");

/** The account named `name` of instruction `ix` (IDL order). */
function account(instruction: TransactionInstruction, ix: string, name: string): PublicKey {
  const accounts = PAYMENT_LEDGER_IDL.instructions.find((candidate) => candidate.name === ix)!.accounts as { name: string }[];
  const index = accounts.findIndex((candidate) => candidate.name === name);
  expect(index, `${ix}.${name}`).toBeGreaterThanOrEqual(0);
  return instruction.keys[index]!.pubkey;
}

/** What every instruction of the program carries, checked against `other`. */
function expectAt(instruction: TransactionInstruction, ix: string): void {
  expect(instruction.programId.toBase58(), ix).toBe(other.toBase58());
  expect(account(instruction, ix, "program").toBase58(), ix).toBe(other.toBase58());
  expect(account(instruction, ix, "event_authority").toBase58(), ix).toBe(eventAuthorityPda(other).address.toBase58());
  const builtIn = PAYMENT_LEDGER_PROGRAM_ID.toBase58();
  const builtInPdas = new Set(
    [configPda(PAYMENT_LEDGER_PROGRAM_ID), eventAuthorityPda(PAYMENT_LEDGER_PROGRAM_ID)].map((p) => p.address.toBase58()),
  );
  for (const meta of instruction.keys) {
    expect(meta.pubkey.toBase58(), `${ix}: the built-in program id`).not.toBe(builtIn);
    expect(builtInPdas.has(meta.pubkey.toBase58()), `${ix}: a PDA of the built-in program`).toBe(false);
  }
}

describe("the binding at another program address", () => {
  const channel = channelAccounts({ programId: other, payer, payee, mint, channelId });
  const settlement = { cumulativeUnits: 5n, sequence: 1n, charges: [{ paymentId: 1n, amountUnits: 5n, endpointHash: hash }] };

  it("derives every PDA from the given program id", () => {
    expect(configPda(other).address.equals(configPda(PAYMENT_LEDGER_PROGRAM_ID).address)).toBe(false);
    expect(channel.programId.equals(other)).toBe(true);
    expect(channel.channel.toBase58()).toBe(channelPda(payer, payee, channelId, other).address.toBase58());
    expect(channel.escrow.toBase58()).toBe(escrowPda(channel.channel, other).address.toBase58());
    expect(channel.channel.equals(channelPda(payer, payee, channelId, PAYMENT_LEDGER_PROGRAM_ID).address)).toBe(false);
  });

  it("builds every instruction the gateway and init-cluster send for it", async () => {
    const initialize = await initializeInstruction({ programId: other, authority, settlementMint: mint, treasury: authority });
    expectAt(initialize, "initialize");
    expect(account(initialize, "initialize", "config").toBase58()).toBe(configPda(other).address.toBase58());

    // Without invocation or transfer: Anchor encodes each optional account left out as the program.
    const record = await recordPaymentInstruction({
      programId: other,
      authority,
      payer,
      payee,
      paymentId: 1n,
      amountUnits: 10n,
      protocol: "x402",
      rail: "card",
      endpointHash: hash,
    });
    expectAt(record, "record_payment");
    expect(account(record, "record_payment", "config").toBase58()).toBe(configPda(other).address.toBase58());
    expect(account(record, "record_payment", "payer_state").toBase58()).toBe(payerStatePda(payer, other).address.toBase58());
    for (const optional of ["invocation", "mint", "payer_token", "payee_token", "token_program"]) {
      expect(account(record, "record_payment", optional).toBase58(), optional).toBe(other.toBase58());
    }

    const invocation = invocationPda(parentSignature, subAgent, other).address;
    const atomic = await recordPaymentInstruction({
      programId: other,
      authority,
      payer,
      payee,
      paymentId: 2n,
      amountUnits: 10n,
      protocol: "mpp",
      rail: "stablecoin",
      endpointHash: hash,
      invocation,
      transfer: associatedTransferAccounts(payer, payee, mint),
    });
    expectAt(atomic, "record_payment");
    expect(account(atomic, "record_payment", "invocation").toBase58()).toBe(invocation.toBase58());

    const attested = await recordAttestedPaymentInstruction({
      programId: other,
      authority,
      payer,
      payee,
      paymentId: 3n,
      amountUnits: 10n,
      protocol: "x402",
      endpointHash: hash,
      settlementReference: parentSignature,
    });
    expectAt(attested, "record_attested_payment");
    expect(account(attested, "record_attested_payment", "payer_state").toBase58()).toBe(payerStatePda(payer, other).address.toBase58());

    const open = await openInvocationInstruction({
      programId: other,
      authority,
      invoker: payer,
      parentSignature,
      subAgent,
      budgetUnits: 100n,
    });
    expectAt(open, "open_invocation");
    expect(account(open, "open_invocation", "invocation").toBase58()).toBe(invocation.toBase58());

    const channelInstructions: [string, TransactionInstruction][] = [
      [
        "open_channel",
        await openChannelInstruction({
          authority,
          channel,
          depositUnits: 100n,
          expiresAt: 2_000_000_000n,
          withdrawDelaySeconds: 60n,
          protocol: "mpp",
        }),
      ],
      ["top_up_channel", await topUpChannelInstruction({ channel, amountUnits: 10n })],
      ["settle_channel", await settleChannelInstruction({ settler: payee, channel, settlement })],
      ["close_channel", await closeChannelInstruction({ signer: payee, channel, finalSettlement: settlement })],
      ["refund_channel", await refundChannelInstruction({ signer: payer, channel, rentPayer: authority })],
      ["force_close_channel", await forceCloseChannelInstruction({ signer: payer, channel, rentPayer: authority })],
    ];
    for (const [name, instruction] of channelInstructions) {
      expectAt(instruction, name);
      expect(account(instruction, name, "channel").toBase58(), name).toBe(channel.channel.toBase58());
      expect(account(instruction, name, "escrow").toBase58(), name).toBe(channel.escrow.toBase58());
      if (name !== "top_up_channel")
        expect(account(instruction, name, "config").toBase58(), name).toBe(configPda(other).address.toBase58());
    }
  });

  it("reads events and errors of the given program only", () => {
    const coder = new BorshCoder(PAYMENT_LEDGER_IDL);
    const discriminator = PAYMENT_LEDGER_IDL.events!.find((event) => event.name === "InvocationOpened")!.discriminator;
    const body = coder.types.encode("InvocationOpened", {
      invocation: Keypair.generate().publicKey,
      invoker: payer,
      sub_agent: subAgent,
      parent_signature: Array.from(parentSignature),
      budget: new BN(100),
      opened_at: new BN(1_767_225_600),
      slot: new BN(42),
    });
    const data = `Program data: ${Buffer.concat([Buffer.from(discriminator), body]).toString("base64")}`;
    const logs = (id: PublicKey) => [`Program ${id.toBase58()} invoke [1]`, data, `Program ${id.toBase58()} success`];
    expect(eventsFromLogs(logs(other), other).map((located) => located.event.name)).toEqual(["InvocationOpened"]);
    expect(eventsFromLogs(logs(PAYMENT_LEDGER_PROGRAM_ID), other)).toEqual([]);

    const code = ledgerErrorCode("InsufficientFunds");
    const failed = (id: PublicKey) => [`Program ${id.toBase58()} failed: custom program error: 0x${code.toString(16)}`];
    expect(ledgerErrorCodeFromLogs(failed(other), other)).toBe(code);
    expect(ledgerErrorCodeFromLogs(failed(PAYMENT_LEDGER_PROGRAM_ID), other)).toBeUndefined();
    expect(findLedgerError({ logs: failed(other) }, other)?.errorName).toBe("InsufficientFunds");
    const included = { InstructionError: [0, { Custom: code }] };
    expect(ledgerErrorCodeFromTransactionError(included, [other], other)).toBe(code);
    expect(ledgerErrorCodeFromTransactionError(included, [PAYMENT_LEDGER_PROGRAM_ID], other)).toBeUndefined();
  });
});
