/**
 * What the query service's REST read views are given: the shared route needs and the same
 * dependencies the GraphQL resolvers read through (`ApiDependencies`).
 */
import type { Route, RouteContext, RouteDeps } from "../../shared/http/router.js";
import type { ApiDependencies } from "../context.js";

/** `primary` is optional here: the gateway mounts these views on its own deps, whose pool is the primary. */
export type QueryRouteDeps = RouteDeps & Omit<ApiDependencies, "primary">;
export type QueryRoute = Route<QueryRouteDeps>;
export type QueryRouteContext = RouteContext<QueryRouteDeps>;
