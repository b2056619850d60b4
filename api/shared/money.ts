/**
 * Money at the API edge: amounts are bigint base units inside (6 decimals, spec 2.7) and decimal
 * strings outside ("1.500000"), never floats. Shares and percentages are exact decimal strings too.
 */

export const USDC_DECIMALS = 6;
const SCALE = 10n ** BigInt(USDC_DECIMALS);

/** 1500000n -> "1.500000"; negative amounts keep their sign. */
export function formatUsdc(units: bigint): string {
  const sign = units < 0n ? "-" : "";
  const abs = units < 0n ? -units : units;
  return `${sign}${abs / SCALE}.${(abs % SCALE).toString().padStart(USDC_DECIMALS, "0")}`;
}

/** "1.5" | "1.500000" | "2" -> base units; null when not a non-negative decimal with ≤ 6 places. */
export function parseUsdc(text: string): bigint | null {
  const match = /^(\d{1,14})(?:\.(\d{1,6}))?$/.exec(text);
  if (match === null) return null;
  return BigInt(match[1]!) * SCALE + BigInt((match[2] ?? "").padEnd(USDC_DECIMALS, "0"));
}

/**
 * part / whole as a decimal string with `places` decimals, rounded half up; "0" share of an empty
 * whole. `multiplier` 100 gives a percentage.
 */
export function ratio(part: bigint, whole: bigint, places: number, multiplier = 1n): string {
  if (whole <= 0n) return formatFixed(0n, places);
  const scale = 10n ** BigInt(places);
  const scaled = (part * multiplier * scale * 2n + whole) / (whole * 2n);
  return formatFixed(scaled, places);
}

function formatFixed(scaled: bigint, places: number): string {
  if (places === 0) return scaled.toString();
  const scale = 10n ** BigInt(places);
  return `${scaled / scale}.${(scaled % scale).toString().padStart(places, "0")}`;
}

/** Postgres numeric/int8 text -> bigint (pg returns them as strings). */
export function units(value: string | number | bigint | null | undefined): bigint {
  if (value === null || value === undefined) return 0n;
  return BigInt(value);
}
