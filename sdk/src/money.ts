/**
 * Money at the client's edge. The spec's `{ usdc: number }` is converted to bigint base units
 * (6 decimals) exactly, from the number's shortest decimal text (`String(0.1)` is `"0.1"`), never
 * by multiplying a float. Inside the client, amounts are `bigint` base units.
 */

/** The spec's amount shape at the client's edge (spec 2.3), e.g. `{ usdc: 0.05 }`. */
export type Usdc = { usdc: number };

export const USDC_DECIMALS = 6;
const SCALE = 10n ** BigInt(USDC_DECIMALS);
/** The ledger's amounts are u64. */
export const MAX_AMOUNT_UNITS = 2n ** 64n - 1n;

const DECIMAL = /^(\d+)(?:\.(\d+))?$/;

export class MoneyFormatError extends RangeError {
  override readonly name = "MoneyFormatError";
}

/**
 * A decimal text (spec 2.9 `amount.value`, or a number's shortest text) → base units.
 * Refuses signs, exponents, more than 6 decimals and amounts above a u64.
 */
export function decimalToUnits(text: string): bigint {
  const match = DECIMAL.exec(text);
  if (match === null) throw new MoneyFormatError(`not a non-negative decimal amount: ${JSON.stringify(text)}`);
  const fraction = match[2] ?? "";
  if (fraction.length > USDC_DECIMALS) {
    throw new MoneyFormatError(`more than ${USDC_DECIMALS} decimal places: ${text}`);
  }
  const units = BigInt(match[1]!) * SCALE + BigInt(fraction.padEnd(USDC_DECIMALS, "0"));
  if (units > MAX_AMOUNT_UNITS) throw new MoneyFormatError(`amount too large: ${text}`);
  return units;
}

/**
 * `1.5` → `1_500_000n`. The number's shortest round-trip text is the amount the caller wrote, so
 * `0.1` is exactly 100000 units and `0.1 + 0.2` (0.30000000000000004) is refused for having more
 * than 6 decimals instead of being silently rounded.
 */
export function usdcToUnits(usdc: number): bigint {
  if (typeof usdc !== "number" || !Number.isFinite(usdc)) throw new MoneyFormatError(`not a finite number: ${String(usdc)}`);
  if (usdc < 0 || Object.is(usdc, -0)) throw new MoneyFormatError(`negative amount: ${String(usdc)}`);
  return decimalToUnits(plainDecimal(usdc));
}

/**
 * `1_500_000n` → `1.5`. A double holds every decimal of up to 15 significant digits, so every
 * amount below 10^15 base units (a billion usdc) converts exactly; a larger amount converts only
 * when its number reads back as the same decimal, and is refused rather than rounded otherwise.
 */
export function unitsToUsdc(units: bigint): number {
  if (units < 0n) throw new MoneyFormatError(`negative amount: ${units}`);
  const text = unitsToDecimal(units);
  const value = Number(text);
  if (plainDecimal(value) !== text) throw new MoneyFormatError(`amount ${text} usdc cannot be held exactly by a number`);
  return value;
}

/** `1_500_000n` → `"1.5"` (shortest form, no exponent). */
export function unitsToDecimal(units: bigint): string {
  const negative = units < 0n;
  const magnitude = negative ? -units : units;
  const whole = magnitude / SCALE;
  const fraction = (magnitude % SCALE).toString().padStart(USDC_DECIMALS, "0").replace(/0+$/, "");
  return `${negative ? "-" : ""}${whole}${fraction === "" ? "" : `.${fraction}`}`;
}

/** `{ usdc: number }` → base units, validating the shape. */
export function moneyToUnits(money: { usdc: number }, field = "usdc"): bigint {
  if (typeof money !== "object" || money === null || typeof money.usdc !== "number") {
    throw new MoneyFormatError(`${field} must be { usdc: number }`);
  }
  return usdcToUnits(money.usdc);
}

/**
 * The number's shortest round-trip text without an exponent: `1e-7` → `"0.0000001"`,
 * `1e21` → `"1000000000000000000000"`. Exponent forms are expanded digit by digit.
 */
function plainDecimal(value: number): string {
  const text = String(value);
  const exponent = /^(\d+)(?:\.(\d+))?e([+-]\d+)$/.exec(text);
  if (exponent === null) return text;
  const digits = exponent[1]! + (exponent[2] ?? "");
  const point = exponent[1]!.length + Number(exponent[3]);
  if (point <= 0) return `0.${"0".repeat(-point)}${digits}`;
  if (point >= digits.length) return digits + "0".repeat(point - digits.length);
  return `${digits.slice(0, point)}.${digits.slice(point)}`;
}
