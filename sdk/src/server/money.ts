/**
 * Amounts in the middleware: bigint base units of the 6-decimal settlement token inside, decimal
 * strings on the wire (x402 `amount` in base units, MPP `value` in USDC), `{ usdc: number }` only
 * in `req.payment`, converted exactly through the decimal text, never by float arithmetic.
 */

export const DECIMALS = 6;
const SCALE = 10n ** BigInt(DECIMALS);
const U64_MAX = (1n << 64n) - 1n;

/** A positive base-unit amount: a bigint, or a string of digits without leading zeros. */
export function parseUnits(value: unknown, where: string): bigint {
  let units: bigint;
  if (typeof value === "bigint") units = value;
  else if (typeof value === "string" && /^[1-9]\d{0,19}$/.test(value)) units = BigInt(value);
  else throw new TypeError(`${where}: expected base units as a bigint or a string of digits such as "50000"`);
  if (units <= 0n || units > U64_MAX) throw new TypeError(`${where}: must be positive and fit in a u64`);
  return units;
}

/** "0.05" → 50_000n; at most 6 decimals, no sign, no exponent. */
export function parseDecimal(value: unknown, where: string): bigint {
  const match = typeof value === "string" ? /^(0|[1-9]\d{0,13})(?:\.(\d{1,6}))?$/.exec(value) : null;
  if (match === null) throw new TypeError(`${where}: expected a decimal string with at most ${DECIMALS} decimals, such as "0.05"`);
  const units = BigInt(match[1]!) * SCALE + BigInt((match[2] ?? "").padEnd(DECIMALS, "0"));
  if (units === 0n) throw new TypeError(`${where}: must be positive`);
  return units;
}

/** 50_000n → "0.05". */
export function formatDecimal(units: bigint): string {
  const whole = units / SCALE;
  const fraction = (units % SCALE).toString().padStart(DECIMALS, "0").replace(/0+$/, "");
  return fraction === "" ? whole.toString() : `${whole}.${fraction}`;
}

/** `{ usdc }` for the handler: the number whose shortest decimal spelling is the exact amount. */
export function usdcOf(units: bigint): { usdc: number } {
  return { usdc: Number(formatDecimal(units)) };
}
