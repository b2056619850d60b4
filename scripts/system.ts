/**
 * The whole system in one process, as `npm start` runs it and as the end-to-end tests, the SDK
 * tests and the gateway/client benches start it: the local ledger (our program on LiteSVM behind
 * JSON-RPC), a migrated database, the indexer following the ledger, the API (GraphQL, REST
 * metrics, the gateway's REST /v1 routes with custodial wallets, the x402 facilitator and the MPP
 * service), the settlement reconciler, the webhook dispatcher and the housekeeping loop.
 *
 * Nothing here is a stand-in for one of our components. The treasury funding source is the local
 * stand-in for an account's real funding source; the card processor is the named stand-in for a
 * card network (api/card).
 */
import { Connection } from "@solana/web3.js";
import type pg from "pg";
import { type Logger, pino } from "pino";
import { StandInCardProcessor } from "../api/card/index.js";
import { pruneIdempotencyKeys } from "../api/http/index.js";
import { createAccount, issueApiKey } from "../api/keys.js";
import { MppGateway } from "../api/mpp/index.js";
import { rpcBalanceReader } from "../api/read/balances.js";
import { type ApiServer, createApiServer } from "../api/server.js";
import { runReconciler, Settlement } from "../api/settlement/index.js";
import { runSweeper } from "../api/settlement/sweeper.js";
import {
  AgentWallets,
  generateWalletEncryptionKey,
  keystoreFromEnv,
  type Keystore,
  LocalTreasuryFundingSource,
  localSettlementLedger,
  type SettlementLedger,
} from "../api/wallets/index.js";
import { Dispatcher, type Mailer, SecretBox, smtpMailer } from "../api/webhooks/index.js";
import { pruneExpiredNonces, X402Facilitator } from "../api/x402/index.js";
import { createPool } from "../indexer/db/database.js";
import { migrate } from "../indexer/db/migrate.js";
import { IngestPipeline } from "../indexer/pipeline.js";
import { RpcSource } from "../indexer/sources/rpc.js";
import { type Localnet, type LocalnetOptions, startLocalnet } from "./localnet.js";

const HOUSEKEEPING_MS = 3_600_000;

export interface SystemOptions {
  /** A migrated-or-empty database this system owns (it is migrated here). */
  readonly databaseUrl: string;
  /** API port; 0 picks a free one. */
  readonly port?: number;
  readonly host?: string;
  readonly localnet?: LocalnetOptions;
  readonly logger?: Logger;
  /** WALLET_ENCRYPTION_KEY / WEBHOOK_SECRETS_KEY; fresh random keys when absent. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** SMTP transport for email alerts; none by default. */
  readonly mailer?: Mailer | null;
  /** How often the reconciler and housekeeping passes run. */
  readonly reconcileIntervalMs?: number;
  readonly housekeepingMs?: number;
  /** Deliveries to loopback/private receivers (a local system or a test); false in production. */
  readonly allowPrivateNetworks?: boolean;
  /**
   * Webhook endpoints may be registered on loopback (a local development system or a test; never
   * other private ranges). Default: `env.WEBHOOK_ALLOW_LOOPBACK === "true"`, else false.
   */
  readonly allowLoopbackWebhooks?: boolean;
  /** Indexer poll interval (ms) for the JSON-RPC source. */
  readonly pollIntervalMs?: number;
  /** New payee token accounts the authority funds per paying account in 24 h (api/settlement/payee.ts). */
  readonly payeeAccountQuota?: number;
}

export interface System {
  /** `http://host:port` of the API (GraphQL at /graphql, REST at /v1). */
  readonly apiUrl: string;
  readonly port: number;
  readonly databaseUrl: string;
  readonly pool: pg.Pool;
  readonly localnet: Localnet;
  readonly ledger: SettlementLedger;
  readonly keystore: Keystore;
  readonly secretBox: SecretBox;
  readonly wallets: AgentWallets;
  readonly settlement: Settlement;
  readonly facilitator: X402Facilitator;
  /** The MPP service side for resource servers (`/v1/mpp/*`). */
  readonly mpp: MppGateway;
  readonly api: ApiServer;
  readonly dispatcher: Dispatcher;
  /** Base58 mint of the local USDC (the x402 `token`). */
  readonly token: string;
  /** The network name payments name (`solana-localnet`). */
  readonly network: string;
  /** A new account with one API key (shown once; only its hash is stored). */
  createAccount(name: string): Promise<{ accountId: string; apiKey: string }>;
  stop(): Promise<void>;
}

