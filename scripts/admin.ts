/**
 * `npm run admin -- <command>`: the commands of api/gateway/admin.ts (create-account, issue-key,
 * revoke-key, register-agent) on the local system's database (or DATABASE_URL's), whether the
 * system is running (its embedded server is shared) or not (the server runs for this command
 * only); and `init-cluster`, which creates the program config on a configured cluster
 * (scripts/init-cluster.ts). `--env-file PATH` reads variables from a file under the environment.
 */
import { runAdmin } from "../api/gateway/admin.js";
import { adminClusterConfig, adminDatabaseConfig, configOrExit, refuse } from "../indexer/config/index.js";
import { createPool } from "../indexer/db/database.js";
import { initCluster } from "./init-cluster.js";
import { openLocalDatabase } from "./local-database.js";
import { localState } from "./local-state.js";

const USAGE = `usage (each also takes --env-file PATH):
  npm run admin -- init-cluster
  npm run admin -- create-account <name>
  npm run admin -- issue-key <accountId> [--scope admin|approver|agent:<agentId>]
  npm run admin -- revoke-key <apiKey>
  npm run admin -- register-agent <accountId> <agentId> <walletAddress> [name]`;

async function main(commandLine: readonly string[]): Promise<number> {
  if (commandLine.includes("init-cluster")) {
    const { config, argv } = configOrExit("admin", commandLine, adminClusterConfig);
    if (argv.length !== 1)
      refuse("admin", [`${argv.find((arg) => arg !== "init-cluster")}: unknown option; expected init-cluster [--env-file PATH]`]);
    const result = await initCluster(config);
    for (const line of result.lines) process.stdout.write(`${line}\n`);
    if (result.problems.length > 0) refuse("admin", result.problems);
    return 0;
  }
  const { config, argv } = configOrExit("admin", commandLine, adminDatabaseConfig);
  const env = {
    ...(config.databaseUrl === undefined ? {} : { DATABASE_URL: config.databaseUrl }),
    ...(config.dataDir === undefined ? {} : { APG_DATA_DIR: config.dataDir }),
  };
  const database = await openLocalDatabase({ env, dataDir: localState(env).postgresDir, mode: "share" });
  const pool = createPool(database.url);
  try {
    return await runAdmin(pool, argv, USAGE);
  } finally {
    await pool.end();
    await database.stop();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  },
);
