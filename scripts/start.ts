/**
 * `npm start`: the whole system on embedded defaults, in one process, until Ctrl-C
 * (scripts/system.ts assembles it). `npm start -- --reset` wipes the local state first.
 *
 * It runs the local ledger on 8899/8900 (history in `.data/localnet`), the database `apg_local`
 * (embedded in `.data/postgres` unless DATABASE_URL is set), the indexer, the API on PORT (4000)
 * with its loops, the dashboard at /dashboard/ (built when stale), and a demo account whose API key
 * is printed at the first start only. Keys: WALLET_ENCRYPTION_KEY and WEBHOOK_SECRETS_KEY when
 * set, else made once and kept in `.data/keys.json`.
 *
 * Environment (also `--env-file PATH`; checked first, a refused one exits 2 with one line per
 * problem): DATABASE_URL, PORT, HOST, SMTP_URL, LOG_LEVEL, APG_DATA_DIR, LOCALNET_RPC_PORT.
 */
import { pino } from "pino";
import { accountNamed } from "../api/shared/keys.js";
import { configOrExit, type LocalConfig, localConfig } from "../indexer/config/index.js";
import { ChainMismatch } from "../indexer/store/chain-identity.js";
import { ensureDashboardBuilt } from "./dashboard-build.js";
import { type LocalDatabase, openLocalDatabase } from "./local-database.js";
import { claimSystem, localKeys, localState, RESET_COMMAND, resetLocalState, SystemRunning } from "./local-state.js";
import { smtpMailer, startSystem } from "./system.js";

const DEMO_ACCOUNT = "demo";
const USAGE = "usage: npm start [-- --reset] [--env-file PATH]";

/**
 * Resolves at the first SIGINT or SIGTERM. Later ones are ignored while the system stops: a
 * Ctrl-C reaches every process of the terminal's group, and the runners in between (npm, tsx)
 * relay it again, so one keypress can arrive here twice.
 */
function untilSignalled(): Promise<void> {
  return new Promise((resolveSignal) => {
    const onSignal = (): void => resolveSignal();
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
  });
}

async function main(commandLine: readonly string[]): Promise<number> {
  const { config, argv } = configOrExit("start", commandLine, localConfig);
  // The helpers below read the same variables (DATABASE_URL, APG_DATA_DIR, keys) from this record.
  const env = { ...process.env, ...configEnv(config) };
  const unknown = argv.filter((arg) => arg !== "--reset");
  if (unknown.length > 0) {
    console.error(`unknown option ${unknown[0]}\n${USAGE}`);
    return 2;
  }
  // Listening from the start: a signal that arrives while the system starts (or just as the
  // banner is printed) stops it once it has started, instead of killing the process midway.
  const signalled = untilSignalled();
  const state = localState(env);
  const rpcPort = config.localnetRpcPort;
  if (argv.includes("--reset")) {
    for (const removed of await resetLocalState(state, env)) console.log(`reset: removed ${removed}`);
  }
  const release = await claimSystem(state);
  await ensureDashboardBuilt((line) => process.stdout.write(`${line}\n`));
  let database: LocalDatabase | null = null;
  try {
    database = await openLocalDatabase({ env, dataDir: state.postgresDir, mode: "own" });
    const system = await startSystem({
      databaseUrl: database.url,
      port: config.port,
      host: config.host,
      localnet: { ledgerDir: state.ledgerDir, rpcPort, wsPort: rpcPort + 1 },
      logger: pino({ name: "apg", level: config.logLevel }),
      env: { ...env, ...(await localKeys(state, env)) },
      mailer: config.smtpUrl === undefined ? null : smtpMailer(config.smtpUrl),
      // A local system: webhooks to receivers on this machine are what a developer tries first.
      allowPrivateNetworks: true,
      // ... and registering them: loopback only (WEBHOOK_ALLOW_LOOPBACK), never other private ranges.
      allowLoopbackWebhooks: true,
      keepWarm: true,
    });
    const existing = await accountNamed(system.pool, DEMO_ACCOUNT);
    const demo = existing === null ? await system.createAccount(DEMO_ACCOUNT) : null;
    const accountId = existing ?? demo!.accountId;
    const history = system.localnet.info.resumed ? "resumed from .data/localnet" : "new chain in .data/localnet";
    process.stdout.write(
      [
        "",
        "Agent Payment Gateway (local)",
        `  ledger RPC      ${system.localnet.rpcUrl}   (${history}; keypairs there)`,
        `  database        ${database.description}`,
        `  dashboard       ${system.apiUrl}/dashboard/   (sign in with the demo API key)`,
        `  GraphQL         ${system.apiUrl}/graphql`,
        `  REST            ${system.apiUrl}/v1/...   (docs/openapi.yaml)`,
        `  demo account    ${accountId}`,
        demo === null
          ? `  demo API key    shown at the first start; a new one: npm run admin -- issue-key ${accountId}`
          : `  demo API key    ${demo.apiKey}   (shown once; only its hash is stored)`,
        `  state           kept in .data/ across restarts; \`${RESET_COMMAND}\` wipes it`,
        "  Ctrl-C to stop",
        "",
      ].join("\n"),
    );
    await signalled;
    console.log("stopping: the system, then the ledger and the database (their state is kept)");
    await system.stop();
    return 0;
  } finally {
    await database?.stop();
    await release();
  }
}

/** The parsed variables as the local helpers read them (an env file's ones included). */
function configEnv(config: LocalConfig): Record<string, string> {
  return {
    ...config.keys,
    ...(config.databaseUrl === undefined ? {} : { DATABASE_URL: config.databaseUrl }),
    ...(config.dataDir === undefined ? {} : { APG_DATA_DIR: config.dataDir }),
  };
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    if (error instanceof ChainMismatch) {
      console.error(
        `${error.message}.\nThe ledger in .data/localnet and the database do not belong together; ` +
          `\`${RESET_COMMAND}\` (or \`npm start -- --reset\`) wipes both and starts afresh.`,
      );
    } else if (error instanceof SystemRunning) {
      console.error(error.message);
    } else {
      console.error(error);
    }
    process.exit(1);
  },
);
