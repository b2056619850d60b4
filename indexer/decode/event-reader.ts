/**
 * The hot-path event decoder: discriminator + Borsh body → the stored JSON payload (payload.ts),
 * read field by field in each event's layout order (programs/payment_ledger/ts/events.ts, the
 * IDL). No intermediate objects (BN, PublicKey), no base64 round trip.
 *
 * The IDL coder stays the definition: `event-reader.test.ts` checks that this reader and
 * `eventPayload(decodeEvent…)` give the same payload for random events of every layout, and the
 * same failure for truncated and corrupted ones. Like the coder, bytes after the last field are
 * ignored.
 */
import { PAYMENT_LEDGER_IDL, PROTOCOLS, RAILS, type LedgerEventName } from "../../programs/payment_ledger/ts/index.js";
import { BorshReader } from "./borsh-reader.js";
import type { EventPayload } from "./payload.js";

export interface ReadEvent {
  readonly name: LedgerEventName;
  readonly payload: EventPayload;
}

type Layout = (r: BorshReader) => EventPayload;

const LAYOUTS: Record<LedgerEventName, Layout> = {
  PaymentRecorded: (r) => ({
    payer: r.pubkey(),
    payee: r.pubkey(),
    paymentId: r.u64String(),
    amountUnits: r.u64String(),
    mint: r.pubkey(),
    protocol: r.variant(PROTOCOLS),
    rail: r.variant(RAILS),
    endpointHash: r.hex(32),
    atomic: r.bool(),
    settlementReference: r.some() ? r.base58(64) : null,
    parent: r.some()
      ? { invocation: r.pubkey(), parentSignature: r.base58(64), budgetUnits: r.u64String(), spentUnits: r.u64String() }
      : null,
    recordedAtSeconds: r.i64Number(),
    slot: r.u64String(),
  }),
  InvocationOpened: (r) => ({
    invocation: r.pubkey(),
    invoker: r.pubkey(),
    subAgent: r.pubkey(),
    parentSignature: r.base58(64),
    budgetUnits: r.u64String(),
    openedAtSeconds: r.i64Number(),
    slot: r.u64String(),
  }),
  ConfigInitialized: (r) => ({
    authority: r.pubkey(),
    settlementMint: r.pubkey(),
    treasury: r.pubkey(),
    decimals: r.u8(),
  }),
  ChannelOpened: (r) => ({
    channel: r.pubkey(),
    payer: r.pubkey(),
    payee: r.pubkey(),
    mint: r.pubkey(),
    channelId: r.hex(32),
    depositUnits: r.u64String(),
    protocol: r.variant(PROTOCOLS),
    invocation: r.some() ? r.pubkey() : null,
    expiresAtSeconds: r.i64Number(),
    withdrawDelaySeconds: r.i64Number(),
    openedAtSeconds: r.i64Number(),
    slot: r.u64String(),
  }),
  ChannelToppedUp: (r) => ({
    channel: r.pubkey(),
    amountUnits: r.u64String(),
    depositUnits: r.u64String(),
    slot: r.u64String(),
  }),
  ChannelSettled: (r) => ({
    channel: r.pubkey(),
    payer: r.pubkey(),
    payee: r.pubkey(),
    settler: r.pubkey(),
    cumulativeUnits: r.u64String(),
    deltaUnits: r.u64String(),
    sequence: r.u64String(),
    chargeCount: r.u32(),
    chargesDigest: r.hex(32),
    slot: r.u64String(),
  }),
  ChannelCloseRequested: (r) => ({
    channel: r.pubkey(),
    requestedBy: r.pubkey(),
    closeRequestedAtSeconds: r.i64Number(),
    refundableAtSeconds: r.i64Number(),
    slot: r.u64String(),
  }),
  ChannelClosed: (r) => ({
    channel: r.pubkey(),
    payer: r.pubkey(),
    payee: r.pubkey(),
    closedBy: r.pubkey(),
    depositUnits: r.u64String(),
    settledUnits: r.u64String(),
    refundedUnits: r.u64String(),
    sequence: r.u64String(),
    forced: r.bool(),
    slot: r.u64String(),
  }),
};

const DISCRIMINATOR_BYTES = 8;

/** Discriminator (8 bytes, read as a little-endian u64) → event name, from the IDL. */
const NAMES = new Map<bigint, LedgerEventName>(
  (PAYMENT_LEDGER_IDL.events ?? []).map((event) => [Buffer.from(event.discriminator).readBigUInt64LE(0), event.name as LedgerEventName]),
);
for (const name of NAMES.values()) {
  if (!(name in LAYOUTS)) throw new Error(`event-reader: the IDL names an event without a layout here: ${name}`);
}

/**
 * Reads one event (discriminator + body, as after the `emit_cpi!` tag or in a `Program data:`
 * line). Null when the discriminator is not one of ours; throws when the body does not decode.
 */
export function readEvent(data: Uint8Array): ReadEvent | null {
  if (data.length < DISCRIMINATOR_BYTES) return null;
  const discriminator = Buffer.from(data.buffer, data.byteOffset, DISCRIMINATOR_BYTES).readBigUInt64LE(0);
  const name = NAMES.get(discriminator);
  if (name === undefined) return null;
  return { name, payload: LAYOUTS[name](new BorshReader(data, DISCRIMINATOR_BYTES)) };
}
