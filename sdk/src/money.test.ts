import { describe, expect, it } from "vitest";
import { decimalToUnits, MoneyFormatError, unitsToDecimal, unitsToUsdc, usdcToUnits } from "./money.js";

describe("usdc numbers convert to base units exactly", () => {
  it("takes the number's shortest decimal text, not a float product", () => {
    expect(usdcToUnits(0.1)).toBe(100_000n);
    expect(usdcToUnits(0.2)).toBe(200_000n);
    expect(usdcToUnits(0.3)).toBe(300_000n);
    expect(usdcToUnits(1.005)).toBe(1_005_000n); // 1.005 * 1e6 is 1004999.9999999999 as a float
    expect(usdcToUnits(0.000001)).toBe(1n); // String(1e-6) is "0.000001"
    expect(usdcToUnits(1e-6)).toBe(1n);
    expect(usdcToUnits(2.000001)).toBe(2_000_001n);
    expect(usdcToUnits(123456789.000001)).toBe(123_456_789_000_001n);
    expect(usdcToUnits(0)).toBe(0n);
    expect(usdcToUnits(5)).toBe(5_000_000n);
  });

  it("refuses 0.1 + 0.2 rather than rounding it (17 decimals)", () => {
    expect(() => usdcToUnits(0.1 + 0.2)).toThrow(MoneyFormatError);
  });

  it("refuses more than 6 decimals, negatives and non-finite numbers", () => {
    expect(() => usdcToUnits(0.0000001)).toThrow(/decimal places/);
    expect(() => usdcToUnits(1.1234567)).toThrow(/decimal places/);
    expect(() => usdcToUnits(-1)).toThrow(/negative/);
    expect(() => usdcToUnits(-0)).toThrow(/negative/);
    expect(() => usdcToUnits(Number.NaN)).toThrow(/finite/);
    expect(() => usdcToUnits(Number.POSITIVE_INFINITY)).toThrow(/finite/);
    expect(() => usdcToUnits("1" as unknown as number)).toThrow(/finite/);
  });

  it("refuses amounts above a u64 of base units", () => {
    expect(() => usdcToUnits(1e21)).toThrow(/too large/);
    expect(decimalToUnits("18446744073709.551615")).toBe(2n ** 64n - 1n);
    expect(() => decimalToUnits("18446744073709.551616")).toThrow(/too large/);
  });
});

describe("decimal strings (spec 2.7 / 2.9 amounts)", () => {
  it("parses plain decimals exactly", () => {
    expect(decimalToUnits("0.05")).toBe(50_000n);
    expect(decimalToUnits("10")).toBe(10_000_000n);
    expect(decimalToUnits("0.000001")).toBe(1n);
  });

  it("refuses signs, exponents, blanks and extra decimals", () => {
    for (const bad of ["", "-1", "+1", "1e2", " 1", "1.", ".5", "0.0000001", "1,5", "0x10"]) {
      expect(() => decimalToUnits(bad), bad).toThrow(MoneyFormatError);
    }
  });
});

describe("base units back to usdc numbers", () => {
  it("round-trips every amount through the number's text", () => {
    for (const units of [0n, 1n, 10n, 100_000n, 1_500_000n, 2_000_001n, 999_999_999_999n, 999_999_999_999_999n]) {
      expect(usdcToUnits(unitsToUsdc(units)), String(units)).toBe(units);
    }
    expect(unitsToUsdc(1_500_000n)).toBe(1.5);
    expect(unitsToDecimal(2_000_001n)).toBe("2.000001");
    expect(unitsToDecimal(3_000_000n)).toBe("3");
  });

  it("round-trips pseudo-random amounts with 6 decimals", () => {
    let seed = 42n;
    for (let i = 0; i < 2000; i += 1) {
      seed = (seed * 6364136223846793005n + 1442695040888963407n) % 2n ** 64n;
      const units = seed % 1_000_000_000_000_000n;
      expect(usdcToUnits(unitsToUsdc(units))).toBe(units);
    }
  });

  it("refuses what a number cannot hold exactly", () => {
    expect(() => unitsToUsdc(12_345_678_901_000_001n)).toThrow(/exactly/);
    expect(() => unitsToUsdc(-1n)).toThrow(/negative/);
  });
});
