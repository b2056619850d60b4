/**
 * The client's error classes (spec 7). Every class derives from `ServiceError` and carries the
 * gateway's stable `code` (REST problem `code`, GraphQL `extensions.code`) and HTTP `status` when
 * the failure came from an answer.
 *
 * `instanceof` works across two copies of this package (a bundled copy and a hoisted one, or an
 * ESM and a CJS build): each class is branded with a `Symbol.for` key and checks the brand in a
 * static `Symbol.hasInstance`, so `error instanceof PolicyViolationError` does not depend on which
 * copy constructed the error.
 */

const BRAND = Symbol.for("agent-payment-gateway.sdk.error");

/**
 * The gateway's stable error codes: a copy of the one registry, api/shared/errors.ts ERROR_CODES
 * (REST problem `code`, GraphQL `extensions.code`), in its order, because the SDK imports nothing
 * of the server. A code is never reused for another meaning, so a name here keeps its meaning.
 * test/sdk/error-codes.test.ts fails when the registry gains a code missing here.
 */
export const GATEWAY_ERROR_CODES = [
  // Both surfaces.
  "AUTHENTICATION_ERROR",
  "BAD_USER_INPUT",
  "FORBIDDEN_SCOPE",
  "NOT_FOUND",
  "INVALID_JSON",
  "PAYLOAD_TOO_LARGE",
  "UNSUPPORTED_MEDIA_TYPE",
  // GraphQL only.
  "QUERY_TOO_DEEP",
  "GRAPHQL_PARSE_FAILED",
  "QUERY_TOO_COSTLY",
  "URI_TOO_LONG",
  // REST only.
  "METHOD_NOT_ALLOWED",
  "INVALID_IDEMPOTENCY_KEY",
  "IDEMPOTENCY_KEY_REUSED",
  "IDEMPOTENCY_IN_PROGRESS",
  "AGENT_EXISTS",
  "AGENT_ARCHIVED",
  "AGENT_NOT_EMPTY",
  "INVOCATION_NOT_FOUND",
  "APPROVAL_NOT_FOUND",
  "APPROVAL_ALREADY_DECIDED",
  "APPROVAL_DENIED",
  "APPROVAL_EXPIRED",
  "CONFLICT",
  "POLICY_VIOLATION",
  "LIMIT_EXCEEDED",
  "INVALID_WEBHOOK_URL",
  "INSUFFICIENT_FUNDS",
  "BUDGET_EXCEEDED",
  "PAYMENT_FAILED",
  "PAYEE_REFUSED",
  "SERVICE_UNAVAILABLE",
  "INTERNAL_SERVER_ERROR",
] as const;

/**
 * Codes this client sets on errors it builds itself: the paid request failed and releasing the
 * reservation showed the payment is being settled (may still land) or was settled (the money
 * moved, the answer was lost). `API_UNREACHABLE`: the paid API gave no answer to the unpaid first
 * request (nothing was paid). `APPROVAL_PENDING`: the policy held the payment for a person and
 * nobody decided within the client's wait (`ApprovalRequiredError`; the gateway answered 202).
 * Never a gateway code.
 */
export const CLIENT_ERROR_CODES = [
  "PAYMENT_OUTCOME_UNKNOWN",
  "PAYMENT_SETTLED_ANSWER_LOST",
  "API_UNREACHABLE",
  "APPROVAL_PENDING",
] as const;

/** A code the gateway answers with (the union mirrors the server's registry exactly). */
export type GatewayErrorCode = (typeof GATEWAY_ERROR_CODES)[number];

/** Every code an error of this client can carry: the gateway's, then the client's own. */
export const ERROR_CODES = [...GATEWAY_ERROR_CODES, ...CLIENT_ERROR_CODES] as const;

/** A code this version of the client knows (for exhaustive `switch`es). */
export type KnownErrorCode = (typeof ERROR_CODES)[number];

