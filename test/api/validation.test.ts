/** Argument parsing at the API edge: pure rules, no database (money: api/shared/money.test.ts). */
import { randomBytes } from "node:crypto";
import bs58 from "bs58";
import { describe, expect, it } from "vitest";
import { isApiError } from "../../api/shared/errors.js";
import {
  durationMs,
  encodeCursor,
  parseAmount,
  parseCursor,
  parseIntInRange,
  parseMetricNames,
  parseResolution,
  parseSince,
  parseTxHash,
  parseWindow,
} from "../../api/shared/validation.js";

const NOW = new Date("2026-03-10T12:34:56.789Z");

function badInput(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    if (isApiError(error, "BAD_USER_INPUT")) return String(error.extensions.argument);
    throw error;
  }
  throw new Error("expected BAD_USER_INPUT");
}

describe("argument parsing", () => {
  it("a transaction hash is base58 of 64 bytes", () => {
    const hash = bs58.encode(randomBytes(64));
    expect(parseTxHash("txHash", hash)).toBe(hash);
    expect(badInput(() => parseTxHash("txHash", bs58.encode(randomBytes(32))))).toBe("txHash");
    expect(badInput(() => parseTxHash("rootTxHash", "0OIl"))).toBe("rootTxHash");
    expect(badInput(() => parseTxHash("txHash", ""))).toBe("txHash");
  });

  it("integers must lie in their range; absent means the default", () => {
    expect(parseIntInRange("limit", undefined, 50, 1, 200)).toBe(50);
    expect(parseIntInRange("limit", 200, 50, 1, 200)).toBe(200);
    for (const bad of [0, -1, 201, 1.5]) expect(badInput(() => parseIntInRange("limit", bad, 50, 1, 200))).toBe("limit");
  });

  it("amounts are non-negative decimals", () => {
    expect(parseAmount("amount", "0.25")).toBe(250_000n);
    expect(badInput(() => parseAmount("amount", "-0.25"))).toBe("amount");
  });

  it("durations: minutes, hours, days", () => {
    expect(durationMs("15m")).toBe(900_000);
    expect(durationMs("24h")).toBe(86_400_000);
    expect(durationMs("7d")).toBe(604_800_000);
    for (const bad of ["0h", "1w", "h", "1.5h", "-1h", "24 h", "1H"]) expect(durationMs(bad), bad).toBeNull();
  });

  it("since is a window back from now, at most 366 days", () => {
    expect(parseSince("since", "24h", NOW).getTime()).toBe(NOW.getTime() - 86_400_000);
    expect(badInput(() => parseSince("since", "400d", NOW))).toBe("since");
    expect(badInput(() => parseSince("since", "yesterday", NOW))).toBe("since");
  });

  it("named windows end at the next whole minute and span exactly their length", () => {
    for (const [label, ms] of [
      ["1h", 3_600_000],
      ["24h", 86_400_000],
      ["7d", 604_800_000],
      ["30d", 2_592_000_000],
    ] as const) {
      const window = parseWindow(label, null, NOW);
      expect(window.label).toBe(label);
      expect(window.to.toISOString()).toBe("2026-03-10T12:35:00.000Z");
      expect(window.to.getTime() - window.from.getTime()).toBe(ms);
    }
    expect(parseWindow(undefined, null, NOW).label).toBe("24h");
    for (const bad of ["2h", "1d", "custom", "", "90d"])
      expect(
        badInput(() => parseWindow(bad, null, NOW)),
        bad,
      ).toBe("window");
  });

  it("a custom range is rounded down to minutes, ordered, zoned and at most 400 days", () => {
    const window = parseWindow(null, { from: "2026-01-01T00:00:30Z", to: "2026-01-02T00:00:59+00:00" }, NOW);
    expect([window.label, window.from.toISOString(), window.to.toISOString()]).toEqual([
      "custom",
      "2026-01-01T00:00:00.000Z",
      "2026-01-02T00:00:00.000Z",
    ]);
    expect(badInput(() => parseWindow(null, { from: "2026-01-02T00:00:00Z", to: "2026-01-01T00:00:00Z" }, NOW))).toBe("range");
    expect(badInput(() => parseWindow(null, { from: "2026-01-01T00:00:00", to: "2026-01-02T00:00:00Z" }, NOW))).toBe("range.from");
    expect(badInput(() => parseWindow(null, { from: "2020-01-01T00:00:00Z", to: "2026-01-02T00:00:00Z" }, NOW))).toBe("range");
    expect(badInput(() => parseWindow("24h", { from: "2026-01-01T00:00:00Z", to: "2026-01-02T00:00:00Z" }, NOW))).toBe("window");
  });

  it("a resolution must be known and give at most 1440 buckets", () => {
    const day = parseWindow("24h", null, NOW);
    expect(parseResolution("1h", day)).toEqual({ label: "1h", ms: 3_600_000 });
    expect(parseResolution("1m", day).label).toBe("1m");
    expect(badInput(() => parseResolution("1m", parseWindow("7d", null, NOW)))).toBe("resolution");
    expect(badInput(() => parseResolution("7s", day))).toBe("resolution");
  });

  it("metric names are the spec's four; none asked means all", () => {
    expect(parseMetricNames(null)).toEqual(["spend", "tx_count", "policy_violations", "protocol_split"]);
    expect(parseMetricNames(["spend", " tx_count", "spend"])).toEqual(["spend", "tx_count"]);
    expect(badInput(() => parseMetricNames(["latency"]))).toBe("metrics");
  });

  it("cursors round-trip, and anything else is refused", () => {
    for (let i = 0; i < 200; i++) {
      const cursor = {
        timeMicros: BigInt(`0x${randomBytes(6).toString("hex")}`),
        kind: (i % 2) as 0 | 1,
        id: BigInt(`0x${randomBytes(4).toString("hex")}`),
      };
      expect(parseCursor("after", encodeCursor(cursor))).toEqual(cursor);
    }
    for (const bad of ["", "bm9wZQ", Buffer.from("1:2:3").toString("base64url"), Buffer.from("x:0:1").toString("base64url")]) {
      expect(
        badInput(() => parseCursor("after", bad)),
        bad,
      ).toBe("after");
    }
  });
});
