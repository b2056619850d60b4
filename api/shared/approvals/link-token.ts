/**
 * The signed one-time link of an approval (docs/rest.md "Approvals"):
 * `/v1/approvals/{id}/decide?token=<nonce>.<mac>`, where `nonce` is 16 random bytes and `mac` the
 * HMAC-SHA256, under the gateway's secret key, of the approval id, its `expiresAt` and the nonce
 * (all base64url). The MAC binds the token to one approval and its expiry, so a token cannot be
 * moved to another approval; only the token's SHA-256 is stored (`approvals.link_token_hash`), so a
 * leaked table decides nothing; single use is the store's (`decideByLink` sets `link_used_at`).
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";

const NONCE_BYTES = 16;
const TOKEN = /^([A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{43})$/;
/** A key shorter than the MAC's output would weaken it. */
const MIN_KEY_BYTES = 32;

export interface LinkToken {
  /** Goes into the link once; never stored. */
  readonly token: string;
  /** SHA-256 of the token: what `approvals.link_token_hash` keeps. */
  readonly hash: Buffer;
}

function mac(key: Buffer, approvalId: string, expiresAt: Date, nonce: string): string {
  if (key.length < MIN_KEY_BYTES) throw new RangeError(`the link key must have at least ${MIN_KEY_BYTES} bytes`);
  return createHmac("sha256", key).update(`${approvalId}\n${expiresAt.toISOString()}\n${nonce}`, "utf8").digest("base64url");
}

export function linkTokenHash(token: string): Buffer {
  return createHash("sha256").update(token, "utf8").digest();
}

/** A new token for the approval `approvalId` that expires at `expiresAt`. */
export function createLinkToken(key: Buffer, approvalId: string, expiresAt: Date): LinkToken {
  const nonce = randomBytes(NONCE_BYTES).toString("base64url");
  const token = `${nonce}.${mac(key, approvalId, expiresAt, nonce)}`;
  return { token, hash: linkTokenHash(token) };
}

/**
 * Whether `token` was made by `createLinkToken(key, approvalId, expiresAt)` (constant-time), and
 * `now` is before `expiresAt`. A true answer decides nothing by itself: the store still requires the
 * token's hash on a pending approval whose link is unused.
 */
export function verifyLinkToken(key: Buffer, token: string, approvalId: string, expiresAt: Date, now: Date): boolean {
  const match = TOKEN.exec(token);
  if (match === null || now.getTime() >= expiresAt.getTime()) return false;
  const expected = Buffer.from(mac(key, approvalId, expiresAt, match[1]!), "utf8");
  const given = Buffer.from(match[2]!, "utf8");
  return expected.length === given.length && timingSafeEqual(expected, given);
}
