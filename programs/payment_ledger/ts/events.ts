/**
 * Decoding of the program's events from a confirmed transaction.
 *
 * The program emits with `emit_cpi!`: a self-invocation (an inner instruction to the program)
 * whose data is the 8-byte event tag, the event discriminator and the borsh body. Inner
 * instructions survive log truncation and only the program can sign them, so they are the
 * source of truth. `Program data:` log lines (Anchor's `emit!`) are read only when a response
 * carries no inner instructions, and such a result says whether the logs were truncated.
 */
import { BorshCoder } from "@coral-xyz/anchor";
import {
  type CompiledInnerInstruction,
  type MessageAccountKeys,
  PublicKey,
  type TransactionResponse,
  type VersionedTransactionResponse,
} from "@solana/web3.js";
import bs58 from "bs58";
import { fromAnchorEnum, type Protocol, PROTOCOLS, type Rail, RAILS } from "./enums.js";
import { PAYMENT_LEDGER_IDL } from "./idl.js";

/** `sha256("anchor:event")[..8]`, little-endian: the first bytes of every event instruction. */
export const EVENT_IX_TAG: Uint8Array = Uint8Array.from([0xe4, 0x45, 0xa5, 0x2e, 0x51, 0xcb, 0x9a, 0x1d]);

/** The raw IDL (not Anchor's camel-cased copy), so event names match the Rust program. */
const coder = new BorshCoder(PAYMENT_LEDGER_IDL);

export interface ParentLink {
  readonly invocation: PublicKey;
  readonly parentSignature: Uint8Array;
  readonly budgetUnits: bigint;
  /** Invocation total after this payment. */
  readonly spentUnits: bigint;
}

export interface PaymentRecorded {
  readonly payer: PublicKey;
  readonly payee: PublicKey;
  readonly paymentId: bigint;
  readonly amountUnits: bigint;
  readonly mint: PublicKey;
  readonly protocol: Protocol;
  readonly rail: Rail;
  readonly endpointHash: Uint8Array;
  /** The instruction moved the tokens itself (TransferChecked CPI). */
  readonly atomic: boolean;
  readonly settlementReference: Uint8Array | null;
  readonly parent: ParentLink | null;
  readonly recordedAtSeconds: number;
  readonly slot: bigint;
}

export interface InvocationOpened {
  readonly invocation: PublicKey;
  readonly invoker: PublicKey;
  readonly subAgent: PublicKey;
  readonly parentSignature: Uint8Array;
  readonly budgetUnits: bigint;
  readonly openedAtSeconds: number;
  readonly slot: bigint;
}

export interface ConfigInitialized {
  readonly authority: PublicKey;
  readonly settlementMint: PublicKey;
  readonly treasury: PublicKey;
  readonly decimals: number;
}

export interface ChannelOpened {
  readonly channel: PublicKey;
  readonly payer: PublicKey;
  readonly payee: PublicKey;
  readonly mint: PublicKey;
  readonly channelId: Uint8Array;
  readonly depositUnits: bigint;
  readonly protocol: Protocol;
  readonly invocation: PublicKey | null;
  readonly expiresAtSeconds: number;
  readonly withdrawDelaySeconds: number;
  readonly openedAtSeconds: number;
  readonly slot: bigint;
}

export interface ChannelToppedUp {
  readonly channel: PublicKey;
  readonly amountUnits: bigint;
  /** Total escrowed after the top up. */
  readonly depositUnits: bigint;
  readonly slot: bigint;
}

/** A voucher settled; its charges follow as `PaymentRecorded` events of the same instruction. */
export interface ChannelSettled {
  readonly channel: PublicKey;
  readonly payer: PublicKey;
  readonly payee: PublicKey;
  readonly settler: PublicKey;
  readonly cumulativeUnits: bigint;
  readonly deltaUnits: bigint;
  readonly sequence: bigint;
  readonly chargeCount: number;
  readonly chargesDigest: Uint8Array;
  readonly slot: bigint;
}

export interface ChannelCloseRequested {
  readonly channel: PublicKey;
  readonly requestedBy: PublicKey;
  readonly closeRequestedAtSeconds: number;
  readonly refundableAtSeconds: number;
  readonly slot: bigint;
}

export interface ChannelClosed {
  readonly channel: PublicKey;
  readonly payer: PublicKey;
  readonly payee: PublicKey;
  readonly closedBy: PublicKey;
  readonly depositUnits: bigint;
  readonly settledUnits: bigint;
  readonly refundedUnits: bigint;
  readonly sequence: bigint;
  /** Closed by the payer after expiry, without a close request. */
  readonly forced: boolean;
  readonly slot: bigint;
}

