/**
 * JSON at the REST edge, with exact numbers. Request bodies are parsed from their raw text by a
 * small strict parser that keeps every number token as its text (`JsonNumber`), so an amount such
 * as `0.1` or `12345678901.000001` never passes through a float. Responses are written by
 * `writeJson`, which prints a `JsonNumber` as its digits. `canonicalJson` gives the byte-stable
 * form the idempotency fingerprint hashes (keys sorted, no whitespace, numbers as sent).
 */
import { JsonNumber } from "../json-number.js";
import { ServiceError } from "../errors.js";

/** A JSON number token, exactly as written. */
export { JsonNumber };

export type JsonValue = null | boolean | string | JsonNumber | JsonValue[] | { [key: string]: JsonValue };

/** Bodies larger than this are refused before parsing (413). */
export const MAX_BODY_BYTES = 64 * 1024;
/** Arrays and objects nest at most this deep. */
const MAX_DEPTH = 32;
const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

function invalid(detail: string): ServiceError {
  return new ServiceError("INVALID_JSON", `request body is not valid JSON: ${detail}`);
}

/**
 * Parses JSON text; duplicate keys, trailing text and raw control characters are errors. Escaped
 * ones (`\u0000`, lone surrogates) decode as JSON says: the text rule (api/shared/text.ts) judges them.
 * Every request body of both services passes here: characters are read as codes, a string without
 * a backslash is a slice of the text (only one with escapes goes through `JSON.parse`), and objects
 * are built in place (a `__proto__` key defined as an own property, never the prototype).
 */
export function parseJson(text: string): JsonValue {
  const length = text.length;
  let at = 0;
  /** Skips whitespace; the code of the next character, or -1 at the end. */
  const ws = (): number => {
    for (; at < length; at += 1) {
      const code = text.charCodeAt(at);
      if (code !== 0x20 && code !== 0x09 && code !== 0x0a && code !== 0x0d) return code;
    }
    return -1;
  };
  const value = (depth: number): JsonValue => {
    if (depth > MAX_DEPTH) throw invalid(`nested deeper than ${MAX_DEPTH}`);
    const c = ws();
    if (c === 0x7b) {
      at += 1;
      const out: Record<string, JsonValue> = {};
      if (ws() === 0x7d) {
        at += 1;
        return out;
      }
      for (;;) {
        if (ws() !== 0x22) throw invalid(`expected a key at offset ${at}`);
        const key = string();
        if (Object.hasOwn(out, key)) throw invalid(`duplicate key ${JSON.stringify(key)}`);
        if (ws() !== 0x3a) throw invalid(`expected ':' at offset ${at}`);
        at += 1;
        const item = value(depth + 1);
        if (key === "__proto__") Object.defineProperty(out, key, { value: item, enumerable: true, writable: true, configurable: true });
        else out[key] = item;
        const next = ws();
        at += 1;
        if (next === 0x2c) continue;
        if (next === 0x7d) return out;
        throw invalid(`expected ',' or '}' at offset ${at - 1}`);
      }
    }
    if (c === 0x5b) {
      at += 1;
      const out: JsonValue[] = [];
      if (ws() === 0x5d) {
        at += 1;
        return out;
      }
      for (;;) {
        out.push(value(depth + 1));
        const next = ws();
        at += 1;
        if (next === 0x2c) continue;
        if (next === 0x5d) return out;
        throw invalid(`expected ',' or ']' at offset ${at - 1}`);
      }
    }
    if (c === 0x22) return string();
    if (text.startsWith("true", at)) {
      at += 4;
      return true;
    }
    if (text.startsWith("false", at)) {
      at += 5;
      return false;
    }
    if (text.startsWith("null", at)) {
      at += 4;
      return null;
    }
    NUMBER.lastIndex = at;
    const match = NUMBER.exec(text);
    if (match !== null) {
      at += match[0].length;
      return new JsonNumber(match[0]);
    }
    throw invalid(at >= length ? "unexpected end" : `unexpected character at offset ${at}`);
  };
  const string = (): string => {
    // Find the closing quote; only a token with escapes needs decoding (by JSON.parse).
    const start = at;
    let end = at + 1;
    let escaped = false;
    for (;;) {
      if (end >= length) throw invalid("unterminated string");
      const code = text.charCodeAt(end);
      if (code === 0x22) break;
      if (code < 0x20) throw invalid(`control character in a string at offset ${end}`);
      if (code === 0x5c) {
        escaped = true;
        end += 2;
      } else end += 1;
    }
    at = end + 1;
    if (!escaped) return text.slice(start + 1, end);
    try {
      return JSON.parse(text.slice(start, end + 1)) as string;
    } catch {
      throw invalid(`bad string escape near offset ${at}`);
    }
  };
  const result = value(0);
  if (ws() !== -1) throw invalid(`trailing text at offset ${at}`);
  return result;
}

/** Keys sorted, no whitespace, numbers exactly as sent: the fingerprint's input. */
export function canonicalJson(value: JsonValue | undefined): string {
  if (value === undefined) return "";
  if (value === null || typeof value === "boolean") return String(value);
  if (typeof value === "string") return JSON.stringify(value);
  if (value instanceof JsonNumber) return value.text;
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  const keys = Object.keys(value).sort();
  return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson(value[key])}`).join(",")}}`;
}

/**
 * Serializes a response. `JsonNumber` prints as its digits; `Date` as ISO 8601; `bigint` is refused
 * (money must be converted on purpose, see money.ts); `undefined` fields are left out. `indent` > 0
 * pretty-prints like `JSON.stringify(value, null, indent)` (e-mail bodies), numbers still exact.
 */
export function writeJson(value: unknown, indent = 0): string {
  return write(value, indent, "");
}

function write(value: unknown, indent: number, pad: string): string {
  if (value === null) return "null";
  if (value instanceof JsonNumber) return value.text;
  if (value instanceof Date) return JSON.stringify(value.toISOString());
  switch (typeof value) {
    case "string":
    case "boolean":
      return JSON.stringify(value);
    case "number":
      if (!Number.isFinite(value)) throw new Error("writeJson: non-finite number");
      return JSON.stringify(value);
    case "bigint":
      throw new Error("writeJson: bigint must be converted at the edge (money.ts)");
    case "object": {
      const inner = indent > 0 ? `${pad}${" ".repeat(indent)}` : "";
      const join = (parts: string[], open: string, close: string) =>
        parts.length === 0
          ? `${open}${close}`
          : indent > 0
            ? `${open}\n${inner}${parts.join(`,\n${inner}`)}\n${pad}${close}`
            : `${open}${parts.join(",")}${close}`;
      if (Array.isArray(value))
        return join(
          value.map((item) => (item === undefined ? "null" : write(item, indent, inner))),
          "[",
          "]",
        );
      const parts: string[] = [];
      for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
        if (item === undefined) continue;
        parts.push(`${JSON.stringify(key)}:${indent > 0 ? " " : ""}${write(item, indent, inner)}`);
      }
      return join(parts, "{", "}");
    }
    default:
      throw new Error(`writeJson: cannot serialize ${typeof value}`);
  }
}

/** A JSON object (not an array, not null, not a number token). */
export function isRecord(value: unknown): value is Record<string, JsonValue> {
  return typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof JsonNumber);
}
