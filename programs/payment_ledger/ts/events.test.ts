import anchor, { BorshCoder } from "@coral-xyz/anchor";
import {
  ComputeBudgetProgram,
  Keypair,
  PublicKey,
  Transaction,
  type TransactionError,
  type VersionedTransactionResponse,
} from "@solana/web3.js";
import bs58 from "bs58";
import { describe, expect, it } from "vitest";
import { endpointHash } from "./endpoint-hash.js";
import { decodeEventInstructionData, decodeTransactionEvents, EVENT_IX_TAG, eventsFromLogs, eventsNamed } from "./events.js";
import { PAYMENT_LEDGER_IDL, PAYMENT_LEDGER_PROGRAM_ID } from "./idl.js";
import { recordPaymentInstruction } from "./instructions.js";
import { eventAuthorityPda } from "./pda.js";

const { BN } = anchor;
const coder = new BorshCoder(PAYMENT_LEDGER_IDL);
const programId = PAYMENT_LEDGER_PROGRAM_ID;

const payer = Keypair.generate().publicKey;
const payee = Keypair.generate().publicKey;
const mint = Keypair.generate().publicKey;
const invocation = Keypair.generate().publicKey;
const parentSignature = Uint8Array.from({ length: 64 }, (_, i) => 255 - i);
const hash = endpointHash("api.example.com/v1/quote");

/** Discriminator + borsh body, built with the coder from the IDL (what the program writes). */
function encodeEvent(name: string, data: Record<string, unknown>): Buffer {
  const discriminator = PAYMENT_LEDGER_IDL.events?.find((event) => event.name === name)?.discriminator;
  if (discriminator === undefined) throw new Error(`no event ${name}`);
  return Buffer.concat([Buffer.from(discriminator), coder.types.encode(name, data)]);
}

/** The data of the `emit_cpi!` self-invocation: tag + event. */
function eventInstructionData(name: string, data: Record<string, unknown>): Buffer {
  return Buffer.concat([Buffer.from(EVENT_IX_TAG), encodeEvent(name, data)]);
}

const U64_NEAR_MAX = 18_446_744_073_709_551_615n;

const paymentRecorded = {
  payer,
  payee,
  payment_id: new BN(U64_NEAR_MAX.toString()),
  amount: new BN("9007199254740993"), // 2^53 + 1: exact only as bigint
  mint,
  protocol: { X402: {} },
  rail: { Stablecoin: {} },
  endpoint_hash: Array.from(hash),
  atomic: true,
  settlement_reference: null,
  parent: {
    invocation,
    parent_signature: Array.from(parentSignature),
    budget: new BN(5_000_000),
    spent: new BN(1_250_000),
  },
  recorded_at: new BN(1_767_225_600),
  slot: new BN(42),
};

/** A getTransaction (json) response for a transaction whose first instruction emitted `data`. */
async function confirmedTransaction(
  innerData: Buffer[],
  options: { err?: unknown; logs?: string[]; withInner?: boolean } = {},
): Promise<VersionedTransactionResponse> {
  const authority = Keypair.generate();
  const instruction = await recordPaymentInstruction({
    programId: PAYMENT_LEDGER_PROGRAM_ID,
    authority: authority.publicKey,
    payer,
    payee,
    paymentId: 1n,
    amountUnits: 1n,
    protocol: "mpp",
    rail: "card",
    endpointHash: hash,
  });
  const tx = new Transaction({ feePayer: authority.publicKey, recentBlockhash: PublicKey.default.toBase58() });
  tx.add(ComputeBudgetProgram.setComputeUnitLimit({ units: 200_000 }), instruction);
  const message = tx.compileMessage();
  const keys = message.accountKeys;
  const programIndex = keys.findIndex((key) => key.equals(programId));
  const eventAuthorityIndex = keys.findIndex((key) => key.equals(eventAuthorityPda(PAYMENT_LEDGER_PROGRAM_ID).address));
  const innerInstructions = [
    {
      index: 1,
      instructions: innerData.map((data) => ({
        programIdIndex: programIndex,
        accounts: [eventAuthorityIndex],
        data: bs58.encode(data),
      })),
    },
  ];
  return {
    slot: 77,
    blockTime: 1_767_225_600,
    version: "legacy",
    transaction: { message, signatures: [bs58.encode(new Uint8Array(64).fill(7))] },
    meta: {
      err: (options.err ?? null) as TransactionError | null,
      fee: 5000,
      preBalances: [],
      postBalances: [],
      innerInstructions: options.withInner === false ? null : innerInstructions,
      logMessages: options.logs ?? [],
      preTokenBalances: [],
      postTokenBalances: [],
    },
  };
}

