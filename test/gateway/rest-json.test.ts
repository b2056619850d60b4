/**
 * The REST edge's JSON reader and writer (api/shared/http/json.ts, money.ts): agrees with JSON.parse on
 * every valid document (fuzzed), keeps number tokens exact, refuses what JSON.parse would not
 * (and duplicate keys), and amounts round-trip to the base unit.
 */
import { describe, expect, it } from "vitest";
import { canonicalJson, JsonNumber, type JsonValue, parseJson, writeJson } from "../../api/shared/http/json.js";
import { parseUsdcNumber } from "../../api/shared/http/money.js";
import { usdcJson } from "../../api/shared/money.js";
import { ServiceError } from "../../api/shared/errors.js";
import { requestFingerprint } from "../../api/shared/http/idempotency.js";

/** Deterministic PRNG (mulberry32) so a failure reproduces. */
function rng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function randomValue(next: () => number, depth: number): unknown {
  const pick = Math.floor(next() * (depth > 3 ? 5 : 7));
  switch (pick) {
    case 0:
      return null;
    case 1:
      return next() < 0.5;
    case 2:
      return (next() - 0.5) * 10 ** Math.floor(next() * 12);
    case 3:
      return Math.floor((next() - 0.5) * 1e9);
    case 4:
      return `${Array.from({ length: Math.floor(next() * 6) }, () => String.fromCharCode(Math.floor(next() * 0x2fff))).join("")}"\\\n`;
    case 5:
      return Array.from({ length: Math.floor(next() * 4) }, () => randomValue(next, depth + 1));
    default: {
      const out: Record<string, unknown> = {};
      for (let i = 0; i < Math.floor(next() * 4); i += 1) out[`k${Math.floor(next() * 100)}\u00e9`] = randomValue(next, depth + 1);
      return out;
    }
  }
}

function toPlain(value: JsonValue): unknown {
  if (value instanceof JsonNumber) return Number(value.text);
  if (Array.isArray(value)) return value.map(toPlain);
  if (value !== null && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, toPlain(v)]));
  return value;
}

function refuses(text: string): boolean {
  try {
    parseJson(text);
    return false;
  } catch (error) {
    return error instanceof ServiceError && error.code === "INVALID_JSON";
  }
}

