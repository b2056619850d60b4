/**
 * Money read from REST request bodies: `{ usdc: number }` (spec 2.1), taken from the raw JSON
 * number token, never through a float, and parsed by api/shared/money.ts's `parseUsdc`; refusals
 * become 400 problem JSON naming the field. Writing money out is `usdcJson` in api/shared/money.ts.
 */
import { parseUsdc, USDC_DECIMALS } from "../money.js";
import { isRecord, JsonNumber, type JsonValue } from "./json.js";
import { badRequest } from "../errors.js";

/**
 * A JSON number token → base units. Refuses strings, negatives, exponents, more than 6 decimals,
 * amounts above a u64, and (unless `allowZero`) zero.
 */
export function parseUsdcNumber(value: JsonValue | undefined, field: string, allowZero = false): bigint {
  if (!(value instanceof JsonNumber)) throw badRequest(field, "must be a number (a usdc amount such as 1.5)");
  const units = parseUsdc(value.text);
  if (units === "not_a_decimal") throw badRequest(field, `must be a non-negative decimal without exponent, got ${value.text}`);
  if (units === "too_many_decimals") throw badRequest(field, `has more than ${USDC_DECIMALS} decimal places: ${value.text}`);
  if (units === "too_large") throw badRequest(field, "is too large");
  if (units === 0n && !allowZero) throw badRequest(field, "must be positive");
  return units;
}

/** `{ usdc: number }` → base units. */
export function parseMoneyObject(value: JsonValue | undefined, field: string): bigint {
  if (!isRecord(value)) throw badRequest(field, "must be { usdc: number }");
  for (const key of Object.keys(value)) if (key !== "usdc") throw badRequest(`${field}.${key}`, "unknown field");
  return parseUsdcNumber(value.usdc, `${field}.usdc`);
}
