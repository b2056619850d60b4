/**
 * Ed25519 keys at the protocol edge. The gateway signs for an agent through `AgentSigner` (the
 * custodial wallet's key never leaves it); verifiers need only the base58 address, which on the
 * ledger chain is the raw 32-byte ed25519 public key.
 */
import { createPrivateKey, createPublicKey, type KeyObject, sign, verify } from "node:crypto";
import { PublicKey } from "@solana/web3.js";

/** Who signs payments for an agent: its wallet address (base58) and a detached ed25519 signature. */
export interface AgentSigner {
  readonly address: string;
  sign(bytes: Uint8Array): Promise<Uint8Array>;
}

export const SIGNATURE_BYTES = 64;

// DER prefixes of an ed25519 PKCS#8 private key (RFC 8410) and SubjectPublicKeyInfo; the 32 raw
// key bytes follow each.
const PKCS8_PREFIX = Buffer.from("302e020100300506032b657004220420", "hex");
const SPKI_PREFIX = Buffer.from("302a300506032b6570032100", "hex");

/** The shape of a web3.js `Keypair` this module needs: 64 secret bytes, seed || public key. */
export interface SecretKeyHolder {
  readonly secretKey: Uint8Array;
  readonly publicKey: { toBase58(): string };
}

/** An `AgentSigner` over a web3.js Keypair, signing with node:crypto. */
export function keypairSigner(keypair: SecretKeyHolder): AgentSigner {
  if (keypair.secretKey.length !== 64) throw new RangeError(`secret key must be 64 bytes, got ${keypair.secretKey.length}`);
  const key = createPrivateKey({
    key: Buffer.concat([PKCS8_PREFIX, Buffer.from(keypair.secretKey.subarray(0, 32))]),
    format: "der",
    type: "pkcs8",
  });
  const address = keypair.publicKey.toBase58();
  // The seed must derive the public half, else signatures would verify against nobody.
  const derived = createPublicKey(key).export({ format: "der", type: "spki" }).subarray(SPKI_PREFIX.length);
  if (!derived.equals(Buffer.from(keypair.secretKey.subarray(32)))) throw new Error("secret key seed does not match its public key");
  return {
    address,
    async sign(bytes: Uint8Array): Promise<Uint8Array> {
      return new Uint8Array(sign(null, bytes, key));
    },
  };
}

/** The 32 key bytes of a base58 address, or null when it is not one. */
export function addressBytes(address: string): Uint8Array | null {
  try {
    const key = new PublicKey(address);
    // PublicKey accepts some non-canonical spellings; only the canonical base58 round-trips.
    return key.toBase58() === address ? key.toBytes() : null;
  } catch {
    return null;
  }
}

export function isAddress(text: string): boolean {
  return addressBytes(text) !== null;
}

function publicKeyObject(address: string): KeyObject | null {
  const raw = addressBytes(address);
  if (raw === null) return null;
  return createPublicKey({ key: Buffer.concat([SPKI_PREFIX, Buffer.from(raw)]), format: "der", type: "spki" });
}

/** True when `signature` is `address`'s ed25519 signature of `message`; false for anything malformed. */
export function verifySignature(address: string, message: Uint8Array, signature: Uint8Array): boolean {
  if (signature.length !== SIGNATURE_BYTES) return false;
  const key = publicKeyObject(address);
  if (key === null) return false;
  try {
    return verify(null, message, key, signature);
  } catch {
    return false;
  }
}
