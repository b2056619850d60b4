/**
 * The one error model of both services (docs/rest.md "Error model"). `ERROR_CODES` is the only
 * registry of machine codes: each with the HTTP status it is answered with and, where spec 7 names
 * one, the client's error class. A code is stable: never reused for another meaning, never renamed.
 *
 * Every error either service answers on purpose is a `ServiceError` (or a subclass in the module
 * that raises it): a registry `code`, its `status`, optionally the spec class (`errorClass`), the
 * fine-grained lowercase machine `reason` (`invalid_amount`, `payee_is_mint`, ...), the input at
 * fault (`field`), further answer properties and response headers. The error renders itself: as
 * RFC 9457 problem JSON for REST (`toProblem`, api/shared/http/problem.ts writes it) and as
 * GraphQL `extensions` (`graphqlExtensions`, `toGraphQLError`). Anything else is unexpected: REST
 * answers 500 INTERNAL_SERVER_ERROR and yoga masks it.
 *
 * The SDK mirrors the codes as a typed union (sdk/src/errors.ts ERROR_CODES;
 * test/sdk/error-codes.test.ts keeps the copy complete). Importable by every part of the server:
 * it imports nothing of it (graphql only).
 */
import { GraphQLError } from "graphql";

/** Client error classes of spec 7, as named in answers (`errorClass`). */
export type SpecErrorClass =
  | "ServiceError"
  | "PolicyViolationError"
  | "DailyBudgetExceededError"
  | "DomainNotAllowedError"
  | "BudgetExceededError"
  | "InsufficientFundsError"
  | "PaymentProtocolError"
  | "PaymentError"
  | "AuthenticationError";

interface CodeEntry {
  readonly status: number;
  /** The spec class every answer with this code names (an error may name a subclass instead). */
  readonly errorClass?: SpecErrorClass;
}

