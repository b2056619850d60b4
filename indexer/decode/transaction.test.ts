/**
 * The decoder as a pure function over normalized transactions built with the IDL coder (what the
 * program writes). The integration suite covers the same rules over real ledger transactions.
 */
import anchor, { BorshCoder } from "@coral-xyz/anchor";
import { Keypair } from "@solana/web3.js";
import { describe, expect, it } from "vitest";
import { EVENT_IX_TAG, eventAuthorityPda, PAYMENT_LEDGER_IDL, PAYMENT_LEDGER_PROGRAM_ID } from "../../programs/payment_ledger/ts/index.js";
import type { RawTransaction } from "../sources/source.js";
import { decodeSettlementTransfer, TOKEN_PROGRAM } from "./settlement.js";
import { decodeRawTransaction } from "./transaction.js";

const { BN } = anchor;
const coder = new BorshCoder(PAYMENT_LEDGER_IDL);
const programId = PAYMENT_LEDGER_PROGRAM_ID.toBase58();
const authority = eventAuthorityPda(PAYMENT_LEDGER_PROGRAM_ID).address.toBase58();
const key = (): string => Keypair.generate().publicKey.toBase58();
const payer = Keypair.generate().publicKey;
const payee = Keypair.generate().publicKey;

function encodeEvent(name: string, data: Record<string, unknown>): Uint8Array {
  const discriminator = PAYMENT_LEDGER_IDL.events?.find((event) => event.name === name)?.discriminator;
  if (discriminator === undefined) throw new Error(`no event ${name}`);
  return new Uint8Array(Buffer.concat([Buffer.from(discriminator), coder.types.encode(name, data)]));
}

const U64_MAX = 18_446_744_073_709_551_615n;
const payment = encodeEvent("PaymentRecorded", {
  payer,
  payee,
  payment_id: new BN(7),
  amount: new BN(U64_MAX.toString()),
  mint: Keypair.generate().publicKey,
  protocol: { Mpp: {} },
  rail: { Card: {} },
  endpoint_hash: Array.from({ length: 32 }, (_, i) => i),
  atomic: false,
  settlement_reference: null,
  parent: null,
  recorded_at: new BN(1_767_225_600),
  slot: new BN(42),
});

function transaction(overrides: Partial<RawTransaction> = {}): RawTransaction {
  return {
    signature: "sig",
    slot: 42n,
    blockTime: 1_767_225_600,
    indexInBlock: null,
    commitment: "confirmed",
    err: null,
    accountKeys: [key(), programId, authority],
    instructions: [{ programIdIndex: 1, accounts: [0], data: new Uint8Array([1]), stackHeight: 1 }],
    innerInstructions: [
      {
        index: 0,
        instructions: [{ programIdIndex: 1, accounts: [2], data: new Uint8Array([...EVENT_IX_TAG, ...payment]), stackHeight: 2 }],
      },
    ],
    logs: [`Program ${programId} invoke [1]`, `Program ${programId} success`],
    preTokenBalances: [],
    postTokenBalances: [],
    ...overrides,
  };
}