export type LedgerEvent =
  | { readonly name: "PaymentRecorded"; readonly data: PaymentRecorded }
  | { readonly name: "InvocationOpened"; readonly data: InvocationOpened }
  | { readonly name: "ConfigInitialized"; readonly data: ConfigInitialized }
  | { readonly name: "ChannelOpened"; readonly data: ChannelOpened }
  | { readonly name: "ChannelToppedUp"; readonly data: ChannelToppedUp }
  | { readonly name: "ChannelSettled"; readonly data: ChannelSettled }
  | { readonly name: "ChannelCloseRequested"; readonly data: ChannelCloseRequested }
  | { readonly name: "ChannelClosed"; readonly data: ChannelClosed };

export type LedgerEventName = LedgerEvent["name"];

/** An event and where it sits in its transaction: (signature, instructionIndex, innerIndex) is unique. */
export interface LocatedEvent {
  readonly event: LedgerEvent;
  /** Index of the top-level instruction that emitted it. */
  readonly instructionIndex: number;
  /** Position among that instruction's inner instructions; null when read from logs. */
  readonly innerIndex: number | null;
}

export interface TransactionEvents {
  readonly signature: string;
  readonly slot: number;
  readonly blockTime: number | null;
  /** Failed transactions changed nothing, so they yield no events. */
  readonly failed: boolean;
  readonly events: readonly LocatedEvent[];
  readonly source: "inner-instructions" | "logs";
  /** The validator cut the logs short; events read from logs may be missing. */
  readonly logTruncated: boolean;
}

// ---- decoding one event ----------------------------------------------------------------------

type Raw = Record<string, unknown>;

function field(raw: Raw, name: string): unknown {
  if (!(name in raw)) {
    throw new TypeError(`event field ${name} missing`);
  }
  return raw[name];
}

function pubkey(raw: Raw, name: string): PublicKey {
  const value = field(raw, name);
  if (!(value instanceof PublicKey)) throw new TypeError(`event field ${name} is not a public key`);
  return value;
}

/** u64/i64 come out of the coder as BN; anything with an exact decimal `toString` converts. */
function integer(raw: Raw, name: string): bigint {
  const value = field(raw, name);
  if (value === null || typeof value !== "object" || !("toString" in value)) {
    throw new TypeError(`event field ${name} is not an integer`);
  }
  return BigInt(String(value));
}

function bytes(raw: Raw, name: string, length: number): Uint8Array {
  return toBytes(field(raw, name), name, length);
}

function toBytes(value: unknown, name: string, length: number): Uint8Array {
  if (!Array.isArray(value) && !(value instanceof Uint8Array)) throw new TypeError(`event field ${name} is not bytes`);
  if (value.length !== length) throw new TypeError(`event field ${name} has ${value.length} bytes, expected ${length}`);
  return Uint8Array.from(value as ArrayLike<number>);
}

function struct(value: unknown, name: string): Raw {
  if (value === null || typeof value !== "object") throw new TypeError(`event field ${name} is not a struct`);
  return value as Raw;
}

function toPaymentRecorded(raw: Raw): PaymentRecorded {
  const reference = field(raw, "settlement_reference");
  const parent = field(raw, "parent");
  return {
    payer: pubkey(raw, "payer"),
    payee: pubkey(raw, "payee"),
    paymentId: integer(raw, "payment_id"),
    amountUnits: integer(raw, "amount"),
    mint: pubkey(raw, "mint"),
    protocol: fromAnchorEnum(field(raw, "protocol"), PROTOCOLS, "protocol"),
    rail: fromAnchorEnum(field(raw, "rail"), RAILS, "rail"),
    endpointHash: bytes(raw, "endpoint_hash", 32),
    atomic: field(raw, "atomic") === true,
    settlementReference: reference === null ? null : toBytes(reference, "settlement_reference", 64),
    parent: parent === null ? null : toParentLink(struct(parent, "parent")),
    recordedAtSeconds: Number(integer(raw, "recorded_at")),
    slot: integer(raw, "slot"),
  };
}

function toParentLink(raw: Raw): ParentLink {
  return {
    invocation: pubkey(raw, "invocation"),
    parentSignature: bytes(raw, "parent_signature", 64),
    budgetUnits: integer(raw, "budget"),
    spentUnits: integer(raw, "spent"),
  };
}

function toInvocationOpened(raw: Raw): InvocationOpened {
  return {
    invocation: pubkey(raw, "invocation"),
    invoker: pubkey(raw, "invoker"),
    subAgent: pubkey(raw, "sub_agent"),
    parentSignature: bytes(raw, "parent_signature", 64),
    budgetUnits: integer(raw, "budget"),
    openedAtSeconds: Number(integer(raw, "opened_at")),
    slot: integer(raw, "slot"),
  };
}

