/**
 * How `/graphql` reads a request, before any parsing of the document: the same exact JSON as the
 * REST edge (api/shared/http/json.ts: duplicate keys and trailing text refused), the REST edge's
 * text rule for variables and argument literals (api/shared/text.ts), and bounded sizes, so a body is never buffered or executed beyond what the service reads.
 *
 * - POST: `application/json` (or `application/graphql+json`) only, at most
 *   `MAX_GRAPHQL_BODY_BYTES`, counted while it streams in (a body without Content-Length cannot
 *   slip past); larger is 413 PAYLOAD_TOO_LARGE, another media type 415 UNSUPPORTED_MEDIA_TYPE,
 *   bad JSON or duplicate keys 400 INVALID_JSON.
 * - GET: the URL at most `MAX_GRAPHQL_URL_BYTES` (414 URI_TOO_LONG); its `variables` and
 *   `extensions` parameters go through the same strict parser.
 * - Numbers anywhere in the parameters must be plain JSON integers (no fraction, no exponent):
 *   every numeric input of this schema is an `Int` (limits, depths, page sizes) and money is a
 *   decimal string, so `1e2` or `1.0` is a client mistake (400 BAD_USER_INPUT), not 100 or 1.
 */
import type { GraphQLError } from "graphql";
import type { GraphQLParams, Plugin } from "graphql-yoga";
import { type ErrorCode, httpError, isServiceError } from "../shared/errors.js";
import { isRecord, JsonNumber, type JsonValue, parseJson } from "../shared/http/json.js";
import { findUnstorableText, InvalidTextError } from "../shared/text.js";
import { textArgumentsRule } from "./text-arguments.js";

/** POST bodies larger than this are refused (413) before parsing. */
export const MAX_GRAPHQL_BODY_BYTES = 1024 * 1024;
/**
 * GET requests with a longer URL (path and query string) are refused (414). Below node's own 16 KiB
 * header limit (which answers a bare 431), so a long GET gets a typed answer.
 */
export const MAX_GRAPHQL_URL_BYTES = 8 * 1024;

const PLAIN_INTEGER = /^-?(?:0|[1-9]\d*)$/;
const PARAM_KEYS = new Set(["query", "variables", "operationName", "extensions"]);

/** An error found before the document is executed: it ends the request with its own status. */
function requestError(code: ErrorCode, message: string, properties: Record<string, unknown> = {}): GraphQLError {
  return httpError(code, message, properties).toGraphQLError({ endsRequest: true });
}

/** The REST parser's INVALID_JSON as the same GraphQL request error. */
function strictParse(text: string): JsonValue {
  try {
    return parseJson(text);
  } catch (error) {
    if (isServiceError(error, "INVALID_JSON")) throw error.toGraphQLError({ endsRequest: true });
    throw error;
  }
}

/** A parsed JSON value as plain JS, refusing number tokens that are not plain integers. */
function plain(value: JsonValue, path: string): unknown {
  if (value instanceof JsonNumber) {
    if (!PLAIN_INTEGER.test(value.text)) {
      throw requestError(
        "BAD_USER_INPUT",
        `${path}: ${value.text} is not a plain integer; numeric inputs are integers without fraction or exponent (amounts are decimal strings)`,
        { field: path },
      );
    }
    return Number(value.text);
  }
  if (Array.isArray(value)) return value.map((item, i) => plain(item, `${path}[${i}]`));
  if (isRecord(value)) {
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) out[key] = plain(item, `${path}.${key}`);
    return out;
  }
  return value;
}

function objectOrNull(value: unknown, name: string): Record<string, unknown> | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "object" || Array.isArray(value))
    throw requestError("BAD_USER_INPUT", `${name} must be a JSON object`, { field: name });
  return value as Record<string, unknown>;
}

function stringOrNull(value: unknown, name: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "string") throw requestError("BAD_USER_INPUT", `${name} must be a string`, { field: name });
  return value;
}