/**
 * A known error code, or any other string: a newer gateway may answer a code this version does
 * not know yet, and it must still reach the caller (`string & {}` keeps the known names offered
 * by editors instead of collapsing the union to `string`).
 */
export type ErrorCode = KnownErrorCode | (string & {});

export type ErrorClassName =
  | "ServiceError"
  | "PolicyViolationError"
  | "DailyBudgetExceededError"
  | "DomainNotAllowedError"
  | "BudgetExceededError"
  | "InsufficientFundsError"
  | "PaymentProtocolError"
  | "PaymentError"
  | "AuthenticationError"
  | "ApprovalRequiredError";

/** Which classes each class counts as (itself and its ancestors), by name. */
const LINEAGE: Record<ErrorClassName, readonly ErrorClassName[]> = {
  ServiceError: ["ServiceError"],
  PolicyViolationError: ["PolicyViolationError", "ServiceError"],
  DailyBudgetExceededError: ["DailyBudgetExceededError", "PolicyViolationError", "ServiceError"],
  DomainNotAllowedError: ["DomainNotAllowedError", "PolicyViolationError", "ServiceError"],
  BudgetExceededError: ["BudgetExceededError", "PolicyViolationError", "ServiceError"],
  InsufficientFundsError: ["InsufficientFundsError", "ServiceError"],
  PaymentProtocolError: ["PaymentProtocolError", "ServiceError"],
  PaymentError: ["PaymentError", "ServiceError"],
  AuthenticationError: ["AuthenticationError", "ServiceError"],
  ApprovalRequiredError: ["ApprovalRequiredError", "ServiceError"],
};

export interface ServiceErrorOptions {
  /** The gateway's stable error code (`POLICY_VIOLATION`, `INSUFFICIENT_FUNDS`, ...). */
  code?: ErrorCode;
  /** HTTP status of the answer that carried the error. */
  status?: number;
  /** The problem body (or GraphQL extensions) as received, for inspection. */
  detail?: unknown;
  /** The underlying failure (a network error, the last attempt's error). */
  cause?: unknown;
  /** The gateway's request id, when it sent one. */
  requestId?: string;
}

function brandOf(value: unknown): ErrorClassName | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const brand = (value as Record<symbol, unknown>)[BRAND];
  return typeof brand === "string" && Object.hasOwn(LINEAGE, brand) ? (brand as ErrorClassName) : undefined;
}

/** Base class of every error the client throws on purpose. */
export class ServiceError extends Error {
  /** The brand this class checks in `instanceof` (overridden by each subclass). */
  static readonly className: ErrorClassName = "ServiceError";

  readonly code?: ErrorCode;
  readonly status?: number;
  readonly detail?: unknown;
  readonly requestId?: string;

  constructor(message: string, options: ServiceErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    const className = (new.target as typeof ServiceError).className;
    this.name = className;
    Object.defineProperty(this, BRAND, { value: className, enumerable: false });
    if (options.code !== undefined) this.code = options.code;
    if (options.status !== undefined) this.status = options.status;
    if (options.detail !== undefined) this.detail = options.detail;
    if (options.requestId !== undefined) this.requestId = options.requestId;
  }

  static override [Symbol.hasInstance](value: unknown): boolean {
    const brand = brandOf(value);
    if (brand === undefined) return false;
    return LINEAGE[brand].includes(this.className);
  }
}

/** A spend policy rejected the payment (spec 7). */
export class PolicyViolationError extends ServiceError {
  static override readonly className: ErrorClassName = "PolicyViolationError";
  /** The gateway's refusal text: spec 7's `<reason_code>: requested <amount> <unit>, limit is <amount> <unit>` where a limit exists (docs/policy.md "Refusal texts"). */
  readonly reason: string;
  /** The machine code before the colon, e.g. `per_call_limit_exceeded`. */
  readonly reasonCode: string;

  constructor(reason: string, options: ServiceErrorOptions & { reasonCode?: string } = {}) {
    super(reason, options);
    this.reason = reason;
    this.reasonCode = options.reasonCode ?? reasonCodeOf(reason);
  }
}

