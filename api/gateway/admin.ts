/**
 * Local administration from a shell, straight against the database (no gateway, no API key):
 *
 *   tsx api/gateway/admin.ts create-account <name>                      → account id and its first API key
 *   tsx api/gateway/admin.ts issue-key <accountId> [--scope <scope>]    → a new API key (shown once)
 *   tsx api/gateway/admin.ts revoke-key <apiKey>                        → exit 1 if no such active key
 *   tsx api/gateway/admin.ts register-agent <accountId> <agentId> <walletAddress> [name]
 *
 * `create-account` is the only way to make an account and its first key: every REST route needs a
 * key already. Once a key exists, `POST/DELETE /v1/api-keys` do what `issue-key`/`revoke-key` do.
 * `--scope` is `admin` (the default), `approver` or `agent:<agentId>` (an agent of the account):
 * what the key may do (api/shared/scopes.ts, docs/rest.md "Scopes"); an unknown scope or agent is
 * refused with exit 2 and no key.
 * `register-agent` differs from `POST /v1/agents`: it records a wallet address the caller already
 * controls and creates no custodial wallet; `agentId` is the public id, scoped to the account as
 * the route scopes it (api/shared/agent-ids.ts).
 *
 * Postgres from DATABASE_URL; migrations are applied first. Exit codes: 0 done, 1 failed, 2 usage.
 * A command; it needs only the database (api/shared, indexer/db), no ledger. `runAdmin` is the
 * same commands on a pool the caller opened: `npm run admin` (scripts/admin.ts) runs them on the
 * local system's database.
 */
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type pg from "pg";
import { createPool } from "../../indexer/db/database.js";
import { migrate } from "../../indexer/db/migrate.js";
import { internalAgentId } from "../shared/agent-ids.js";
import { accountExists, createAccount, issueApiKey, registerAgent, revokeApiKey, scopeAgentExists } from "../shared/keys.js";
import { ADMIN_SCOPE, formatScope, parseScope } from "../shared/scopes.js";

const USAGE = `usage:
  tsx api/gateway/admin.ts create-account <name>
  tsx api/gateway/admin.ts issue-key <accountId> [--scope admin|approver|agent:<agentId>]
  tsx api/gateway/admin.ts revoke-key <apiKey>
  tsx api/gateway/admin.ts register-agent <accountId> <agentId> <walletAddress> [name]`;

/** Runs one command on `pool`; returns the exit code. */
export async function runAdmin(pool: pg.Pool, argv: readonly string[], usage = USAGE): Promise<number> {
  const [command, ...args] = argv;
  await migrate(pool);
  switch (command) {
    case "create-account": {
      if (args.length !== 1) break;
      const accountId = await createAccount(pool, args[0]!);
      const { apiKey } = await issueApiKey(pool, accountId);
      console.log(JSON.stringify({ accountId, apiKey }, null, 2));
      return 0;
    }
    case "issue-key": {
      const scoped = args.length === 3 && args[1] === "--scope";
      if (args.length !== 1 && !scoped) break;
      const accountId = args[0]!;
      const scope = scoped ? parseScope(args[2]!) : ADMIN_SCOPE;
      if (scope === null) {
        console.error(`unknown scope ${JSON.stringify(args[2])}: use admin, approver or agent:<agentId>`);
        return 2;
      }
      if (!(await accountExists(pool, accountId)) || !(await scopeAgentExists(pool, accountId, scope))) {
        console.error(`no ${scope.kind === "agent" ? `agent ${scope.agentId} in account` : "account"} ${accountId}`);
        return 2;
      }
      const issued = await issueApiKey(pool, accountId, scope);
      console.log(JSON.stringify({ ...issued, scope: formatScope(issued.scope) }, null, 2));
      return 0;
    }
    case "revoke-key": {
      if (args.length !== 1) break;
      const revoked = await revokeApiKey(pool, args[0]!);
      console.log(revoked ? "revoked" : "no such active key");
      return revoked ? 0 : 1;
    }
    case "register-agent": {
      if (args.length < 3 || args.length > 4) break;
      const [accountId, agentId, walletAddress, name] = args as [string, string, string, string | undefined];
      // Scoped to the account like POST /v1/agents: `agentId` is the public id (api/shared/agent-ids.ts).
      const key = internalAgentId(accountId, agentId);
      await registerAgent(pool, accountId, { agentId: key, walletAddress, ...(name === undefined ? {} : { name }) });
      console.log(`registered ${agentId} (${walletAddress})`);
      return 0;
    }
  }
  console.error(usage);
  return 2;
}

async function main(argv: string[]): Promise<number> {
  const pool = createPool();
  try {
    return await runAdmin(pool, argv);
  } finally {
    await pool.end();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (error: unknown) => {
      console.error(error instanceof Error ? error.message : error);
      process.exit(1);
    },
  );
}
