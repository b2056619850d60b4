/**
 * The gateway's HTTP server: the query service's server (GraphQL, read views, live feed) with the
 * gateway's REST /v1 routes and the dashboard (its files and sign-in, ./dashboard) mounted before
 * it. One port serves all, as `npm start` and the gateway's own entry point (api/gateway/main.ts)
 * run it.
 */
import { type ApiServer, type ApiServerOptions, createApiServer, pluginsOf } from "../query/server.js";
import { rpcBalanceReader } from "../shared/balances.js";
import { useDashboard } from "./dashboard/index.js";
import type { GatewayDeps } from "./http/deps.js";
import { useGatewayRoutes } from "./http/routes.js";
import { useMcp } from "./mcp/index.js";

export interface GatewayServerOptions extends ApiServerOptions {
  /** The gateway's services behind the REST /v1 routes; a route whose service is absent answers 503. */
  readonly gateway?: Omit<GatewayDeps, "pool" | "logger" | "now" | "network" | "balances">;
  /** The built dashboard it serves at /dashboard/; dashboard/dist of this repository by default. */
  readonly dashboardDir?: string;
  /** `/mcp` may pay APIs on loopback and private addresses (local systems, tests); false by default. */
  readonly mcpAllowPrivateNetworks?: boolean;
}

export function createGatewayServer(options: GatewayServerOptions): ApiServer {
  // Without an explicit reader, the custodial wallets' ledger answers balances.
  const wallets = options.gateway?.wallets;
  const balances =
    options.balances ?? (wallets === undefined ? undefined : rpcBalanceReader(wallets.ledger.connection, wallets.ledger.mint));
  const dashboard = useDashboard({ pool: options.pool, ...(options.dashboardDir === undefined ? {} : { dir: options.dashboardDir }) });
  const server = createApiServer({
    ...options,
    ...(balances === undefined ? {} : { balances }),
    // The /v1 routes and /mcp authenticate through the server's key cache, as GraphQL does.
    plugins: (shared) => [
      ...pluginsOf(options.plugins, shared),
      dashboard,
      // The payments MCP server at /mcp calls this same server's routes in process.
      useMcp(() => ({
        pool: options.pool,
        keys: shared.keys,
        dispatch: (request) => Promise.resolve(server.yoga.fetch(request)),
        allowPrivateNetworks: options.mcpAllowPrivateNetworks === true,
        logger: options.logger,
      })),
      useGatewayRoutes({
        pool: options.pool,
        logger: options.logger,
        now: options.now,
        network: options.network,
        balances,
        ...options.gateway,
        keys: shared.keys,
      }),
    ],
  });
  return server;
}
