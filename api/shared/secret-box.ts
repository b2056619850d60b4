/**
 * Webhook signing secrets: generated as `whsec_` + base64 of 32 random bytes (Standard Webhooks),
 * shown once to the account, stored only as AES-256-GCM ciphertext. The encryption key comes from
 * `WEBHOOK_SECRETS_KEY` (32 bytes, base64 or hex) and never touches the database. Nothing here
 * logs; `SecretBox` renders as "[SecretBox]" so a stray log line cannot print the key.
 */
import { createCipheriv, createDecipheriv, createHmac, randomBytes } from "node:crypto";

export const SECRET_PREFIX = "whsec_";
const SECRET_BYTES = 32;
const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
/** The ciphertext layout: version byte, IV, tag, encrypted secret. */
const FORMAT_VERSION = 1;

export class SecretKeyError extends Error {
  override readonly name = "SecretKeyError";
  readonly code = "webhook_secrets_key_invalid";
}

/** A new `whsec_…` secret (Standard Webhooks: 24–64 random bytes; we use 32). */
export function generateSigningSecret(): string {
  return SECRET_PREFIX + randomBytes(SECRET_BYTES).toString("base64");
}

/** The HMAC key inside a `whsec_…` secret. */
export function signingKey(secret: string): Buffer {
  if (!secret.startsWith(SECRET_PREFIX)) throw new SecretKeyError("a signing secret starts with whsec_");
  const key = Buffer.from(secret.slice(SECRET_PREFIX.length), "base64");
  if (key.length < 24 || key.length > 64) throw new SecretKeyError("a signing secret holds 24 to 64 bytes");
  return key;
}

export class SecretBox {
  readonly #key: Buffer;

  constructor(key: Buffer) {
    if (key.length !== KEY_BYTES) throw new SecretKeyError(`the secrets key must be ${KEY_BYTES} bytes`);
    this.#key = Buffer.from(key);
  }

  /** `WEBHOOK_SECRETS_KEY` as 64 hex digits or base64 of 32 bytes. */
  static fromEnv(env: NodeJS.ProcessEnv = process.env): SecretBox {
    const text = env.WEBHOOK_SECRETS_KEY?.trim();
    if (text === undefined || text === "") {
      throw new SecretKeyError("WEBHOOK_SECRETS_KEY is not set (32 bytes, base64 or hex): webhook secrets are stored encrypted");
    }
    return new SecretBox(/^[0-9a-fA-F]{64}$/.test(text) ? Buffer.from(text, "hex") : Buffer.from(text, "base64"));
  }

  static generateKey(): string {
    return randomBytes(KEY_BYTES).toString("base64");
  }

  encrypt(secret: string): Buffer {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv("aes-256-gcm", this.#key, iv);
    const sealed = Buffer.concat([cipher.update(secret, "utf8"), cipher.final()]);
    return Buffer.concat([Buffer.of(FORMAT_VERSION), iv, cipher.getAuthTag(), sealed]);
  }

  decrypt(ciphertext: Buffer): string {
    if (ciphertext.length < 1 + IV_BYTES + TAG_BYTES || ciphertext[0] !== FORMAT_VERSION) {
      throw new SecretKeyError("unreadable secret ciphertext");
    }
    const iv = ciphertext.subarray(1, 1 + IV_BYTES);
    const tag = ciphertext.subarray(1 + IV_BYTES, 1 + IV_BYTES + TAG_BYTES);
    const decipher = createDecipheriv("aes-256-gcm", this.#key, iv);
    decipher.setAuthTag(tag);
    try {
      return Buffer.concat([decipher.update(ciphertext.subarray(1 + IV_BYTES + TAG_BYTES)), decipher.final()]).toString("utf8");
    } catch {
      throw new SecretKeyError("secret ciphertext does not open with this key (wrong WEBHOOK_SECRETS_KEY?)");
    }
  }

  /**
   * A 32-byte key derived from the secrets key for one `purpose` (the signed approval links'
   * HMAC), so a MAC key never doubles as the encryption key or another purpose's key.
   */
  derivedKey(purpose: string): Buffer {
    return createHmac("sha256", this.#key).update(`derived:${purpose}`, "utf8").digest();
  }

  toString(): string {
    return "[SecretBox]";
  }

  toJSON(): string {
    return "[SecretBox]";
  }
}
