/**
 * Refusals as MCP tool errors: `isError: true`, the text a model reads (the spec 7 reason of a
 * policy refusal, `<reason_code>: requested <amount> <unit>, limit is <amount> <unit>`, else the
 * error's message), and structured content a host acts on (`errorClass`, `code`, and the fields
 * of the class: `reasonCode`, `domain`, `currentBalance`, `endpoint`; for a payment held for a
 * person, `approvalId`, `expiresAt` and the `idempotencyKey` that resumes it).
 *
 * Only refusals and failures of the payment become tool errors; a bug in this server (anything
 * not a ServiceError or a bad argument) is still answered as a tool error, without its stack, so
 * a host never sees the process die for one call.
 */
import {
  ApprovalRequiredError,
  DomainNotAllowedError,
  type ErrorClassName,
  InsufficientFundsError,
  PaymentProtocolError,
  PolicyViolationError,
  ServiceError,
} from "../errors.js";
import { InvalidArgumentsError } from "./input-schema.js";

/** The MCP `CallToolResult` of a refusal. */
export interface ToolRefusal {
  [key: string]: unknown;
  isError: true;
  content: Array<{ type: "text"; text: string }>;
  structuredContent: Record<string, unknown>;
}

/** The caller's own `maxPrice` was below the price: refused before anything was authorized. */
export class MaxPriceExceededError extends PolicyViolationError {
  /** `requested` null: the offer named no price that could be read (refused rather than guessed). */
  constructor(requested: string | null, limit: string) {
    const asked = requested === null ? "an unreadable price" : `${requested} usdc`;
    super(`max_price_exceeded: requested ${asked}, limit is ${limit} usdc`, {
      code: "POLICY_VIOLATION",
      reasonCode: "max_price_exceeded",
    });
  }
}

function classNameOf(error: ServiceError): ErrorClassName {
  return (error.constructor as { className?: ErrorClassName }).className ?? "ServiceError";
}

export function refusal(error: unknown): ToolRefusal {
  if (error instanceof InvalidArgumentsError) {
    return answer(`invalid arguments: ${error.message}`, {
      errorClass: "InvalidArgumentsError",
      code: "BAD_USER_INPUT",
      argument: error.argument,
    });
  }
  if (error instanceof TypeError) {
    // The client's own argument checks (an endpoint that is not a URL, a body on a GET).
    return answer(`invalid arguments: ${error.message}`, { errorClass: "InvalidArgumentsError", code: "BAD_USER_INPUT" });
  }
  if (!(error instanceof ServiceError)) {
    return answer("the payments server failed on this call", { errorClass: "ServiceError", code: "INTERNAL_ERROR" });
  }
  const details: Record<string, unknown> = {
    errorClass: classNameOf(error),
    code: error.code ?? null,
    ...(error.status === undefined ? {} : { status: error.status }),
  };
  if (error instanceof PolicyViolationError) {
    details.reason = error.reason;
    details.reasonCode = error.reasonCode;
    if (error instanceof DomainNotAllowedError) details.domain = error.domain;
    return answer(error.reason, details);
  }
  if (error instanceof ApprovalRequiredError) {
    details.approvalId = error.approvalId;
    details.expiresAt = error.expiresAt;
    if (error.idempotencyKey !== undefined) details.idempotencyKey = error.idempotencyKey;
    return answer(
      `${error.message}; call again with idempotencyKey ${error.idempotencyKey ?? "(the same key)"} once a person approved it`,
      details,
    );
  }
  if (error instanceof InsufficientFundsError) details.currentBalance = error.currentBalance;
  if (error instanceof PaymentProtocolError) details.endpoint = error.endpoint;
  return answer(error.message, details);
}

function answer(text: string, structuredContent: Record<string, unknown>): ToolRefusal {
  return { isError: true, content: [{ type: "text", text }], structuredContent };
}
