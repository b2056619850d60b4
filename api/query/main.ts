/**
 * `tsx api/query/main.ts [--env-file PATH]` (`npm run query`): the query service (GraphQL and the
 * REST read views) on PORT (default 4000) over DATABASE_URL; with DATABASE_READ_URL (a streaming
 * replica of it) the read models are read there, while credentials, policies and the live feed
 * stay on the primary (docs/scaling.md); QUERY_WORKERS > 1 serves through that many processes on
 * the one port (api/query/workers.ts). Balances are read from SOLANA_RPC_URL when it and
 * SETTLEMENT_MINT are set. Every variable: `.env.example` (indexer/config checks them first; a
 * refused configuration exits 2 with one line per problem).
 */
import { configOrExit, queryConfig } from "../../indexer/config/index.js";

async function main(argv: readonly string[]): Promise<void> {
  const { config } = configOrExit("query", argv, queryConfig);
  // Loaded only now: a refused configuration answers in a moment, before the service's modules load.
  const { serveQuery } = await import("./serve.js");
  await serveQuery(config);
}

main(process.argv.slice(2)).catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
