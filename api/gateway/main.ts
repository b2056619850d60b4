/**
 * `tsx api/gateway/main.ts [--env-file PATH]` (`npm run gateway`): the gateway on any Solana
 * cluster, configured from the environment (every variable: `.env.example`, read and checked by
 * indexer/config before the database or the chain is touched; a refused configuration exits 2
 * with one line per problem). It serves the gateway's REST /v1 routes and, on the same port, the
 * query service (GraphQL and the read views) over the same database, and runs the gateway's loops
 * (reconciler, sweeper, webhook dispatcher, housekeeping). The indexer runs as its own process
 * (`npm run indexer`), following the same cluster into the same database. docs/deploy.md is the
 * operator's guide.
 *
 * The card rail uses the named stand-in processor (api/gateway/card) until a real one is wired.
 * Exit codes: 0 stopped by a signal, 1 failed to start, 2 configuration refused.
 */
import { configOrExit, gatewayConfig } from "../../indexer/config/index.js";

async function main(argv: readonly string[]): Promise<void> {
  const { config } = configOrExit("gateway", argv, gatewayConfig);
  // Loaded only now: a refused configuration answers in a moment, before the service's modules load.
  const { serveGateway } = await import("./serve.js");
  await serveGateway(config);
}

main(process.argv.slice(2)).catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
