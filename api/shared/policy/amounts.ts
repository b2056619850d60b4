/**
 * Money at the policy's edges. Inside, every amount is a `bigint` of 6-decimal token base units;
 * decimal strings (and the spec's `{ usdc: number }`) exist only where values enter or leave.
 */
import { JsonNumber } from "../json-number.js";
import { InvalidAmountError } from "./errors.js";

export const USDC_DECIMALS = 6;
export const UNITS_PER_USDC = 1_000_000n;
/** The largest amount a `numeric(20,0)` column (and a u64 on chain) can both hold. */
export const MAX_AMOUNT_UNITS = 18_446_744_073_709_551_615n;

const DECIMAL = /^(\d{1,20})(?:\.(\d+))?$/;

/** "1.50" → 1_500_000n exactly; more than 6 decimals, signs, exponents and blanks are rejected. */
export function parseUsdc(value: string | number): bigint {
  const text = typeof value === "number" ? numberText(value) : value;
  const match = DECIMAL.exec(text);
  if (!match) throw new InvalidAmountError(text, "expected a non-negative decimal such as 1.50");
  const fraction = match[2] ?? "";
  if (fraction.length > USDC_DECIMALS) {
    throw new InvalidAmountError(text, `more than ${USDC_DECIMALS} decimal places`);
  }
  const units = BigInt(match[1]!) * UNITS_PER_USDC + BigInt(fraction.padEnd(USDC_DECIMALS, "0"));
  if (units > MAX_AMOUNT_UNITS) throw new InvalidAmountError(text, "too large");
  return units;
}

function numberText(value: number): string {
  if (!Number.isFinite(value)) throw new InvalidAmountError(String(value), "not a finite number");
  // String() gives the shortest text that round-trips, so 0.1 stays "0.1" and 0.1 + 0.2 shows its
  // 17 digits and is rejected rather than silently rounded.
  return String(value);
}

/** 1_500_000n → "1.5"; the exact decimal with no trailing zeros. */
export function formatUsdc(units: bigint): string {
  if (units < 0n) return `-${formatUsdc(-units)}`;
  const whole = units / UNITS_PER_USDC;
  const fraction = (units % UNITS_PER_USDC).toString().padStart(USDC_DECIMALS, "0").replace(/0+$/, "");
  return fraction === "" ? whole.toString() : `${whole}.${fraction}`;
}

/** The spec's money object `{ usdc: number }`, its number the exact decimal (no float on the way). */
export interface UsdcJson {
  readonly usdc: JsonNumber;
}

/**
 * The spec's money object for JSON written by `writeJson`: the number token is `formatUsdc`'s exact
 * decimal, so 100_000n is `0.1` (never 0.10000000000000001) and 2^64 - 1 units keep every digit.
 */
export function toUsdc(units: bigint): UsdcJson {
  return { usdc: new JsonNumber(formatUsdc(units)) };
}

export function assertAmountUnits(units: bigint, what: string): void {
  if (units <= 0n) throw new InvalidAmountError(units.toString(), `${what} must be positive`);
  if (units > MAX_AMOUNT_UNITS) throw new InvalidAmountError(units.toString(), `${what} is too large`);
}
