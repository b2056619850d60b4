/**
 * The program's enums (`Protocol`, `Rail` in state.rs) as TypeScript string unions, and their
 * Anchor shape (`{ x402: {} }`) at the coder boundary.
 */

export const PROTOCOLS = ["x402", "mpp"] as const;
export type Protocol = (typeof PROTOCOLS)[number];

export const RAILS = ["stablecoin", "card", "other"] as const;
export type Rail = (typeof RAILS)[number];

/** Anchor's encoding of a fieldless enum variant: an object with one key, the variant name. */
export type AnchorEnum = Record<string, Record<string, never>>;

export function toAnchorEnum(variant: string): AnchorEnum {
  return { [variant]: {} };
}

/**
 * The variant a decoded Anchor enum holds. The raw IDL spells variants as in Rust (`X402`), the
 * camel-cased one as `x402`; both map to the same union member.
 */
export function fromAnchorEnum<T extends string>(value: unknown, variants: readonly T[], what: string): T {
  const keys = value !== null && typeof value === "object" ? Object.keys(value) : [];
  const key = keys.length === 1 ? keys[0]!.toLowerCase() : undefined;
  const variant = variants.find((candidate) => candidate === key);
  if (variant === undefined) {
    throw new TypeError(`unknown ${what} variant ${JSON.stringify(value)}`);
  }
  return variant;
}
