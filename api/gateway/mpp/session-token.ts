/**
 * MPP session tokens (spec 2.9, 4.4 `X-MPP-Session`): opaque bearer secrets of 256 random bits,
 * written `mpps_` + base64url (no padding). Only their sha256 is ever stored; the clear token
 * exists in the HTTP answer that hands it out and in the paying process's memory.
 */
import { createHash, randomBytes } from "node:crypto";

export const X_MPP_SESSION = "X-MPP-Session";
const PREFIX = "mpps_";
const TOKEN = /^mpps_[A-Za-z0-9_-]{43}$/;

export function newSessionToken(): string {
  return `${PREFIX}${randomBytes(32).toString("base64url")}`;
}

export function isSessionTokenShape(token: string): boolean {
  return TOKEN.test(token);
}

export function sessionTokenHash(token: string): Buffer {
  return createHash("sha256").update(token, "utf8").digest();
}
