/**
 * The configuration of each entry point, parsed from one environment into typed values, with
 * every problem collected (./reader.ts). Nothing here touches the database or the chain: that is
 * the preflight's job (./preflight.ts), and it runs only on a configuration that parsed.
 */
import type { Keypair, PublicKey } from "@solana/web3.js";
import {
  base58Address,
  ConfigReader,
  type Env,
  explorerCluster,
  genesisHash,
  grpcUrl,
  httpUrl,
  publicUrl,
  integer,
  key32,
  keypairFile,
  nonEmpty,
  oneOf,
  port,
  postgresUrl,
  retiredKeys,
  smtpUrl,
  solAmount,
} from "./reader.js";

export const NETWORKS = ["solana-devnet", "solana-mainnet", "solana-testnet", "solana-localnet"] as const;
export type Network = (typeof NETWORKS)[number];

/**
 * The first 32 characters of each public cluster's genesis hash (the CAIP-2 reference x402 uses,
 * api/gateway/chain/networks.ts). `solana-localnet` is any other cluster: its hash is configured.
 */
export const PUBLIC_GENESIS_PREFIX: Readonly<Record<Exclude<Network, "solana-localnet">, string>> = {
  "solana-mainnet": "5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp",
  "solana-devnet": "EtWTRABZaYq6iMfeYKouRu166VU2xqa1",
  "solana-testnet": "4uhcVJyU9pJkvQyS88uRDiswHXSCkY3z",
};

const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** Default floor of SOL the authority and the fee payer hold: about 10 000 payments' fees. */
export const DEFAULT_MIN_FEE_PAYER_LAMPORTS = 50_000_000n;

export interface Listen {
  readonly port: number;
  readonly host: string;
  readonly logLevel: LogLevel;
}

export interface Cluster {
  readonly rpcUrl: string;
  readonly network: Network;
  /** The configured genesis hash, when given (always for solana-localnet). */
  readonly genesisHash: string | undefined;
  readonly programId: PublicKey;
  readonly mint: PublicKey;
  readonly decimals: number;
  readonly authority: Keypair;
  readonly treasury: Keypair;
  /** Where the two keypairs were read from (printed by init-cluster, never their contents). */
  readonly keyFiles: { readonly authority: string; readonly treasury: string };
  readonly minFeePayerLamports: bigint;
}

export interface GatewayConfig extends Listen {
  readonly databaseUrl: string;
  readonly databaseReadUrl: string | undefined;
  readonly cluster: Cluster;
  readonly feePayer: Keypair | undefined;
  /** The keystore and secret-box variables, as their own readers take them. */
  readonly keys: Readonly<Record<string, string>>;
  readonly explorerCluster: string;
  readonly smtpUrl: string | undefined;
  /** The gateway's public base URL: the signed approval links start with it. */
  readonly publicUrl: string | undefined;
  /** New outside payers whose payment_ledger account the authority pays, per account in 24 h. */
  readonly attestedPayerQuota: number | undefined;
  /** The fee payer's and authority's SOL floor for the low-balance alert. */
  readonly lowBalanceFloorLamports: bigint | undefined;
  /** Webhook targets on loopback accepted and delivered to: local development and tests only. */
  readonly allowLoopbackWebhooks: boolean;
}

export interface QueryConfig extends Listen {
  readonly databaseUrl: string;
  readonly databaseReadUrl: string | undefined;
  /** Balances are read from the cluster when both are set. */
  readonly balances: { readonly rpcUrl: string; readonly mint: PublicKey } | undefined;
  readonly network: Network | undefined;
  /** Processes serving on the one port (api/query/workers.ts); 1 = this process alone. */
  readonly workers: number;
}

export interface IndexerConfig {
  readonly databaseUrl: string;
  readonly rpcUrl: string;
  readonly programId: PublicKey;
  readonly explorerCluster: string;
  readonly yellowstone: { readonly endpoint: string; readonly xToken: string | undefined } | undefined;
  readonly logLevel: LogLevel;
}

