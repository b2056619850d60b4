/**
 * Every error the query service returns on purpose: a GraphQLError whose `extensions.code` is one
 * of these stable codes (never reused for another meaning), with the HTTP status REST answers
 * with. Anything else is masked by yoga.
 */
import { GraphQLError } from "graphql";

export const ERROR_CODES = {
  /** Missing, malformed, unknown or revoked API key (spec 5: AuthenticationError). */
  AUTHENTICATION_ERROR: 401,
  /** An argument failed validation: window, limit, hash, amount, cursor, range. */
  BAD_USER_INPUT: 400,
  /** The agent (or tree root) does not exist, or belongs to another account: the same answer. */
  NOT_FOUND: 404,
  /** The query nests deeper than the service allows. */
  QUERY_TOO_DEEP: 400,
  /** The document does not parse, or has more tokens than the service reads. */
  GRAPHQL_PARSE_FAILED: 400,
  /** The query's estimated cost (fields × list sizes) exceeds the service's budget. */
  QUERY_TOO_COSTLY: 400,
  /** The request body is not JSON, not UTF-8, or repeats a key (api/shared/http/json.ts, both surfaces). */
  INVALID_JSON: 400,
  /** The request body is larger than the surface reads (REST 64 KiB, GraphQL 1 MiB). */
  PAYLOAD_TOO_LARGE: 413,
  /** The request body is not application/json. */
  UNSUPPORTED_MEDIA_TYPE: 415,
  /** A GraphQL GET whose URL is longer than the service reads (api/query/graphql-request.ts). */
  URI_TOO_LONG: 414,
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

/**
 * GraphQL answers field errors with HTTP 200 next to the data that did resolve; only an
 * authentication failure ends the request, with 401. REST maps every code to its status above.
 */
export function apiError(code: ErrorCode, message: string, details: Record<string, unknown> = {}): GraphQLError {
  // An authentication refusal keeps the headers its caller gave (api/shared/auth.ts: WWW-Authenticate).
  const given = (details.http ?? {}) as Record<string, unknown>;
  const http = code === "AUTHENTICATION_ERROR" ? { http: { ...given, status: ERROR_CODES[code] } } : {};
  return new GraphQLError(message, { extensions: { code, ...details, ...http } });
}

export function badInput(argument: string, message: string): GraphQLError {
  return apiError("BAD_USER_INPUT", `${argument}: ${message}`, { argument });
}

export function isApiError(error: unknown, code?: ErrorCode): error is GraphQLError {
  return error instanceof GraphQLError && (code === undefined || error.extensions.code === code);
}
