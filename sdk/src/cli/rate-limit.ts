/**
 * `--rate-limit "<calls> per <unit>"` → the policy's `{ calls, window }` (spec 2.1). The policy
 * knows five windows (1m, 5m, 15m, 1h, 24h); a unit is any spelling of one of them:
 *
 * | window | accepted units |
 * |---|---|
 * | `1m` | `minute`, `min`, `m`, `1m`, `1 minute`, `60s` |
 * | `5m` | `5m`, `5min`, `5 minutes` |
 * | `15m` | `15m`, `15min`, `15 minutes`, `quarter-hour` |
 * | `1h` | `hour`, `hr`, `h`, `1h`, `60m`, `60 minutes` |
 * | `24h` | `day`, `d`, `1d`, `24h`, `24 hours` |
 *
 * Any other span (`2 per 10m`) is refused with the list: silently rounding a limit to a nearby
 * window would enforce a policy the user did not write.
 */
import { MAX_RATE_LIMIT_CALLS, type RateLimit, type RateWindow } from "../rate-limits.js";
import { UsageError } from "./usage.js";

const SECONDS_PER_UNIT: Readonly<Record<string, number>> = {
  s: 1,
  sec: 1,
  secs: 1,
  second: 1,
  seconds: 1,
  m: 60,
  min: 60,
  mins: 60,
  minute: 60,
  minutes: 60,
  h: 3_600,
  hr: 3_600,
  hrs: 3_600,
  hour: 3_600,
  hours: 3_600,
  d: 86_400,
  day: 86_400,
  days: 86_400,
};

const WINDOW_BY_SECONDS: ReadonlyMap<number, RateWindow> = new Map([
  [60, "1m"],
  [300, "5m"],
  [900, "15m"],
  [3_600, "1h"],
  [86_400, "24h"],
]);

const RATE = /^(\d{1,7})\s*(?:per|\/)\s*(.+)$/i;
const SPAN = /^(\d{1,5})?\s*([a-z]+)$/;

/** `"100 per hour"` → `{ calls: 100, window: "1h" }`; `"none"` → null (removes the limit). */
export function parseRateLimit(text: string): RateLimit | null {
  const trimmed = text.trim();
  if (trimmed.toLowerCase() === "none") return null;
  const match = RATE.exec(trimmed);
  if (match === null) throw new UsageError(`--rate-limit must look like "100 per hour" or "10 per 5m", got "${text}"`);
  const calls = Number(match[1]);
  if (calls < 1 || calls > MAX_RATE_LIMIT_CALLS) throw new UsageError(`--rate-limit calls must be from 1 to ${MAX_RATE_LIMIT_CALLS}`);
  return { calls, window: parseRateWindow(match[2]!) };
}

/** A unit (`hour`, `5m`, `15 minutes`, `quarter-hour`) → one of the five policy windows. */
export function parseRateWindow(unit: string): RateWindow {
  const normalized = unit.trim().toLowerCase();
  if (normalized === "quarter-hour" || normalized === "quarter hour") return "15m";
  const span = SPAN.exec(normalized);
  const perUnit = span === null ? undefined : SECONDS_PER_UNIT[span[2]!];
  const count = span === null || span[1] === undefined ? 1 : Number(span[1]);
  const window = perUnit === undefined ? undefined : WINDOW_BY_SECONDS.get(count * perUnit);
  if (window === undefined) {
    throw new UsageError(`--rate-limit unit "${unit}" is not a policy window; use minute (1m), 5m, 15m, hour (1h) or day (24h)`);
  }
  return window;
}

/** `{ calls: 100, window: "1h" }` → `"100 per 1h"` (the form parseRateLimit reads back). */
export function formatRateLimit(rateLimit: { readonly calls: number; readonly window: string }): string {
  return `${rateLimit.calls} per ${rateLimit.window}`;
}
