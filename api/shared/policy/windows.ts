/**
 * The two kinds of time window the policy uses (spec 2.1, 3, 8):
 *
 * - the daily budget window: a period of exactly 24 h that opens at the first payment made while
 *   no period is open, and resets 24 h later (half-open: [start, start + 24 h));
 * - the rate-limit window: a sliding window of the last `1m`..`24h` ending now, half-open too:
 *   a call made exactly `window` ago no longer counts.
 */

export const BUDGET_WINDOW_MS = 24 * 60 * 60 * 1000;

export const RATE_WINDOWS = ["1m", "5m", "15m", "1h", "24h"] as const;
export type RateWindow = (typeof RATE_WINDOWS)[number];

export const RATE_WINDOW_MS: Readonly<Record<RateWindow, number>> = {
  "1m": 60_000,
  "5m": 5 * 60_000,
  "15m": 15 * 60_000,
  "1h": 60 * 60_000,
  "24h": 24 * 60 * 60_000,
};

export function isRateWindow(value: unknown): value is RateWindow {
  return typeof value === "string" && (RATE_WINDOWS as readonly string[]).includes(value);
}

/** The open budget period at `now`, or null when the last one has reset (or none ever opened). */
export function openBudgetWindow(windowStart: Date | null, now: Date): { start: Date; resetsAt: Date } | null {
  if (windowStart === null) return null;
  const resetsAt = new Date(windowStart.getTime() + BUDGET_WINDOW_MS);
  return now.getTime() < resetsAt.getTime() ? { start: windowStart, resetsAt } : null;
}

/** Calls made after this instant count against a rate limit of `window` at `now`. */
export function rateWindowStart(window: RateWindow, now: Date): Date {
  return new Date(now.getTime() - RATE_WINDOW_MS[window]);
}
