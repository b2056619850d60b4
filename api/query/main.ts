/**
 * `tsx api/query/main.ts`: the query service on PORT (default 4000), Postgres from DATABASE_URL;
 * with DATABASE_READ_URL (a streaming replica of it) the read models are read there, while
 * credentials, policies and the live feed stay on the primary (docs/scaling.md).
 * Balances are read from RPC_URL when it and SETTLEMENT_MINT are set.
 */
import { Connection, PublicKey } from "@solana/web3.js";
import { pino } from "pino";
import { createPool, databaseUrl, readReplicaPool } from "../../indexer/db/database.js";
import { migrate } from "../../indexer/db/migrate.js";
import { rpcBalanceReader } from "../shared/balances.js";
import { createApiServer } from "./server.js";

async function main(): Promise<void> {
  const logger = pino({ name: "api" });
  const url = databaseUrl();
  const pool = createPool(url);
  await migrate(pool);
  const rpcUrl = process.env.RPC_URL;
  const mint = process.env.SETTLEMENT_MINT;
  const balances =
    rpcUrl !== undefined && mint !== undefined ? rpcBalanceReader(new Connection(rpcUrl, "confirmed"), new PublicKey(mint)) : undefined;
  const readPool = readReplicaPool();
  const server = createApiServer({
    pool,
    ...(readPool === undefined ? {} : { readPool }),
    logger,
    databaseUrl: url,
    ...(balances === undefined ? {} : { balances }),
    ...(process.env.NETWORK === undefined ? {} : { network: process.env.NETWORK }),
  });
  const port = await server.listen(Number(process.env.PORT ?? 4000), process.env.HOST ?? "127.0.0.1");
  logger.info({ port }, "query service listening: /graphql, /v1/agents/{agentId}/metrics");
  const stop = async (): Promise<void> => {
    await server.close();
    await Promise.all([pool.end(), readPool?.end()]);
    process.exit(0);
  };
  process.once("SIGINT", () => void stop());
  process.once("SIGTERM", () => void stop());
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