describe("event decoding", () => {
  it("an emit_cpi! instruction decodes back to the event the program encoded", () => {
    const event = decodeEventInstructionData(eventInstructionData("PaymentRecorded", paymentRecorded));
    expect(event?.name).toBe("PaymentRecorded");
    if (event?.name !== "PaymentRecorded") return;
    expect(event.data.payer.equals(payer)).toBe(true);
    expect(event.data.payee.equals(payee)).toBe(true);
    expect(event.data.paymentId).toBe(U64_NEAR_MAX);
    expect(event.data.amountUnits).toBe(9_007_199_254_740_993n);
    expect(event.data.protocol).toBe("x402");
    expect(event.data.rail).toBe("stablecoin");
    expect(event.data.atomic).toBe(true);
    expect(Buffer.from(event.data.endpointHash).equals(Buffer.from(hash))).toBe(true);
    expect(event.data.settlementReference).toBeNull();
    expect(event.data.parent?.invocation.equals(invocation)).toBe(true);
    expect(Buffer.from(event.data.parent?.parentSignature ?? []).equals(Buffer.from(parentSignature))).toBe(true);
    expect(event.data.parent?.budgetUnits).toBe(5_000_000n);
    expect(event.data.parent?.spentUnits).toBe(1_250_000n);
    expect(event.data.recordedAtSeconds).toBe(1_767_225_600);
    expect(event.data.slot).toBe(42n);
  });

  it("data without the event tag is not an event", () => {
    const body = encodeEvent("PaymentRecorded", paymentRecorded);
    expect(decodeEventInstructionData(body)).toBeNull();
    expect(decodeEventInstructionData(new Uint8Array(4))).toBeNull();
  });

  it("every event the IDL declares decodes", () => {
    const channel = Keypair.generate().publicKey;
    const digest = Array.from({ length: 32 }, (_, i) => i);
    // One sample per IDL event: a new event in the program fails here until it has a decoder.
    const samples: Record<string, [Record<string, unknown>, Record<string, unknown>]> = {
      PaymentRecorded: [paymentRecorded, { paymentId: U64_NEAR_MAX }],
      InvocationOpened: [
        {
          invocation,
          invoker: payer,
          sub_agent: payee,
          parent_signature: Array.from(parentSignature),
          budget: new BN(3),
          opened_at: new BN(-1),
          slot: new BN(9),
        },
        { budgetUnits: 3n, openedAtSeconds: -1, slot: 9n },
      ],
      ConfigInitialized: [{ authority: payer, settlement_mint: mint, treasury: payee, decimals: 6 }, { decimals: 6 }],
      ChannelOpened: [
        {
          channel,
          payer,
          payee,
          mint,
          channel_id: digest,
          deposit: new BN("9007199254740993"),
          protocol: { Mpp: {} },
          invocation: null,
          expires_at: new BN(1_767_229_200),
          withdraw_delay: new BN(600),
          opened_at: new BN(1_767_225_600),
          slot: new BN(5),
        },
        {
          depositUnits: 9_007_199_254_740_993n,
          protocol: "mpp",
          invocation: null,
          expiresAtSeconds: 1_767_229_200,
          withdrawDelaySeconds: 600,
        },
      ],
      ChannelToppedUp: [
        { channel, amount: new BN(1), deposit: new BN(11), slot: new BN(6) },
        { amountUnits: 1n, depositUnits: 11n, slot: 6n },
      ],
      ChannelSettled: [
        {
          channel,
          payer,
          payee,
          settler: payee,
          cumulative_amount: new BN(2_600),
          delta: new BN(2_500),
          sequence: new BN(2),
          charge_count: 1,
          charges_digest: digest,
          slot: new BN(7),
        },
        { cumulativeUnits: 2_600n, deltaUnits: 2_500n, sequence: 2n, chargeCount: 1 },
      ],
      ChannelCloseRequested: [
        { channel, requested_by: payer, close_requested_at: new BN(100), refundable_at: new BN(700), slot: new BN(8) },
        { closeRequestedAtSeconds: 100, refundableAtSeconds: 700 },
      ],
      ChannelClosed: [
        {
          channel,
          payer,
          payee,
          closed_by: payer,
          deposit: new BN(11),
          settled: new BN(4),
          refunded: new BN(7),
          sequence: new BN(2),
          forced: true,
          slot: new BN(9),
        },
        { depositUnits: 11n, settledUnits: 4n, refundedUnits: 7n, sequence: 2n, forced: true },
      ],
    };
    expect(Object.keys(samples).sort()).toEqual((PAYMENT_LEDGER_IDL.events ?? []).map((event) => event.name).sort());
    for (const [name, [data, expected]] of Object.entries(samples)) {
      expect(decodeEventInstructionData(eventInstructionData(name, data)), name).toMatchObject({ name, data: expected });
    }
    const settled = decodeEventInstructionData(eventInstructionData("ChannelSettled", samples.ChannelSettled![0]));
    if (settled?.name !== "ChannelSettled") throw new Error("not decoded");
    expect(settled.data.channel.equals(channel)).toBe(true);
    expect(Array.from(settled.data.chargesDigest)).toEqual(digest);
    const opened = decodeEventInstructionData(
      eventInstructionData("ChannelOpened", { ...samples.ChannelOpened![0], invocation, protocol: { X402: {} } }),
    );
    if (opened?.name !== "ChannelOpened") throw new Error("not decoded");
    expect(opened.data.invocation?.equals(invocation)).toBe(true);
    expect(opened.data.protocol).toBe("x402");
  });

  it("events are read from the program's inner instructions with their position", async () => {
    const tx = await confirmedTransaction([
      Buffer.from([1, 2, 3]), // an inner instruction to the program that is not an event
      eventInstructionData("PaymentRecorded", paymentRecorded),
    ]);
    const decoded = decodeTransactionEvents(tx, PAYMENT_LEDGER_PROGRAM_ID);
    expect(decoded.source).toBe("inner-instructions");
    expect(decoded.failed).toBe(false);
    expect(decoded.slot).toBe(77);
    expect(decoded.signature).toBe(bs58.encode(new Uint8Array(64).fill(7)));
    expect(decoded.events).toHaveLength(1);
    expect(decoded.events[0]).toMatchObject({ instructionIndex: 1, innerIndex: 1 });
    expect(eventsNamed(decoded, "PaymentRecorded")[0]?.amountUnits).toBe(9_007_199_254_740_993n);
    expect(eventsNamed(decoded, "InvocationOpened")).toEqual([]);
  });

  it("a failed transaction yields no events", async () => {
    const tx = await confirmedTransaction([eventInstructionData("PaymentRecorded", paymentRecorded)], {
      err: { InstructionError: [1, { Custom: 6003 }] },
    });
    const decoded = decodeTransactionEvents(tx, PAYMENT_LEDGER_PROGRAM_ID);
    expect(decoded.failed).toBe(true);
    expect(decoded.events).toEqual([]);
  });

  it("without inner instructions, Program data lines of the program itself are read and truncation is flagged", async () => {
    const id = programId.toBase58();
    const other = Keypair.generate().publicKey.toBase58();
    const data = encodeEvent("PaymentRecorded", paymentRecorded).toString("base64");
    const logs = [
      "Program ComputeBudget111111111111111111111111111111 invoke [1]",
      "Program ComputeBudget111111111111111111111111111111 success",
      `Program ${id} invoke [1]`,
      `Program ${other} invoke [2]`,
      `Program data: ${data}`, // printed by a program it called: not ours
      `Program ${other} success`,
      `Program data: ${data}`,
      `Program ${id} consumed 1000 of 200000 compute units`,
      `Program ${id} success`,
      "Log truncated",
    ];
    const decoded = decodeTransactionEvents(await confirmedTransaction([], { withInner: false, logs }), PAYMENT_LEDGER_PROGRAM_ID);
    expect(decoded.source).toBe("logs");
    expect(decoded.logTruncated).toBe(true);
    expect(decoded.events).toHaveLength(1);
    expect(decoded.events[0]).toMatchObject({ instructionIndex: 1, innerIndex: null });
    expect(eventsFromLogs(logs.slice(0, 2), PAYMENT_LEDGER_PROGRAM_ID)).toEqual([]);
  });
});
