/**
 * Option values → request values. Everything here fails with a UsageError (exit 2) before a
 * request is sent. Amounts are read as decimal text into bigint base units; the `{ usdc: number }`
 * sent is checked to carry exactly those units.
 */
import { decimalToUnits, MoneyFormatError, unitsToUsdc, usdcToUnits } from "../money.js";
import { UsageError } from "./usage.js";

/** Written as `none` to remove a limit (spec 4.1: `null` removes it). */
export const NONE = "none";

/** `"12.5"` → `1n`-exact `{ usdc: 12.5 }`; `"none"` → null. */
export function amountOption(text: string, option: string): { usdc: number } | null {
  if (text.trim().toLowerCase() === NONE) return null;
  return { usdc: unitsToNumber(positiveUnits(text, option), option) };
}

export function positiveUnits(text: string, option: string): bigint {
  if (text.trim().startsWith("-")) throw new UsageError(`--${option} must not be negative, got "${text}"`);
  let units: bigint;
  try {
    units = decimalToUnits(text.trim());
  } catch (error) {
    if (error instanceof MoneyFormatError) throw new UsageError(`--${option} must be a usdc amount such as 10 or 0.25 (${error.message})`);
    throw error;
  }
  if (units === 0n) throw new UsageError(`--${option} must be positive (use "none" to remove the limit)`);
  return units;
}

/** The JSON number for `units`, refused when a double cannot carry it exactly. */
export function unitsToNumber(units: bigint, option: string): number {
  try {
    const usdc = unitsToUsdc(units);
    if (usdcToUnits(usdc) === units) return usdc;
  } catch (error) {
    if (!(error instanceof MoneyFormatError)) throw error;
  }
  throw new UsageError(`--${option} is too large to send exactly`);
}

/** `"a.com, api.b.com"` → `["a.com", "api.b.com"]`; `"none"` → null. */
export function domainsOption(text: string, option: string): string[] | null {
  if (text.trim().toLowerCase() === NONE) return null;
  const entries = text
    .split(",")
    .map((entry) => entry.trim())
    .filter((entry) => entry.length > 0);
  if (entries.length === 0) throw new UsageError(`--${option} needs a comma-separated list of domains, or none`);
  for (const entry of entries) {
    if (/[^\p{L}\p{N}.-]/u.test(entry)) throw new UsageError(`--${option}: "${entry}" is not a domain (no scheme, port, path or wildcard)`);
  }
  return entries;
}

export function oneOf<T extends string>(text: string, option: string, allowed: readonly T[]): T {
  if (!(allowed as readonly string[]).includes(text))
    throw new UsageError(`--${option} must be one of ${allowed.join(", ")}, got "${text}"`);
  return text as T;
}

export function integerOption(text: string, option: string, min: number, max: number): number {
  if (!/^\d{1,9}$/.test(text.trim())) throw new UsageError(`--${option} must be an integer, got "${text}"`);
  const value = Number(text.trim());
  if (value < min || value > max) throw new UsageError(`--${option} must be from ${min} to ${max}`);
  return value;
}

/** `15m`, `24h`, `7d`: the duration form the gateway's `since` and alert windows read. */
export function durationOption(text: string, option: string): string {
  const trimmed = text.trim();
  if (!/^[1-9]\d{0,5}[mhd]$/.test(trimmed)) throw new UsageError(`--${option} must be a window such as 15m, 24h or 7d, got "${text}"`);
  return trimmed;
}

/** A decimal for a JSON number token (alert thresholds): no sign, no exponent, exact as a double. */
export function decimalNumberOption(text: string, option: string): number {
  const trimmed = text.trim();
  if (trimmed.startsWith("-")) throw new UsageError(`--${option} must not be negative, got "${text}"`);
  const match = /^(\d{1,15})(?:\.(\d{1,6}))?$/.exec(trimmed);
  if (match === null) throw new UsageError(`--${option} must be a number such as 80 or 2.5, got "${text}"`);
  const value = Number(trimmed);
  const canonical = `${BigInt(match[1]!)}${(match[2] ?? "").replace(/0+$/, "") === "" ? "" : `.${match[2]!.replace(/0+$/, "")}`}`;
  if (String(value) !== canonical) throw new UsageError(`--${option} has too many digits to send exactly`);
  return value;
}

export function dateTimeOption(text: string, option: string): string {
  const trimmed = text.trim();
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:\d{2})$/.test(trimmed) || Number.isNaN(Date.parse(trimmed))) {
    throw new UsageError(`--${option} must be an ISO 8601 date-time with a zone, e.g. 2026-01-31T00:00Z`);
  }
  return trimmed;
}

/** A `budget_pct` threshold: a percent above 0 and at most 100, at most 2 decimals (the gateway's rule). */
export function percentOption(text: string, option: string): number {
  const value = decimalNumberOption(text, option);
  if (!/^\d+(\.\d{1,2})?$/.test(text.trim())) throw new UsageError(`--${option} is a percent with at most 2 decimals, got "${text}"`);
  if (value <= 0 || value > 100) throw new UsageError(`--${option} must be a percent above 0 and at most 100, got "${text}"`);
  return value;
}
