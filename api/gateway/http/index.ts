/** REST /v1 gateway routes (docs/rest.md, docs/openapi.yaml). */
export { createGatewayHandler, GATEWAY_ROUTES, useGatewayRoutes } from "./routes.js";
export {
  IDEMPOTENCY_RETENTION_MS,
  pruneIdempotencyKeys,
  runDatabaseEffect,
  runExternalEffect,
  type RouteResponse,
} from "../../shared/http/idempotency.js";
export { canonicalJson, JsonNumber, parseJson, writeJson } from "../../shared/http/json.js";
export type { GatewayDeps } from "./deps.js";
