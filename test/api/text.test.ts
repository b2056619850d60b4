/**
 * The text rule (api/shared/text.ts): which characters a text input may hold, and how a refusal
 * names the value at fault inside a parsed body.
 */
import { describe, expect, it } from "vitest";
import { findUnstorableText, InvalidTextError, refuseUnstorableJson, unstorableText } from "../../api/shared/text.js";

describe("unstorableText", () => {
  it.each([
    ["a\u0000b", "U+0000"],
    ["tab\there", "U+0009"],
    ["line\nbreak", "U+000A"],
    ["\u001f", "U+001F"],
    ["del\u007f", "U+007F"],
    ["c1\u0085", "U+0085"],
    ["\u009f", "U+009F"],
    ["high \ud83d alone", "U+D83D"],
    ["low \ude00 alone", "U+DE00"],
    ["pair then high \ud83d\ude00\ud83d", "U+D83D"],
  ])("%j is refused, naming %s", (text, point) => {
    expect(unstorableText(text)).toContain(point);
  });

  it.each([["plain"], ["é ü ß"], ["日本語"], ["😀 emoji pair"], ["\ufffd replacement"], ["\u00a0 nbsp"], ["\u2028 line separator"], [""]])(
    "%j is accepted",
    (text) => {
      expect(unstorableText(text)).toBeNull();
    },
  );
});

describe("findUnstorableText", () => {
  it("names the path of the first refused value or key, at any depth", () => {
    expect(findUnstorableText({ name: "ok", domains: ["a.com", "b\u0000.com"] })?.field).toBe("domains[1]");
    expect(findUnstorableText({ x402: { resource: "https://a.example/\ud800" } })?.field).toBe("x402.resource");
    expect(findUnstorableText({ meta: { "k\u0001": 1 } })).toMatchObject({ field: "meta", detail: expect.stringContaining("a key") });
    expect(findUnstorableText("\u0000")?.field).toBe("body");
    expect(findUnstorableText({ a: [1, true, null, { b: "fine" }] })).toBeNull();
  });

  it("refuses with BAD_USER_INPUT, reason invalid_text, naming the field", () => {
    let caught: unknown;
    try {
      refuseUnstorableJson({ description: "a\u0000b" });
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(InvalidTextError);
    expect(caught).toMatchObject({ code: "BAD_USER_INPUT", status: 400, field: "description", reason: "invalid_text" });
  });
});
