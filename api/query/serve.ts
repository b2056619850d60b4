/**
 * The query service process once its configuration is accepted (api/query/main.ts checks it first).
 * With QUERY_WORKERS above 1 this process migrates, then forks that many workers sharing the port
 * (api/query/workers.ts); each worker serves as a single process does.
 */
import { Connection } from "@solana/web3.js";
import { type Logger, pino } from "pino";
import type { QueryConfig } from "../../indexer/config/index.js";
import { createPool } from "../../indexer/db/database.js";
import { migrate } from "../../indexer/db/migrate.js";
import { rpcBalanceReader } from "../shared/balances.js";
import { createOpsMetrics, requestIdMixin, useOpsRoutes } from "../shared/ops/index.js";
import { createApiServer } from "./server.js";
import { isWorker, startWorkers } from "./workers.js";

/** How long in-flight requests get to finish after SIGTERM. */
const SHUTDOWN_GRACE_MS = 10_000;

/** Migrates and serves the query service until SIGINT/SIGTERM (then exits 0). */
export async function serveQuery(config: QueryConfig): Promise<void> {
  const logger = pino({ name: "api", level: config.logLevel, mixin: requestIdMixin });
  if (config.workers > 1 && !isWorker()) return superviseWorkers(config, logger);
  // Warm: the first reads after a quiet spell do not wait for new connections.
  const pool = createPool(config.databaseUrl, { keepWarm: true });
  // Workers find the schema migrated by their primary.
  if (!isWorker()) await migrate(pool);
  const connection = config.balances === undefined ? undefined : new Connection(config.balances.rpcUrl, "confirmed");
  const balances =
    connection === undefined || config.balances === undefined ? undefined : rpcBalanceReader(connection, config.balances.mint);
  const readPool = config.databaseReadUrl === undefined ? undefined : createPool(config.databaseReadUrl, { keepWarm: true });
  const ops = useOpsRoutes({
    metrics: createOpsMetrics({ pool, ...(connection === undefined ? {} : { connection }) }),
    readiness: { pool, ...(connection === undefined ? {} : { connection }) },
  });
  const server = createApiServer({
    ops,
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
    ops.drain();
    await ops.idle(SHUTDOWN_GRACE_MS);
    await server.close();
    await Promise.all([pool.end(), readPool?.end()]);
    process.exit(0);
  };
  process.once("SIGINT", () => void stop());
  process.once("SIGTERM", () => void stop());
}

/** Migrates once, then runs `config.workers` serving processes until SIGINT/SIGTERM. */
async function superviseWorkers(config: QueryConfig, logger: Logger): Promise<void> {
  const pool = createPool(config.databaseUrl);
  try {
    await migrate(pool);
  } finally {
    await pool.end();
  }
  const workers = await startWorkers(config.workers, logger);
  logger.info({ port: workers.port, workers: config.workers }, "query service listening through its workers");
  const stop = async (): Promise<void> => {
    await workers.stop();
    process.exit(0);
  };
  process.once("SIGINT", () => void stop());
  process.once("SIGTERM", () => void stop());
}
