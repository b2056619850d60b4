/**
 * Parsing of every GraphQL / REST argument into typed values, once, at the edge. Each failure is
 * BAD_USER_INPUT naming the argument. Limits here are the service's own (spec 8 leaves them open).
 */
import bs58 from "bs58";
import { badInput } from "./errors.js";
import { parseUsdc } from "./money.js";

export const TRANSACTIONS_LIMIT_DEFAULT = 50;
export const TRANSACTIONS_LIMIT_MAX = 200;
export const TREE_DEPTH_DEFAULT = 16;
export const TREE_DEPTH_MAX = 64;
export const TREE_NODE_LIMIT_DEFAULT = 500;
export const TREE_NODE_LIMIT_MAX = 5000;
/** Buckets one metrics series may hold (window / resolution). */
export const METRIC_BUCKETS_MAX = 1440;
const SINCE_MAX_MS = 366 * 24 * 3_600_000;
const CUSTOM_RANGE_MAX_MS = 400 * 24 * 3_600_000;

const MINUTE_MS = 60_000;
const UNIT_MS = { m: MINUTE_MS, h: 60 * MINUTE_MS, d: 24 * 60 * MINUTE_MS } as const;

/** The dashboard windows (spec 4.2, 4.9); `custom` is a from/to range. */
export const NAMED_WINDOWS = ["1h", "24h", "7d", "30d"] as const;
export const RESOLUTIONS = ["1m", "5m", "15m", "1h", "6h", "1d"] as const;
export const METRIC_NAMES = ["spend", "tx_count", "policy_violations", "protocol_split"] as const;
export type MetricName = (typeof METRIC_NAMES)[number];

/** "15m" | "24h" | "7d" -> milliseconds; null when not of that shape. */
export function durationMs(text: string): number | null {
  const match = /^([1-9]\d{0,5})([mhd])$/.exec(text);
  if (match === null) return null;
  return Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS];
}

/** A ledger transaction hash: base58 of a 64-byte ed25519 signature. */
export function parseTxHash(argument: string, value: string): string {
  let bytes: Uint8Array;
  try {
    bytes = bs58.decode(value);
  } catch {
    throw badInput(argument, "not a base58 transaction hash");
  }
  if (bytes.length !== 64) throw badInput(argument, `a transaction hash is 64 bytes, got ${bytes.length}`);
  return value;
}

export function parseAgentId(argument: string, value: string): string {
  if (!/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/.test(value)) throw badInput(argument, "not a valid agent id");
  return value;
}

export function parseIntInRange(argument: string, value: number | null | undefined, fallback: number, min: number, max: number): number {
  if (value === null || value === undefined) return fallback;
  if (!Number.isInteger(value) || value < min || value > max) {
    throw badInput(argument, `must be an integer from ${min} to ${max}, got ${value}`);
  }
  return value;
}

export function parseAmount(argument: string, value: string): bigint {
  const parsed = parseUsdc(value);
  if (typeof parsed === "string") throw badInput(argument, `must be a non-negative decimal amount with at most 6 decimals, got "${value}"`);
  return parsed;
}

/** `since` of transactions.list: a window back from now ("24h", "7d", "15m"), at most 366 days. */
export function parseSince(argument: string, value: string, now: Date): Date {
  const ms = durationMs(value);
  if (ms === null || ms > SINCE_MAX_MS) throw badInput(argument, `must be a window such as 15m, 24h or 7d (at most 366d), got "${value}"`);
  return new Date(now.getTime() - ms);
}

export function parseDateTime(argument: string, value: string): Date {
  // ISO 8601 with an explicit zone only: a zone-less time means nothing in UTC-only outputs.
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:\d{2})$/.test(value)) {
    throw badInput(argument, `must be an ISO 8601 date-time with a zone, got "${value}"`);
  }
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) throw badInput(argument, `not a valid date-time: "${value}"`);
  return date;
}

/** A time window [from, to): one of the named windows back from now, or a custom range. */
export interface TimeWindow {
  /** "1h" | "24h" | "7d" | "30d" | "custom". */
  readonly label: string;
  readonly from: Date;
  readonly to: Date;
}

