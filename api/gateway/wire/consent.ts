/**
 * The pieces of a signed consent that x402 payloads and MPP submissions share: the length-prefixed
 * fields the signature covers, nonces, base58 addresses and signatures, unix-second expiries. Each
 * parser fails through the caller's `fail`, so the error names the protocol and the field.
 */
import { randomBytes } from "node:crypto";
import bs58 from "bs58";
import { isAddress, SIGNATURE_BYTES } from "../chain/signer.js";
import { type Fail, text } from "./strict-json.js";

/** Nonces: 16 to 128 characters of [A-Za-z0-9_-]; the signer's default is 32 random bytes in hex. */
export const NONCE_PATTERN = /^[A-Za-z0-9_-]{16,128}$/;

const MAX_VALID_UNTIL_SECONDS = 253_402_300_799; // 9999-12-31T23:59:59Z

/** A new nonce: 32 random bytes in hex. */
export function newNonce(): string {
  return randomBytes(32).toString("hex");
}

export function address(value: unknown, field: string, onFail: Fail): string {
  const raw = text(value, field, onFail);
  if (!isAddress(raw)) onFail(field, "expected a base58 ledger address");
  return raw;
}

export function parseSignature(value: unknown, field: string, onFail: Fail): Uint8Array {
  const raw = text(value, field, onFail);
  let bytes: Uint8Array;
  try {
    bytes = bs58.decode(raw);
  } catch {
    return onFail(field, "expected base58");
  }
  if (bytes.length !== SIGNATURE_BYTES) onFail(field, `expected ${SIGNATURE_BYTES} bytes, got ${bytes.length}`);
  return bytes;
}

export function parseNonce(value: unknown, field: string, onFail: Fail): string {
  const raw = text(value, field, onFail);
  if (!NONCE_PATTERN.test(raw)) onFail(field, "expected 16 to 128 characters of A-Z a-z 0-9 _ -");
  return raw;
}

export function parseSeconds(value: unknown, field: string, onFail: Fail): number {
  const raw = text(value, field, onFail);
  if (!/^[1-9]\d{0,11}$/.test(raw)) onFail(field, "expected unix seconds as a decimal string");
  const seconds = Number(raw);
  if (seconds > MAX_VALID_UNTIL_SECONDS) onFail(field, "too far in the future");
  return seconds;
}

/** u32 big-endian length || UTF-8 bytes, for each field in order. */
export function lengthPrefixed(fields: readonly string[]): Uint8Array {
  const parts: Buffer[] = [];
  for (const field of fields) {
    const bytes = Buffer.from(field, "utf8");
    const length = Buffer.alloc(4);
    length.writeUInt32BE(bytes.length);
    parts.push(length, bytes);
  }
  return new Uint8Array(Buffer.concat(parts));
}