function toConfigInitialized(raw: Raw): ConfigInitialized {
  return {
    authority: pubkey(raw, "authority"),
    settlementMint: pubkey(raw, "settlement_mint"),
    treasury: pubkey(raw, "treasury"),
    decimals: Number(field(raw, "decimals")),
  };
}

function optionalPubkey(raw: Raw, name: string): PublicKey | null {
  const value = field(raw, name);
  if (value === null) return null;
  if (!(value instanceof PublicKey)) throw new TypeError(`event field ${name} is not a public key`);
  return value;
}

function boolean(raw: Raw, name: string): boolean {
  const value = field(raw, name);
  if (typeof value !== "boolean") throw new TypeError(`event field ${name} is not a boolean`);
  return value;
}

function toChannelOpened(raw: Raw): ChannelOpened {
  return {
    channel: pubkey(raw, "channel"),
    payer: pubkey(raw, "payer"),
    payee: pubkey(raw, "payee"),
    mint: pubkey(raw, "mint"),
    channelId: bytes(raw, "channel_id", 32),
    depositUnits: integer(raw, "deposit"),
    protocol: fromAnchorEnum(field(raw, "protocol"), PROTOCOLS, "protocol"),
    invocation: optionalPubkey(raw, "invocation"),
    expiresAtSeconds: Number(integer(raw, "expires_at")),
    withdrawDelaySeconds: Number(integer(raw, "withdraw_delay")),
    openedAtSeconds: Number(integer(raw, "opened_at")),
    slot: integer(raw, "slot"),
  };
}

function toChannelToppedUp(raw: Raw): ChannelToppedUp {
  return {
    channel: pubkey(raw, "channel"),
    amountUnits: integer(raw, "amount"),
    depositUnits: integer(raw, "deposit"),
    slot: integer(raw, "slot"),
  };
}

function toChannelSettled(raw: Raw): ChannelSettled {
  return {
    channel: pubkey(raw, "channel"),
    payer: pubkey(raw, "payer"),
    payee: pubkey(raw, "payee"),
    settler: pubkey(raw, "settler"),
    cumulativeUnits: integer(raw, "cumulative_amount"),
    deltaUnits: integer(raw, "delta"),
    sequence: integer(raw, "sequence"),
    chargeCount: Number(field(raw, "charge_count")),
    chargesDigest: bytes(raw, "charges_digest", 32),
    slot: integer(raw, "slot"),
  };
}

function toChannelCloseRequested(raw: Raw): ChannelCloseRequested {
  return {
    channel: pubkey(raw, "channel"),
    requestedBy: pubkey(raw, "requested_by"),
    closeRequestedAtSeconds: Number(integer(raw, "close_requested_at")),
    refundableAtSeconds: Number(integer(raw, "refundable_at")),
    slot: integer(raw, "slot"),
  };
}

function toChannelClosed(raw: Raw): ChannelClosed {
  return {
    channel: pubkey(raw, "channel"),
    payer: pubkey(raw, "payer"),
    payee: pubkey(raw, "payee"),
    closedBy: pubkey(raw, "closed_by"),
    depositUnits: integer(raw, "deposit"),
    settledUnits: integer(raw, "settled"),
    refundedUnits: integer(raw, "refunded"),
    sequence: integer(raw, "sequence"),
    forced: boolean(raw, "forced"),
    slot: integer(raw, "slot"),
  };
}

/** Decodes a discriminator + borsh body (base64), as in a `Program data:` line. Null if not ours. */
export function decodeEventBase64(base64: string): LedgerEvent | null {
  const decoded = coder.events.decode(base64);
  if (decoded === null) return null;
  const raw = struct(decoded.data, decoded.name);
  switch (decoded.name) {
    case "PaymentRecorded":
      return { name: "PaymentRecorded", data: toPaymentRecorded(raw) };
    case "InvocationOpened":
      return { name: "InvocationOpened", data: toInvocationOpened(raw) };
    case "ConfigInitialized":
      return { name: "ConfigInitialized", data: toConfigInitialized(raw) };
    case "ChannelOpened":
      return { name: "ChannelOpened", data: toChannelOpened(raw) };
    case "ChannelToppedUp":
      return { name: "ChannelToppedUp", data: toChannelToppedUp(raw) };
    case "ChannelSettled":
      return { name: "ChannelSettled", data: toChannelSettled(raw) };
    case "ChannelCloseRequested":
      return { name: "ChannelCloseRequested", data: toChannelCloseRequested(raw) };
    case "ChannelClosed":
      return { name: "ChannelClosed", data: toChannelClosed(raw) };
    default:
      return null;
  }
}

function startsWith(data: Uint8Array, prefix: Uint8Array): boolean {
  return data.length >= prefix.length && prefix.every((byte, i) => data[i] === byte);
}

