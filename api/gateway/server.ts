/**
 * The gateway's HTTP server: the query service's server (GraphQL, read views, live feed) with the
 * gateway's REST /v1 routes mounted before it. One port serves both, as `npm start` and the
 * gateway's own entry point (api/gateway/main.ts) run it.
 */
import { type ApiServer, type ApiServerOptions, createApiServer } from "../query/server.js";
import { rpcBalanceReader } from "../shared/balances.js";
import type { GatewayDeps } from "./http/deps.js";
import { useGatewayRoutes } from "./http/routes.js";

export interface GatewayServerOptions extends Omit<ApiServerOptions, "plugins"> {
  /** The gateway's services behind the REST /v1 routes; a route whose service is absent answers 503. */
  readonly gateway?: Omit<GatewayDeps, "pool" | "logger" | "now" | "network" | "balances">;
}

export function createGatewayServer(options: GatewayServerOptions): ApiServer {
  // Without an explicit reader, the custodial wallets' ledger answers balances.
  const wallets = options.gateway?.wallets;
  const balances =
    options.balances ?? (wallets === undefined ? undefined : rpcBalanceReader(wallets.ledger.connection, wallets.ledger.mint));
  const routes = useGatewayRoutes({
    pool: options.pool,
    logger: options.logger,
    now: options.now,
    network: options.network,
    balances,
    ...options.gateway,
  });
  return createApiServer({ ...options, ...(balances === undefined ? {} : { balances }), plugins: [routes] });
}
