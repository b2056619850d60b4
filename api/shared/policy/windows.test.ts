import { describe, expect, it } from "vitest";
import { BUDGET_WINDOW_MS, isRateWindow, openBudgetWindow, RATE_WINDOW_MS, rateWindowStart } from "./windows.js";

const T0 = new Date("2026-03-01T12:00:00.000Z");
const at = (ms: number) => new Date(T0.getTime() + ms);

describe("budget period", () => {
  it("is open from its start until one millisecond before 24 h, and reset at exactly 24 h", () => {
    expect(openBudgetWindow(T0, T0)).toEqual({ start: T0, resetsAt: at(BUDGET_WINDOW_MS) });
    expect(openBudgetWindow(T0, at(BUDGET_WINDOW_MS - 1))).not.toBeNull();
    expect(openBudgetWindow(T0, at(BUDGET_WINDOW_MS))).toBeNull();
  });

  it("is not open when no payment opened one", () => {
    expect(openBudgetWindow(null, T0)).toBeNull();
  });
});

describe("rate windows", () => {
  it.each([
    ["1m", 60_000],
    ["5m", 300_000],
    ["15m", 900_000],
    ["1h", 3_600_000],
    ["24h", 86_400_000],
  ] as const)("%s lasts %i ms", (window, ms) => {
    expect(RATE_WINDOW_MS[window]).toBe(ms);
    expect(rateWindowStart(window, at(ms))).toEqual(T0);
  });

  it.each(["1m", "5m", "15m", "1h", "24h"])("accepts %s", (window) => {
    expect(isRateWindow(window)).toBe(true);
  });

  it.each(["1d", "60s", "1H", "2h", "", " 1m", 1, null])("rejects %j", (window) => {
    expect(isRateWindow(window)).toBe(false);
  });
});
