/**
 * RFC 9457 problem JSON for every REST /v1 error: `{ type, title, status, code, detail, ... }`.
 * The body is the error's own rendering (`ServiceError.toProblem`, api/shared/errors.ts): this
 * module only writes it as a route response, and knows no error but the base class.
 */
import type { ServiceError } from "../errors.js";
import { writeJson } from "./json.js";
import type { RouteResponse } from "./route-response.js";

// The routes' error vocabulary, re-exported because callers think of "the problem" as one thing.
export { badRequest, httpError, ServiceError } from "../errors.js";

export const PROBLEM_CONTENT_TYPE = "application/problem+json";

/** The error as a route response (problem JSON). */
export function problemResponse(error: ServiceError): RouteResponse {
  return {
    status: error.status,
    body: writeJson(error.toProblem()),
    headers: { "content-type": PROBLEM_CONTENT_TYPE, ...error.headers },
  };
}
