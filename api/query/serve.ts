/** The query service process once its configuration is accepted (api/query/main.ts checks it first). */
import { Connection } from "@solana/web3.js";
import { pino } from "pino";
import type { QueryConfig } from "../../indexer/config/index.js";
import { createPool } from "../../indexer/db/database.js";
import { migrate } from "../../indexer/db/migrate.js";
import { rpcBalanceReader } from "../shared/balances.js";
import { createApiServer } from "./server.js";

/** Migrates and serves the query service until SIGINT/SIGTERM (then exits 0). */
export async function serveQuery(config: QueryConfig): Promise<void> {
  const logger = pino({ name: "api", level: config.logLevel });
  const pool = createPool(config.databaseUrl);
  await migrate(pool);
  const balances =
    config.balances === undefined ? undefined : rpcBalanceReader(new Connection(config.balances.rpcUrl, "confirmed"), config.balances.mint);
  const readPool = config.databaseReadUrl === undefined ? undefined : createPool(config.databaseReadUrl);
  const server = createApiServer({
    pool,
    ...(readPool === undefined ? {} : { readPool }),
    logger,
    databaseUrl: config.databaseUrl,
    ...(balances === undefined ? {} : { balances }),
    ...(config.network === undefined ? {} : { network: config.network }),
  });
  const port = await server.listen(config.port, config.host);
  logger.info({ port }, "query service listening: /graphql, /v1/agents/{agentId}/metrics");
  const stop = async (): Promise<void> => {
    await server.close();
    await Promise.all([pool.end(), readPool?.end()]);
    process.exit(0);
  };
  process.once("SIGINT", () => void stop());
  process.once("SIGTERM", () => void stop());
}
