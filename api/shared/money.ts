/**
 * The server's one money module: bigint base units inside (6 decimals, spec 2.7), decimal text or
 * exact JSON number tokens outside, never floats. Any server module may import it; the SDK keeps
 * its own copy, as it imports nothing of the server.
 *
 * `parseUsdc` is the one parser (non-negative, at most 6 places, at most a u64 of units); it names
 * the problem and each edge words it in its own error, so messages stay those of their surface.
 * Two display formats:
 * - `formatUsdcFixed` → "1.500000": GraphQL's decimal strings and the wallet errors' messages;
 * - `formatUsdcShort` → "1.5": human text (policy reasons, refusals, alerts), the `{ usdc: number }`
 *   token of REST bodies and webhook payloads (`usdcJson`), and MPP's `value` strings.
 */
import { JsonNumber } from "./json-number.js";

export const USDC_DECIMALS = 6;
export const UNITS_PER_USDC = 10n ** BigInt(USDC_DECIMALS);
/** The largest amount a `numeric(20,0)` column (and a u64 on chain) can both hold. */
export const MAX_AMOUNT_UNITS = 18_446_744_073_709_551_615n;

/** Why a text is not an amount. */
export type UsdcTextProblem = "not_a_decimal" | "too_many_decimals" | "too_large";

// Twenty integer digits hold any u64 of whole usdc even with leading zeros; more is malformed.
const DECIMAL = /^(\d{1,20})(?:\.(\d+))?$/;

/**
 * "1.50" | "1.5" | "2" → base units, exactly; or the problem with the text. Signs, exponents,
 * blanks, a bare "1." or ".5", more than 6 decimals and more than 2^64 - 1 units are refused.
 */
export function parseUsdc(text: string): bigint | UsdcTextProblem {
  const match = DECIMAL.exec(text);
  if (match === null) return "not_a_decimal";
  const fraction = match[2] ?? "";
  if (fraction.length > USDC_DECIMALS) return "too_many_decimals";
  const units = BigInt(match[1]!) * UNITS_PER_USDC + BigInt(fraction.padEnd(USDC_DECIMALS, "0"));
  return units > MAX_AMOUNT_UNITS ? "too_large" : units;
}

/** 1_500_000n → "1.500000" (GraphQL decimals, wallet error messages); negatives keep their sign. */
export function formatUsdcFixed(units: bigint): string {
  const sign = units < 0n ? "-" : "";
  const abs = units < 0n ? -units : units;
  return `${sign}${abs / UNITS_PER_USDC}.${(abs % UNITS_PER_USDC).toString().padStart(USDC_DECIMALS, "0")}`;
}

/** 1_500_000n → "1.5", 1_000_000n → "1" (human text, JSON number tokens); negatives keep their sign. */
export function formatUsdcShort(units: bigint): string {
  if (units < 0n) return `-${formatUsdcShort(-units)}`;
  const whole = units / UNITS_PER_USDC;
  const fraction = (units % UNITS_PER_USDC).toString().padStart(USDC_DECIMALS, "0").replace(/0+$/, "");
  return fraction === "" ? whole.toString() : `${whole}.${fraction}`;
}

/** The spec's money object `{ usdc: number }`, its number the exact decimal (no float on the way). */
export interface UsdcJson {
  readonly usdc: JsonNumber;
}

/**
 * 1_500_000n → `{ usdc: 1.5 }` for JSON written by `writeJson` (api/shared/http/json.ts): the token
 * is `formatUsdcShort`'s text, so 100_000n is `0.1` (never 0.10000000000000001) and 2^64 - 1 units
 * keep every digit.
 */
export function usdcJson(units: bigint): UsdcJson {
  return { usdc: new JsonNumber(formatUsdcShort(units)) };
}

export function usdcJsonOrNull(units: bigint | null): UsdcJson | null {
  return units === null ? null : usdcJson(units);
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