/** The daily budget is consumed; payments are rejected until the window resets. */
export class DailyBudgetExceededError extends PolicyViolationError {
  static override readonly className: ErrorClassName = "DailyBudgetExceededError";
}

/** The endpoint's domain is not on the allowlist, or is on the blocklist. */
export class DomainNotAllowedError extends PolicyViolationError {
  static override readonly className: ErrorClassName = "DomainNotAllowedError";
  readonly domain: string;

  constructor(reason: string, domain: string, options: ServiceErrorOptions & { reasonCode?: string } = {}) {
    super(reason, options);
    this.domain = domain;
  }
}

/** A sub-agent's payment would exceed the budget of its `agents.invoke` invocation. */
export class BudgetExceededError extends PolicyViolationError {
  static override readonly className: ErrorClassName = "BudgetExceededError";
}

/** The agent's wallet lacks the funds. */
export class InsufficientFundsError extends ServiceError {
  static override readonly className: ErrorClassName = "InsufficientFundsError";
  readonly currentBalance: { usdc: number };

  constructor(message: string, currentBalance: { usdc: number }, options: ServiceErrorOptions = {}) {
    super(message, options);
    this.currentBalance = currentBalance;
  }
}

/** A 402 answer names a payment protocol the client does not recognise. */
export class PaymentProtocolError extends ServiceError {
  static override readonly className: ErrorClassName = "PaymentProtocolError";
  readonly endpoint: string;

  constructor(message: string, endpoint: string, options: ServiceErrorOptions = {}) {
    super(message, options);
    this.endpoint = endpoint;
  }
}

/** The payment failed (after all retries of a transient failure, or definitively). */
export class PaymentError extends ServiceError {
  static override readonly className: ErrorClassName = "PaymentError";
}

/** The API key is invalid or missing (spec 5). */
export class AuthenticationError extends ServiceError {
  static override readonly className: ErrorClassName = "AuthenticationError";
}

/**
 * The policy held the payment for a person (docs/policy.md "Approvals") and it was still pending
 * when the client stopped waiting: nothing was signed or paid. Calling `pay` again with the same
 * idempotency key resumes it (the paid result once approved); `approvalId` follows it
 * (`approvals.get`). A denied or expired approval is a `PolicyViolationError` instead
 * (`code` `APPROVAL_DENIED` / `APPROVAL_EXPIRED`, `reasonCode` `approval_denied` / `approval_expired`).
 */
export class ApprovalRequiredError extends ServiceError {
  static override readonly className: ErrorClassName = "ApprovalRequiredError";
  readonly approvalId: string;
  /** ISO 8601: when the gateway's clock expires the approval if nobody decides. */
  readonly expiresAt: string;
  /** The Idempotency-Key `pay` sent (the caller's or the one it generated): `pay` again with it to resume. */
  readonly idempotencyKey?: string;

  constructor(message: string, approvalId: string, expiresAt: string, options: ServiceErrorOptions & { idempotencyKey?: string } = {}) {
    const { idempotencyKey, ...rest } = options;
    super(message, { code: "APPROVAL_PENDING", ...rest });
    this.approvalId = approvalId;
    this.expiresAt = expiresAt;
    if (idempotencyKey !== undefined) this.idempotencyKey = idempotencyKey;
  }
}

/**
 * The 202 answer of a held authorization (`{ approval: { id, status: "pending", expiresAt, ... } }`)
 * → `ApprovalRequiredError`; null when the answer is not that shape.
 */
export function approvalRequiredFrom(
  answer: unknown,
  status = 202,
  requestId?: string,
  idempotencyKey?: string,
): ApprovalRequiredError | null {
  const approval = isRecord(answer) ? answer.approval : undefined;
  if (!isRecord(approval)) return null;
  const id = stringField(approval, "id");
  const expiresAt = stringField(approval, "expiresAt");
  if (id === undefined || expiresAt === undefined) return null;
  const reason = stringField(approval, "reason");
  const message = `payment held for approval ${id} until ${expiresAt}${reason === undefined ? "" : ` (${reason})`}`;
  return new ApprovalRequiredError(message, id, expiresAt, {
    status,
    detail: answer,
    ...(requestId === undefined ? {} : { requestId }),
    ...(idempotencyKey === undefined ? {} : { idempotencyKey }),
  });
}