export const ERROR_CODES = {
  // Both surfaces (REST problem `code`, GraphQL `extensions.code`).
  /** Missing, malformed, unknown or revoked API key (spec 5), with the WWW-Authenticate challenge. */
  AUTHENTICATION_ERROR: { status: 401, errorClass: "AuthenticationError" },
  /** An argument or field failed validation: window, limit, hash, amount, cursor, range, body field. */
  BAD_USER_INPUT: { status: 400 },
  /** The API key's scope does not allow the route or field (api/shared/scopes.ts); `requiredScopes` names what would. */
  FORBIDDEN_SCOPE: { status: 403 },
  /** The agent (alert, endpoint, key, ...) does not exist, or belongs to another account: the same answer. */
  NOT_FOUND: { status: 404 },
  /** The request body is not JSON, not UTF-8, or repeats a key (api/shared/http/json.ts). */
  INVALID_JSON: { status: 400 },
  /** The request body is larger than the surface reads (REST 64 KiB, GraphQL 1 MiB). */
  PAYLOAD_TOO_LARGE: { status: 413 },
  /** The request body is not application/json. */
  UNSUPPORTED_MEDIA_TYPE: { status: 415 },

  // GraphQL only (api/query).
  /** The query nests deeper than the service allows. */
  QUERY_TOO_DEEP: { status: 400 },
  /** The document does not parse, or has more tokens than the service reads. */
  GRAPHQL_PARSE_FAILED: { status: 400 },
  /** The query's estimated cost (fields × list sizes) exceeds the service's budget. */
  QUERY_TOO_COSTLY: { status: 400 },
  /** A GraphQL GET whose URL is longer than the service reads (api/query/graphql-request.ts). */
  URI_TOO_LONG: { status: 414 },

  // REST only.
  METHOD_NOT_ALLOWED: { status: 405 },
  INVALID_IDEMPOTENCY_KEY: { status: 400 },
  /** Same Idempotency-Key, different method, path or body (IETF draft: 422). */
  IDEMPOTENCY_KEY_REUSED: { status: 422 },
  /** A request with the same Idempotency-Key is executing right now; retry later. */
  IDEMPOTENCY_IN_PROGRESS: { status: 409 },
  AGENT_EXISTS: { status: 409 },
  /** The agent is archived: it cannot authorize payments or be funded (its history stays readable). */
  AGENT_ARCHIVED: { status: 409 },
  /** Archiving refused: the agent's wallet holds funds, or payments/operations are still open. */
  AGENT_NOT_EMPTY: { status: 409 },
  /** `parentTxHash` opened no invocation for this agent (`agents.invoke` reads it as "no sub-spend"). */
  INVOCATION_NOT_FOUND: { status: 404 },
  /** No such approval in the account (or, for an agent key, of its agent); a dead link token answers the same. */
  APPROVAL_NOT_FOUND: { status: 404 },
  /** The approval was decided before (a person, the signed link or the timeout); nothing changed. */
  APPROVAL_ALREADY_DECIDED: { status: 409 },
  /** The held payment was denied by a person: a refusal like the policy's (`reasonCode` `approval_denied`). */
  APPROVAL_DENIED: { status: 403, errorClass: "PolicyViolationError" },
  /** The held payment was not decided before its timeout (`onTimeout: deny`; `reasonCode` `approval_expired`). */
  APPROVAL_EXPIRED: { status: 403, errorClass: "PolicyViolationError" },
  /** The state of the resource does not allow the request (e.g. a released reservation). */
  CONFLICT: { status: 409 },
  /** A spend policy rejected the payment; `errorClass` may name a subclass (DailyBudgetExceededError, DomainNotAllowedError). */
  POLICY_VIOLATION: { status: 403, errorClass: "PolicyViolationError" },
  LIMIT_EXCEEDED: { status: 409 },
  /** A well-formed webhook URL whose host is loopback, private, link-local, metadata or internal. */
  INVALID_WEBHOOK_URL: { status: 422, errorClass: "ServiceError" },
  INSUFFICIENT_FUNDS: { status: 422, errorClass: "InsufficientFundsError" },
  /** A sub-agent's payment would exceed its invocation's budget. */
  BUDGET_EXCEEDED: { status: 422, errorClass: "BudgetExceededError" },
  /** The ledger refused the payment, or its transaction expired. */
  PAYMENT_FAILED: { status: 502, errorClass: "PaymentError" },
  /** `payTo` is not a wallet the ledger can credit safely (api/gateway/chain/payee.ts); nothing was signed. */
  PAYEE_REFUSED: { status: 422, errorClass: "PaymentError" },
  SERVICE_UNAVAILABLE: { status: 503 },
  INTERNAL_SERVER_ERROR: { status: 500 },
} as const satisfies Record<string, CodeEntry>;

export type ErrorCode = keyof typeof ERROR_CODES;

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === "string" && Object.hasOwn(ERROR_CODES, value);
}

export interface ServiceErrorOptions {
  /** The spec class the client raises; the registry's class for the code when omitted. */
  readonly errorClass?: string;
  /** Which rule refused, as a stable lowercase machine reason (`invalid_amount`, `loopback`, ...). */
  readonly reason?: string;
  /** The input at fault: REST `field`, GraphQL `extensions.argument`. */
  readonly field?: string;
  /** Further properties of the answer (`currentBalance`, `host`, `limit`, ...), rendered as given. */
  readonly extra?: Readonly<Record<string, unknown>>;
  /** Response headers the answer needs (`WWW-Authenticate`, `Allow`). */
  readonly headers?: Readonly<Record<string, string>>;
  readonly cause?: unknown;
}

