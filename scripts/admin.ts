/**
 * `npm run admin -- <command>`: the commands of api/gateway/admin.ts (create-account, issue-key,
 * revoke-key, register-agent) on the local system's database, whether the system is running (its
 * embedded server is shared) or not (the server runs for this command only).
 */
import { createPool } from "../indexer/db/database.js";
import { runAdmin } from "../api/gateway/admin.js";
import { openLocalDatabase } from "./local-database.js";
import { localState } from "./local-state.js";

const USAGE = `usage:
  npm run admin -- create-account <name>
  npm run admin -- issue-key <accountId> [--scope admin|approver|agent:<agentId>]
  npm run admin -- revoke-key <apiKey>
  npm run admin -- register-agent <accountId> <agentId> <walletAddress> [name]`;

async function main(argv: readonly string[]): Promise<number> {
  const database = await openLocalDatabase({ env: process.env, dataDir: localState(process.env).postgresDir, mode: "share" });
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
