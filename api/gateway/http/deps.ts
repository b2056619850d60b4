/**
 * What the gateway's REST /v1 routes are given: the shared route needs (database, log, clock,
 * secret box) and the gateway's services. A route whose service is absent answers 503, so a test
 * can mount only what it exercises.
 */
import type { Route as SharedRoute, RouteContext as SharedRouteContext, RouteDeps } from "../../shared/http/router.js";
import type { BalanceReader } from "../../shared/balances.js";
import type { ApprovalWaits } from "../payments/approvals/index.js";
import type { ChannelSessions } from "../channels/index.js";
import type { CosignedTransfers } from "../cosigned/cosigned.js";
import type { Invocations } from "../invocations/index.js";
import type { AgentTokenAccounts } from "../settlement/payee-account.js";
import type { MppGateway } from "../mpp/gateway.js";
import type { AgentWallets, Keystore } from "../wallets/index.js";
import type { SignedTransfers } from "../transfers/index.js";
import type { X402Facilitator } from "../x402/facilitator.js";

export interface GatewayDeps extends RouteDeps {
  /** Spec 2.4 `network` when no wallets are configured; "solana-localnet" by default. */
  readonly network?: string | undefined;
  /** Chain balances for the agents listing (batched). */
  readonly balances?: BalanceReader | undefined;
  /** Custodial wallets: wallet routes and balances. Wallet routes answer 503 without them. */
  readonly wallets?: AgentWallets | undefined;
  /** Seals new agents' keys: `POST /v1/agents` answers 503 without it. */
  readonly keystore?: Keystore | undefined;
  /** Our x402 facilitator: `/v1/x402/verify` and `/v1/x402/settle` answer 503 without it. */
  readonly facilitator?: X402Facilitator | undefined;
  /**
   * Payers' own transfers co-signed by the gateway's fee payer: the standard x402 facilitator
   * (`/v1/x402/facilitator/*`) and MPP `solana` charges (`/v1/mpp/solana/*`) answer 503 without it.
   */
  readonly cosigned?: CosignedTransfers | undefined;
  /** `agents.invoke` invocations on the ledger: sub-agent payments and the invocation route answer 503 without it. */
  readonly invocations?: Invocations | undefined;
  /** Base58 mint the facilitator settles in (`GET /v1/x402/supported`; 503 without it). */
  readonly settlementToken?: string | undefined;
  /** Payments to real x402 / MPP servers (signed transfers): such offers answer 503 without it. */
  readonly transfers?: SignedTransfers | undefined;
  /** Channel sessions (api/gateway/channels): `/v1/channels/*` and opening answer 503 without it. */
  readonly channels?: ChannelSessions | undefined;
  /** The MPP service side for resource servers: `/v1/mpp/*` answer 503 without it. */
  readonly mpp?: MppGateway | undefined;
  /** The ledger's explorer cluster, as the indexer's (`mainnet-beta`, `devnet`, or an RPC URL): `solanaExplorer` in answers. */
  readonly explorerCluster?: string | undefined;
  /**
   * Local development only: webhook endpoints may be registered on loopback (127.0.0.0/8, ::1,
   * localhost); never other private or metadata addresses. Off by default.
   */
  readonly allowLoopbackWebhooks?: boolean | undefined;
  /**
   * An SMTP transport is configured (SMTP_URL), so `email:` alert targets can be delivered. When
   * false or absent an e-mail alert is still stored (deliveries wait for a transport) and its create
   * answer carries a warning.
   */
  readonly mailConfigured?: boolean | undefined;
  /**
   * Opens a new agent's token account when it is registered (the service pays the rent, within
   * the payee-token-account quota), so it can be paid at once; without it the account is opened
   * by the agent's first funding or settlement.
   */
  readonly tokenAccounts?: AgentTokenAccounts | undefined;
  /**
   * The gateway's public base URL (`https://gateway.example`): the signed approval links of
   * `approval.requested` start with it; absent, they are path-only (`/v1/approvals/…`).
   */
  readonly publicUrl?: string | undefined;
  /** Long-polls on approvals (one LISTEN connection, closed on drain); one per pool when absent. */
  readonly approvalWaits?: ApprovalWaits | undefined;
}

export type Route = SharedRoute<GatewayDeps>;
export type RouteContext = SharedRouteContext<GatewayDeps>;
