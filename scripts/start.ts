/**
 * `npm start`: the whole system on embedded defaults, in one process, until Ctrl-C.
 *
 * - the local ledger (our program on LiteSVM behind JSON-RPC) on 8899/8900;
 * - a dedicated database `apg_local` on the PostgreSQL server of DATABASE_URL (default the local
 *   one), recreated at each start because the local ledger is in memory and starts a fresh chain;
 * - the indexer following the ledger (`indexer run`, JSON-RPC source);
 * - the API on PORT (default 4000): GraphQL, REST metrics and the gateway's REST /v1 routes
 *   (custodial agent wallets funded from the local treasury, x402 facilitator, policies, alerts,
 *   webhooks, API keys);
 * - the settlement reconciler, the webhook dispatcher (email alerts when SMTP_URL is set) and an
 *   hourly pruning of spent x402 nonces and expired idempotency keys;
 * - a demo account with one API key, printed once.
 *
 * Keys: WALLET_ENCRYPTION_KEY and WEBHOOK_SECRETS_KEY when set; otherwise fresh random keys for
 * this run (the database is recreated each start, so nothing sealed with them outlives the run).
 * The treasury funding source is the local stand-in for an account's real funding source.
 */
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Connection } from "@solana/web3.js";
import pg from "pg";
import { pino } from "pino";
import { pruneIdempotencyKeys } from "../api/http/index.js";
import { createAccount, issueApiKey } from "../api/keys.js";
import { rpcBalanceReader } from "../api/read/balances.js";
import { createApiServer } from "../api/server.js";
import { runReconciler, Settlement } from "../api/settlement/index.js";
import {
  AgentWallets,
  generateWalletEncryptionKey,
  keystoreFromEnv,
  LocalTreasuryFundingSource,
  localSettlementLedger,
} from "../api/wallets/index.js";
import { Dispatcher, SecretBox, smtpMailer } from "../api/webhooks/index.js";
import { pruneExpiredNonces, X402Facilitator } from "../api/x402/index.js";
import { createPool, databaseUrl } from "../indexer/db/database.js";
import { migrate } from "../indexer/db/migrate.js";
import { IngestPipeline } from "../indexer/pipeline.js";
import { RpcSource } from "../indexer/sources/rpc.js";
import { startLocalnet } from "./localnet.js";

const LOCAL_DATABASE = "apg_local";
const HOUSEKEEPING_MS = 3_600_000;

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
  const logger = pino({ name: "apg" });
  const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
  const localnet = await startLocalnet({ ledgerDir: join(root, ".data", "localnet"), rpcPort: 8899, wsPort: 8900 });
  const { info } = localnet;
  logger.info({ rpcUrl: info.rpcUrl, programId: info.programId.toBase58(), mint: info.mint.toBase58() }, "local ledger ready");

  const url = await freshLocalDatabase(databaseUrl());
  const pool = createPool(url);
  await migrate(pool);

  const controller = new AbortController();
  const source = new RpcSource({ rpcUrl: info.rpcUrl, programId: info.programId });
  const pipeline = new IngestPipeline({
    pool,
    programId: info.programId,
    cluster: info.rpcUrl,
    logger: logger.child({ component: "indexer" }),
    lookup: (signature) => source.transaction(signature),
  });
  const indexing = pipeline.run(source, controller.signal).catch((error: unknown) => {
    logger.error({ err: error }, "indexer stopped");
  });

  const env = {
    ...process.env,
    WALLET_ENCRYPTION_KEY: process.env.WALLET_ENCRYPTION_KEY ?? generateWalletEncryptionKey(),
    WEBHOOK_SECRETS_KEY: process.env.WEBHOOK_SECRETS_KEY ?? SecretBox.generateKey(),
  };
  const keystore = keystoreFromEnv(env);
  const secretBox = SecretBox.fromEnv(env);
  const ledger = localSettlementLedger(localnet);
  const wallets = new AgentWallets({ pool, keystore, ledger, fundingSource: LocalTreasuryFundingSource.fromLocalnet(ledger, localnet) });
  const settlement = new Settlement({ pool, wallets, ledger });
  const facilitator = new X402Facilitator({
    pool,
    settler: settlement,
    agents: wallets,
    network: ledger.network,
    token: info.mint.toBase58(),
  });
  const reconciling = runReconciler(settlement, wallets, {
    signal: controller.signal,
    onError: (error) => logger.warn({ err: error }, "reconciler pass failed"),
  });
  const dispatcher = new Dispatcher({
    pool,
    secrets: secretBox,
    mailer: process.env.SMTP_URL === undefined ? null : smtpMailer(process.env.SMTP_URL),
    logger: logger.child({ component: "webhooks" }),
    // A local system: webhooks to receivers on this machine are what a developer tries first.
    allowPrivateNetworks: true,
  });
  dispatcher.start();
  // Housekeeping: x402 nonces whose payloads can no longer verify, idempotency keys past 24 h.
  const housekeeping = setInterval(() => {
    const now = new Date();
    Promise.all([pruneExpiredNonces(pool, now), pruneIdempotencyKeys(pool, now)]).then(
      ([nonces, keys]) => (nonces + keys > 0 ? logger.info({ nonces, keys }, "pruned") : undefined),
      (error: unknown) => logger.warn({ err: error }, "pruning failed"),
    );
  }, HOUSEKEEPING_MS);

  const api = createApiServer({
    pool,
    logger: logger.child({ component: "api" }),
    databaseUrl: url,
    balances: rpcBalanceReader(new Connection(info.rpcUrl, "confirmed"), info.mint),
    network: ledger.network,
    gateway: { wallets, keystore, secretBox, facilitator },
  });
  const port = await api.listen(Number(process.env.PORT ?? 4000), process.env.HOST ?? "127.0.0.1");

  const accountId = await createAccount(pool, "demo");
  const key = await issueApiKey(pool, accountId);
  process.stdout.write(
    [
      "",
      "Agent Payment Gateway (local)",
      `  ledger RPC      ${info.rpcUrl}   (keypairs in .data/localnet)`,
      `  database        ${url}`,
      `  GraphQL         http://127.0.0.1:${port}/graphql`,
      `  REST            http://127.0.0.1:${port}/v1/...   (docs/openapi.yaml)`,
      `  demo account    ${accountId}`,
      `  demo API key    ${key.apiKey}   (shown once; only its hash is stored)`,
      "  Ctrl-C to stop",
      "",
    ].join("\n"),
  );

  await new Promise<void>((stop) => {
    process.once("SIGINT", () => stop());
    process.once("SIGTERM", () => stop());
  });
  controller.abort();
  clearInterval(housekeeping);
  await Promise.all([indexing, reconciling, dispatcher.stop()]);
  await api.close();
  await pool.end();
  await localnet.stop();
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
