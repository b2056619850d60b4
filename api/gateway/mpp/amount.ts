/**
 * MPP money (spec 2.9): `{ value, currency }` with `value` a decimal string of the currency's
 * display unit. Our rails settle in the 6-decimal settlement token, so the only currency is USDC
 * and `value` must have at most 6 decimals; it is parsed exactly into base units, never a float,
 * and written back with api/shared/money.ts's `formatUsdcShort` ("0.05").
 */
import { parseUsdc, USDC_DECIMALS } from "../../shared/money.js";
import type { Fail } from "../wire/strict-json.js";

export const MPP_CURRENCY = "USDC";
// The stricter shape MPP values have always had to take, on top of parseUsdc's rules: no leading
// zeros and at most 14 integer digits (2^64 - 1 base units is 18446744073709.551615).
const MPP_VALUE = /^(0|[1-9]\d{0,13})(?:\.\d{1,6})?$/;

export interface MppAmount {
  readonly units: bigint;
  readonly currency: typeof MPP_CURRENCY;
}

/** "0.05" → 50_000n; signs, exponents, blanks, leading dots and > 6 decimals are refused. */
export function parseDecimalUnits(value: unknown, field: string, fail: Fail): bigint {
  if (typeof value !== "string") return fail(field, "expected a decimal string");
  if (!MPP_VALUE.test(value)) {
    if (/^\d+\.\d{7,}$/.test(value)) fail(field, `more than ${USDC_DECIMALS} decimal places`);
    return fail(field, "expected a non-negative decimal such as 0.05");
  }
  const units = parseUsdc(value);
  if (units === "too_large") return fail(field, "too large");
  // Unreachable: MPP_VALUE admits only decimals with at most 6 places.
  if (typeof units === "string") return fail(field, "expected a non-negative decimal such as 0.05");
  if (units === 0n) fail(field, "must be positive");
  return units;
}

export function parseCurrency(value: unknown, field: string, fail: Fail): typeof MPP_CURRENCY {
  if (typeof value !== "string" || value.toUpperCase() !== MPP_CURRENCY) return fail(field, `expected "${MPP_CURRENCY}"`);
  return MPP_CURRENCY;
}
