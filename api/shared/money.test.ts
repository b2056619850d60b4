/** The one money module: its parser, its two display formats and the JSON money object. */
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { mulberry32 } from "../../test/support/random.js";
import { parseJson, writeJson } from "./http/json.js";
import { JsonNumber } from "./json-number.js";
import { formatUsdcFixed, formatUsdcShort, MAX_AMOUNT_UNITS, parseUsdc, ratio, usdcJson } from "./money.js";

describe("parseUsdc and formatUsdcFixed", () => {
  it("formats base units as six-decimal strings, never through floats", () => {
    expect(formatUsdcFixed(0n)).toBe("0.000000");
    expect(formatUsdcFixed(1_500_000n)).toBe("1.500000");
    expect(formatUsdcFixed(1n)).toBe("0.000001");
    expect(formatUsdcFixed(18_446_744_073_709_551_615n)).toBe("18446744073709.551615");
    expect(formatUsdcFixed(-250_000n)).toBe("-0.250000");
  });

  it("parses decimal amounts with at most six decimals and round-trips every formatted amount", () => {
    expect(parseUsdc("1.5")).toBe(1_500_000n);
    expect(parseUsdc("2")).toBe(2_000_000n);
    expect(parseUsdc("0.000001")).toBe(1n);
    for (const bad of ["-1", "1.1234567", "abc", "", "1e6", " 1", "1.", ".5"]) expect(parseUsdc(bad), bad).toBeTypeOf("string");
    for (let i = 0; i < 500; i++) {
      const units = BigInt(`0x${randomBytes(5).toString("hex")}`);
      expect(parseUsdc(formatUsdcFixed(units))).toBe(units);
    }
  });

  it("names why a text is not an amount, for each edge to word in its own error", () => {
    expect(parseUsdc("1.5.0")).toBe("not_a_decimal");
    expect(parseUsdc("000000000000000000001")).toBe("not_a_decimal");
    expect(parseUsdc("1.0000001")).toBe("too_many_decimals");
    expect(parseUsdc("18446744073709.551615")).toBe(MAX_AMOUNT_UNITS);
    expect(parseUsdc("18446744073709.551616")).toBe("too_large");
  });

  it("shares and percentages are exact decimal strings, rounded half up", () => {
    expect(ratio(1n, 3n, 2, 100n)).toBe("33.33");
    expect(ratio(2n, 3n, 2, 100n)).toBe("66.67");
    expect(ratio(1n, 8n, 2, 100n)).toBe("12.50");
    expect(ratio(1n, 3n, 6)).toBe("0.333333");
    expect(ratio(5n, 5n, 6)).toBe("1.000000");
    expect(ratio(0n, 0n, 2, 100n)).toBe("0.00");
  });
});

describe("formatUsdcShort", () => {
  it.each([
    [1_500_000n, "1.5"],
    [1_000_000n, "1"],
    [1n, "0.000001"],
    [0n, "0"],
    [1_000_001n, "1.000001"],
    [-2_500_000n, "-2.5"],
  ])("renders %s as %s", (units, text) => {
    expect(formatUsdcShort(units)).toBe(text);
  });

  it("round-trips every amount through parseUsdc", () => {
    let seed = 42n;
    for (let i = 0; i < 1_000; i += 1) {
      seed = (seed * 6364136223846793005n + 1442695040888963407n) % 2n ** 64n;
      const units = seed % 10n ** BigInt(1 + (i % 19));
      expect(parseUsdc(formatUsdcShort(units))).toBe(units);
    }
  });

  it("gives the spec's money object with the exact decimal as its JSON number", () => {
    expect(writeJson(usdcJson(1_500_000n))).toBe('{"usdc":1.5}');
    expect(writeJson(usdcJson(100_000n))).toBe('{"usdc":0.1}');
    expect(writeJson(usdcJson(0n))).toBe('{"usdc":0}');
    // 2^53 + 1 base units and the u64 maximum: a float would round both.
    expect(writeJson(usdcJson(9_007_199_254_740_993n))).toBe('{"usdc":9007199254.740993}');
    expect(writeJson(usdcJson(MAX_AMOUNT_UNITS))).toBe('{"usdc":18446744073709.551615}');
  });
});

describe("money rendered into JSON (property)", () => {
  // Seeded so a failure replays: u64 draws from two 32-bit halves, the magnitude spread over every
  // digit count (a uniform u64 is almost always 20 digits long).
  const SEED = 0x5eed_0a11;
  const random = mulberry32(SEED);
  const u32 = () => BigInt(Math.floor(random() * 4_294_967_296));
  const amounts: bigint[] = [0n, 1n, 100_000n, 2n ** 53n, 2n ** 53n + 1n, MAX_AMOUNT_UNITS, MAX_AMOUNT_UNITS - 1n];
  for (let i = 0; i < 5_000; i += 1) {
    const u64 = (u32() << 32n) | u32();
    amounts.push(u64 % 10n ** BigInt(1 + (i % 20)));
  }

  it(`every base-unit amount 0..2^64-1 written as { usdc: number } parses back to the same units (seed ${SEED})`, () => {
    for (const units of amounts) {
      const text = writeJson(usdcJson(units));
      const parsed = parseJson(text) as { usdc: JsonNumber };
      expect(parsed.usdc, text).toBeInstanceOf(JsonNumber);
      expect(parseUsdc(parsed.usdc.text), text).toBe(units);
      // And it is plain JSON: any JSON reader sees the same decimal digits (no exponent, no sign).
      expect(parsed.usdc.text, text).toMatch(/^(0|[1-9]\d*)(\.\d{1,6})?$/);
    }
  });
});