/** Decodes the data of an `emit_cpi!` instruction (tag + discriminator + body). Null if not an event. */
export function decodeEventInstructionData(data: Uint8Array): LedgerEvent | null {
  if (!startsWith(data, EVENT_IX_TAG)) return null;
  return decodeEventBase64(Buffer.from(data.subarray(EVENT_IX_TAG.length)).toString("base64"));
}

// ---- decoding a transaction ------------------------------------------------------------------

type ConfirmedTransaction = VersionedTransactionResponse | TransactionResponse;

function accountKeys(tx: ConfirmedTransaction): MessageAccountKeys {
  const message = tx.transaction.message;
  if (message.version === "legacy") return message.getAccountKeys();
  return message.getAccountKeys({ accountKeysFromLookups: tx.meta?.loadedAddresses ?? undefined });
}

function eventsFromInnerInstructions(
  inner: readonly CompiledInnerInstruction[],
  keys: MessageAccountKeys,
  programId: PublicKey,
): LocatedEvent[] {
  const events: LocatedEvent[] = [];
  for (const group of inner) {
    group.instructions.forEach((instruction, innerIndex) => {
      if (!keys.get(instruction.programIdIndex)?.equals(programId)) return;
      const event = decodeEventInstructionData(bs58.decode(instruction.data));
      if (event !== null) events.push({ event, instructionIndex: group.index, innerIndex });
    });
  }
  return events;
}

const INVOKE = /^Program (\S+) invoke \[(\d+)\]$/;
const EXIT = /^Program (\S+) (success|failed)/;
const DATA = "Program data: ";
export const LOG_TRUNCATED = "Log truncated";

/** One `Program data:` line: the top-level instruction it belongs to and its first field. */
export interface ProgramDataLine {
  readonly instructionIndex: number;
  readonly base64: string;
}

/**
 * `Program data:` lines printed while `programId` itself is executing (not a program it called,
 * nor one that called it). Tracks the invocation stack the way the runtime prints it.
 */
export function programDataLines(logs: readonly string[], programId: string): ProgramDataLine[] {
  const stack: string[] = [];
  const lines: ProgramDataLine[] = [];
  let instructionIndex = -1;
  for (const line of logs) {
    const invoke = INVOKE.exec(line);
    if (invoke !== null) {
      if (invoke[2] === "1") instructionIndex += 1;
      stack.push(invoke[1]!);
      continue;
    }
    if (EXIT.test(line)) {
      stack.pop();
      continue;
    }
    if (!line.startsWith(DATA) || stack.at(-1) !== programId) continue;
    // Anchor's emit! writes one base64 field; take the first and ignore any others.
    lines.push({ instructionIndex, base64: line.slice(DATA.length).split(" ")[0] ?? "" });
  }
  return lines;
}

/** The events the program logged with `emit!` (see `programDataLines`). */
export function eventsFromLogs(logs: readonly string[], programId: PublicKey): LocatedEvent[] {
  const events: LocatedEvent[] = [];
  for (const { instructionIndex, base64 } of programDataLines(logs, programId.toBase58())) {
    const event = decodeEventBase64(base64);
    if (event !== null) events.push({ event, instructionIndex, innerIndex: null });
  }
  return events;
}

/** Every event the program emitted in a `getTransaction` response (json encoding). */
export function decodeTransactionEvents(tx: ConfirmedTransaction, programId: PublicKey): TransactionEvents {
  const signature = tx.transaction.signatures[0] ?? "";
  const logs = tx.meta?.logMessages ?? [];
  const common = {
    signature,
    slot: tx.slot,
    blockTime: tx.blockTime ?? null,
    logTruncated: logs.some((line) => line.includes(LOG_TRUNCATED)),
  };
  const failed = tx.meta === null || tx.meta.err !== null;
  if (failed) return { ...common, failed, events: [], source: "inner-instructions" };
  const inner = tx.meta?.innerInstructions;
  if (inner !== null && inner !== undefined) {
    const events = eventsFromInnerInstructions(inner, accountKeys(tx), programId);
    if (events.length > 0 || !logs.some((line) => line.startsWith(DATA))) {
      return { ...common, failed, events, source: "inner-instructions" };
    }
  }
  return { ...common, failed, events: eventsFromLogs(logs, programId), source: "logs" };
}

type EventData<N extends LedgerEventName> = Extract<LedgerEvent, { name: N }>["data"];

/** The events of one kind, in transaction order. */
export function eventsNamed<N extends LedgerEventName>(events: TransactionEvents, name: N): EventData<N>[] {
  const found: EventData<N>[] = [];
  for (const { event } of events.events) {
    if (event.name === name) found.push(event.data as EventData<N>);
  }
  return found;
}
