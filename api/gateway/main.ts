/**
 * `tsx api/gateway/main.ts` (`npm run gateway`): the gateway on any Solana cluster, configured from
 * the environment. It serves the gateway's REST /v1 routes and, on the same port, the query
 * service (GraphQL and the read views) over the same database, and runs the gateway's loops
 * (reconciler, sweeper, webhook dispatcher, housekeeping). The indexer runs as its own process
 * (`npm run indexer`), following the same cluster into the same database.
 *
 *   DATABASE_URL                 Postgres (migrations are applied first)
 *   DATABASE_READ_URL            optional: a streaming replica of it; GraphQL reads the read models
 *                                there (credentials, policies, the live feed and every write stay on
 *                                the primary; docs/scaling.md)
 *   SOLANA_RPC_URL               the cluster's JSON-RPC endpoint
 *   SOLANA_NETWORK               spec 2.4 network name (default solana-devnet)
 *   SETTLEMENT_MINT              base58 mint payments settle in (USDC); SETTLEMENT_MINT_DECIMALS (6)
 *   LEDGER_AUTHORITY_KEYPAIR     path of the program's config authority keypair (JSON, 64 bytes)
 *   PROGRAM_ID                   optional: refused unless it is the address the program declares
 *   TREASURY_KEYPAIR             path of the keypair whose token account funds `wallet.fund`
 *   FEE_PAYER_KEYPAIR            optional: path of the dedicated key (SOL only) that co-signs payers'
 *                                own transfers as fee payer (standard x402 facilitator, MPP solana
 *                                charges; api/gateway/cosigned); without it those routes answer 503
 *   ATTESTED_PAYER_QUOTA         new outside payers whose payment_ledger state the authority pays, per
 *                                account in 24 h (default 100; docs/protocols.md "What the service pays")
 *   LOW_BALANCE_FLOOR_LAMPORTS   the fee payer's and authority's SOL floor for the low-balance alert
 *                                (default 1000000000)
 *   WALLET_ENCRYPTION_KEY        seals agent keys (api/gateway/wallets/keystore.ts)
 *   WEBHOOK_SECRETS_KEY          seals webhook, alert and stored-response secrets
 *   EXPLORER_CLUSTER             explorer links (mainnet-beta, devnet, or an RPC URL; default devnet)
 *   SMTP_URL                     e-mail alerts (optional)
 *   PORT (4000), HOST (127.0.0.1), LOG_LEVEL (info)
 *
 * The card rail uses the named stand-in processor (api/gateway/card) until a real one is wired.
 * Exit codes: 0 stopped by a signal, 1 failed to start.
 */
import { readFile } from "node:fs/promises";
import { getAssociatedTokenAddressSync } from "@solana/spl-token";
import { Keypair } from "@solana/web3.js";
import { pino } from "pino";
import { createPool, databaseUrl, readReplicaPool } from "../../indexer/db/database.js";
import { migrate } from "../../indexer/db/migrate.js";
import { claimChain } from "../../indexer/store/chain-identity.js";
import { PAYMENT_LEDGER_PROGRAM_ID } from "../../programs/payment_ledger/ts/index.js";
import { rpcBalanceReader } from "../shared/balances.js";
import { SecretBox } from "../shared/secret-box.js";
import { StandInCardProcessor } from "./card/index.js";
import { startGateway } from "./gateway.js";
import { createGatewayServer } from "./server.js";
import { keystoreFromEnv, LocalTreasuryFundingSource, settlementLedgerFromEnv } from "./wallets/index.js";
import { smtpMailer } from "./webhooks/index.js";

async function keypairFile(name: string): Promise<Keypair> {
  const path = process.env[name];
  if (path === undefined || path === "") throw new Error(`${name} is not set`);
  const json: unknown = JSON.parse(await readFile(path, "utf8"));
  if (!Array.isArray(json) || json.length !== 64) throw new Error(`${name}: expected a JSON array of 64 bytes`);
  return Keypair.fromSecretKey(Uint8Array.from(json as number[]));
}

async function main(): Promise<void> {
  const logger = pino({ name: "gateway", level: process.env.LOG_LEVEL ?? "info" });
  const programId = process.env.PROGRAM_ID;
  if (programId !== undefined && programId !== PAYMENT_LEDGER_PROGRAM_ID.toBase58()) {
    throw new Error(`PROGRAM_ID ${programId}: this build talks to payment_ledger at ${PAYMENT_LEDGER_PROGRAM_ID.toBase58()}`);
  }
  const url = databaseUrl();
  const pool = createPool(url);
  await migrate(pool);
  const ledger = await settlementLedgerFromEnv();
  // A database holds one chain's history: refuse a cluster other than the one it was built from.
  await claimChain(pool, await ledger.connection.getGenesisHash());
  const treasury = await keypairFile("TREASURY_KEYPAIR");
  const treasuryToken = getAssociatedTokenAddressSync(ledger.mint, treasury.publicKey, true);
  const gateway = startGateway({
    pool,
    ledger,
    keystore: keystoreFromEnv(),
    secretBox: SecretBox.fromEnv(),
    fundingSource: new LocalTreasuryFundingSource(ledger, treasury, treasuryToken),
    cardProcessor: new StandInCardProcessor(),
    logger,
    mailer: process.env.SMTP_URL === undefined ? null : smtpMailer(process.env.SMTP_URL),
    explorerCluster: process.env.EXPLORER_CLUSTER ?? "devnet",
    ...(process.env.FEE_PAYER_KEYPAIR === undefined ? {} : { feePayer: await keypairFile("FEE_PAYER_KEYPAIR") }),
    ...(process.env.ATTESTED_PAYER_QUOTA === undefined ? {} : { attestedPayerQuota: positiveInteger("ATTESTED_PAYER_QUOTA") }),
    ...(process.env.LOW_BALANCE_FLOOR_LAMPORTS === undefined
      ? {}
      : { lowBalanceFloorLamports: BigInt(positiveInteger("LOW_BALANCE_FLOOR_LAMPORTS")) }),
  });
  const readPool = readReplicaPool();
  const server = createGatewayServer({
    pool,
    ...(readPool === undefined ? {} : { readPool }),
    logger: logger.child({ component: "api" }),
    databaseUrl: url,
    balances: rpcBalanceReader(ledger.connection, ledger.mint),
    network: ledger.network,
    gateway: gateway.routes,
  });
  const port = await server.listen(Number(process.env.PORT ?? 4000), process.env.HOST ?? "127.0.0.1");
  logger.info({ port, network: ledger.network, mint: gateway.token }, "gateway listening: /v1, /graphql");
  const stop = async (): Promise<void> => {
    await gateway.stop();
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

/** A positive integer from the environment, or a start failure naming the variable. */
function positiveInteger(name: string): number {
  const text = process.env[name] ?? "";
  if (!/^[1-9]\d{0,15}$/.test(text)) throw new Error(`${name} must be a positive integer`);
  return Number(text);
}
