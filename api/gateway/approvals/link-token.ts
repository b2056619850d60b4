/**
 * The signed one-time link of an approval (docs/rest.md "Approvals"): 32 random bytes and an
 * HMAC-SHA256 under the gateway's secrets key over the approval id, those bytes and `expiresAt`,
 * base64url. Only the token's SHA-256 is stored (`approvals.link_token_hash`): the database alone
 * cannot mint or recover a link. The link is single use and dies with the approval (the store's
 * `decideByLink` condition); here it is only made and checked.
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { SecretBox } from "../../shared/secret-box.js";

const PURPOSE = "approval-link";
const NONCE_BYTES = 32;
const MAC_BYTES = 32;
const TOKEN_CHARS = Math.ceil(((NONCE_BYTES + MAC_BYTES) * 4) / 3);
const TOKEN_SHAPE = /^[A-Za-z0-9_-]+$/;

export interface LinkToken {
  /** What the link carries (`?token=`). */
  readonly token: string;
  /** What the store keeps. */
  readonly hash: Buffer;
}

function macOf(box: SecretBox, approvalId: string, nonce: Buffer, expiresAt: Date): Buffer {
  return box.mac(PURPOSE, Buffer.concat([Buffer.from(`${approvalId}\n${expiresAt.toISOString()}\n`, "utf8"), nonce]));
}

export function newLinkToken(box: SecretBox, approvalId: string, expiresAt: Date): LinkToken {
  const nonce = randomBytes(NONCE_BYTES);
  const bytes = Buffer.concat([nonce, macOf(box, approvalId, nonce, expiresAt)]);
  return { token: bytes.toString("base64url"), hash: createHash("sha256").update(bytes).digest() };
}

/** The stored hash of a token of the right shape, or null for text that is no token (nothing to look up). */
export function linkTokenHash(token: string | null): Buffer | null {
  if (token === null || token.length !== TOKEN_CHARS || !TOKEN_SHAPE.test(token)) return null;
  const bytes = Buffer.from(token, "base64url");
  if (bytes.length !== NONCE_BYTES + MAC_BYTES) return null;
  return createHash("sha256").update(bytes).digest();
}

/** Whether the token was signed for this approval and expiry (constant time), after its hash matched a row. */
export function linkTokenSigned(box: SecretBox, token: string, approvalId: string, expiresAt: Date): boolean {
  const bytes = Buffer.from(token, "base64url");
  if (bytes.length !== NONCE_BYTES + MAC_BYTES) return false;
  const expected = macOf(box, approvalId, bytes.subarray(0, NONCE_BYTES), expiresAt);
  return timingSafeEqual(expected, bytes.subarray(NONCE_BYTES));
}
