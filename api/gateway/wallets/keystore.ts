/**
 * Agent keys at rest: each agent's 32-byte ed25519 seed is sealed with AES-256-GCM under a key
 * from configuration. The key's version is stored with the ciphertext so keys can rotate (old
 * versions stay configured for decryption; new wallets use the current one). The agent id and
 * wallet address are the GCM additional data: a ciphertext copied to another agent's row fails
 * authentication instead of handing that agent someone else's key.
 *
 * Secrets never leave this module except as a `Keypair` handed to a signer; nothing here logs.
 */
import { createCipheriv, createDecipheriv, type KeyObject, randomBytes } from "node:crypto";
import { Keypair } from "@solana/web3.js";
import { publicAgentId } from "../../shared/agent-ids.js";
import { WalletKeyError } from "../chain/errors.js";
import { addressBytes, type CheckedKeypair, ed25519PrivateKey, publicKeyOf } from "../chain/signer.js";

const KEY_BYTES = 32;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const SEED_BYTES = 32;
const AAD_CONTEXT = "apg.agent-wallet.v1";
const VERSION_SHAPE = /^[A-Za-z0-9_.-]{1,32}$/;

export interface SealedKey {
  /** Encrypted seed followed by the 16-byte GCM tag. */
  readonly ciphertext: Buffer;
  readonly nonce: Buffer;
  readonly keyVersion: string;
}

/** Who the key belongs to: bound into the ciphertext as additional data. */
export interface KeyOwner {
  readonly agentId: string;
  readonly address: string;
}

export interface KeystoreConfig {
  /** Version of `currentKey`, stored with every ciphertext it seals. */
  readonly currentVersion: string;
  readonly currentKey: Uint8Array;
  /** Retired keys by version, kept to open older ciphertexts until they are re-sealed. */
  readonly retiredKeys?: ReadonlyMap<string, Uint8Array>;
}

function aad(owner: KeyOwner): Buffer {
  return Buffer.from(`${AAD_CONTEXT}\n${owner.agentId}\n${owner.address}`, "utf8");
}

/** The seed's private key when it derives `publicKey`, else null. */
function keyDerivingTo(seed: Uint8Array, publicKey: Uint8Array): KeyObject | null {
  try {
    const key = ed25519PrivateKey(seed, publicKey);
    return publicKeyOf(key).equals(publicKey) ? key : null;
  } catch {
    return null;
  }
}

function checkKey(key: Uint8Array, version: string): Buffer {
  if (!VERSION_SHAPE.test(version)) throw new WalletKeyError(`wallet key version ${JSON.stringify(version)} is malformed`);
  if (key.length !== KEY_BYTES) throw new WalletKeyError(`wallet key ${version} must be ${KEY_BYTES} bytes, got ${key.length}`);
  return Buffer.from(key);
}

export class Keystore {
  readonly currentVersion: string;
  readonly #keys: Map<string, Buffer>;

  constructor(config: KeystoreConfig) {
    this.currentVersion = config.currentVersion;
    this.#keys = new Map();
    for (const [version, key] of config.retiredKeys ?? []) this.#keys.set(version, checkKey(key, version));
    this.#keys.set(config.currentVersion, checkKey(config.currentKey, config.currentVersion));
  }

