/**
 * Money in the dashboard: exact, from the API's strings. Amounts arrive as 6-decimal USDC strings
 * ("1.500000") with their base units beside them ("1500000"); sums and shares are computed on
 * bigint base units and written back as decimal text. No amount ever goes through a float (a
 * chart's pixel position is the one place a number is plotted, never shown as an amount).
 */

export const USDC_DECIMALS = 6;
const SCALE = 10n ** BigInt(USDC_DECIMALS);

/** Base units (a bigint or its decimal-digit string) as 6-decimal text: 1500000n → "1.500000". */
export function unitsToDecimal(units: bigint | string): string {
  const value = typeof units === "string" ? BigInt(units) : units;
  const negative = value < 0n;
  const abs = negative ? -value : value;
  const whole = abs / SCALE;
  const fraction = (abs % SCALE).toString().padStart(USDC_DECIMALS, "0");
  return `${negative ? "-" : ""}${whole}.${fraction}`;
}

/**
 * An exact decimal for display: trailing zeros beyond the cents dropped, thousands grouped:
 * "1234.500000" → "1,234.50", "0.000125" → "0.000125", "3" → "3.00".
 */
export function formatAmount(decimal: string): string {
  const match = /^(-?)(\d+)(?:\.(\d+))?$/.exec(decimal.trim());
  if (match === null) return decimal;
  const [, sign, whole, fraction = ""] = match;
  let digits = fraction.replace(/0+$/, "");
  if (digits.length < 2) digits = digits.padEnd(2, "0");
  const grouped = whole!.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  return `${sign}${grouped}.${digits}`;
}

/** The sum of base-unit strings, as a bigint. */
export function sumUnits(values: readonly (string | bigint)[]): bigint {
  let total = 0n;
  for (const value of values) total += typeof value === "string" ? BigInt(value) : value;
  return total;
}

/** part / whole in percent with two decimals, rounded half up: (80n, 100n) → "80.00". "0.00" for a zero whole. */
export function percentOf(part: bigint, whole: bigint): string {
  if (whole <= 0n) return "0.00";
  const hundredths = (part * 10_000n * 2n + whole) / (whole * 2n);
  const text = hundredths.toString().padStart(3, "0");
  return `${text.slice(0, -2)}.${text.slice(-2)}`;
}

/** Base units as a number of USDC for a chart's vertical position only (never displayed as an amount). */
export function unitsForPlot(units: string | bigint): number {
  return Number(typeof units === "string" ? BigInt(units) : units) / 1e6;
}
