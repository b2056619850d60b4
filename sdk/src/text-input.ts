/**
 * The characters a text input may carry: the same rule as the gateway's (docs/rest.md "Text
 * fields"). Refused: the C0 controls U+0000-U+001F, DEL and the C1 controls U+007F-U+009F, and
 * lone UTF-16 surrogates (a string that is not valid Unicode). PostgreSQL cannot store U+0000, and
 * a control character in an id, a name or a URL is never what the caller meant. Everything else
 * (any script, emoji) is accepted.
 *
 * The client checks every string it is about to send (the request path, query, JSON body and
 * headers, and `pay`'s endpoint and headers) before anything leaves, so a bad value is an
 * `InvalidInputError` naming the field instead of a round trip or a crash in `encodeURIComponent`.
 */

/** A C0 control, DEL or a C1 control, or a surrogate half that is not part of a pair. */
// With the `u` flag a surrogate pair is one code point, so the surrogate range matches only halves.
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is this pattern's purpose.
const UNSTORABLE = /[\u0000-\u001f\u007f-\u009f\ud800-\udfff]/u;

/**
 * A caller's value the client refuses to send. A `TypeError` (as every other argument check of
 * this client), with `field` naming the input (`name`, `allowedDomains[2]`, `endpoint`,
 * `headers.x-trace`) and the gateway's code for the same refusal.
 */
export class InvalidInputError extends TypeError {
  override readonly name = "InvalidInputError";
  readonly code = "BAD_USER_INPUT";
  readonly field: string;

  constructor(field: string, detail: string) {
    super(`${field}: ${detail}`);
    this.field = field;
  }
}

/** The index and a printable name of the first refused character of `text`, or null. */
export function findUnstorable(text: string): { index: number; character: string } | null {
  const match = UNSTORABLE.exec(text);
  if (match === null) return null;
  const code = match[0].codePointAt(0) ?? 0;
  const name = code >= 0xd800 ? "a lone surrogate" : "a control character";
  return { index: match.index, character: `${name} (U+${code.toString(16).toUpperCase().padStart(4, "0")})` };
}

/** Throws `InvalidInputError` naming `field` when `text` holds a refused character. */
export function checkText(field: string, text: string): void {
  const bad = findUnstorable(text);
  if (bad !== null) throw new InvalidInputError(field, `contains ${bad.character} at position ${bad.index}, which cannot be stored`);
}

/**
 * Checks every string inside a JSON-like value (object keys too), naming each by its path
 * (`policy.allowedDomains[1]`). Cycles are not followed (JSON.stringify refuses them anyway).
 */
export function checkTexts(field: string, value: unknown, seen: Set<object> = new Set()): void {
  if (typeof value === "string") {
    checkText(field === "" ? "body" : field, value);
    return;
  }
  if (typeof value !== "object" || value === null || seen.has(value)) return;
  seen.add(value);
  if (Array.isArray(value)) {
    for (const [index, item] of value.entries()) checkTexts(`${field}[${index}]`, item, seen);
    return;
  }
  for (const [key, item] of Object.entries(value)) {
    const path = field === "" ? key : `${field}.${key}`;
    checkText(path, key);
    checkTexts(path, item, seen);
  }
}