export interface LocalConfig extends Listen {
  /** Unset: the embedded server. */
  readonly databaseUrl: string | undefined;
  readonly dataDir: string | undefined;
  readonly localnetRpcPort: number;
  readonly smtpUrl: string | undefined;
  /** Keys given in the environment (else the local state's). */
  readonly keys: Readonly<Record<string, string>>;
}

/** A configuration, or the problems that refused it (one line each). */
export type Loaded<T> = { readonly ok: true; readonly config: T } | { readonly ok: false; readonly problems: readonly string[] };

function finish<T>(reader: ConfigReader, build: () => T): Loaded<T> {
  return reader.problems.length > 0 ? { ok: false, problems: reader.problems } : { ok: true, config: build() };
}

function listen(reader: ConfigReader): Listen {
  return {
    port: reader.withDefault("PORT", port, 4000),
    host: reader.withDefault("HOST", nonEmpty, "127.0.0.1"),
    logLevel: reader.withDefault("LOG_LEVEL", oneOf(LOG_LEVELS), "info"),
  };
}

/**
 * The program address (PROGRAM_ID). Every service takes it from here and hands it to the binding,
 * so a program deployed at any address works without a rebuild of the services; that a program is
 * deployed and executable there is the preflight's check (./preflight.ts).
 */
function programId(reader: ConfigReader): PublicKey | undefined {
  return reader.required("PROGRAM_ID", base58Address);
}

/**
 * `requireCustomGenesis`: a custom cluster (solana-localnet) must name its genesis hash, except
 * for init-cluster, which prints it.
 */
function cluster(reader: ConfigReader, requireCustomGenesis = true): Cluster | undefined {
  const rpcUrl = reader.required("SOLANA_RPC_URL", httpUrl);
  const network = reader.required("SOLANA_NETWORK", oneOf(NETWORKS));
  const genesis = reader.optional("SOLANA_GENESIS_HASH", genesisHash);
  if (requireCustomGenesis && network === "solana-localnet" && reader.raw("SOLANA_GENESIS_HASH") === undefined) {
    reader.problem("SOLANA_GENESIS_HASH", "not set (required for the custom cluster solana-localnet)", "the cluster's genesis hash");
  }
  if (network !== undefined && network !== "solana-localnet" && genesis !== undefined) {
    const prefix = PUBLIC_GENESIS_PREFIX[network];
    if (!genesis.startsWith(prefix)) {
      reader.problem("SOLANA_GENESIS_HASH", `${genesis} is not the genesis hash of ${network}`, `a hash starting ${prefix}, or unset`);
    }
  }
  const program = programId(reader);
  const mint = reader.required("SETTLEMENT_MINT", base58Address);
  const decimals = reader.withDefault("SETTLEMENT_MINT_DECIMALS", integer(0, 18, "the mint's decimals"), 6);
  const authority = reader.required("LEDGER_AUTHORITY_KEYPAIR", keypairFile);
  const treasury = reader.required("TREASURY_KEYPAIR", keypairFile);
  const minFeePayerLamports = reader.withDefault("MIN_FEE_PAYER_SOL", solAmount, DEFAULT_MIN_FEE_PAYER_LAMPORTS);
  if ([rpcUrl, network, program, mint, authority, treasury].includes(undefined)) return undefined;
  return {
    rpcUrl: rpcUrl!,
    network: network!,
    genesisHash: genesis,
    programId: program!,
    mint: mint!,
    decimals,
    authority: authority!.keypair,
    treasury: treasury!.keypair,
    keyFiles: { authority: authority!.path, treasury: treasury!.path },
    minFeePayerLamports,
  };
}