/** `isServiceError(e, "POLICY_VIOLATION")`: narrowing by class and, optionally, by code. */
export function isServiceError(error: unknown, code?: ErrorCode): error is ServiceError {
  return error instanceof ServiceError && (code === undefined || error.code === code);
}

function reasonCodeOf(reason: string): string {
  const colon = reason.indexOf(":");
  return colon > 0 ? reason.slice(0, colon) : reason;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function stringField(body: Record<string, unknown>, key: string): string | undefined {
  const value = body[key];
  return typeof value === "string" ? value : undefined;
}

/** `{ usdc: number }` from an answer, or undefined when it is not that shape. */
function moneyField(body: Record<string, unknown>, key: string): { usdc: number } | undefined {
  const value = body[key];
  if (!isRecord(value) || typeof value.usdc !== "number" || !Number.isFinite(value.usdc)) return undefined;
  return { usdc: value.usdc };
}

/**
 * The gateway's RFC 9457 problem JSON (REST) or a GraphQL error's extensions → the client's
 * class. `errorClass` decides when present (the gateway names the spec's class); otherwise the
 * `code` and status do. Unknown shapes become a plain `ServiceError` with the status.
 */
export function errorFromProblem(status: number, problem: unknown, requestId?: string): ServiceError {
  const body = isRecord(problem) ? problem : {};
  const code = stringField(body, "code");
  const errorClass = stringField(body, "errorClass");
  const detailText = stringField(body, "detail") ?? stringField(body, "message") ?? stringField(body, "title");
  const message = detailText ?? `the gateway answered ${status}${code === undefined ? "" : ` ${code}`}`;
  const options: ServiceErrorOptions = {
    ...(code === undefined ? {} : { code }),
    status,
    detail: problem,
    ...(requestId === undefined ? {} : { requestId }),
  };

  if (status === 401 || code === "AUTHENTICATION_ERROR" || errorClass === "AuthenticationError") {
    return new AuthenticationError(message, options);
  }

  const reason = stringField(body, "reason") ?? message;
  const reasonCode = stringField(body, "reasonCode");
  const policyOptions = { ...options, ...(reasonCode === undefined ? {} : { reasonCode }) };
  switch (errorClass) {
    case "PolicyViolationError":
      return new PolicyViolationError(reason, policyOptions);
    case "DailyBudgetExceededError":
      return new DailyBudgetExceededError(reason, policyOptions);
    case "DomainNotAllowedError":
      return new DomainNotAllowedError(reason, stringField(body, "domain") ?? "", policyOptions);
    case "BudgetExceededError":
      return new BudgetExceededError(reason, policyOptions);
    case "InsufficientFundsError":
      return new InsufficientFundsError(message, moneyField(body, "currentBalance") ?? { usdc: 0 }, options);
    case "PaymentProtocolError":
      return new PaymentProtocolError(message, stringField(body, "endpoint") ?? "", options);
    case "PaymentError":
      return new PaymentError(message, options);
    default:
      break;
  }

  switch (code) {
    case "POLICY_VIOLATION":
    case "APPROVAL_DENIED":
    case "APPROVAL_EXPIRED":
      return new PolicyViolationError(reason, policyOptions);
    case "BUDGET_EXCEEDED":
      return new BudgetExceededError(reason, policyOptions);
    case "INSUFFICIENT_FUNDS":
      return new InsufficientFundsError(message, moneyField(body, "currentBalance") ?? { usdc: 0 }, options);
    case "PAYMENT_FAILED":
      return new PaymentError(message, options);
    default:
      return new ServiceError(message, options);
  }
}