describe("decodeRawTransaction", () => {
  it("an emit_cpi event keeps a u64 amount exact as a decimal string", () => {
    const decoded = decodeRawTransaction(transaction(), PAYMENT_LEDGER_PROGRAM_ID);
    expect(decoded.outcome).toBe("indexed");
    expect(decoded.events).toHaveLength(1);
    expect(decoded.events[0]).toMatchObject({ instructionIndex: 0, innerIndex: 0, ordinal: 0, name: "PaymentRecorded" });
    expect(decoded.events[0]!.payload.amountUnits).toBe(U64_MAX.toString());
    expect(decoded.events[0]!.payload).toMatchObject({ protocol: "mpp", rail: "card", payer: payer.toBase58() });
  });

  it("an event instruction not signed by the event authority is not an event", () => {
    const forged = transaction({ accountKeys: [key(), programId, key()] });
    expect(decodeRawTransaction(forged, PAYMENT_LEDGER_PROGRAM_ID).outcome).toBe("no_events");
  });

  it("an event authority loaded from a lookup table (after the static keys) signs events like a static one", () => {
    // Static keys: fee payer, program; loaded readonly: the event authority (index 2).
    const decoded = decodeRawTransaction(
      transaction({ accountKeys: [key(), programId, authority], unresolvedKeys: 0 }),
      PAYMENT_LEDGER_PROGRAM_ID,
    );
    expect(decoded.outcome).toBe("indexed");
  });

  it("a transaction whose looked-up keys the source did not report is unresolved, never no_events", () => {
    // The event instruction points at index 2, a key the node left out.
    const blind = transaction({ accountKeys: [key(), programId], unresolvedKeys: 1 });
    const decoded = decodeRawTransaction(blind, PAYMENT_LEDGER_PROGRAM_ID);
    expect(decoded).toMatchObject({ outcome: "unresolved", events: [] });
    expect(decoded.detail).toMatch(/1 account key/);
    // Even when the program itself is not among the keys it has (a CPI through a looked-up id).
    expect(decodeRawTransaction(transaction({ accountKeys: [key()], unresolvedKeys: 2 }), PAYMENT_LEDGER_PROGRAM_ID).outcome).toBe(
      "unresolved",
    );
    // A failed transaction stays failed: it has no events whatever its keys.
    expect(
      decodeRawTransaction(transaction({ err: { InstructionError: [0, "Custom"] }, unresolvedKeys: 1 }), PAYMENT_LEDGER_PROGRAM_ID).outcome,
    ).toBe("failed");
  });

  it("without inner instructions, events are read from Program data logs of the program itself", () => {
    const data = `Program data: ${Buffer.from(payment).toString("base64")}`;
    const decoded = decodeRawTransaction(
      transaction({
        innerInstructions: [],
        logs: [`Program ${programId} invoke [1]`, data, `Program ${programId} success`],
      }),
      PAYMENT_LEDGER_PROGRAM_ID,
    );
    expect(decoded.outcome).toBe("indexed");
    expect(decoded.events[0]).toMatchObject({ innerIndex: -1, source: "logs" });
  });

  it("a Program data line printed by another program is ignored", () => {
    const other = key();
    const data = `Program data: ${Buffer.from(payment).toString("base64")}`;
    const decoded = decodeRawTransaction(
      transaction({
        innerInstructions: [],
        logs: [
          `Program ${programId} invoke [1]`,
          `Program ${other} invoke [2]`,
          data,
          `Program ${other} success`,
          `Program ${programId} success`,
        ],
      }),
      PAYMENT_LEDGER_PROGRAM_ID,
    );
    expect(decoded.events).toEqual([]);
  });

  it("events read from truncated logs are flagged as truncated", () => {
    const data = `Program data: ${Buffer.from(payment).toString("base64")}`;
    const decoded = decodeRawTransaction(
      transaction({ innerInstructions: [], logs: [`Program ${programId} invoke [1]`, data, "Log truncated"] }),
      PAYMENT_LEDGER_PROGRAM_ID,
    );
    expect(decoded.outcome).toBe("truncated");
    expect(decoded.events).toHaveLength(1);
  });

  it("failed and foreign transactions yield no events and say why", () => {
    expect(decodeRawTransaction(transaction({ err: { InstructionError: [0, { Custom: 6010 }] } }), PAYMENT_LEDGER_PROGRAM_ID).outcome).toBe(
      "failed",
    );
    expect(decodeRawTransaction(transaction({ accountKeys: [key(), key(), authority] }), PAYMENT_LEDGER_PROGRAM_ID).outcome).toBe(
      "foreign",
    );
  });

  it("a channel settlement stores its ChannelSettled event and one PaymentRecorded per charge", () => {
    const channel = Keypair.generate().publicKey;
    const settled = encodeEvent("ChannelSettled", {
      channel,
      payer,
      payee,
      settler: payee,
      cumulative_amount: new BN(U64_MAX.toString()),
      delta: new BN(300),
      sequence: new BN(9),
      charge_count: 2,
      charges_digest: Array.from({ length: 32 }, (_, i) => 255 - i),
      slot: new BN(42),
    });
    const closed = encodeEvent("ChannelClosed", {
      channel,
      payer,
      payee,
      closed_by: payer,
      deposit: new BN(1_000),
      settled: new BN(300),
      refunded: new BN(700),
      sequence: new BN(9),
      forced: false,
      slot: new BN(42),
    });
    const event = (data: Uint8Array) => ({
      programIdIndex: 1,
      accounts: [2],
      data: new Uint8Array([...EVENT_IX_TAG, ...data]),
      stackHeight: 2,
    });
    const decoded = decodeRawTransaction(
      transaction({ innerInstructions: [{ index: 0, instructions: [event(settled), event(payment), event(payment), event(closed)] }] }),
      PAYMENT_LEDGER_PROGRAM_ID,
    );
    expect(decoded.outcome).toBe("indexed");
    expect(decoded.events.map((e) => e.name)).toEqual(["ChannelSettled", "PaymentRecorded", "PaymentRecorded", "ChannelClosed"]);
    expect(decoded.events.map((e) => e.ordinal)).toEqual([0, 1, 2, 3]);
    expect(decoded.events[0]!.payload).toMatchObject({
      channel: channel.toBase58(),
      cumulativeUnits: U64_MAX.toString(),
      deltaUnits: "300",
      sequence: "9",
      chargeCount: 2,
      chargesDigest: Buffer.from(Array.from({ length: 32 }, (_, i) => 255 - i)).toString("hex"),
    });
    expect(decoded.events[3]!.payload).toMatchObject({ settledUnits: "300", refundedUnits: "700", forced: false });
    expect(Buffer.from(decoded.events[0]!.raw).equals(Buffer.from(settled))).toBe(true);
  });

  it("any byte string as event data is skipped and counted, never thrown", () => {
    for (let length = 0; length < 200; length += 7) {
      const body = Uint8Array.from({ length }, (_, i) => (i * 37 + length) & 0xff);
      const tx = transaction({
        innerInstructions: [
          {
            index: 0,
            instructions: [{ programIdIndex: 1, accounts: [2], data: new Uint8Array([...EVENT_IX_TAG, ...body]), stackHeight: 2 }],
          },
        ],
      });
      const decoded = decodeRawTransaction(tx, PAYMENT_LEDGER_PROGRAM_ID);
      expect(["malformed", "unknown_event", "indexed"]).toContain(decoded.outcome);
    }
  });
});

describe("decodeSettlementTransfer", () => {
  it("reads amount, mint, authority and owners of a TransferChecked (SPL Token tag 12)", () => {
    const keys = [key(), key(), key(), key(), TOKEN_PROGRAM];
    const data = Buffer.alloc(10);
    data[0] = 12;
    data.writeBigUInt64LE(400_000n, 1);
    data[9] = 6;
    const tx = transaction({
      accountKeys: keys,
      instructions: [{ programIdIndex: 4, accounts: [1, 2, 3, 0], data: new Uint8Array(data), stackHeight: 1 }],
      innerInstructions: [],
      preTokenBalances: [
        { accountIndex: 1, mint: keys[2]!, owner: "payer", programId: TOKEN_PROGRAM, amount: 1n, decimals: 6 },
        { accountIndex: 3, mint: keys[2]!, owner: "payee", programId: TOKEN_PROGRAM, amount: 1n, decimals: 6 },
      ],
    });
    expect(decodeSettlementTransfer(tx).transfer).toEqual({
      sourceOwner: "payer",
      destinationOwner: "payee",
      authority: keys[0],
      mint: keys[2],
      amountUnits: 400_000n,
      decimals: 6,
    });
  });
});
