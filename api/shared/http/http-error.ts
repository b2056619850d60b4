/**
 * The error the REST layer answers on purpose: a status, a stable `code` and a detail, with the
 * code → status table. Rendering it as RFC 9457 problem JSON is problem.ts's job; this file imports
 * nothing of api/shared/http so that the parsers problem.ts itself uses (json.ts, money.ts) can throw it
 * without an import cycle.
 */
import { ERROR_CODES } from "../errors.js";

/** Codes of the REST layer beyond api/shared/errors.ts ERROR_CODES, with their status. */
export const REST_ERROR_CODES = {
  ...ERROR_CODES,
  INVALID_JSON: 400,
  UNSUPPORTED_MEDIA_TYPE: 415,
  PAYLOAD_TOO_LARGE: 413,
  METHOD_NOT_ALLOWED: 405,
  INVALID_IDEMPOTENCY_KEY: 400,
  /** Same Idempotency-Key, different method, path or body (IETF draft: 422). */
  IDEMPOTENCY_KEY_REUSED: 422,
  /** A request with the same Idempotency-Key is executing right now; retry later. */
  IDEMPOTENCY_IN_PROGRESS: 409,
  AGENT_EXISTS: 409,
  /** The agent is archived: it cannot authorize payments or be funded (its history stays readable). */
  AGENT_ARCHIVED: 409,
  /** Archiving refused: the agent's wallet holds funds, or payments/operations are still open. */
  AGENT_NOT_EMPTY: 409,
  /** The state of the resource does not allow the request (e.g. a released reservation). */
  CONFLICT: 409,
  /** A spend policy rejected the payment (spec 7: PolicyViolationError and its kin, in `errorClass`). */
  POLICY_VIOLATION: 403,
  LIMIT_EXCEEDED: 409,
  /** A well-formed webhook URL whose host is loopback, private, link-local, metadata or internal. */
  INVALID_WEBHOOK_URL: 422,
  INSUFFICIENT_FUNDS: 422,
  BUDGET_EXCEEDED: 422,
  PAYMENT_FAILED: 502,
  /** `payTo` is not a wallet the ledger can credit safely (api/gateway/settlement/payee.ts); nothing was signed. */
  PAYEE_REFUSED: 422,
  SERVICE_UNAVAILABLE: 503,
  INTERNAL_SERVER_ERROR: 500,
} as const;

export type RestErrorCode = keyof typeof REST_ERROR_CODES;

/** An error the REST layer answers on purpose. */
export class HttpError extends Error {
  override readonly name = "HttpError";
  constructor(
    readonly status: number,
    readonly code: string,
    detail: string,
    readonly extra: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(detail);
  }
}

export function httpError(code: RestErrorCode, detail: string, extra: Record<string, unknown> = {}): HttpError {
  return new HttpError(REST_ERROR_CODES[code], code, detail, extra);
}

export function badRequest(field: string, detail: string): HttpError {
  return httpError("BAD_USER_INPUT", `${field}: ${detail}`, { field });
}