/** An error either service answers on purpose; subclasses add the properties their failure has. */
export class ServiceError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly errorClass: string | undefined;
  readonly reason: string | undefined;
  readonly field: string | undefined;
  readonly extra: Readonly<Record<string, unknown>>;
  readonly headers: Readonly<Record<string, string>>;

  constructor(code: ErrorCode, message: string, options: ServiceErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "ServiceError";
    const entry: CodeEntry = ERROR_CODES[code];
    this.code = code;
    this.status = entry.status;
    this.errorClass = options.errorClass ?? entry.errorClass;
    this.reason = options.reason;
    this.field = options.field;
    this.extra = options.extra ?? {};
    this.headers = options.headers ?? {};
  }

  /** The RFC 9457 problem body of REST /v1. */
  toProblem(): Record<string, unknown> {
    return { type: "about:blank", title: this.code, status: this.status, code: this.code, detail: this.message, ...this.properties() };
  }

  /**
   * The GraphQL error's `extensions`. GraphQL answers field errors with HTTP 200 next to the data
   * that did resolve, so `http` (status and headers, read by yoga) is there only for an error that
   * ends the request: an authentication failure, or one found before the document is executed.
   */
  graphqlExtensions(options: { readonly endsRequest?: boolean } = {}): Record<string, unknown> {
    const { field, ...properties } = this.properties();
    const endsRequest = options.endsRequest ?? this.code === "AUTHENTICATION_ERROR";
    const headers = Object.keys(this.headers).length === 0 ? {} : { headers: this.headers };
    return {
      code: this.code,
      ...(field === undefined ? {} : { argument: field }),
      ...properties,
      ...(endsRequest ? { http: { status: this.status, ...headers } } : {}),
    };
  }

  /** The error as the GraphQLError resolvers and yoga plugins throw. */
  toGraphQLError(options: { readonly endsRequest?: boolean } = {}): ServiceGraphQLError {
    return new ServiceGraphQLError(this, this.graphqlExtensions(options));
  }

  /**
   * The properties both renderings carry after the code: `errorClass`, `reason`, `field`, then the
   * extra ones. A subclass whose answer differs overrides this, never the renderers.
   */
  protected properties(): Record<string, unknown> {
    return {
      ...(this.errorClass === undefined ? {} : { errorClass: this.errorClass }),
      ...(this.reason === undefined ? {} : { reason: this.reason }),
      ...(this.field === undefined ? {} : { field: this.field }),
      ...this.extra,
    };
  }
}

/**
 * A ServiceError as GraphQL carries it. It has no `originalError` on purpose: yoga counts an error
 * whose original is not a GraphQLError as unexpected (HTTP 500 without data), so the source error
 * is kept here, where api/shared/http/problem.ts finds it when REST meets the same validation.
 */
export class ServiceGraphQLError extends GraphQLError {
  readonly #source: ServiceError;

  constructor(source: ServiceError, extensions: Record<string, unknown>) {
    super(source.message, { extensions });
    this.#source = source;
  }

  get serviceError(): ServiceError {
    return this.#source;
  }
}

/** The ServiceError an answer renders, or null for anything unexpected (logged, answered 500). */
export function toServiceError(error: unknown): ServiceError | null {
  if (error instanceof ServiceError) return error;
  if (error instanceof ServiceGraphQLError) return error.serviceError;
  return null;
}

export function isServiceError(error: unknown, code?: ErrorCode): error is ServiceError {
  return error instanceof ServiceError && (code === undefined || error.code === code);
}

/**
 * A ServiceError from the REST routes' vocabulary: the detail and the answer's properties as one
 * record (`errorClass` and `field` among them, the rest rendered as given).
 */
export function httpError(code: ErrorCode, detail: string, properties: Record<string, unknown> = {}): ServiceError {
  const { errorClass, field, ...extra } = properties;
  return new ServiceError(code, detail, {
    ...(typeof errorClass === "string" ? { errorClass } : {}),
    ...(typeof field === "string" ? { field } : {}),
    extra,
  });
}

/** BAD_USER_INPUT naming the input at fault. */
export function badRequest(field: string, detail: string): ServiceError {
  return new ServiceError("BAD_USER_INPUT", `${field}: ${detail}`, { field });
}

/**
 * `httpError` as the GraphQLError a resolver or plugin throws; `argument` in the details names the
 * argument at fault (REST calls it `field`).
 */
export function apiError(code: ErrorCode, message: string, details: Record<string, unknown> = {}): GraphQLError {
  const { argument, ...properties } = details;
  return httpError(code, message, { ...properties, ...(typeof argument === "string" ? { field: argument } : {}) }).toGraphQLError();
}

/** `badRequest` as the GraphQLError a resolver throws: `extensions.argument` names the argument. */
export function badInput(argument: string, message: string): GraphQLError {
  return badRequest(argument, message).toGraphQLError();
}

export function isApiError(error: unknown, code?: ErrorCode): error is GraphQLError {
  return error instanceof GraphQLError && (code === undefined || error.extensions.code === code);
}
