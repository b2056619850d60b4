import { describe, expect, it } from "vitest";
import { mulberry32 } from "../../../test/support/random.js";
import { parseJson, writeJson } from "../http/json.js";
import { JsonNumber } from "../json-number.js";
import { formatUsdc, MAX_AMOUNT_UNITS, parseUsdc, toUsdc } from "./amounts.js";
import { isPolicyInputError } from "./errors.js";

describe("parseUsdc", () => {
  it.each([
    ["1.50", 1_500_000n],
    ["1.5", 1_500_000n],
    ["0.000001", 1n],
    ["2", 2_000_000n],
    ["0", 0n],
    ["18446744073709.551615", 18_446_744_073_709_551_615n],
  ])("parses %s exactly", (text, units) => {
    expect(parseUsdc(text)).toBe(units);
  });

  it.each([
    [1.5, 1_500_000n],
    [0.1, 100_000n],
    [0.000001, 1n],
    [10, 10_000_000n],
  ])("parses the number %s exactly", (value, units) => {
    expect(parseUsdc(value)).toBe(units);
  });

  it.each(["1.0000001", "-1", "+1", "1e3", ".5", "1.", " 1", "1,5", "", "0x10", "18446744073709.551616"])("rejects %j", (text) => {
    expect(() => parseUsdc(text)).toThrow(expect.objectContaining({ reason: "invalid_amount" }));
  });

  it.each([0.1 + 0.2, 1e-7, Number.NaN, Number.POSITIVE_INFINITY, -0.5, 1e21])("rejects the number %s", (value) => {
    let thrown: unknown;
    try {
      parseUsdc(value);
    } catch (error) {
      thrown = error;
    }
    expect(isPolicyInputError(thrown, "invalid_amount")).toBe(true);
  });
});

describe("formatUsdc", () => {
  it.each([
    [1_500_000n, "1.5"],
    [1_000_000n, "1"],
    [1n, "0.000001"],
    [0n, "0"],
    [1_000_001n, "1.000001"],
    [-2_500_000n, "-2.5"],
  ])("renders %s as %s", (units, text) => {
    expect(formatUsdc(units)).toBe(text);
  });

  it("round-trips every amount through parseUsdc", () => {
    let seed = 42n;
    for (let i = 0; i < 1_000; i += 1) {
      seed = (seed * 6364136223846793005n + 1442695040888963407n) % 2n ** 64n;
      const units = seed % 10n ** BigInt(1 + (i % 19));
      expect(parseUsdc(formatUsdc(units))).toBe(units);
    }
  });

  it("gives the spec's money object with the exact decimal as its JSON number", () => {
    expect(writeJson(toUsdc(1_500_000n))).toBe('{"usdc":1.5}');
    expect(writeJson(toUsdc(100_000n))).toBe('{"usdc":0.1}');
    expect(writeJson(toUsdc(0n))).toBe('{"usdc":0}');
    // 2^53 + 1 base units and the u64 maximum: a float would round both.
    expect(writeJson(toUsdc(9_007_199_254_740_993n))).toBe('{"usdc":9007199254.740993}');
    expect(writeJson(toUsdc(MAX_AMOUNT_UNITS))).toBe('{"usdc":18446744073709.551615}');
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
      const text = writeJson(toUsdc(units));
      const parsed = parseJson(text) as { usdc: JsonNumber };
      expect(parsed.usdc, text).toBeInstanceOf(JsonNumber);
      expect(parseUsdc(parsed.usdc.text), text).toBe(units);
      // And it is plain JSON: any JSON reader sees the same decimal digits (no exponent, no sign).
      expect(parsed.usdc.text, text).toMatch(/^(0|[1-9]\d*)(\.\d{1,6})?$/);
    }
  });
});
