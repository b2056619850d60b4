/**
 * The approval link's token: bound to its approval and expiry by the MAC, refused once expired,
 * malformed or under another key, and stored only as its hash.
 */
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { createLinkToken, linkTokenHash, verifyLinkToken } from "./link-token.js";

const KEY = randomBytes(32);
const ID = "6f1c2a3b-0000-4000-8000-00000000a001";
const EXPIRES = new Date("2026-03-01T12:15:00.000Z");
const BEFORE = new Date("2026-03-01T12:14:59.999Z");

describe("the approval link token", () => {
  it("verifies for its approval and expiry, before the expiry only", () => {
    const { token, hash } = createLinkToken(KEY, ID, EXPIRES);
    expect(token).toMatch(/^[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}$/);
    expect(hash).toEqual(linkTokenHash(token));
    expect(hash).toHaveLength(32);
    expect(verifyLinkToken(KEY, token, ID, EXPIRES, BEFORE)).toBe(true);
    expect(verifyLinkToken(KEY, token, ID, EXPIRES, EXPIRES)).toBe(false);
  });

  it("is refused for another approval, another expiry, another key, or any change of a character", () => {
    const { token } = createLinkToken(KEY, ID, EXPIRES);
    expect(verifyLinkToken(KEY, token, "6f1c2a3b-0000-4000-8000-00000000a002", EXPIRES, BEFORE)).toBe(false);
    expect(verifyLinkToken(KEY, token, ID, new Date(EXPIRES.getTime() + 1), BEFORE)).toBe(false);
    expect(verifyLinkToken(randomBytes(32), token, ID, EXPIRES, BEFORE)).toBe(false);
    for (let i = 0; i < token.length; i += 1) {
      if (token[i] === ".") continue;
      const changed = `${token.slice(0, i)}${token[i] === "A" ? "B" : "A"}${token.slice(i + 1)}`;
      expect(verifyLinkToken(KEY, changed, ID, EXPIRES, BEFORE), `character ${i}`).toBe(false);
    }
    for (const malformed of ["", ".", token.replace(".", ""), `${token}x`, `${token.split(".")[0]}.`]) {
      expect(verifyLinkToken(KEY, malformed, ID, EXPIRES, BEFORE)).toBe(false);
    }
  });

  it("is new every time, and refuses a short key", () => {
    expect(createLinkToken(KEY, ID, EXPIRES).token).not.toBe(createLinkToken(KEY, ID, EXPIRES).token);
    expect(() => createLinkToken(randomBytes(16), ID, EXPIRES)).toThrow(RangeError);
  });
});
