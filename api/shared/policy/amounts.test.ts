import { describe, expect, it } from "vitest";
import { parseAmountInput } from "./amounts.js";
import { isPolicyInputError } from "./errors.js";

describe("parseAmountInput", () => {
  it.each([
    ["1.50", 1_500_000n],
    ["1.5", 1_500_000n],
    ["0.000001", 1n],
    ["2", 2_000_000n],
    ["0", 0n],
    ["18446744073709.551615", 18_446_744_073_709_551_615n],
  ])("parses %s exactly", (text, units) => {
    expect(parseAmountInput(text)).toBe(units);
  });

  it.each([
    [1.5, 1_500_000n],
    [0.1, 100_000n],
    [0.000001, 1n],
    [10, 10_000_000n],
  ])("parses the number %s exactly", (value, units) => {
    expect(parseAmountInput(value)).toBe(units);
  });

  it.each(["1.0000001", "-1", "+1", "1e3", ".5", "1.", " 1", "1,5", "", "0x10", "18446744073709.551616"])("rejects %j", (text) => {
    expect(() => parseAmountInput(text)).toThrow(expect.objectContaining({ reason: "invalid_amount" }));
  });

  it.each([0.1 + 0.2, 1e-7, Number.NaN, Number.POSITIVE_INFINITY, -0.5, 1e21])("rejects the number %s", (value) => {
    let thrown: unknown;
    try {
      parseAmountInput(value);
    } catch (error) {
      thrown = error;
    }
    expect(isPolicyInputError(thrown, "invalid_amount")).toBe(true);
  });
});
