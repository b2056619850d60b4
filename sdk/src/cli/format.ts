/**
 * Values of the gateway's answers as the tables show them. Amounts arrive as `{ usdc: number }`
 * (spec 2.1) and become bigint base units at once (sdk/src/money.ts, exact); sums are bigint.
 */
import { ServiceError } from "../errors.js";
import { MoneyFormatError, moneyToUnits, unitsToDecimal } from "../money.js";

/** `1_500_000n` → `"1.5 USDC"`. */
export function formatUnits(units: bigint): string {
  return `${unitsToDecimal(units)} USDC`;
}

/** An answer's `{ usdc }` → base units; a malformed answer is a ServiceError, not a wrong number. */
export function unitsOf(value: unknown, field: string): bigint {
  try {
    return moneyToUnits(value as { usdc: number }, field);
  } catch (error) {
    if (error instanceof MoneyFormatError) throw new ServiceError(`unexpected answer: ${field} is not an amount (${error.message})`);
    throw error;
  }
}

/** Base units as text (GraphQL's `*Units` fields) → bigint. */
export function unitsFromText(value: unknown, field: string): bigint {
  if (typeof value !== "string" || !/^\d{1,20}$/.test(value)) throw new ServiceError(`unexpected answer: ${field} is not base units`);
  return BigInt(value);
}

/** Spec 2.2: endpoints are shown without their scheme (host and path). */
export function endpointText(endpoint: unknown): string {
  if (typeof endpoint !== "string") return "-";
  return endpoint.replace(/^[a-z][a-z0-9+.-]*:\/\//i, "");
}

export function text(value: unknown, fallback = "-"): string {
  if (value === null || value === undefined || value === "") return fallback;
  return String(value);
}

export function record(value: unknown, what: string): Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw new ServiceError(`unexpected answer: ${what} is not an object`);
  return value as Record<string, unknown>;
}

export function list(value: unknown, what: string): Record<string, unknown>[] {
  if (!Array.isArray(value)) throw new ServiceError(`unexpected answer: ${what} is not a list`);
  return value.map((item, index) => record(item, `${what}[${index}]`));
}
