/**
 * The characters a text input may hold, on every surface: REST bodies (every string and key, at any
 * depth), path and query parameters, GraphQL arguments and variables. Checked once at each edge
 * (api/shared/http/router.ts, api/query/graphql-request.ts, api/query/text-arguments.ts), so no
 * route can forget it; docs/rest.md "Text fields" states the rule.
 *
 * Refused:
 * - C0 controls U+0000–U+001F: PostgreSQL cannot store U+0000 at all, and the others (tab and line
 *   breaks included) have no place in a name, URL, domain, e-mail address or description, where
 *   they could forge lines in logs, e-mail headers or exports;
 * - DEL and the C1 controls U+007F–U+009F, for the same reason;
 * - lone UTF-16 surrogates (U+D800–U+DFFF not in a pair): not Unicode characters, they cannot be
 *   written as UTF-8, so they would be stored altered.
 * Everything else (any script, emoji, U+FFFD) is allowed.
 */
import { ServiceError } from "./errors.js";

// Without the `u` flag a regex sees UTF-16 code units, which is what finding a lone surrogate needs.
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is its purpose
const UNSTORABLE = /[\u0000-\u001f\u007f-\u009f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

export const TEXT_RULE = "text fields refuse control characters (U+0000–U+001F, U+007F–U+009F) and lone surrogates";

/** Why `text` cannot be accepted (the first offending character), or null when it can. */
export function unstorableText(text: string): string | null {
  const match = UNSTORABLE.exec(text);
  if (match === null) return null;
  const code = match[0].charCodeAt(0);
  const point = `U+${code.toString(16).toUpperCase().padStart(4, "0")}`;
  const what = code >= 0xd800 && code <= 0xdfff ? "a lone surrogate" : "a control character";
  return `contains ${point} (${what}) at index ${match.index}; ${TEXT_RULE}`;
}

/** BAD_USER_INPUT (reason `invalid_text`) naming `field`, for a text with an unstorable character. */
export class InvalidTextError extends ServiceError {
  constructor(field: string, detail: string) {
    super("BAD_USER_INPUT", `${field}: ${detail}`, { field, reason: "invalid_text" });
    this.name = "InvalidTextError";
  }
}

/** Throws `InvalidTextError` for `text` under the name `field`. */
export function refuseUnstorableText(field: string, text: string): void {
  const problem = unstorableText(text);
  if (problem !== null) throw new InvalidTextError(field, problem);
}

/**
 * The first string or key in a parsed JSON value that cannot be accepted, with its path
 * (`name`, `domains[2]`, `metadata.note`; `path` prefixes it), or null.
 */
export function findUnstorableText(value: unknown, path = ""): { field: string; detail: string } | null {
  if (typeof value === "string") {
    const detail = unstorableText(value);
    return detail === null ? null : { field: path === "" ? "body" : path, detail };
  }
  if (Array.isArray(value)) {
    for (const [index, item] of value.entries()) {
      const found = findUnstorableText(item, `${path}[${index}]`);
      if (found !== null) return found;
    }
    return null;
  }
  if (typeof value === "object" && value !== null) {
    for (const [key, item] of Object.entries(value)) {
      const keyProblem = unstorableText(key);
      const field = path === "" ? key : `${path}.${key}`;
      if (keyProblem !== null) return { field: path === "" ? "body" : path, detail: `a key ${keyProblem}` };
      const found = findUnstorableText(item, field);
      if (found !== null) return found;
    }
  }
  return null;
}

/** Throws `InvalidTextError` for the first unacceptable string or key in a parsed JSON value. */
export function refuseUnstorableJson(value: unknown, path = ""): void {
  const found = findUnstorableText(value, path);
  if (found !== null) throw new InvalidTextError(found.field, found.detail);
}