describe("parseJson", () => {
  it("agrees with JSON.parse on 2,000 random documents, indented or not", () => {
    const next = rng(20261122);
    for (let i = 0; i < 2_000; i += 1) {
      const value = randomValue(next, 0);
      const text = JSON.stringify(value, null, i % 2 === 0 ? undefined : 2);
      expect(toPlain(parseJson(text)), text).toEqual(JSON.parse(text));
    }
  });

  it("keeps number tokens as written", () => {
    const parsed = parseJson('{"a":12345678901.000001,"b":[0.1,-0,1e-7,100]}') as Record<string, JsonValue>;
    expect((parsed.a as JsonNumber).text).toBe("12345678901.000001");
    expect((parsed.b as JsonNumber[]).map((n) => n.text)).toEqual(["0.1", "-0", "1e-7", "100"]);
  });

  it("refuses what JSON.parse refuses, and duplicate keys", () => {
    for (const text of [
      "",
      "{",
      "[1,]",
      "{'a':1}",
      "01",
      "1.",
      ".5",
      "+1",
      "NaN",
      '"\u0001"',
      '{"a":1}x',
      '{"a":1,"a":2}',
      "[".repeat(40) + "]".repeat(40),
    ]) {
      expect(refuses(text), JSON.stringify(text)).toBe(true);
    }
  });

  it("refuses exactly what JSON.parse refuses on 3,000 mutated documents, else agrees with it", () => {
    const next = rng(20261128);
    const alphabet = ['"', "\\", "{", "}", "[", "]", ":", ",", " ", "\n", "0", "7", "-", ".", "e", "u", "t", "n", "\u0001", "\u00e9"];
    let refused = 0;
    for (let i = 0; i < 3_000; i += 1) {
      const valid = JSON.stringify(randomValue(next, 0), null, i % 3 === 0 ? 1 : undefined);
      const at = Math.floor(next() * (valid.length + 1));
      const char = alphabet[Math.floor(next() * alphabet.length)]!;
      const edit = Math.floor(next() * 3);
      const text =
        edit === 0 ? valid.slice(0, at) + valid.slice(at + 1) : valid.slice(0, at) + char + valid.slice(at + (edit === 1 ? 0 : 1));
      let expected: unknown;
      try {
        expected = JSON.parse(text);
      } catch {
        expect(refuses(text), JSON.stringify(text)).toBe(true);
        refused += 1;
        continue;
      }
      let parsed: JsonValue;
      try {
        parsed = parseJson(text);
      } catch (error) {
        // The one document JSON.parse takes and this reader refuses: a key given twice.
        expect(String(error), JSON.stringify(text)).toContain("duplicate key");
        continue;
      }
      expect(toPlain(parsed), JSON.stringify(text)).toEqual(expected);
    }
    expect(refused).toBeGreaterThan(1_000);
  });

  it("reads `__proto__` as an own key, never as the prototype", () => {
    const parsed = parseJson('{"__proto__":{"polluted":true},"constructor":1,"toString":"s"}') as Record<string, JsonValue>;
    expect(Object.getPrototypeOf(parsed)).toBe(Object.prototype);
    expect(Object.keys(parsed)).toEqual(["__proto__", "constructor", "toString"]);
    expect(Object.hasOwn(parsed, "__proto__")).toBe(true);
    expect((parsed as { polluted?: unknown }).polluted).toBeUndefined();
    expect(({} as { polluted?: unknown }).polluted).toBeUndefined();
    expect(toPlain(parsed)).toEqual(JSON.parse('{"__proto__":{"polluted":true},"constructor":1,"toString":"s"}'));
    expect(refuses('{"__proto__":1,"__proto__":2}')).toBe(true);
  });

  it("the canonical form ignores key order and whitespace but not number spelling", () => {
    const a = canonicalJson(parseJson('{ "b": [1, {"y":2,"x":1}], "a": "s" }'));
    const b = canonicalJson(parseJson('{"a":"s","b":[1,{"x":1,"y":2}]}'));
    expect(a).toBe(b);
    expect(requestFingerprint("POST", "/v1/x", a)).toBe(requestFingerprint("post", "/v1/x", b));
    expect(canonicalJson(parseJson('{"usdc":1.5}'))).not.toBe(canonicalJson(parseJson('{"usdc":1.50}')));
  });
});

describe("amounts at the edge", () => {
  it("every base-unit amount round-trips through the written number token", () => {
    const next = rng(7);
    for (let i = 0; i < 2_000; i += 1) {
      const units = BigInt(Math.floor(next() * 1e6)) * 10n ** BigInt(Math.floor(next() * 10)) + BigInt(Math.floor(next() * 1e6));
      const text = writeJson(usdcJson(units));
      const parsed = parseJson(text) as Record<string, JsonValue>;
      expect(parseUsdcNumber(parsed.usdc, "usdc", true)).toBe(units);
    }
  });

  it("refuses more than 6 decimals, negatives, exponents, strings and zero", () => {
    for (const text of ["1.0000001", "-1", "1e2", "0", "-0"]) {
      expect(() => parseUsdcNumber(new JsonNumber(text), "usdc")).toThrow(ServiceError);
    }
    expect(() => parseUsdcNumber("1", "usdc")).toThrow(ServiceError);
    expect(parseUsdcNumber(new JsonNumber("0.000001"), "usdc")).toBe(1n);
    expect(parseUsdcNumber(new JsonNumber("18446744073709.551615"), "usdc")).toBe(18446744073709551615n);
    expect(() => parseUsdcNumber(new JsonNumber("18446744073709.551616"), "usdc")).toThrow(ServiceError);
  });
});
