/**
 * RFC 9457 problem JSON for every REST /v1 error: `{ type, title, status, code, detail, ... }`.
 * `code` is stable (never reused for another meaning) and equals GraphQL's `extensions.code` where
 * both surfaces share the failure. Errors the spec names (section 7) also carry `errorClass` (the
 * client's class name) and the spec's properties (`currentBalance`, `domain`, `reason`).
 */
import { GraphQLError } from "graphql";
import { ERROR_CODES, type ErrorCode } from "../errors.js";
import { isPolicyInputError, InvalidPolicyError } from "../policy/errors.js";
import { HttpError, httpError } from "./http-error.js";
import { writeJson } from "./json.js";
import { usdcJson } from "../money.js";
import type { RouteResponse } from "./route-response.js";
import { GatewayError, InsufficientFundsError, BudgetExceededError, PaymentError } from "../../gateway/wallets/errors.js";

// The error itself lives in http-error.ts, which imports nothing of the REST layer, so the JSON and
// money parsers can throw it without importing this renderer (which imports them). Re-exported
// here because callers think of "the problem" as one thing.
export { badRequest, HttpError, httpError, REST_ERROR_CODES, type RestErrorCode } from "./http-error.js";

export const PROBLEM_CONTENT_TYPE = "application/problem+json";

/** The error as a route response (problem JSON). */
export function problemResponse(error: HttpError): RouteResponse {
  return { status: error.status, body: writeJson(problemBody(error)), headers: { "content-type": PROBLEM_CONTENT_TYPE, ...error.headers } };
}

export function problemBody(error: HttpError): Record<string, unknown> {
  return { type: "about:blank", title: error.code, status: error.status, code: error.code, detail: error.message, ...error.extra };
}

/** The error as an HttpError; null for anything unexpected (the caller logs it and answers 500). */
export function toHttpError(error: unknown): HttpError | null {
  if (error instanceof HttpError) return error;
  if (error instanceof GraphQLError) {
    const code = error.extensions.code;
    if (typeof code === "string" && Object.hasOwn(ERROR_CODES, code)) {
      const { argument, errorClass, http } = error.extensions as { argument?: unknown; errorClass?: unknown; http?: { headers?: unknown } };
      const extra: Record<string, unknown> = {
        ...(typeof errorClass === "string" ? { errorClass } : {}),
        ...(typeof argument === "string" ? { field: argument } : {}),
      };
      // Headers the error asks for (WWW-Authenticate on a 401, api/shared/auth.ts) go out with the problem.
      const headers = isStringRecord(http?.headers) ? http.headers : {};
      return new HttpError(ERROR_CODES[code as ErrorCode], code, error.message, extra, headers);
    }
    return null;
  }
  if (isPolicyInputError(error)) {
    const field = error instanceof InvalidPolicyError ? error.field : undefined;
    return httpError("BAD_USER_INPUT", error.message, { reason: error.code, ...(field === undefined ? {} : { field }) });
  }
  if (error instanceof GatewayError) return fromGatewayError(error);
  const named = error as { name?: unknown; code?: unknown; message?: unknown };
  if (named?.name === "InvalidAlertError" || named?.name === "InvalidTargetError") {
    return httpError("BAD_USER_INPUT", String(named.message), { reason: String(named.code) });
  }
  if (named?.name === "X402FormatError" || named?.name === "MppFormatError") {
    const field = (error as { field?: unknown }).field;
    return httpError("BAD_USER_INPUT", String(named.message), {
      reason: String(named.code),
      ...(typeof field === "string" ? { field } : {}),
    });
  }
  if (named?.name === "WebhookTargetRefusedError") {
    const refused = error as { host?: unknown; reason?: unknown };
    return httpError("INVALID_WEBHOOK_URL", String(named.message), {
      errorClass: "ServiceError",
      field: "url",
      reason: String(refused.reason),
      host: String(refused.host),
    });
  }
  if (named?.name === "PayeeRefusedError") {
    const { code, field, payee } = error as { code?: unknown; field?: unknown; payee?: unknown };
    return httpError("PAYEE_REFUSED", String(named.message), {
      errorClass: "PaymentError",
      reason: String(code),
      ...(typeof field === "string" ? { field } : {}),
      ...(typeof payee === "string" ? { payee } : {}),
    });
  }
  if (named?.name === "EndpointLimitError") return httpError("LIMIT_EXCEEDED", String(named.message));
  return null;
}

function isStringRecord(value: unknown): value is Record<string, string> {
  return typeof value === "object" && value !== null && Object.values(value).every((item) => typeof item === "string");
}

function fromGatewayError(error: GatewayError): HttpError {
  if (error instanceof InsufficientFundsError) {
    return httpError("INSUFFICIENT_FUNDS", error.message, {
      errorClass: "InsufficientFundsError",
      currentBalance: usdcJson(error.currentBalanceUnits),
    });
  }
  if (error instanceof BudgetExceededError) {
    return httpError("BUDGET_EXCEEDED", error.message, { errorClass: "BudgetExceededError", invocation: error.invocation });
  }
  if (error instanceof PaymentError) return httpError("PAYMENT_FAILED", error.message, { errorClass: "PaymentError" });
  switch (error.code) {
    case "wallet_not_found":
      return httpError("NOT_FOUND", error.message);
    case "wallet_exists":
      return httpError("AGENT_EXISTS", error.message);
    case "invalid_address":
    case "invalid_amount":
    case "invalid_client_reference":
      return httpError("BAD_USER_INPUT", error.message, { reason: error.code });
    case "idempotency_conflict":
      return httpError("IDEMPOTENCY_KEY_REUSED", error.message);
    default:
      return httpError("SERVICE_UNAVAILABLE", error.message);
  }
}
