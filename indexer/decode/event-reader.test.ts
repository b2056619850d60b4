/**
 * The hand-written event reader against the definition, the IDL coder: random events of every
 * layout (seeded, so a failure replays) encoded by the coder must read back to the payload the
 * coder's own decode gives, and damaged bytes must fail or agree the same way.
 */
import anchor, { BorshCoder } from "@coral-xyz/anchor";
import { PublicKey } from "@solana/web3.js";
import { describe, expect, it } from "vitest";
import {
  decodeEventInstructionData,
  EVENT_IX_TAG,
  type LedgerEventName,
  PAYMENT_LEDGER_IDL,
} from "../../programs/payment_ledger/ts/index.js";
import { readEvent } from "./event-reader.js";
import { eventPayload } from "./payload.js";
import { mulberry32 } from "../../test/support/random.js";

const { BN } = anchor;
const coder = new BorshCoder(PAYMENT_LEDGER_IDL);
const EVENTS_PER_LAYOUT = 400;

class Random {
  constructor(readonly next: () => number) {}
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  bytes(n: number): number[] {
    return Array.from({ length: n }, () => this.int(256));
  }
  /** Edges (0, 2^32, 2^53, max) as often as anywhere else in the range. */
  u64(): InstanceType<typeof BN> {
    const edges = [0n, 1n, 2n ** 32n - 1n, 2n ** 32n, 2n ** 53n - 1n, 2n ** 53n, 2n ** 53n + 1n, 2n ** 64n - 1n];
    const value = this.int(3) === 0 ? edges[this.int(edges.length)]! : BigInt(`0x${Buffer.from(this.bytes(8)).toString("hex")}`);
    return new BN(value.toString());
  }
  i64(): InstanceType<typeof BN> {
    const value = BigInt.asIntN(64, BigInt(this.u64().toString()));
    return new BN(value.toString());
  }
  key(): PublicKey {
    return new PublicKey(Uint8Array.from(this.bytes(32)));
  }
  flag(): boolean {
    return this.int(2) === 1;
  }
  protocol(): Record<string, Record<string, never>> {
    return this.flag() ? { X402: {} } : { Mpp: {} };
  }
}

const EVENT_FIELDS: Record<LedgerEventName, (r: Random) => Record<string, unknown>> = {
  PaymentRecorded: (r) => ({
    payer: r.key(),
    payee: r.key(),
    payment_id: r.u64(),
    amount: r.u64(),
    mint: r.key(),
    protocol: r.protocol(),
    rail: [{ Stablecoin: {} }, { Card: {} }, { Other: {} }][r.int(3)],
    endpoint_hash: r.bytes(32),
    atomic: r.flag(),
    settlement_reference: r.flag() ? r.bytes(64) : null,
    parent: r.flag() ? { invocation: r.key(), parent_signature: r.bytes(64), budget: r.u64(), spent: r.u64() } : null,
    recorded_at: r.i64(),
    slot: r.u64(),
  }),
  InvocationOpened: (r) => ({
    invocation: r.key(),
    invoker: r.key(),
    sub_agent: r.key(),
    parent_signature: r.bytes(64),
    budget: r.u64(),
    opened_at: r.i64(),
    slot: r.u64(),
  }),
  ConfigInitialized: (r) => ({ authority: r.key(), settlement_mint: r.key(), treasury: r.key(), decimals: r.int(256) }),
  ChannelOpened: (r) => ({
    channel: r.key(),
    payer: r.key(),
    payee: r.key(),
    mint: r.key(),
    channel_id: r.bytes(32),
    deposit: r.u64(),
    protocol: r.protocol(),
    invocation: r.flag() ? r.key() : null,
    expires_at: r.i64(),
    withdraw_delay: r.i64(),
    opened_at: r.i64(),
    slot: r.u64(),
  }),
  ChannelToppedUp: (r) => ({ channel: r.key(), amount: r.u64(), deposit: r.u64(), slot: r.u64() }),
  ChannelSettled: (r) => ({
    channel: r.key(),
    payer: r.key(),
    payee: r.key(),
    settler: r.key(),
    cumulative_amount: r.u64(),
    delta: r.u64(),
    sequence: r.u64(),
    charge_count: r.int(2 ** 32),
    charges_digest: r.bytes(32),
    slot: r.u64(),
  }),
  ChannelCloseRequested: (r) => ({
    channel: r.key(),
    requested_by: r.key(),
    close_requested_at: r.i64(),
    refundable_at: r.i64(),
    slot: r.u64(),
  }),
  ChannelClosed: (r) => ({
    channel: r.key(),
    payer: r.key(),
    payee: r.key(),
    closed_by: r.key(),
    deposit: r.u64(),
    settled: r.u64(),
    refunded: r.u64(),
    sequence: r.u64(),
    forced: r.flag(),
    slot: r.u64(),
  }),
};