export async function startSystem(options: SystemOptions): Promise<System> {
  const logger = options.logger ?? pino({ name: "apg", level: process.env.LOG_LEVEL ?? "info" });
  const localnet = await startLocalnet(options.localnet ?? {});
  const { info } = localnet;
  logger.info({ rpcUrl: info.rpcUrl, programId: info.programId.toBase58(), mint: info.mint.toBase58() }, "local ledger ready");

  const pool = createPool(options.databaseUrl);
  await migrate(pool);

  const controller = new AbortController();
  const source = new RpcSource({
    rpcUrl: info.rpcUrl,
    programId: info.programId,
    ...(options.pollIntervalMs === undefined ? {} : { pollMs: options.pollIntervalMs }),
  });
  const pipeline = new IngestPipeline({
    pool,
    programId: info.programId,
    cluster: info.rpcUrl,
    logger: logger.child({ component: "indexer" }),
    lookup: (signature) => source.transaction(signature),
  });
  const indexing = pipeline.run(source, controller.signal).catch((error: unknown) => {
    if (!controller.signal.aborted) logger.error({ err: error }, "indexer stopped");
  });

  const env = {
    ...(options.env ?? {}),
    WALLET_ENCRYPTION_KEY: options.env?.WALLET_ENCRYPTION_KEY ?? generateWalletEncryptionKey(),
    WEBHOOK_SECRETS_KEY: options.env?.WEBHOOK_SECRETS_KEY ?? SecretBox.generateKey(),
  };
  const keystore = keystoreFromEnv(env);
  const secretBox = SecretBox.fromEnv(env);
  const ledger = localSettlementLedger(localnet);
  const wallets = new AgentWallets({ pool, keystore, ledger, fundingSource: LocalTreasuryFundingSource.fromLocalnet(ledger, localnet) });
  const settlement = new Settlement({
    pool,
    wallets,
    ledger,
    ...(options.payeeAccountQuota === undefined ? {} : { payeeAccountQuota: options.payeeAccountQuota }),
  });
  const token = info.mint.toBase58();
  const facilitator = new X402Facilitator({
    pool,
    settler: settlement,
    agents: wallets,
    invocations: settlement,
    network: ledger.network,
    token,
    onWarning: (message, context) => logger.warn(context, message),
  });
  // The card rail settles through the named stand-in until a real card processor is configured.
  const mpp = new MppGateway({ pool, settler: settlement, agents: wallets, cardProcessor: new StandInCardProcessor() });
  const reconciling = runReconciler(settlement, wallets, {
    signal: controller.signal,
    ...(options.reconcileIntervalMs === undefined ? {} : { intervalMs: options.reconcileIntervalMs }),
    onError: (error) => logger.warn({ err: error }, "reconciler pass failed"),
  });
  // Closes what the pay path left open (claims, expired authorizations, invocation openings).
  const sweeping = runSweeper(
    pool,
    { agents: wallets, invocations: settlement, onWarning: (message, context) => logger.warn(context, message) },
    {
      signal: controller.signal,
      ...(options.reconcileIntervalMs === undefined ? {} : { intervalMs: options.reconcileIntervalMs }),
      onError: (error) => logger.warn({ err: error }, "sweeper pass failed"),
      onPass: (report) => {
        if (Object.values(report).some((count) => count > 0)) logger.info(report, "swept");
      },
    },
  );
  const dispatcher = new Dispatcher({
    pool,
    secrets: secretBox,
    mailer: options.mailer ?? null,
    logger: logger.child({ component: "webhooks" }),
    allowPrivateNetworks: options.allowPrivateNetworks ?? false,
  });
  dispatcher.start();
  const housekeeping = setInterval(() => {
    const now = new Date();
    Promise.all([pruneExpiredNonces(pool, now), pruneIdempotencyKeys(pool, now)]).then(
      ([nonces, keys]) => (nonces + keys > 0 ? logger.info({ nonces, keys }, "pruned") : undefined),
      (error: unknown) => logger.warn({ err: error }, "housekeeping failed"),
    );
  }, options.housekeepingMs ?? HOUSEKEEPING_MS);

  const api = createApiServer({
    pool,
    logger: logger.child({ component: "api" }),
    databaseUrl: options.databaseUrl,
    balances: rpcBalanceReader(new Connection(info.rpcUrl, "confirmed"), info.mint),
    network: ledger.network,
    gateway: {
      wallets,
      keystore,
      secretBox,
      facilitator,
      invocations: settlement,
      settlementToken: token,
      mpp,
      explorerCluster: info.rpcUrl,
      allowLoopbackWebhooks: options.allowLoopbackWebhooks ?? options.env?.WEBHOOK_ALLOW_LOOPBACK === "true",
    },
  });
  const host = options.host ?? "127.0.0.1";
  const port = await api.listen(options.port ?? 0, host);

  let stopped: Promise<void> | null = null;
  return {
    apiUrl: `http://${host}:${port}`,
    port,
    databaseUrl: options.databaseUrl,
    pool,
    localnet,
    ledger,
    keystore,
    secretBox,
    wallets,
    settlement,
    facilitator,
    mpp,
    api,
    dispatcher,
    token,
    network: ledger.network,
    async createAccount(name) {
      const accountId = await createAccount(pool, name);
      return { accountId, apiKey: (await issueApiKey(pool, accountId)).apiKey };
    },
    stop() {
      stopped ??= (async () => {
        controller.abort();
        clearInterval(housekeeping);
        await Promise.all([indexing, reconciling, sweeping, dispatcher.stop()]);
        await api.close();
        await pool.end();
        await localnet.stop();
      })();
      return stopped;
    },
  };
}

export { smtpMailer };
