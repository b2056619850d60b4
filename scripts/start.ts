/**
 * `npm start`: the whole system on embedded defaults, in one process, until Ctrl-C
 * (scripts/system.ts assembles it):
 *
 * - the local ledger (our program on LiteSVM behind JSON-RPC) on 8899/8900;
 * - a dedicated database `apg_local` on the PostgreSQL server of DATABASE_URL (default the local
 *   one), recreated at each start because the local ledger is in memory and starts a fresh chain;
 * - the indexer, the API on PORT (default 4000): GraphQL, REST metrics and the gateway's REST /v1
 *   routes; the settlement reconciler, the webhook dispatcher (email alerts when SMTP_URL is set)
 *   and the housekeeping loop;
 * - the dashboard at /dashboard/ of the API (built first when dashboard/dist is missing or stale);
 * - a demo account with one API key, printed once.
 *
 * Keys: WALLET_ENCRYPTION_KEY and WEBHOOK_SECRETS_KEY when set; otherwise fresh random keys for
 * this run (the database is recreated each start, so nothing sealed with them outlives the run).
 */
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { pino } from "pino";
import { databaseUrl } from "../indexer/db/database.js";
import { ensureDashboardBuilt } from "./dashboard-build.js";
import { smtpMailer, startSystem } from "./system.js";

const LOCAL_DATABASE = "apg_local";

/** Drops and recreates `apg_local` on the server of `serverUrl`; returns its URL. */
async function freshLocalDatabase(serverUrl: string): Promise<string> {
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${LOCAL_DATABASE} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${LOCAL_DATABASE}`);
  } finally {
    await admin.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${LOCAL_DATABASE}`;
  return url.toString();
}

async function main(): Promise<void> {
  const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
  await ensureDashboardBuilt((line) => process.stdout.write(`${line}\n`));
  const system = await startSystem({
    databaseUrl: await freshLocalDatabase(databaseUrl()),
    port: Number(process.env.PORT ?? 4000),
    host: process.env.HOST ?? "127.0.0.1",
    localnet: { ledgerDir: join(root, ".data", "localnet"), rpcPort: 8899, wsPort: 8900 },
    logger: pino({ name: "apg" }),
    env: process.env,
    mailer: process.env.SMTP_URL === undefined ? null : smtpMailer(process.env.SMTP_URL),
    // A local system: webhooks to receivers on this machine are what a developer tries first.
    allowPrivateNetworks: true,
    // ... and registering them: loopback only (WEBHOOK_ALLOW_LOOPBACK), never other private ranges.
    allowLoopbackWebhooks: true,
  });
  const demo = await system.createAccount("demo");
  process.stdout.write(
    [
      "",
      "Agent Payment Gateway (local)",
      `  ledger RPC      ${system.localnet.rpcUrl}   (keypairs in .data/localnet)`,
      `  database        ${system.databaseUrl}`,
      `  dashboard       ${system.apiUrl}/dashboard/   (sign in with the demo API key)`,
      `  GraphQL         ${system.apiUrl}/graphql`,
      `  REST            ${system.apiUrl}/v1/...   (docs/openapi.yaml)`,
      `  demo account    ${demo.accountId}`,
      `  demo API key    ${demo.apiKey}   (shown once; only its hash is stored)`,
      "  Ctrl-C to stop",
      "",
    ].join("\n"),
  );

  await new Promise<void>((stop) => {
    process.once("SIGINT", () => stop());
    process.once("SIGTERM", () => stop());
  });
  await system.stop();
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
