/**
 * Channel vouchers (programs/payment_ledger/src/voucher.rs, docs/ledger.md "Channels"): the 113
 * bytes a payer signs with its ed25519 key, the hash chain that binds every charge to them, the
 * signature itself, and the ed25519 precompile instruction that carries it to a settlement.
 *
 *   message = "payment_ledger:channel-voucher:v1" (33 bytes) || channel (32)
 *             || cumulative amount u64 LE || sequence u64 LE || charges digest (32)
 *   d0 = sha256("payment_ledger:channel-charges:v1" || channel || opened slot u64 LE)
 *   d_i = sha256(d_{i-1} || payment id u64 LE || amount u64 LE || endpoint hash)
 */
import { createHash, createPrivateKey, createPublicKey, sign, verify } from "node:crypto";
import { Ed25519Program, type Keypair, type PublicKey, type TransactionInstruction } from "@solana/web3.js";
import { ENDPOINT_HASH_BYTES } from "./endpoint-hash.js";

export const VOUCHER_DOMAIN = "payment_ledger:channel-voucher:v1";
export const CHARGES_DOMAIN = "payment_ledger:channel-charges:v1";
export const VOUCHER_MESSAGE_BYTES = 113;
export const DIGEST_BYTES = 32;
export const VOUCHER_SIGNATURE_BYTES = 64;

const U64_MAX = (1n << 64n) - 1n;

/** A channel state the payer signs: everything paid and charged since the channel opened. */
export interface Voucher {
  readonly cumulativeUnits: bigint;
  /** Number of charges since open. */
  readonly sequence: bigint;
  /** The hash chain after the `sequence`-th charge. */
  readonly chargesDigest: Uint8Array;
}

/** One paid request covered by a voucher. */
export interface ChannelCharge {
  /** From the payer's id sequence; strictly increasing within the channel. */
  readonly paymentId: bigint;
  readonly amountUnits: bigint;
  readonly endpointHash: Uint8Array;
}

function u64le(value: bigint, what: string): Buffer {
  if (value < 0n || value > U64_MAX) throw new RangeError(`${what} must fit in a u64, got ${value}`);
  const bytes = Buffer.alloc(8);
  bytes.writeBigUInt64LE(value);
  return bytes;
}

function exactly(bytes: Uint8Array, length: number, what: string): Uint8Array {
  if (bytes.length !== length) throw new RangeError(`${what} must be ${length} bytes, got ${bytes.length}`);
  return bytes;
}

function sha256(...parts: Uint8Array[]): Uint8Array {
  const hash = createHash("sha256");
  for (const part of parts) hash.update(part);
  return new Uint8Array(hash.digest());
}

export function voucherMessage(channel: PublicKey, voucher: Voucher): Uint8Array {
  const message = Buffer.concat([
    Buffer.from(VOUCHER_DOMAIN, "ascii"),
    channel.toBuffer(),
    u64le(voucher.cumulativeUnits, "cumulative amount"),
    u64le(voucher.sequence, "sequence"),
    exactly(voucher.chargesDigest, DIGEST_BYTES, "charges digest"),
  ]);
  return new Uint8Array(message);
}

/** The digest of a channel before its first charge; `openedSlot` is the channel account's. */
export function initialChargesDigest(channel: PublicKey, openedSlot: bigint): Uint8Array {
  return sha256(Buffer.from(CHARGES_DOMAIN, "ascii"), channel.toBuffer(), u64le(openedSlot, "opened slot"));
}

export function nextChargesDigest(previous: Uint8Array, charge: ChannelCharge): Uint8Array {
  return sha256(
    exactly(previous, DIGEST_BYTES, "previous digest"),
    u64le(charge.paymentId, "payment id"),
    u64le(charge.amountUnits, "amount"),
    exactly(charge.endpointHash, ENDPOINT_HASH_BYTES, "endpoint hash"),
  );
}

/** The voucher after `charges`, starting from `from` (a settled or signed state). */
export function advanceVoucher(from: Voucher, charges: readonly ChannelCharge[]): Voucher {
  let { cumulativeUnits, sequence, chargesDigest } = from;
  for (const charge of charges) {
    if (charge.amountUnits <= 0n) throw new RangeError("a charge amount must be positive");
    cumulativeUnits += charge.amountUnits;
    sequence += 1n;
    chargesDigest = nextChargesDigest(chargesDigest, charge);
  }
  return { cumulativeUnits, sequence, chargesDigest };
}

// DER prefixes that turn a raw ed25519 key into the SPKI / PKCS#8 forms node:crypto reads.
const SPKI_PREFIX = Buffer.from("302a300506032b6570032100", "hex");
const PKCS8_PREFIX = Buffer.from("302e020100300506032b657004220420", "hex");

/** The payer's ed25519 signature over a voucher message (a Solana keypair's secret key). */
export function signVoucher(payer: Keypair, message: Uint8Array): Uint8Array {
  const key = createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, payer.secretKey.subarray(0, 32)]), format: "der", type: "pkcs8" });
  return new Uint8Array(sign(null, message, key));
}

/** Whether `signature` is `payer`'s over `message`: the check a payee makes before serving. */
export function verifyVoucherSignature(payer: PublicKey, message: Uint8Array, signature: Uint8Array): boolean {
  if (signature.length !== VOUCHER_SIGNATURE_BYTES) return false;
  const key = createPublicKey({ key: Buffer.concat([SPKI_PREFIX, payer.toBuffer()]), format: "der", type: "spki" });
  return verify(null, message, key, signature);
}

/**
 * The ed25519 precompile instruction a settlement needs right before it: one signature, with key,
 * signature and message inside its own data (the layout the program checks).
 */
export function voucherSignatureInstruction(payer: PublicKey, message: Uint8Array, signature: Uint8Array): TransactionInstruction {
  return Ed25519Program.createInstructionWithPublicKey({
    publicKey: payer.toBytes(),
    message: exactly(message, VOUCHER_MESSAGE_BYTES, "voucher message"),
    signature: exactly(signature, VOUCHER_SIGNATURE_BYTES, "voucher signature"),
  });
}
