/** REST /v1 gateway routes (docs/rest.md, docs/openapi.yaml). */
export { createGatewayHandler, GATEWAY_ROUTES, useGatewayRoutes } from "./gateway.js";
export {
  IDEMPOTENCY_RETENTION_MS,
  pruneIdempotencyKeys,
  runDatabaseEffect,
  runExternalEffect,
  type RouteResponse,
} from "./idempotency.js";
export { canonicalJson, JsonNumber, parseJson, writeJson } from "./json.js";
export { HttpError, REST_ERROR_CODES, type RestErrorCode } from "./problem.js";
export type { GatewayDeps } from "./router.js";