/**
 * Windows end at `now` and start at `now - window`, both aligned down to a whole minute: the
 * rollups are per minute, so a window is always a whole number of rollup buckets.
 */
export function parseWindow(
  window: string | null | undefined,
  range: { from: string; to: string } | null | undefined,
  now: Date,
  fallback = "24h",
): TimeWindow {
  if (range !== null && range !== undefined) {
    if (window !== null && window !== undefined && window !== "custom") {
      throw badInput("window", 'give either a named window or a custom range (with window "custom" or none)');
    }
    const from = floorMinute(parseDateTime("range.from", range.from));
    const to = floorMinute(parseDateTime("range.to", range.to));
    if (to.getTime() <= from.getTime()) throw badInput("range", "to must be at least a minute after from");
    if (to.getTime() - from.getTime() > CUSTOM_RANGE_MAX_MS) throw badInput("range", "a custom range spans at most 400 days");
    return { label: "custom", from, to };
  }
  const label = window ?? fallback;
  if (label === "custom") throw badInput("window", 'window "custom" needs a range { from, to }');
  if (!(NAMED_WINDOWS as readonly string[]).includes(label)) {
    throw badInput("window", `must be one of ${NAMED_WINDOWS.join(", ")} or custom, got "${label}"`);
  }
  const end = floorMinute(now);
  // Inclusive of the current (partial) minute: the window ends at the next minute boundary.
  const to = new Date(end.getTime() + MINUTE_MS);
  return { label, from: new Date(to.getTime() - durationMs(label)!), to };
}

export function parseResolution(value: string | null | undefined, window: TimeWindow): { label: string; ms: number } {
  const label = value ?? defaultResolution(window);
  if (!(RESOLUTIONS as readonly string[]).includes(label)) {
    throw badInput("resolution", `must be one of ${RESOLUTIONS.join(", ")}, got "${label}"`);
  }
  const ms = durationMs(label)!;
  const buckets = Math.ceil((window.to.getTime() - window.from.getTime()) / ms);
  if (buckets > METRIC_BUCKETS_MAX) {
    throw badInput("resolution", `${label} over this window gives ${buckets} buckets; at most ${METRIC_BUCKETS_MAX}`);
  }
  return { label, ms };
}

function defaultResolution(window: TimeWindow): string {
  const span = window.to.getTime() - window.from.getTime();
  if (span <= 2 * UNIT_MS.h) return "1m";
  if (span <= 2 * UNIT_MS.d) return "1h";
  if (span <= 60 * UNIT_MS.d) return "1d";
  return "1d";
}

export function parseMetricNames(value: readonly string[] | null | undefined): MetricName[] {
  if (value === null || value === undefined || value.length === 0) return [...METRIC_NAMES];
  const names: MetricName[] = [];
  for (const name of value) {
    const trimmed = name.trim();
    if (!(METRIC_NAMES as readonly string[]).includes(trimmed)) {
      throw badInput("metrics", `unknown metric "${trimmed}"; known: ${METRIC_NAMES.join(", ")}`);
    }
    if (!names.includes(trimmed as MetricName)) names.push(trimmed as MetricName);
  }
  return names;
}

export function floorMinute(date: Date): Date {
  return new Date(Math.floor(date.getTime() / MINUTE_MS) * MINUTE_MS);
}

/** Opaque cursor of the transactions listing: (time in µs, kind, id) of the last row returned. */
export interface ListCursor {
  readonly timeMicros: bigint;
  /** 0 = chain transaction, 1 = rejection. */
  readonly kind: 0 | 1;
  readonly id: bigint;
}

export function encodeCursor(cursor: ListCursor): string {
  return Buffer.from(`${cursor.timeMicros}:${cursor.kind}:${cursor.id}`, "utf8").toString("base64url");
}

export function parseCursor(argument: string, value: string): ListCursor {
  const text = Buffer.from(value, "base64url").toString("utf8");
  const match = /^(-?\d{1,20}):([01]):(\d{1,20})$/.exec(text);
  if (match === null) throw badInput(argument, "not a cursor this service issued");
  return { timeMicros: BigInt(match[1]!), kind: Number(match[2]) as 0 | 1, id: BigInt(match[3]!) };
}
