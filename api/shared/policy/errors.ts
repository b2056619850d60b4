/**
 * Input errors of the policy module: a malformed policy, amount or endpoint. These are caller
 * mistakes (REST 400 / GraphQL BAD_USER_INPUT), never policy decisions: a payment the policy
 * rejects is a `PolicyDecision` with `decision: "reject"`, not an exception.
 */

export type PolicyInputErrorCode =
  | "invalid_amount"
  | "invalid_endpoint"
  | "invalid_domain"
  | "invalid_limit"
  | "invalid_rate_limit"
  | "invalid_protocol_preference"
  | "invalid_policy_field";

export abstract class PolicyInputError extends Error {
  abstract readonly code: PolicyInputErrorCode;
}

export class InvalidAmountError extends PolicyInputError {
  readonly code = "invalid_amount";
  constructor(
    readonly input: string,
    detail: string,
  ) {
    super(`invalid amount ${JSON.stringify(input)}: ${detail}`);
    this.name = "InvalidAmountError";
  }
}

export class InvalidEndpointError extends PolicyInputError {
  readonly code = "invalid_endpoint";
  constructor(
    readonly endpoint: string,
    detail: string,
  ) {
    super(`invalid endpoint ${JSON.stringify(endpoint)}: ${detail}`);
    this.name = "InvalidEndpointError";
  }
}

/** A policy field that cannot be stored: `field` names it as spec 2.1 does (`allowedDomains`, ...). */
export class InvalidPolicyError extends PolicyInputError {
  constructor(
    readonly code: Exclude<PolicyInputErrorCode, "invalid_amount" | "invalid_endpoint">,
    readonly field: string,
    detail: string,
  ) {
    super(`invalid ${field}: ${detail}`);
    this.name = "InvalidPolicyError";
  }
}

export function isPolicyInputError(error: unknown, code?: PolicyInputErrorCode): error is PolicyInputError {
  return error instanceof PolicyInputError && (code === undefined || error.code === code);
}
