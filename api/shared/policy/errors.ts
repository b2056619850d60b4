/**
 * Input errors of the policy module: a malformed policy, amount or endpoint. These are caller
 * mistakes (REST 400 / GraphQL BAD_USER_INPUT, `reason` says which rule), never policy decisions:
 * a payment the policy rejects is a `PolicyDecision` with `decision: "reject"`, not an exception.
 */
import { ServiceError } from "../errors.js";

export type PolicyInputReason =
  | "invalid_amount"
  | "invalid_endpoint"
  | "invalid_domain"
  | "invalid_limit"
  | "invalid_rate_limit"
  | "invalid_protocol_preference"
  | "invalid_policy_field"
  | "invalid_approval"
  | "invalid_endpoint_budget";

export abstract class PolicyInputError extends ServiceError {
  declare readonly reason: PolicyInputReason;

  constructor(reason: PolicyInputReason, message: string, field?: string) {
    super("BAD_USER_INPUT", message, { reason, ...(field === undefined ? {} : { field }) });
  }
}

export class InvalidAmountError extends PolicyInputError {
  constructor(
    readonly input: string,
    detail: string,
  ) {
    super("invalid_amount", `invalid amount ${JSON.stringify(input)}: ${detail}`);
    this.name = "InvalidAmountError";
  }
}

export class InvalidEndpointError extends PolicyInputError {
  constructor(
    readonly endpoint: string,
    detail: string,
  ) {
    super("invalid_endpoint", `invalid endpoint ${JSON.stringify(endpoint)}: ${detail}`);
    this.name = "InvalidEndpointError";
  }
}

/** A policy field that cannot be stored: `field` names it as spec 2.1 does (`allowedDomains`, ...). */
export class InvalidPolicyError extends PolicyInputError {
  declare readonly field: string;

  constructor(reason: Exclude<PolicyInputReason, "invalid_amount" | "invalid_endpoint">, field: string, detail: string) {
    super(reason, `invalid ${field}: ${detail}`, field);
    this.name = "InvalidPolicyError";
  }
}

export function isPolicyInputError(error: unknown, reason?: PolicyInputReason): error is PolicyInputError {
  return error instanceof PolicyInputError && (reason === undefined || error.reason === reason);
}
