/**
 * Parsing of the spec 2.10 alert options: thresholds (percent or usdc), windows, targets.
 */
import { describe, expect, it } from "vitest";
import { InvalidAlertError, parseAlertOptions, parseAlertWindow } from "../../api/gateway/events/index.js";

const base = { agent: "agent-1", notify: "email:ops@example.com" } as const;

describe("alert options", () => {
  it("budget_pct thresholds are percents above 0 and up to 100 with at most 2 decimals, kept exactly", () => {
    expect(parseAlertOptions({ ...base, type: "budget_pct", threshold: 80 }).rule).toEqual({ type: "budget_pct", thresholdBp: 8000 });
    expect(parseAlertOptions({ ...base, type: "budget_pct", threshold: "0.01" }).rule).toEqual({ type: "budget_pct", thresholdBp: 1 });
    expect(parseAlertOptions({ ...base, type: "budget_pct", threshold: 100 }).rule).toEqual({ type: "budget_pct", thresholdBp: 10000 });
    for (const bad of [0, "0.00", 100.01, "80.555", -5, "1e2", "", "eighty", Number.NaN]) {
      expect(() => parseAlertOptions({ ...base, type: "budget_pct", threshold: bad }), String(bad)).toThrow(InvalidAlertError);
    }
  });

  it("every percent with two decimals round-trips through its number form", () => {
    for (let bp = 1; bp <= 10_000; bp += 7) {
      const rule = parseAlertOptions({ ...base, type: "budget_pct", threshold: bp / 100 }).rule;
      expect(rule).toEqual({ type: "budget_pct", thresholdBp: bp });
    }
  });

  it("spend_rate takes a usdc amount (never a float in storage) and a window", () => {
    expect(parseAlertOptions({ ...base, type: "spend_rate", threshold: 0.1, window: "1h" }).rule).toEqual({
      type: "spend_rate",
      thresholdUnits: 100_000n,
      window: "1h",
      windowMs: 3_600_000,
    });
    expect(() => parseAlertOptions({ ...base, type: "spend_rate", threshold: 0, window: "1h" })).toThrow(/positive/);
    expect(() => parseAlertOptions({ ...base, type: "spend_rate", threshold: "1.0000001", window: "1h" })).toThrow(/threshold/);
    expect(() => parseAlertOptions({ ...base, type: "budget_pct", threshold: 50, window: "1h" })).toThrow(/spend_rate only/);
    expect(() => parseAlertOptions({ ...base, type: "policy_violation", threshold: 1 })).toThrow(/no --threshold/);
  });

  it("windows are <n>m, <n>h or <n>d from one minute to 30 days", () => {
    expect(parseAlertWindow("1m")).toBe(60_000);
    expect(parseAlertWindow("15m")).toBe(900_000);
    expect(parseAlertWindow("24h")).toBe(86_400_000);
    expect(parseAlertWindow("30d")).toBe(2_592_000_000);
    for (const bad of ["0m", "31d", "1w", "1.5h", "h", "01h", " 1h", "1H"])
      expect(() => parseAlertWindow(bad), bad).toThrow(InvalidAlertError);
  });

  it("normalizes the notify target and refuses unknown types", () => {
    expect(parseAlertOptions({ ...base, type: "policy_violation", notify: "webhook:HTTPS://Hooks.Slack.com/services/x" }).notify).toBe(
      "webhook:https://hooks.slack.com/services/x",
    );
    expect(() => parseAlertOptions({ ...base, type: "budget.warning" })).toThrow(/--type/);
    expect(() => parseAlertOptions({ ...base, agent: "", type: "policy_violation" })).toThrow(/--agent/);
  });
});
