/**
 * Money at the REST edge: `{ usdc: number }` (spec 2.1), read from the raw JSON number token and
 * written as an exact number token, never through a float. Inside, amounts are bigint base units.
 */
import { formatUsdc, MAX_AMOUNT_UNITS, USDC_DECIMALS } from "../policy/amounts.js";
import { isRecord, JsonNumber, type JsonValue } from "./json.js";
import { badRequest } from "../errors.js";

const DECIMAL = /^(\d{1,20})(?:\.(\d+))?$/;

/** 1_500_000n → `{ usdc: 1.5 }` with the number token written exactly. */
export function usdcJson(units: bigint): { usdc: JsonNumber } {
  return { usdc: new JsonNumber(formatUsdc(units)) };
}

export function usdcJsonOrNull(units: bigint | null): { usdc: JsonNumber } | null {
  return units === null ? null : usdcJson(units);
}

/**
 * A JSON number token → base units. Refuses strings, negatives, exponents, more than 6 decimals,
 * amounts above a u64, and (unless `allowZero`) zero.
 */
export function parseUsdcNumber(value: JsonValue | undefined, field: string, allowZero = false): bigint {
  if (!(value instanceof JsonNumber)) throw badRequest(field, "must be a number (a usdc amount such as 1.5)");
  const match = DECIMAL.exec(value.text);
  if (match === null) throw badRequest(field, `must be a non-negative decimal without exponent, got ${value.text}`);
  const fraction = match[2] ?? "";
  if (fraction.length > USDC_DECIMALS) throw badRequest(field, `has more than ${USDC_DECIMALS} decimal places: ${value.text}`);
  const units = BigInt(match[1]!) * 10n ** BigInt(USDC_DECIMALS) + BigInt(fraction.padEnd(USDC_DECIMALS, "0"));
  if (units > MAX_AMOUNT_UNITS) throw badRequest(field, "is too large");
  if (units === 0n && !allowZero) throw badRequest(field, "must be positive");
  return units;
}

/** `{ usdc: number }` → base units. */
export function parseMoneyObject(value: JsonValue | undefined, field: string): bigint {
  if (!isRecord(value)) throw badRequest(field, "must be { usdc: number }");
  for (const key of Object.keys(value)) if (key !== "usdc") throw badRequest(`${field}.${key}`, "unknown field");
  return parseUsdcNumber(value.usdc, `${field}.usdc`);
}
