/**
 * The gateway process once its configuration is accepted (api/gateway/main.ts checks it first):
 * migrations, the chain claim, the gateway's services and loops, and the HTTP server.
 */
import { getAssociatedTokenAddressSync } from "@solana/spl-token";
import { Connection } from "@solana/web3.js";
import { pino } from "pino";
import type { GatewayConfig } from "../../indexer/config/index.js";
import { createPool } from "../../indexer/db/database.js";
import { migrate } from "../../indexer/db/migrate.js";
import { claimChain } from "../../indexer/store/chain-identity.js";
import { rpcBalanceReader } from "../shared/balances.js";
import { createOpsMetrics, requestIdMixin, useOpsRoutes } from "../shared/ops/index.js";
import { SecretBox } from "../shared/secret-box.js";
import { StandInCardProcessor } from "./card/index.js";
import { startGateway } from "./gateway.js";
import { createGatewayServer } from "./server.js";
import { keystoreFromEnv, LocalTreasuryFundingSource } from "./wallets/index.js";
import { COMMITMENT, type SettlementLedger } from "./chain/index.js";
import { smtpMailer } from "./webhooks/index.js";

/** How long in-flight requests get to finish after SIGTERM (systemd's TimeoutStopSec is 30 s). */
export const SHUTDOWN_GRACE_MS = 20_000;

/** Migrates, composes and serves the gateway until SIGINT/SIGTERM (then exits 0). */
export async function serveGateway(config: GatewayConfig): Promise<void> {
  const { cluster } = config;
  const logger = pino({ name: "gateway", level: config.logLevel, mixin: requestIdMixin });
  const ledger: SettlementLedger = {
    connection: new Connection(cluster.rpcUrl, { commitment: COMMITMENT }),
    mint: cluster.mint,
    decimals: cluster.decimals,
    authority: cluster.authority,
    network: cluster.network,
    programId: cluster.programId,
  };
  // Warm: the first payments after a quiet spell do not wait for new connections.
  const pool = createPool(config.databaseUrl, { keepWarm: true });
  await migrate(pool);
  // A database holds one chain's history: refuse a cluster other than the one it was built from.
  await claimChain(pool, await ledger.connection.getGenesisHash());
  const treasuryToken = getAssociatedTokenAddressSync(ledger.mint, cluster.treasury.publicKey, true);
  const gateway = startGateway({
    pool,
    ledger,
    keystore: keystoreFromEnv(config.keys),
    secretBox: SecretBox.fromEnv(config.keys),
    fundingSource: new LocalTreasuryFundingSource(ledger, cluster.treasury, treasuryToken),
    cardProcessor: new StandInCardProcessor(),
    logger,
    mailer: config.smtpUrl === undefined ? null : smtpMailer(config.smtpUrl),
    explorerCluster: config.explorerCluster,
    ...(config.publicUrl === undefined ? {} : { publicUrl: config.publicUrl }),
    ...(config.feePayer === undefined ? {} : { feePayer: config.feePayer }),
    ...(config.attestedPayerQuota === undefined ? {} : { attestedPayerQuota: config.attestedPayerQuota }),
    ...(config.lowBalanceFloorLamports === undefined ? {} : { lowBalanceFloorLamports: config.lowBalanceFloorLamports }),
    // Registration then accepts loopback targets only; delivery lifts the private-address guard.
    allowLoopbackWebhooks: config.allowLoopbackWebhooks,
    allowPrivateNetworks: config.allowLoopbackWebhooks,
  });
  if (config.allowLoopbackWebhooks) logger.warn("WEBHOOK_ALLOW_LOOPBACK=true: webhooks may reach this machine; local development only");
  const readPool = config.databaseReadUrl === undefined ? undefined : createPool(config.databaseReadUrl, { keepWarm: true });
  const ops = useOpsRoutes({
    metrics: createOpsMetrics({
      pool,
      connection: ledger.connection,
      solSpent: () => gateway.solSpent.snapshot(),
      serviceKeys: [
        { name: "authority", key: cluster.authority.publicKey },
        ...(config.feePayer === undefined ? [] : [{ name: "fee_payer", key: config.feePayer.publicKey }]),
      ],
    }),
    readiness: { pool, connection: ledger.connection, programId: cluster.programId },
  });
  const server = createGatewayServer({
    ops,
    pool,
    ...(readPool === undefined ? {} : { readPool }),
    logger: logger.child({ component: "api" }),
    databaseUrl: config.databaseUrl,
    balances: rpcBalanceReader(ledger.connection, ledger.mint),
    network: ledger.network,
    gateway: gateway.routes,
  });
  const port = await server.listen(config.port, config.host);
  logger.info({ port, network: ledger.network, mint: gateway.token }, "gateway listening: /v1, /graphql");
  // SIGTERM: new payments answer 503 at once, the ones in flight get SHUTDOWN_GRACE_MS to finish;
  // one still running then is parked as it stands (its reservation and claim are rows the
  // reconciler resumes at the next start), never half-written.
  const stop = async (): Promise<void> => {
    ops.drain();
    // Long-polls on approvals answer now (the approval as it stands) instead of holding the drain.
    await gateway.routes.approvalWaits?.close();
    const idle = await ops.idle(SHUTDOWN_GRACE_MS);
    logger.info({ idle, inFlight: ops.inFlight() }, "draining done; stopping");
    await gateway.stop();
    await server.close();
    await Promise.all([pool.end(), readPool?.end()]);
    process.exit(0);
  };
  process.once("SIGINT", () => void stop());
  process.once("SIGTERM", () => void stop());
}
