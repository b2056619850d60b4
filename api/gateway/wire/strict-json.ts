/**
 * The few checks every parser of a protocol body needs: a plain object with exactly the allowed
 * keys, non-empty strings, integer amounts. Each throws through the caller's `fail`, so the error
 * names the protocol and the field.
 */

export type Fail = (field: string, detail: string) => never;

export type JsonObject = Record<string, unknown>;

/** Longest string field accepted anywhere in a protocol body (URLs included). */
export const MAX_FIELD_CHARS = 2_048;

export function object(value: unknown, field: string, fail: Fail): JsonObject {
  if (value === null || typeof value !== "object" || Array.isArray(value)) fail(field, "expected an object");
  return value as JsonObject;
}

/** Refuses keys outside `required ∪ optional` and missing required keys. */
export function exactKeys(value: JsonObject, required: readonly string[], optional: readonly string[], prefix: string, fail: Fail): void {
  for (const key of Object.keys(value)) {
    if (!required.includes(key) && !optional.includes(key)) fail(`${prefix}${key}`, "unknown field");
  }
  for (const key of required) {
    if (!(key in value)) fail(`${prefix}${key}`, "missing");
  }
}

export function text(value: unknown, field: string, fail: Fail): string {
  if (typeof value !== "string" || value.length === 0) fail(field, "expected a non-empty string");
  if (value.length > MAX_FIELD_CHARS) fail(field, `longer than ${MAX_FIELD_CHARS} characters`);
  return value;
}

const U64_MAX = (1n << 64n) - 1n;

/** A positive integer amount in base units, as a string of digits without leading zeros. */
export function unitsText(value: unknown, field: string, fail: Fail): bigint {
  const digits = text(value, field, fail);
  if (!/^[1-9]\d{0,19}$/.test(digits)) fail(field, "expected a positive integer in base units");
  const units = BigInt(digits);
  if (units > U64_MAX) fail(field, "does not fit in a u64");
  return units;
}

/** An absolute http(s) URL. */
export function url(value: unknown, field: string, fail: Fail): URL {
  const raw = text(value, field, fail);
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    return fail(field, "expected an absolute URL");
  }
  if (parsed.protocol !== "https:" && parsed.protocol !== "http:") fail(field, "expected an http(s) URL");
  return parsed;
}