/** The default explorer cluster: the public cluster's name, else the RPC URL. */
function defaultExplorer(network: Network | undefined, rpcUrl: string | undefined): string {
  if (network === "solana-mainnet") return "mainnet-beta";
  if (network === "solana-devnet") return "devnet";
  if (network === "solana-testnet") return "testnet";
  return rpcUrl ?? "devnet";
}

export function gatewayConfig(env: Env): Loaded<GatewayConfig> {
  const reader = new ConfigReader(env, "gateway");
  const databaseUrl = reader.required("DATABASE_URL", postgresUrl);
  const databaseReadUrl = reader.optional("DATABASE_READ_URL", postgresUrl);
  const chain = cluster(reader);
  const feePayer = reader.optional("FEE_PAYER_KEYPAIR", keypairFile);
  if (feePayer !== undefined && chain !== undefined && feePayer.keypair.publicKey.equals(chain.authority.publicKey)) {
    reader.problem("FEE_PAYER_KEYPAIR", "is the LEDGER_AUTHORITY_KEYPAIR key", "a dedicated key that holds only SOL");
  }
  const walletKey = reader.required("WALLET_ENCRYPTION_KEY", key32(false));
  const walletKeyVersion = reader.optional("WALLET_ENCRYPTION_KEY_VERSION", nonEmpty);
  const retired = reader.optional("WALLET_ENCRYPTION_RETIRED_KEYS", retiredKeys);
  const secretsKey = reader.required("WEBHOOK_SECRETS_KEY", key32(true));
  if (walletKey !== undefined && secretsKey !== undefined && walletKey === secretsKey) {
    reader.problem("WEBHOOK_SECRETS_KEY", "is the same key as WALLET_ENCRYPTION_KEY", "a key of its own");
  }
  const explorer = reader.optional("EXPLORER_CLUSTER", explorerCluster);
  const smtp = reader.optional("SMTP_URL", smtpUrl);
  const gatewayUrl = reader.optional("GATEWAY_PUBLIC_URL", publicUrl);
  const attestedPayerQuota = reader.optional("ATTESTED_PAYER_QUOTA", integer(1, 1_000_000, "new payers per account per day"));
  const lowBalanceFloor = reader.optional("LOW_BALANCE_FLOOR_SOL", solAmount);
  const allowLoopbackWebhooks = reader.withDefault("WEBHOOK_ALLOW_LOOPBACK", oneOf(["true", "false"] as const), "false");
  const listening = listen(reader);
  return finish(reader, () => ({
    ...listening,
    allowLoopbackWebhooks: allowLoopbackWebhooks === "true",
    publicUrl: gatewayUrl,
    attestedPayerQuota,
    lowBalanceFloorLamports: lowBalanceFloor,
    databaseUrl: databaseUrl!,
    databaseReadUrl,
    cluster: chain!,
    feePayer: feePayer?.keypair,
    keys: {
      WALLET_ENCRYPTION_KEY: walletKey!,
      WEBHOOK_SECRETS_KEY: secretsKey!,
      ...(walletKeyVersion === undefined ? {} : { WALLET_ENCRYPTION_KEY_VERSION: walletKeyVersion }),
      ...(retired === undefined ? {} : { WALLET_ENCRYPTION_RETIRED_KEYS: retired }),
    },
    explorerCluster: explorer ?? defaultExplorer(chain!.network, chain!.rpcUrl),
    smtpUrl: smtp,
  }));
}