function encode(name: LedgerEventName, fields: Record<string, unknown>): Uint8Array {
  const discriminator = PAYMENT_LEDGER_IDL.events!.find((event) => event.name === name)!.discriminator;
  return new Uint8Array(Buffer.concat([Buffer.from(discriminator), coder.types.encode(name, fields)]));
}

type Outcome = { readonly name: string; readonly payload: unknown } | null | "throws";

function byCoder(data: Uint8Array): Outcome {
  try {
    const event = decodeEventInstructionData(Uint8Array.from([...EVENT_IX_TAG, ...data]));
    return event === null ? null : { name: event.name, payload: eventPayload(event) };
  } catch {
    return "throws";
  }
}

function byReader(data: Uint8Array): Outcome {
  try {
    return readEvent(data);
  } catch {
    return "throws";
  }
}

const NAMES = Object.keys(EVENT_FIELDS) as LedgerEventName[];

describe("the hand-written event reader", () => {
  it("covers every event the IDL declares", () => {
    expect(new Set(NAMES)).toEqual(new Set(PAYMENT_LEDGER_IDL.events!.map((event) => event.name)));
  });

  for (const [index, name] of NAMES.entries()) {
    it(`reads random ${name} events to the payload the IDL coder gives`, () => {
      const random = new Random(mulberry32(0x5eed + index));
      for (let i = 0; i < EVENTS_PER_LAYOUT; i += 1) {
        const data = encode(name, EVENT_FIELDS[name](random));
        const expected = byCoder(data);
        expect(expected).not.toBe("throws");
        expect(byReader(data)).toEqual(expected);
      }
    });
  }

  it("fails on every truncated event the coder was given whole", () => {
    const random = new Random(mulberry32(0x7a11));
    for (let i = 0; i < 400; i += 1) {
      const name = NAMES[random.int(NAMES.length)]!;
      const data = encode(name, EVENT_FIELDS[name](random));
      const cut = data.subarray(0, random.int(data.length));
      expect(byReader(cut)).toBe(cut.length < 8 ? null : "throws");
    }
  });

  it("agrees with the coder on events with one byte corrupted (bad tags fail in both)", () => {
    const random = new Random(mulberry32(0xbad));
    let failures = 0;
    for (let i = 0; i < 2_000; i += 1) {
      const name = NAMES[random.int(NAMES.length)]!;
      const data = encode(name, EVENT_FIELDS[name](random));
      const at = 8 + random.int(data.length - 8);
      data[at] = random.int(3) === 0 ? 2 + random.int(254) : random.int(256);
      const expected = byCoder(data);
      if (expected === "throws") failures += 1;
      expect(byReader(data)).toEqual(expected);
    }
    // Some corruptions must have hit a tag (bool, option, enum), or this test proves little.
    expect(failures).toBeGreaterThan(0);
  });

  it("returns null for a discriminator that is not one of ours", () => {
    const data = encode("ChannelToppedUp", EVENT_FIELDS.ChannelToppedUp(new Random(mulberry32(1))));
    data[0] = data[0]! ^ 0xff;
    expect(byCoder(data)).toBeNull();
    expect(readEvent(data)).toBeNull();
  });
});
