import { describe, expect, it } from "vitest";
import { formatUsdc, parseUsdc, toUsdc } from "./amounts.js";
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
    expect(() => parseUsdc(text)).toThrow(expect.objectContaining({ code: "invalid_amount" }));
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

  it("gives the spec's money object", () => {
    expect(toUsdc(1_500_000n)).toEqual({ usdc: 1.5 });
  });
});