export function queryConfig(env: Env): Loaded<QueryConfig> {
  const reader = new ConfigReader(env, "query");
  const databaseUrl = reader.required("DATABASE_URL", postgresUrl);
  const databaseReadUrl = reader.optional("DATABASE_READ_URL", postgresUrl);
  const rpcUrl = reader.optional("SOLANA_RPC_URL", httpUrl);
  const mint = reader.optional("SETTLEMENT_MINT", base58Address);
  if ((reader.raw("SOLANA_RPC_URL") === undefined) !== (reader.raw("SETTLEMENT_MINT") === undefined)) {
    const missing = reader.raw("SOLANA_RPC_URL") === undefined ? "SOLANA_RPC_URL" : "SETTLEMENT_MINT";
    reader.problem(missing, "not set while its pair is", "both SOLANA_RPC_URL and SETTLEMENT_MINT (balances), or neither");
  }
  const network = reader.optional("SOLANA_NETWORK", oneOf(NETWORKS));
  const workers = reader.withDefault("QUERY_WORKERS", integer(1, 64, "processes serving the query service"), 1);
  const listening = listen(reader);
  return finish(reader, () => ({
    ...listening,
    databaseUrl: databaseUrl!,
    databaseReadUrl,
    balances: rpcUrl !== undefined && mint !== undefined ? { rpcUrl, mint } : undefined,
    network,
    workers,
  }));
}

/** indexer/cli.ts lays its flags (`--rpc-url`, `--program-id`, ...) over the environment first. */
export function indexerConfig(env: Env): Loaded<IndexerConfig> {
  const reader = new ConfigReader(env, "indexer");
  const databaseUrl = reader.required("DATABASE_URL", postgresUrl);
  const rpcUrl = reader.required("SOLANA_RPC_URL", httpUrl);
  const program = programId(reader);
  const explorer = reader.optional("EXPLORER_CLUSTER", explorerCluster);
  const endpoint = reader.optional("YELLOWSTONE_ENDPOINT", grpcUrl);
  const xToken = reader.optional("YELLOWSTONE_X_TOKEN", { ...nonEmpty, secret: true });
  const logLevel = reader.withDefault("LOG_LEVEL", oneOf(LOG_LEVELS), "info");
  return finish(reader, () => ({
    databaseUrl: databaseUrl!,
    rpcUrl: rpcUrl!,
    programId: program!,
    explorerCluster: explorer ?? rpcUrl!,
    yellowstone: endpoint === undefined ? undefined : { endpoint, xToken },
    logLevel,
  }));
}

/** `npm run admin -- init-cluster`: the cluster, without the gateway's database and keys. */
export function adminClusterConfig(env: Env): Loaded<Cluster> {
  const reader = new ConfigReader(env, "admin");
  const chain = cluster(reader, false);
  return finish(reader, () => chain!);
}

export function localConfig(env: Env): Loaded<LocalConfig> {
  const reader = new ConfigReader(env, "local");
  const databaseUrl = reader.optional("DATABASE_URL", postgresUrl);
  const dataDir = reader.optional("APG_DATA_DIR", nonEmpty);
  const localnetRpcPort = reader.withDefault("LOCALNET_RPC_PORT", integer(1, 65_534, "the ledger's RPC port"), 8899);
  const smtp = reader.optional("SMTP_URL", smtpUrl);
  const walletKey = reader.optional("WALLET_ENCRYPTION_KEY", key32(false));
  const secretsKey = reader.optional("WEBHOOK_SECRETS_KEY", key32(true));
  const listening = listen(reader);
  return finish(reader, () => ({
    ...listening,
    databaseUrl,
    dataDir,
    localnetRpcPort,
    smtpUrl: smtp,
    keys: {
      ...(walletKey === undefined ? {} : { WALLET_ENCRYPTION_KEY: walletKey }),
      ...(secretsKey === undefined ? {} : { WEBHOOK_SECRETS_KEY: secretsKey }),
    },
  }));
}

/** `npm run admin -- <account command>`: the local system's database, or DATABASE_URL's. */
export function adminDatabaseConfig(env: Env): Loaded<{ readonly databaseUrl: string | undefined; readonly dataDir: string | undefined }> {
  const reader = new ConfigReader(env, "admin");
  const databaseUrl = reader.optional("DATABASE_URL", postgresUrl);
  const dataDir = reader.optional("APG_DATA_DIR", nonEmpty);
  return finish(reader, () => ({ databaseUrl, dataDir }));
}
