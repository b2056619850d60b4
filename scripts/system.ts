/**
 * The whole system in one process, as `npm start` runs it and as the end-to-end tests, the SDK
 * tests and the gateway/client benches start it: the local ledger (our program on LiteSVM behind
 * JSON-RPC), a migrated database, the indexer following the ledger, the API (GraphQL, REST
 * metrics, the gateway's REST /v1 routes with custodial wallets, the x402 facilitator and the MPP
 * service), the settlement reconciler, the webhook dispatcher and the housekeeping loop.
 *
 * Nothing here is a stand-in for one of our components. The treasury funding source is the local
 * stand-in for an account's real funding source; the card processor is the named stand-in for a
 * card network (api/gateway/card).
 */
import { Connection, Keypair, LAMPORTS_PER_SOL } from "@solana/web3.js";
import type pg from "pg";
import { type Logger, pino } from "pino";
import { StandInCardProcessor } from "../api/gateway/card/index.js";
import { type Gateway, startGateway } from "../api/gateway/gateway.js";
import { createGatewayServer } from "../api/gateway/server.js";
import type { CosignedTransfers } from "../api/gateway/cosigned/index.js";
import type { MppGateway } from "../api/gateway/mpp/index.js";
import type { Settlement } from "../api/gateway/settlement/index.js";
import { LOCAL_DEVNET_ALIASES, type SignedTransfers } from "../api/gateway/transfers/index.js";
import {
  type AgentWallets,
  generateWalletEncryptionKey,
  keystoreFromEnv,
  type Keystore,
  LocalTreasuryFundingSource,
} from "../api/gateway/wallets/index.js";
import { localSettlementLedger, type SettlementLedger } from "../api/gateway/chain/index.js";
import { type Dispatcher, type Mailer, smtpMailer } from "../api/gateway/webhooks/index.js";
import type { X402Facilitator } from "../api/gateway/x402/index.js";
import type { ApiServer } from "../api/query/server.js";
import { rpcBalanceReader } from "../api/shared/balances.js";
import { requestIdMixin } from "../api/shared/ops/index.js";
import { createAccount, issueApiKey } from "../api/shared/keys.js";
import { SecretBox } from "../api/shared/secret-box.js";
import { createPool } from "../indexer/db/database.js";
import { migrate } from "../indexer/db/migrate.js";
import { ChainMismatch, chainOfDatabase, claimChain } from "../indexer/store/chain-identity.js";
import { IngestPipeline } from "../indexer/pipeline.js";
import { RpcSource } from "../indexer/sources/rpc.js";
import { type Localnet, type LocalnetOptions, startLocalnet } from "./localnet.js";

export interface SystemOptions {
  /** A migrated-or-empty database this system owns (it is migrated here). */
  readonly databaseUrl: string;
  /**
   * A streaming replica of that database (`DATABASE_READ_URL`): GraphQL and the query service's
   * read views read the read models there (docs/scaling.md). None by default.
   */
  readonly databaseReadUrl?: string;
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
  /**
   * Keep the pools' connections open through quiet spells (`PoolOptions.keepWarm`): `npm start`
   * does; off by default, so a test's stopped systems leave no connections behind.
   */
  readonly keepWarm?: boolean;
  /** New payee token accounts the authority funds per paying account in 24 h (api/gateway/chain/payee.ts). */
  readonly payeeAccountQuota?: number;
  /**
   * Network names of real x402 / MPP offers that mean the local ledger. Default: the devnet names
   * (`LOCAL_DEVNET_ALIASES`), because the official SDKs know only the public clusters: pointed at
   * the local ledger's RPC URL, they call it devnet.
   */
  readonly networkAliases?: readonly string[];
  /** false = every request reads its API key from the database (bench/http's baseline); cached by default. */
  readonly keyCache?: boolean;
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
  /** Payments to real x402 / MPP servers (signed transfers). */
  readonly transfers: SignedTransfers;
  /** Payers' own transfers co-signed as fee payer (standard x402 facilitator, MPP solana charges). */
  readonly cosigned: CosignedTransfers;
  /** The key that co-signs them (funded with SOL on the local ledger). */
  readonly feePayer: Keypair;
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
  const logger = options.logger ?? pino({ name: "apg", level: process.env.LOG_LEVEL ?? "info", mixin: requestIdMixin });
  const localnet = await startLocalnet(options.localnet ?? {});
  const { info } = localnet;
  logger.info({ rpcUrl: info.rpcUrl, programId: info.programId.toBase58(), mint: info.mint.toBase58() }, "local ledger ready");

