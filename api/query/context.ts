/**
 * Per-request context: the authenticated caller and DataLoaders (batching and caching within one
 * request only, so one request never sees another's cache and every batch is account-scoped).
 */
import DataLoader from "dataloader";
import type pg from "pg";
import type { Caller } from "../shared/auth.js";
import type { ApiKeyCache } from "../shared/key-cache.js";
import { agentsByIds, agentsByWallets, endpointsByHashes } from "../shared/agents.js";
import type { LiveFeed } from "./live-feed.js";
import type { BalanceReader } from "../shared/balances.js";
import type { AgentRow, PaymentRow } from "../shared/rows.js";
import { type ChannelRow, channelAddressesByPaymentEvent, channelsByAddresses } from "./read/channels.js";
import { childCountsByHashes, runRootsOf } from "./read/runs.js";
import { transactionsByHashes } from "./read/transactions.js";

export interface ApiDependencies {
  /**
   * The pool the read models are read from: a streaming replica when one is configured
   * (`DATABASE_READ_URL`), else the primary. It may lag the primary by the replica's replay delay.
   */
  readonly pool: pg.Pool;
  /**
   * The primary, for what must see the latest commit: credentials, spend policies and usage (the
   * gateway's own checks ask the query service), and the rows the live feed announces (NOTIFY
   * comes from the primary; a replica may not have replayed them yet).
   */
  readonly primary: pg.Pool;
  /** Wallet balances from the chain (0 for a wallet without a token account); null without it. */
  readonly balances?: BalanceReader | undefined;
  /** Spec 2.4 wallet.network, e.g. "solana-mainnet"; "solana-localnet" by default. */
  readonly network?: string | undefined;
  /** The clock windows are measured from; tests pin it. */
  readonly now?: (() => Date) | undefined;
  /** The live feed's listener; the subscription ends at once without it. */
  readonly feed?: LiveFeed | undefined;
  /** Live API keys held in memory (api/shared/key-cache.ts); each request reads its key without it. */
  readonly keys?: ApiKeyCache | undefined;
}

export interface Loaders {
  readonly agentById: DataLoader<string, AgentRow | null>;
  readonly agentByWallet: DataLoader<string, AgentRow | null>;
  readonly endpointByHash: DataLoader<string, { endpoint: string; domain: string } | null>;
  readonly balanceByWallet: DataLoader<string, bigint | null>;
  readonly transactionByHash: DataLoader<string, PaymentRow | null>;
  /** Payments made under a transaction by the account's agents (Transaction.childCount). */
  readonly childCountByHash: DataLoader<string, number>;
  /** The root of the run a transaction belongs to (Transaction.runRootTxHash). */
  readonly runRootByHash: DataLoader<string, string>;
  /** A channel the account sees (its payer is one of the account's agents), by address. */
  readonly channelByAddress: DataLoader<string, ChannelRow | null>;
  /** The channel a payment was settled from, by its event id (Transaction.channel), before the account check. */
  readonly channelAddressByPaymentEvent: DataLoader<string, string | null>;
}

export interface ApiContext {
  readonly deps: ApiDependencies;
  readonly caller: Caller;
  readonly loaders: Loaders;
  readonly now: Date;
}

export function createLoaders(deps: ApiDependencies, caller: Caller): Loaders {
  const { pool } = deps;
  const balances = deps.balances;
  return {
    agentById: new DataLoader((ids) => agentsByIds(pool, caller.accountId, ids)),
    agentByWallet: new DataLoader((wallets) => agentsByWallets(pool, caller.accountId, wallets)),
    endpointByHash: new DataLoader((hashes) => endpointsByHashes(pool, hashes)),
    balanceByWallet: new DataLoader(async (wallets) => (balances === undefined ? wallets.map(() => null) : balances(wallets))),
    transactionByHash: new DataLoader((hashes) => transactionsByHashes(pool, caller.accountId, hashes)),
    childCountByHash: new DataLoader((hashes) => childCountsByHashes(pool, caller.accountId, hashes)),
    runRootByHash: new DataLoader((hashes) => runRootsOf(pool, caller.accountId, hashes)),
    channelByAddress: new DataLoader((addresses) => channelsByAddresses(pool, caller.accountId, addresses)),
    channelAddressByPaymentEvent: new DataLoader((ids) => channelAddressesByPaymentEvent(pool, ids)),
  };
}

export function createContext(deps: ApiDependencies, caller: Caller): ApiContext {
  return { deps, caller, loaders: createLoaders(deps, caller), now: deps.now?.() ?? new Date() };
}
