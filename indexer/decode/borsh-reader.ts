/**
 * A cursor over a Borsh-encoded buffer, reading exactly the primitive types our event layouts use
 * (programs/payment_ledger/ts/events.ts), straight into their stored JSON forms (payload.ts):
 * integers as decimal strings or numbers, keys and signatures base58, hashes hex.
 *
 * Reading past the end throws a RangeError and an invalid bool / option / enum tag a TypeError,
 * the failures the IDL coder throws for the same bytes; the caller turns either into `malformed`.
 */
import bs58 from "bs58";

const TWO_POW_32 = 4_294_967_296;
/** Above this a u64's high word no longer fits a double exactly (2^53 / 2^32). */
const EXACT_HIGH_WORD = 0x20_0000;

/**
 * Payers, payees, mints and invocations repeat from one event to the next; base58 of 32 bytes is
 * the dearest step of a decode, so recent keys are remembered. Bounded: cleared when full.
 */
const BASE58_CACHE_ENTRIES = 8_192;
const base58Cache = new Map<string, string>();

export class BorshReader {
  private readonly buffer: Buffer;
  private offset: number;

  constructor(data: Uint8Array, offset = 0) {
    this.buffer = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    this.offset = offset;
  }

  private take(length: number): number {
    const start = this.offset;
    if (start + length > this.buffer.length) {
      throw new RangeError(`borsh: ${length} bytes wanted at ${start}, ${this.buffer.length - start} left`);
    }
    this.offset = start + length;
    return start;
  }

  u8(): number {
    return this.buffer[this.take(1)]!;
  }

  u32(): number {
    return this.buffer.readUInt32LE(this.take(4));
  }

  bool(): boolean {
    const value = this.u8();
    if (value === 0) return false;
    if (value === 1) return true;
    throw new TypeError(`borsh: invalid bool ${value}`);
  }

  /** `Option<T>` tag: true when a value follows. */
  some(): boolean {
    const tag = this.u8();
    if (tag === 0) return false;
    if (tag === 1) return true;
    throw new TypeError(`borsh: invalid option tag ${tag}`);
  }

  /** A fieldless enum's variant, by its u8 index. */
  variant<T extends string>(variants: readonly T[]): T {
    const index = this.u8();
    const variant = variants[index];
    if (variant === undefined) throw new TypeError(`borsh: enum variant ${index} of ${variants.length}`);
    return variant;
  }

  /** u64 as a decimal string (exact over the whole range). */
  u64String(): string {
    const at = this.take(8);
    const low = this.buffer.readUInt32LE(at);
    const high = this.buffer.readUInt32LE(at + 4);
    if (high < EXACT_HIGH_WORD) return (high * TWO_POW_32 + low).toString();
    return this.buffer.readBigUInt64LE(at).toString();
  }

  /** i64 as a number (seconds since the epoch; exact below 2^53, as `Number(bigint)` is). */
  i64Number(): number {
    return Number(this.buffer.readBigInt64LE(this.take(8)));
  }

  hex(length: number): string {
    const at = this.take(length);
    return this.buffer.toString("hex", at, at + length);
  }

  /** A 32-byte public key, base58. */
  pubkey(): string {
    const at = this.take(32);
    const key = this.buffer.toString("latin1", at, at + 32);
    let text = base58Cache.get(key);
    if (text === undefined) {
      text = bs58.encode(this.buffer.subarray(at, at + 32));
      if (base58Cache.size >= BASE58_CACHE_ENTRIES) base58Cache.clear();
      base58Cache.set(key, text);
    }
    return text;
  }

  /** Fixed-length bytes as base58 (signatures). */
  base58(length: number): string {
    const at = this.take(length);
    return bs58.encode(this.buffer.subarray(at, at + length));
  }
}
