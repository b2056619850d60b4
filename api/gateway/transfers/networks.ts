/**
 * Which network names of the real protocols designate the gateway's own ledger. A real offer is
 * payable only on that ledger (the agent's tokens live there), so an offer naming any other
 * network is not one of ours, never a guess.
 *
 * - x402 v2 uses CAIP-2 ids (`solana:<first 32 chars of the genesis hash>`), x402 v1 short names
 *   (`solana`, `solana-devnet`, `solana-testnet`); MPP's `solana` method `mainnet-beta`/`mainnet`,
 *   `devnet`, `localnet` (protocols.md §1.4).
 * - The official SDKs know only the three public clusters, so a local ledger has no name they
 *   accept: the local system lets its ledger answer to extra names (`aliases`) as well, e.g. the
 *   devnet ids, with the SDKs' RPC URL pointed at the local ledger.
 *
 * Imported by the transfers module and the gateway's composition (api/gateway/gateway.ts).
 */

export const SOLANA_MAINNET_CAIP2 = "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp";
export const SOLANA_DEVNET_CAIP2 = "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1";
export const SOLANA_TESTNET_CAIP2 = "solana:4uhcVJyU9pJkvQyS88uRDiswHXSCkY3z";

/** The names an offer may give the ledger, per protocol. */
export interface LedgerNetworks {
  /** x402 v1 and v2 network ids. */
  readonly x402: ReadonlySet<string>;
  /** MPP `methodDetails.network` values (absent means mainnet, as the method's spec says). */
  readonly mpp: ReadonlySet<string>;
  /** The canonical USDC mint of the cluster, when the ledger is a public one (MPP `currency: "usdc"`). */
  readonly usdcMint: string | null;
}

const PUBLIC: Record<string, { x402: string[]; mpp: string[]; usdc: string }> = {
  "solana-mainnet": {
    x402: [SOLANA_MAINNET_CAIP2, "solana"],
    mpp: ["mainnet-beta", "mainnet"],
    usdc: "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v",
  },
  "solana-devnet": {
    x402: [SOLANA_DEVNET_CAIP2, "solana-devnet"],
    mpp: ["devnet"],
    usdc: "4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU",
  },
  "solana-testnet": {
    x402: [SOLANA_TESTNET_CAIP2, "solana-testnet"],
    mpp: ["testnet"],
    usdc: "4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU",
  },
};

/**
 * The names of a ledger whose spec 2.4 `network` is `network` (`solana-mainnet`, `solana-devnet`,
 * `solana-testnet`, `solana-localnet`), plus `aliases` (names accepted in both protocols; a local
 * ledger's stand-in names). A local ledger always answers to x402 `solana-localnet` and MPP `localnet`.
 */
export function ledgerNetworks(network: string, aliases: readonly string[] = []): LedgerNetworks {
  const known = PUBLIC[network];
  const x402 = new Set<string>(known?.x402 ?? [network]);
  const mpp = new Set<string>(known?.mpp ?? (network === "solana-localnet" ? ["localnet"] : []));
  for (const alias of aliases) {
    x402.add(alias);
    mpp.add(alias);
  }
  return { x402, mpp, usdcMint: known?.usdc ?? null };
}

/** The aliases that let the official SDKs (which know only public clusters) pay on a local ledger. */
export const LOCAL_DEVNET_ALIASES: readonly string[] = [SOLANA_DEVNET_CAIP2, "solana-devnet", "devnet"];
