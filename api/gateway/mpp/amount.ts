/**
 * MPP money (spec 2.9): `{ value, currency }` with `value` a decimal string of the currency's
 * display unit. Our rails settle in the 6-decimal settlement token, so the only currency is USDC
 * and `value` must have at most 6 decimals; it is parsed exactly into base units, never a float.
 */
import type { Fail } from "../x402/strict-json.js";

export const MPP_CURRENCY = "USDC";
export const MPP_DECIMALS = 6;
const SCALE = 10n ** BigInt(MPP_DECIMALS);
const U64_MAX = (1n << 64n) - 1n;

export interface MppAmount {
  readonly units: bigint;
  readonly currency: typeof MPP_CURRENCY;
}

/** "0.05" → 50_000n; signs, exponents, blanks, leading dots and > 6 decimals are refused. */
export function parseDecimalUnits(value: unknown, field: string, fail: Fail): bigint {
  if (typeof value !== "string") return fail(field, "expected a decimal string");
  const match = /^(0|[1-9]\d{0,13})(?:\.(\d{1,6}))?$/.exec(value);
  if (match === null) {
    if (/^\d+\.\d{7,}$/.test(value)) fail(field, `more than ${MPP_DECIMALS} decimal places`);
    return fail(field, "expected a non-negative decimal such as 0.05");
  }
  const units = BigInt(match[1]!) * SCALE + BigInt((match[2] ?? "").padEnd(MPP_DECIMALS, "0"));
  if (units === 0n) fail(field, "must be positive");
  if (units > U64_MAX) fail(field, "too large");
  return units;
}

/** 50_000n → "0.05": the shortest exact decimal. */
export function formatDecimalUnits(units: bigint): string {
  const whole = units / SCALE;
  const fraction = (units % SCALE).toString().padStart(MPP_DECIMALS, "0").replace(/0+$/, "");
  return fraction === "" ? whole.toString() : `${whole}.${fraction}`;
}

export function parseCurrency(value: unknown, field: string, fail: Fail): typeof MPP_CURRENCY {
  if (typeof value !== "string" || value.toUpperCase() !== MPP_CURRENCY) return fail(field, `expected "${MPP_CURRENCY}"`);
  return MPP_CURRENCY;
}
