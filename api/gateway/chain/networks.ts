/**
 * The one table of the names the real protocols give a Solana ledger (protocols.md §1.4): x402 v2
 * CAIP-2 ids (`solana:<first 32 chars of the genesis hash>`), x402 v1 short names, and the MPP
 * `solana` method's `methodDetails.network`. Both directions read it: paying real servers
 * (transfers/: which names in an offer designate our ledger) and being paid by real clients
 * (cosigned/ through x402/exact.ts and mpp/solana-charge.ts: which names our ledger announces).
 *
 * The official x402 SDKs accept only the three public clusters' ids (their `normalizeNetwork`
 * throws for any other), so a local ledger has no x402 name they would take: it announces itself
 * as devnet, the cluster it stands in for, with the clients pointed at its RPC URL, and the local
 * system lets it answer to the devnet names when paying (`LOCAL_DEVNET_ALIASES`). `@solana/mpp`
 * knows `localnet`, so MPP says what it is.
 *
 * Imported by transfers/, x402/exact.ts, mpp/solana-charge.ts and the gateway's composition. The
 * SDK keeps its own copy of the ids it needs (it imports nothing of the server).
 */

export const SOLANA_MAINNET_CAIP2 = "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp";
export const SOLANA_DEVNET_CAIP2 = "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1";
export const SOLANA_TESTNET_CAIP2 = "solana:4uhcVJyU9pJkvQyS88uRDiswHXSCkY3z";

interface Cluster {
  readonly caip2: string;
  readonly x402v1: string;
  /** MPP names; the first is the one we announce. */
  readonly mpp: readonly [string, ...string[]];
  /** The cluster's canonical USDC mint (MPP `currency: "usdc"`). */
  readonly usdc: string;
}

/** Keyed by the spec 2.4 `network` of the gateway's ledger. */
const CLUSTERS: Readonly<Record<string, Cluster>> = {
  "solana-mainnet": {
    caip2: SOLANA_MAINNET_CAIP2,
    x402v1: "solana",
    mpp: ["mainnet-beta", "mainnet"],
    usdc: "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v",
  },
  "solana-devnet": {
    caip2: SOLANA_DEVNET_CAIP2,
    x402v1: "solana-devnet",
    mpp: ["devnet"],
    usdc: "4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU",
  },
  "solana-testnet": {
    caip2: SOLANA_TESTNET_CAIP2,
    x402v1: "solana-testnet",
    mpp: ["testnet"],
    usdc: "4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU",
  },
};

const LOCALNET = "solana-localnet";
/** The cluster a local ledger stands in for when it must name itself to the official x402 SDKs. */
const LOCAL_STAND_IN = CLUSTERS["solana-devnet"]!;

/** The names a ledger announces when it asks to be paid. */
export interface StandardNetworks {
  /** x402 v2 (CAIP-2). */
  readonly x402: string;
  /** x402 v1. */
  readonly x402v1: string;
  /** MPP `solana` `methodDetails.network`. */
  readonly mpp: string;
}

/** The standard names of a ledger whose spec 2.4 `network` is `network`; null for one we cannot name. */
export function standardNetworks(network: string): StandardNetworks | null {
  if (network === LOCALNET) return { x402: LOCAL_STAND_IN.caip2, x402v1: LOCAL_STAND_IN.x402v1, mpp: "localnet" };
  const cluster = CLUSTERS[network];
  return cluster === undefined ? null : { x402: cluster.caip2, x402v1: cluster.x402v1, mpp: cluster.mpp[0] };
}

/** The names an offer may give the ledger, per protocol (a real offer is payable only on our ledger). */
export interface LedgerNetworks {
  /** x402 v1 and v2 network ids. */
  readonly x402: ReadonlySet<string>;
  /** MPP `methodDetails.network` values (absent means mainnet, as the method's spec says). */
  readonly mpp: ReadonlySet<string>;
  /** The canonical USDC mint of the cluster, when the ledger is a public one (MPP `currency: "usdc"`). */
  readonly usdcMint: string | null;
}

/**
 * The names of a ledger whose spec 2.4 `network` is `network` (`solana-mainnet`, `solana-devnet`,
 * `solana-testnet`, `solana-localnet`), plus `aliases` (names accepted in both protocols; a local
 * ledger's stand-in names). A local ledger always answers to x402 `solana-localnet` and MPP `localnet`.
 */
export function ledgerNetworks(network: string, aliases: readonly string[] = []): LedgerNetworks {
  const known = CLUSTERS[network];
  const x402 = new Set<string>(known === undefined ? [network] : [known.caip2, known.x402v1]);
  const mpp = new Set<string>(known?.mpp ?? (network === LOCALNET ? ["localnet"] : []));
  for (const alias of aliases) {
    x402.add(alias);
    mpp.add(alias);
  }
  return { x402, mpp, usdcMint: known?.usdc ?? null };
}

/** The aliases that let the official SDKs (which know only public clusters) pay on a local ledger. */
export const LOCAL_DEVNET_ALIASES: readonly string[] = [LOCAL_STAND_IN.caip2, LOCAL_STAND_IN.x402v1, ...LOCAL_STAND_IN.mpp];