  /** Seals `keypair`'s seed for `owner` under the current key. */
  seal(keypair: Keypair, owner: KeyOwner): SealedKey {
    if (keypair.publicKey.toBase58() !== owner.address) {
      throw new WalletKeyError("the keypair does not match the address it is sealed for");
    }
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv("aes-256-gcm", this.#keys.get(this.currentVersion)!, nonce, { authTagLength: TAG_BYTES });
    cipher.setAAD(aad(owner));
    const seed = Buffer.from(keypair.secretKey.subarray(0, SEED_BYTES));
    try {
      const ciphertext = Buffer.concat([cipher.update(seed), cipher.final(), cipher.getAuthTag()]);
      return { ciphertext, nonce, keyVersion: this.currentVersion };
    } finally {
      seed.fill(0);
    }
  }

  /** Opens a sealed key; fails with WalletKeyError for an unknown version, a wrong key or owner. */
  open(sealed: SealedKey, owner: KeyOwner): Keypair & CheckedKeypair {
    const key = this.#keys.get(sealed.keyVersion);
    if (key === undefined) throw new WalletKeyError(`wallet key version ${sealed.keyVersion} is not configured`);
    if (sealed.nonce.length !== NONCE_BYTES || sealed.ciphertext.length !== SEED_BYTES + TAG_BYTES) {
      throw new WalletKeyError(`sealed key of agent ${publicAgentId(owner.agentId)} is malformed`);
    }
    const decipher = createDecipheriv("aes-256-gcm", key, sealed.nonce, { authTagLength: TAG_BYTES });
    decipher.setAAD(aad(owner));
    decipher.setAuthTag(sealed.ciphertext.subarray(SEED_BYTES));
    let seed: Buffer;
    try {
      seed = Buffer.concat([decipher.update(sealed.ciphertext.subarray(0, SEED_BYTES)), decipher.final()]);
    } catch {
      // No detail: which of key, nonce, owner or bytes was wrong is not the caller's business.
      throw new WalletKeyError(`sealed key of agent ${publicAgentId(owner.agentId)} does not open with key ${sealed.keyVersion}`);
    }
    try {
      // The public half derived by node:crypto (web3.js's `fromSeed` derives it in JavaScript, ~5×
      // slower) must be the address the ciphertext is bound to.
      const address = addressBytes(owner.address);
      const signingKey = address === null ? null : keyDerivingTo(seed, address);
      if (address === null || signingKey === null) {
        throw new WalletKeyError(`sealed key of agent ${publicAgentId(owner.agentId)} does not match its address`);
      }
      // The checked key rides along, so signing does not import it a second time (chain/signer.ts).
      return Object.assign(Keypair.fromSecretKey(Buffer.concat([seed, address]), { skipValidation: true }), { signingKey });
    } finally {
      seed.fill(0);
    }
  }

  /** Whether a ciphertext should be re-sealed under the current key (key rotation). */
  isStale(sealed: Pick<SealedKey, "keyVersion">): boolean {
    return sealed.keyVersion !== this.currentVersion;
  }
}

function decodeKey(text: string, what: string): Uint8Array {
  const bytes = Buffer.from(text.trim(), "base64");
  if (bytes.length !== KEY_BYTES) throw new WalletKeyError(`${what} must be ${KEY_BYTES} bytes of base64`);
  return bytes;
}

/**
 * The keystore from configuration:
 * - `WALLET_ENCRYPTION_KEY`: 32 bytes, base64 (required);
 * - `WALLET_ENCRYPTION_KEY_VERSION`: its version (default `v1`);
 * - `WALLET_ENCRYPTION_RETIRED_KEYS`: `version:base64,version:base64` for keys being rotated out.
 */
export function keystoreFromEnv(env: NodeJS.ProcessEnv = process.env): Keystore {
  const current = env.WALLET_ENCRYPTION_KEY;
  if (current === undefined || current.length === 0) throw new WalletKeyError("WALLET_ENCRYPTION_KEY is not set");
  const retiredKeys = new Map<string, Uint8Array>();
  for (const entry of (env.WALLET_ENCRYPTION_RETIRED_KEYS ?? "").split(",").filter((part) => part.trim() !== "")) {
    const at = entry.indexOf(":");
    if (at <= 0) throw new WalletKeyError("WALLET_ENCRYPTION_RETIRED_KEYS entries are version:base64");
    const version = entry.slice(0, at).trim();
    retiredKeys.set(version, decodeKey(entry.slice(at + 1), `retired wallet key ${version}`));
  }
  return new Keystore({
    currentVersion: env.WALLET_ENCRYPTION_KEY_VERSION ?? "v1",
    currentKey: decodeKey(current, "WALLET_ENCRYPTION_KEY"),
    retiredKeys,
  });
}

/** A fresh random key, base64: for local setups and tests. */
export function generateWalletEncryptionKey(): string {
  return randomBytes(KEY_BYTES).toString("base64");
}
