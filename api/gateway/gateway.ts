/**
 * The gateway's parts wired together on one database and one ledger: custodial wallets, the
 * settlement path, the x402 facilitator, the MPP service, and the background loops that finish
 * what the pay path leaves open (the settlement reconciler, the sweeper, the webhook dispatcher,
 * the approvals' timeout loop, housekeeping). `routes` is what the HTTP server mounts (api/gateway/server.ts).
 *
 * Two composers call this: `scripts/system.ts` on the local ledger, and `api/gateway/main.ts` on
 * any cluster configured from the environment. Nothing here knows which.
 */
import { type Keypair, PublicKey } from "@solana/web3.js";
import type pg from "pg";
import type { Logger } from "pino";
import type { SecretBox } from "../shared/secret-box.js";
import { ApprovalWaits } from "./payments/approvals/index.js";
import type { CardProcessor } from "./card/processor.js";
import { ChannelSessions, runChannelLoop } from "./channels/index.js";
import { CosignedTransfers } from "./cosigned/cosigned.js";
import { DEFAULT_LOW_BALANCE_FLOOR_LAMPORTS, type LowBalanceAlert, LowBalanceAlerts } from "./events/low-balance.js";
import { pruneIdempotencyKeys } from "../shared/http/idempotency.js";
import type { GatewayDeps } from "./http/deps.js";
import { MppGateway } from "./mpp/gateway.js";
import { LedgerInvocations } from "./invocations/index.js";
import { AgentTokenAccounts, Settlement } from "./settlement/index.js";
import { runApprovalTimeouts, runReconciler } from "./loops/index.js";
import { SolSpent } from "./settlement/sol-spent.js";
import { runSweeper } from "./loops/sweeper.js";
import { ledgerNetworks, SignedTransfers } from "./transfers/index.js";
import { AgentWallets, type FundingSource, type Keystore } from "./wallets/index.js";
import type { SettlementLedger } from "./chain/index.js";
import { Dispatcher, type Mailer } from "./webhooks/index.js";
import { pruneExpiredNonces, X402Facilitator } from "./x402/index.js";

const HOUSEKEEPING_MS = 3_600_000;

export interface GatewayOptions {
  readonly pool: pg.Pool;
  readonly ledger: SettlementLedger;
  readonly keystore: Keystore;
  readonly secretBox: SecretBox;
  /** Where `wallet.fund` takes money from. */
  readonly fundingSource: FundingSource;
  /** The MPP card rail's processor. */
  readonly cardProcessor: CardProcessor;
  readonly logger: Logger;
  /** SMTP transport for email alerts; none by default. */
  readonly mailer?: Mailer | null;
  /** How often the reconciler and the sweeper run. */
  readonly reconcileIntervalMs?: number;
  readonly housekeepingMs?: number;
  /** Deliveries to loopback/private receivers (a local system or a test); false in production. */
  readonly allowPrivateNetworks?: boolean;
  /** Webhook endpoints may be registered on loopback (local development only). */
  readonly allowLoopbackWebhooks?: boolean;
  /** New payee token accounts the authority funds per paying account in 24 h (chain/payee.ts). */
  readonly payeeAccountQuota?: number;
  /** New attested payers whose state's rent the authority pays, per account in 24 h (cosigned/cosigned.ts). */
  readonly attestedPayerQuota?: number;
  /** The fee payer's and the authority's SOL floor (events/low-balance.ts); 1 SOL when absent. */
  readonly lowBalanceFloorLamports?: bigint;
  /** Told when a service key's balance falls below the floor (besides the error log). */
  readonly onServiceAlert?: (alert: LowBalanceAlert) => void;
  /** The explorer cluster answers link to (`mainnet-beta`, `devnet`, or an RPC URL). */
  readonly explorerCluster?: string;
  /**
   * Extra network names of real x402 / MPP offers that mean this ledger (api/gateway/chain/networks.ts):
   * a local ledger's stand-in names for the official SDKs. None by default.
   */
  readonly networkAliases?: readonly string[];
  /**
   * The dedicated fee payer (SOL only, no authority on payment_ledger) that co-signs payers' own
   * transfers: the standard x402 facilitator and MPP `solana` charges (api/gateway/cosigned).
   * Without it those are not offered.
   */
  readonly feePayer?: Keypair;
  /** The gateway's public base URL: the signed approval links start with it (path-only when absent). */
  readonly publicUrl?: string;
  /** How often the approvals' timeout loop looks for due approvals; 1 s by default. */
  readonly approvalTimeoutIntervalMs?: number;
}

