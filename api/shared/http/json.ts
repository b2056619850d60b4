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
 */
export function parseJson(text: string): JsonValue {
  let at = 0;
  const ws = () => {
    while (at < text.length && (text[at] === " " || text[at] === "\t" || text[at] === "\n" || text[at] === "\r")) at += 1;
  };
  const value = (depth: number): JsonValue => {
    if (depth > MAX_DEPTH) throw invalid(`nested deeper than ${MAX_DEPTH}`);
    ws();
    const c = text[at];
    if (c === "{") {
      at += 1;
      const out: Record<string, JsonValue> = Object.create(null) as Record<string, JsonValue>;
      ws();
      if (text[at] === "}") {
        at += 1;
        return { ...out };
      }
      for (;;) {
        ws();
        if (text[at] !== '"') throw invalid(`expected a key at offset ${at}`);
        const key = string();
        if (Object.hasOwn(out, key)) throw invalid(`duplicate key ${JSON.stringify(key)}`);
        ws();
        if (text[at] !== ":") throw invalid(`expected ':' at offset ${at}`);
        at += 1;
        out[key] = value(depth + 1);
        ws();
        if (text[at] === ",") {
          at += 1;
          continue;
        }
        if (text[at] === "}") {
          at += 1;
          return { ...out };
        }
        throw invalid(`expected ',' or '}' at offset ${at}`);
      }
    }
    if (c === "[") {
      at += 1;
      const out: JsonValue[] = [];
      ws();
      if (text[at] === "]") {
        at += 1;
        return out;
      }
      for (;;) {
        out.push(value(depth + 1));
        ws();
        if (text[at] === ",") {
          at += 1;
          continue;
        }
        if (text[at] === "]") {
          at += 1;
          return out;
        }
        throw invalid(`expected ',' or ']' at offset ${at}`);
      }
    }
    if (c === '"') return string();
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
    throw invalid(at >= text.length ? "unexpected end" : `unexpected character at offset ${at}`);
  };
  const string = (): string => {
    // Find the closing quote, then let JSON.parse decode the escapes of that one token.
    let end = at + 1;
    while (end < text.length && text[end] !== '"') {
      const code = text.charCodeAt(end);
      if (code < 0x20) throw invalid(`control character in a string at offset ${end}`);
      end += text[end] === "\\" ? 2 : 1;
    }
    if (end >= text.length) throw invalid("unterminated string");
    const token = text.slice(at, end + 1);
    at = end + 1;
    try {
      return JSON.parse(token) as string;
    } catch {
      throw invalid(`bad string escape near offset ${at}`);
    }
  };
  const result = value(0);
  ws();
  if (at !== text.length) throw invalid(`trailing text at offset ${at}`);
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
