import { describe, expect, it } from "vitest";
import { formatAmount, percentOf, sumUnits, unitsToDecimal } from "./money";

describe("dashboard money", () => {
  it("writes base units as 6-decimal text without a float", () => {
    expect(unitsToDecimal(1_500_000n)).toBe("1.500000");
    expect(unitsToDecimal("1")).toBe("0.000001");
    expect(unitsToDecimal("18446744073709551615")).toBe("18446744073709.551615");
  });

  it("shows amounts trimmed to cents where exact, grouped by thousands", () => {
    expect(formatAmount("1234.500000")).toBe("1,234.50");
    expect(formatAmount("0.050000")).toBe("0.05");
    expect(formatAmount("0.000125")).toBe("0.000125");
    expect(formatAmount("3")).toBe("3.00");
  });

  it("sums base units exactly beyond 2^53", () => {
    expect(sumUnits(["9007199254740993", "1"])).toBe(9_007_199_254_740_994n);
  });

  it("gives percents with two decimals, half up", () => {
    expect(percentOf(80n, 100n)).toBe("80.00");
    expect(percentOf(2n, 3n)).toBe("66.67");
    expect(percentOf(1n, 8n)).toBe("12.50");
    expect(percentOf(1n, 0n)).toBe("0.00");
  });
});