function toParams(body: Record<string, unknown>): GraphQLParams {
  for (const key of Object.keys(body)) {
    if (!PARAM_KEYS.has(key)) throw requestError("BAD_USER_INPUT", `unknown request parameter ${JSON.stringify(key)}`, { field: key });
  }
  const params: GraphQLParams = {};
  const query = stringOrNull(body.query, "query");
  const operationName = stringOrNull(body.operationName, "operationName");
  const variables = objectOrNull(body.variables, "variables");
  const extensions = objectOrNull(body.extensions, "extensions");
  if (query !== undefined) params.query = query;
  if (operationName !== undefined) params.operationName = operationName;
  if (variables !== undefined) {
    // The text rule (api/shared/text.ts) for variables; literals are checked by textArgumentsRule.
    const found = findUnstorableText(variables, "variables");
    if (found !== null) throw new InvalidTextError(found.field, found.detail).toGraphQLError({ endsRequest: true });
    params.variables = variables;
  }
  if (extensions !== undefined) params.extensions = extensions;
  return params;
}

/** The body's bytes, refused as soon as more than `max` have arrived (or are announced). */
async function readBounded(request: Request, max: number): Promise<Uint8Array> {
  const tooLarge = () => requestError("PAYLOAD_TOO_LARGE", `GraphQL request bodies are at most ${max} bytes`, { limit: max });
  const declared = request.headers.get("content-length");
  if (declared !== null && (!/^\d+$/.test(declared.trim()) || Number(declared) > max)) throw tooLarge();
  if (request.body === null) return new Uint8Array(0);
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > max) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge();
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(total);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.byteLength;
  }
  return bytes;
}

/** Whether a POST's Content-Type is one `/graphql` reads (its parameters, such as charset, aside). */
export function isGraphqlJsonType(contentType: string | null | undefined): boolean {
  const type = (contentType ?? "").split(";")[0]!.trim().toLowerCase();
  return type === "application/json" || type === "application/graphql+json";
}

async function parsePost(request: Request): Promise<GraphQLParams> {
  if (!isGraphqlJsonType(request.headers.get("content-type"))) {
    throw requestError("UNSUPPORTED_MEDIA_TYPE", "send GraphQL requests as application/json");
  }
  return paramsOfBody(await readBounded(request, MAX_GRAPHQL_BODY_BYTES));
}

/**
 * A POST body's bytes (already bounded by `MAX_GRAPHQL_BODY_BYTES`) as the request's parameters,
 * by the rules above; a refusal is thrown as the GraphQL request error. The direct path
 * (./direct-graphql.ts) reads its bodies with this too.
 */
export function paramsOfBody(bytes: Uint8Array): GraphQLParams {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw requestError("INVALID_JSON", "request body is not UTF-8");
  }
  const body = strictParse(text.replace(/^\uFEFF/, ""));
  // One operation per request: batching is off, so an array is as wrong as a number.
  if (!isRecord(body)) throw requestError("BAD_USER_INPUT", "the request body must be a JSON object", { field: "body" });
  return toParams(plain(body, "body") as Record<string, unknown>);
}

function parseGet(request: Request): GraphQLParams {
  if (Buffer.byteLength(request.url) > MAX_GRAPHQL_URL_BYTES) {
    throw requestError("URI_TOO_LONG", `GraphQL GET URLs are at most ${MAX_GRAPHQL_URL_BYTES} bytes; POST larger requests`, {
      limit: MAX_GRAPHQL_URL_BYTES,
    });
  }
  const search = new URL(request.url).searchParams;
  const body: Record<string, unknown> = {};
  for (const key of new Set(search.keys())) {
    if (search.getAll(key).length > 1)
      throw requestError("BAD_USER_INPUT", `request parameter ${key} given more than once`, { field: key });
  }
  for (const key of ["query", "operationName"] as const) if (search.has(key)) body[key] = search.get(key);
  for (const key of ["variables", "extensions"] as const) {
    const text = search.get(key);
    if (text !== null && text !== "") body[key] = plain(strictParse(text), key);
  }
  return toParams(body);
}

/**
 * Replaces yoga's request parsers for `/graphql` with the bounded, strict ones above, and refuses
 * unstorable text in argument literals.
 */
export function useGraphqlRequestLimits(): Plugin {
  return {
    onValidate({ addValidationRule }) {
      addValidationRule(textArgumentsRule());
    },
    onRequestParse({ request, setRequestParser }) {
      if (request.method === "GET") setRequestParser(parseGet);
      else if (request.method === "POST") setRequestParser(parsePost);
    },
  };
}