  const keepWarm = options.keepWarm === true;
  const pool = createPool(options.databaseUrl, { keepWarm });
  try {
    await migrate(pool);
    await claimLedger(pool, localnet);
  } catch (error) {
    await pool.end();
    await localnet.stop();
    throw error;
  }

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
  // The dedicated fee payer of payers' own transfers (api/gateway/cosigned): SOL only.
  const feePayer = Keypair.generate();
  await fundFeePayer(ledger.connection, feePayer);
  const gateway: Gateway = startGateway({
    pool,
    ledger,
    keystore,
    secretBox,
    fundingSource: LocalTreasuryFundingSource.fromLocalnet(ledger, localnet),
    feePayer,
    // The card rail settles through the named stand-in until a real card processor is configured.
    cardProcessor: new StandInCardProcessor(),
    logger,
    mailer: options.mailer ?? null,
    explorerCluster: info.rpcUrl,
    allowPrivateNetworks: options.allowPrivateNetworks ?? false,
    allowLoopbackWebhooks: options.allowLoopbackWebhooks ?? options.env?.WEBHOOK_ALLOW_LOOPBACK === "true",
    ...(options.reconcileIntervalMs === undefined ? {} : { reconcileIntervalMs: options.reconcileIntervalMs }),
    ...(options.housekeepingMs === undefined ? {} : { housekeepingMs: options.housekeepingMs }),
    ...(options.payeeAccountQuota === undefined ? {} : { payeeAccountQuota: options.payeeAccountQuota }),
    networkAliases: options.networkAliases ?? LOCAL_DEVNET_ALIASES,
  });
  const { wallets, settlement, facilitator, mpp, transfers, cosigned, dispatcher, token } = gateway;

  const readPool = options.databaseReadUrl === undefined ? undefined : createPool(options.databaseReadUrl, { keepWarm });
  const api = createGatewayServer({
    pool,
    ...(readPool === undefined ? {} : { readPool }),
    logger: logger.child({ component: "api" }),
    databaseUrl: options.databaseUrl,
    balances: rpcBalanceReader(new Connection(info.rpcUrl, "confirmed"), info.mint),
    network: ledger.network,
    gateway: gateway.routes,
    mcpAllowPrivateNetworks: options.allowPrivateNetworks ?? false,
    ...(options.keyCache === undefined ? {} : { keyCache: options.keyCache }),
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
    transfers,
    cosigned: cosigned!,
    feePayer,
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
        await Promise.all([indexing, gateway.stop()]);
        await api.close();
        await Promise.all([pool.end(), readPool?.end()]);
        await localnet.stop();
      })();
      return stopped;
    },
  };
}

/**
 * Refuses a database and a ledger that do not belong together (ChainMismatch): a database of
 * another chain, or a new database beside a ledger that kept a history from an earlier run.
 */
async function claimLedger(pool: pg.Pool, localnet: Localnet): Promise<void> {
  const genesisHash = await new Connection(localnet.rpcUrl, "confirmed").getGenesisHash();
  if (localnet.info.resumed && (await chainOfDatabase(pool)) === null) throw new ChainMismatch(null, genesisHash);
  await claimChain(pool, genesisHash);
}

/** Airdrops the local ledger's SOL to the fee payer and waits until it landed. */
async function fundFeePayer(connection: Connection, feePayer: Keypair): Promise<void> {
  const signature = await connection.requestAirdrop(feePayer.publicKey, 100 * LAMPORTS_PER_SOL);
  for (let attempt = 0; attempt < 200; attempt += 1) {
    const status = (await connection.getSignatureStatuses([signature])).value[0];
    if (status?.err != null) throw new Error(`fee payer airdrop failed: ${JSON.stringify(status.err)}`);
    if (status?.confirmationStatus === "confirmed" || status?.confirmationStatus === "finalized") return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error("fee payer airdrop did not land");
}

export { smtpMailer };
