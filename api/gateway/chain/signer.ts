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

/**
 * The ed25519 private key of a 32-byte seed. Imported as a JWK (RFC 8037): node's PKCS#8 DER
 * import goes through OpenSSL 3's decoders, about 8× slower, on every payment the gateway signs.
 * The JWK's `x` is required by node and not checked against `d`: callers compare the derived
 * public key (`publicKeyOf`) with the one they expect.
 */
export function ed25519PrivateKey(seed: Uint8Array, publicKey: Uint8Array): KeyObject {
  return createPrivateKey({
    key: { kty: "OKP", crv: "Ed25519", d: Buffer.from(seed).toString("base64url"), x: Buffer.from(publicKey).toString("base64url") },
    format: "jwk",
  });
}

/** The raw 32 public-key bytes of a private key, derived from its seed. */
export function publicKeyOf(key: KeyObject): Buffer {
  return Buffer.from((createPublicKey(key).export({ format: "jwk" }) as { x: string }).x, "base64url");
}

/** The shape of a web3.js `Keypair` this module needs: 64 secret bytes, seed || public key. */
export interface SecretKeyHolder {
  readonly secretKey: Uint8Array;
  readonly publicKey: { toBase58(): string };
}

/**
 * A Keypair that carries its private key already imported and checked against its public half
 * (the wallet keystore opens keys so): its signer uses that key instead of importing it again.
 */
export interface CheckedKeypair extends SecretKeyHolder {
  readonly signingKey: KeyObject;
}

/** An `AgentSigner` over a web3.js Keypair, signing with node:crypto. */
export function keypairSigner(keypair: SecretKeyHolder | CheckedKeypair): AgentSigner {
  if (keypair.secretKey.length !== 64) throw new RangeError(`secret key must be 64 bytes, got ${keypair.secretKey.length}`);
  const address = keypair.publicKey.toBase58();
  let key: KeyObject;
  if ("signingKey" in keypair) key = keypair.signingKey;
  else {
    const publicKey = keypair.secretKey.subarray(32);
    key = ed25519PrivateKey(keypair.secretKey.subarray(0, 32), publicKey);
    // The seed must derive the public half, else signatures would verify against nobody.
    if (!publicKeyOf(key).equals(publicKey)) throw new Error("secret key seed does not match its public key");
  }
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
  // JWK for the same reason as `ed25519PrivateKey`: SPKI DER goes through the slow decoders.
  return createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: Buffer.from(raw).toString("base64url") }, format: "jwk" });
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