export interface Gateway {
  readonly wallets: AgentWallets;
  readonly settlement: Settlement;
  readonly facilitator: X402Facilitator;
  readonly mpp: MppGateway;
  /** Channel sessions: opens, vouchers, settlements and closes (api/gateway/channels). */
  readonly channels: ChannelSessions;
  /** Payments to real x402 / MPP servers: signed transfers, recorded once they landed. */
  readonly transfers: SignedTransfers;
  /** Payers' own transfers co-signed as fee payer; null without a fee payer key. */
  readonly cosigned: CosignedTransfers | null;
  /** SOL spent by the fee payer and the authority on co-signed payments, by kind (for a `/metrics` exporter). */
  readonly solSpent: SolSpent;
  readonly dispatcher: Dispatcher;
  /** Base58 mint payments settle in (the x402 `token`). */
  readonly token: string;
  /** The network name payments name (`solana-localnet`, `solana-devnet`, ...). */
  readonly network: string;
  /** The services behind the REST /v1 routes (api/gateway/server.ts `gateway`). */
  readonly routes: Omit<GatewayDeps, "pool" | "logger" | "now" | "network" | "balances">;
  /** Stops the loops (the pool and the HTTP server belong to the caller). */
  stop(): Promise<void>;
}

export function startGateway(options: GatewayOptions): Gateway {
  const { pool, ledger, keystore, secretBox, logger } = options;
  const controller = new AbortController();
  const wallets = new AgentWallets({ pool, keystore, ledger, fundingSource: options.fundingSource });
  const settlement = new Settlement({
    pool,
    wallets,
    ledger,
    invocations: new LedgerInvocations({ pool, wallets, ledger }),
    logger: logger.child({ component: "settlement" }),
    ...(options.payeeAccountQuota === undefined ? {} : { payeeAccountQuota: options.payeeAccountQuota }),
  });
  const token = ledger.mint.toBase58();
  const facilitator = new X402Facilitator({
    pool,
    settler: settlement,
    programId: ledger.programId,
    agents: wallets,
    invocations: settlement,
    network: ledger.network,
    token,
    onWarning: (message, context) => logger.warn(context, message),
  });
  const mpp = new MppGateway({
    pool,
    settler: settlement,
    programId: ledger.programId,
    agents: wallets,
    cardProcessor: options.cardProcessor,
  });
  const transfers = new SignedTransfers({
    pool,
    ledger,
    recorder: settlement,
    networks: ledgerNetworks(ledger.network, options.networkAliases ?? []),
  });
  const solSpent = new SolSpent();
  const cosigned =
    options.feePayer === undefined
      ? null
      : new CosignedTransfers({
          pool,
          ledger,
          feePayer: options.feePayer,
          agents: wallets,
          onWarning: (message, context) => logger.warn(context, message),
          solSpent,
          ...(options.attestedPayerQuota === undefined ? {} : { attestedPayerQuota: options.attestedPayerQuota }),
        });
  const channels = new ChannelSessions({ pool, ledger, wallets, invocations: settlement });
  const interval = options.reconcileIntervalMs === undefined ? {} : { intervalMs: options.reconcileIntervalMs };
  // Channel opens of unknown outcome, pending and accepted settlements, closes past their delay.
  const channelLoop = runChannelLoop(channels, {
    signal: controller.signal,
    ...interval,
    onError: (error, channel) => logger.warn({ err: error, channel }, "channel pass failed"),
  });
  // The service keys' SOL, checked after each settlement reconciler pass.
  const floorLamports = options.lowBalanceFloorLamports ?? DEFAULT_LOW_BALANCE_FLOOR_LAMPORTS;
  const balanceAlerts = new LowBalanceAlerts([
    { key: "authority", address: ledger.authority.publicKey.toBase58(), floorLamports },
    ...(options.feePayer === undefined
      ? []
      : [{ key: "fee_payer" as const, address: options.feePayer.publicKey.toBase58(), floorLamports }]),
  ]);
  const settlementAndBalances = {
    async reconcilePending() {
      const report = await settlement.reconcilePending();
      const alerts = await balanceAlerts
        .check(async (address) => BigInt(await ledger.connection.getBalance(new PublicKey(address), "confirmed")))
        .catch((error: unknown) => {
          logger.warn({ err: error }, "service balances not read");
          return [];
        });
      for (const alert of alerts) {
        logger.error(
          {
            event: alert.event,
            key: alert.key,
            address: alert.address,
            balanceLamports: String(alert.balanceLamports),
            floorLamports: String(alert.floorLamports),
          },
          "a service key's SOL balance is below its floor",
        );
        options.onServiceAlert?.(alert);
      }
      return report;
    },
  };
  const reconciling = runReconciler(settlementAndBalances, wallets, {
    signal: controller.signal,
    ...interval,
    onError: (error) => logger.warn({ err: error }, "reconciler pass failed"),
  });
  // Co-signed transfers left pending, and their records, resolve in their own loop.
  const reconcilingCosigned =
    cosigned === null
      ? Promise.resolve()
      : runReconciler(cosigned, null, {
          signal: controller.signal,
          ...interval,
          onError: (error) => logger.warn({ err: error }, "co-signed transfer reconciler pass failed"),
        });
  // Closes what the pay path left open (claims, expired authorizations, invocation openings).
  const sweeping = runSweeper(
    pool,
    { agents: wallets, invocations: settlement, transfers, onWarning: (message, context) => logger.warn(context, message) },
    {
      signal: controller.signal,
      ...interval,
      onError: (error) => logger.warn({ err: error }, "sweeper pass failed"),
      onPass: (report) => {
        if (Object.values(report).some((count) => count > 0)) logger.info(report, "swept");
      },
    },
  );
  // Held payments nobody decided in time are denied by this clock; it survives restarts (rows only).
  const approvalTimeouts = runApprovalTimeouts(pool, {
    signal: controller.signal,
    ...(options.approvalTimeoutIntervalMs === undefined ? {} : { intervalMs: options.approvalTimeoutIntervalMs }),
    onError: (error) => logger.warn({ err: error }, "approvals timeout pass failed"),
    onPass: (report) => {
      if (report.expired + report.unresumedReleased > 0) logger.info(report, "approvals expired");
    },
  });
  const approvalWaits = new ApprovalWaits(pool);
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

  let stopped: Promise<void> | null = null;
  return {
    wallets,
    settlement,
    facilitator,
    mpp,
    channels,
    transfers,
    cosigned,
    solSpent,
    dispatcher,
    token,
    network: ledger.network,
    routes: {
      wallets,
      keystore,
      secretBox,
      facilitator,
      invocations: settlement,
      settlementToken: token,
      mpp,
      channels,
      transfers,
      ...(cosigned === null ? {} : { cosigned }),
      ...(options.explorerCluster === undefined ? {} : { explorerCluster: options.explorerCluster }),
      allowLoopbackWebhooks: options.allowLoopbackWebhooks ?? false,
      mailConfigured: (options.mailer ?? null) !== null,
      approvalWaits,
      ...(options.publicUrl === undefined ? {} : { publicUrl: options.publicUrl }),
      tokenAccounts: new AgentTokenAccounts({
        pool,
        ledger,
        logger: logger.child({ component: "token-accounts" }),
        ...(options.payeeAccountQuota === undefined ? {} : { payeeAccountQuota: options.payeeAccountQuota }),
      }),
    },
    stop() {
      stopped ??= (async () => {
        controller.abort();
        clearInterval(housekeeping);
        await Promise.all([
          reconciling,
          reconcilingCosigned,
          sweeping,
          channelLoop,
          approvalTimeouts,
          approvalWaits.close(),
          dispatcher.stop(),
        ]);
      })();
      return stopped;
    },
  };
}
