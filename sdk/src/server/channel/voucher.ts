/**
 * Channel vouchers as the payee checks them, with node builtins only (the SDK has no
 * dependencies): the same bytes as programs/payment_ledger/ts/voucher.ts, which the program
 * verifies on chain (docs/ledger.md §5; `voucher.test.ts` proves the two agree byte for byte).
 *
 *   message = "payment_ledger:channel-voucher:v1" (33) || channel (32) || cumulative u64 LE
 *             || sequence u64 LE || charges digest (32)                          = 113 bytes
 *   d0  = sha256("payment_ledger:channel-charges:v1" || channel || opened slot u64 LE)
 *   d_i = sha256(d_{i-1} || payment id u64 LE || amount u64 LE || sha256(host + path))
 */
import { createHash, createPublicKey, type KeyObject, verify } from "node:crypto";
import { base58Decode } from "./base58.js";

export const VOUCHER_DOMAIN = "payment_ledger:channel-voucher:v1";
export const CHARGES_DOMAIN = "payment_ledger:channel-charges:v1";
export const VOUCHER_MESSAGE_BYTES = 113;
export const DIGEST_BYTES = 32;
export const SIGNATURE_BYTES = 64;
const U64_MAX = (1n << 64n) - 1n;

/** A channel's running state: what the payer signs. */
export interface VoucherState {
  readonly cumulativeUnits: bigint;
  readonly sequence: bigint;
  readonly digest: Uint8Array;
}

function u64le(value: bigint): Buffer {
  if (value < 0n || value > U64_MAX) throw new RangeError(`not a u64: ${value}`);
  const bytes = Buffer.alloc(8);
  bytes.writeBigUInt64LE(value);
  return bytes;
}

function sha256(...parts: Uint8Array[]): Uint8Array {
  const hash = createHash("sha256");
  for (const part of parts) hash.update(part);
  return new Uint8Array(hash.digest());
}

/**
 * `api.example.com/v1/quote` for `https://api.example.com/v1/quote?x=1` (spec 2.2; the program
 * hashes this); a fragment (an MCP tool, `host/mcp#tool`) is kept, as the gateway keeps it.
 */
export function endpointText(endpoint: string): string {
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(endpoint)) return endpoint;
  try {
    const url = new URL(endpoint);
    return `${url.host}${url.pathname}${url.hash}`;
  } catch {
    // Not a URL after all: kept as written, so it matches no request's endpoint.
    return endpoint;
  }
}

export function endpointHash(endpoint: string): Uint8Array {
  return sha256(Buffer.from(endpointText(endpoint), "utf8"));
}

export function voucherMessage(channel: Uint8Array, state: VoucherState): Uint8Array {
  if (channel.length !== 32 || state.digest.length !== DIGEST_BYTES) throw new RangeError("channel and digest are 32 bytes");
  return new Uint8Array(
    Buffer.concat([Buffer.from(VOUCHER_DOMAIN, "ascii"), channel, u64le(state.cumulativeUnits), u64le(state.sequence), state.digest]),
  );
}

export function initialDigest(channel: Uint8Array, openedSlot: bigint): Uint8Array {
  return sha256(Buffer.from(CHARGES_DOMAIN, "ascii"), channel, u64le(openedSlot));
}

export function nextDigest(previous: Uint8Array, paymentId: bigint, amountUnits: bigint, endpoint: Uint8Array): Uint8Array {
  return sha256(previous, u64le(paymentId), u64le(amountUnits), endpoint);
}

// DER prefix that turns a raw ed25519 public key into the SPKI form node:crypto reads.
const SPKI_PREFIX = Buffer.from("302a300506032b6570032100", "hex");

/** The payer's key as node:crypto holds it: built once per channel, not per voucher. */
export function ed25519PublicKey(signer: Uint8Array): KeyObject {
  if (signer.length !== 32) throw new RangeError("an ed25519 public key is 32 bytes");
  return createPublicKey({ key: Buffer.concat([SPKI_PREFIX, signer]), format: "der", type: "spki" });
}

/** Whether `signature` is `signer`'s ed25519 signature over `message`; false for malformed keys or signatures. */
export function verifyEd25519(signer: Uint8Array | KeyObject, message: Uint8Array, signature: Uint8Array): boolean {
  if (signature.length !== SIGNATURE_BYTES) return false;
  try {
    const key = signer instanceof Uint8Array ? ed25519PublicKey(signer) : signer;
    return verify(null, message, key, signature);
  } catch {
    return false;
  }
}

/** Base58 public key → 32 bytes; undefined for anything else. */
export function publicKeyBytes(address: string): Uint8Array | undefined {
  const bytes = base58Decode(address);
  return bytes?.length === 32 ? bytes : undefined;
}
