/**
 * Money at the policy's edges. Inside, every amount is a `bigint` of 6-decimal token base units;
 * decimal strings (and the spec's `{ usdc: number }`) exist only where values enter or leave. The
 * parsing and the display formats are api/shared/money.ts's; this module words their refusals as
 * the policy's `InvalidAmountError`.
 */
import { MAX_AMOUNT_UNITS, parseUsdc, USDC_DECIMALS, type UsdcTextProblem } from "../money.js";
import { InvalidAmountError } from "./errors.js";

const DETAIL: Record<UsdcTextProblem, string> = {
  not_a_decimal: "expected a non-negative decimal such as 1.50",
  too_many_decimals: `more than ${USDC_DECIMALS} decimal places`,
  too_large: "too large",
};

/** "1.50" or 1.5 → 1_500_000n exactly; anything `parseUsdc` refuses throws `InvalidAmountError`. */
export function parseAmountInput(value: string | number): bigint {
  const text = typeof value === "number" ? numberText(value) : value;
  const units = parseUsdc(text);
  if (typeof units === "string") throw new InvalidAmountError(text, DETAIL[units]);
  return units;
}

function numberText(value: number): string {
  if (!Number.isFinite(value)) throw new InvalidAmountError(String(value), "not a finite number");
  // String() gives the shortest text that round-trips, so 0.1 stays "0.1" and 0.1 + 0.2 shows its
  // 17 digits and is rejected rather than silently rounded.
  return String(value);
}

export function assertAmountUnits(units: bigint, what: string): void {
  if (units <= 0n) throw new InvalidAmountError(units.toString(), `${what} must be positive`);
  if (units > MAX_AMOUNT_UNITS) throw new InvalidAmountError(units.toString(), `${what} is too large`);
}
