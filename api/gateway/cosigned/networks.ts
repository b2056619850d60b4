/**
 * The names the real protocols give the gateway's ledger when it asks to be paid (protocols.md
 * §1.4): x402 v2 uses CAIP-2 ids, x402 v1 short names, MPP's `solana` method `methodDetails.network`.
 *
 * The official x402 SDKs accept only the three public clusters' ids (their `normalizeNetwork`
 * throws for any other), so a local ledger has no x402 name they would take: it answers as devnet
 * (`solana:EtWTRA…`, `solana-devnet`), the cluster it stands in for, and the clients are pointed at
 * its RPC URL. `@solana/mpp` knows `localnet`, so MPP says what it is.
 *
 * Imported by the protocol adapters (x402/exact.ts, mpp/solana-charge.ts).
 */
export const SOLANA_MAINNET_CAIP2 = "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp";
export const SOLANA_DEVNET_CAIP2 = "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1";
export const SOLANA_TESTNET_CAIP2 = "solana:4uhcVJyU9pJkvQyS88uRDiswHXSCkY3z";

export interface StandardNetworks {
  /** x402 v2 (CAIP-2). */
  readonly x402: string;
  /** x402 v1. */
  readonly x402v1: string;
  /** MPP `solana` `methodDetails.network`. */
  readonly mpp: string;
}

const NAMES: Record<string, StandardNetworks> = {
  "solana-mainnet": { x402: SOLANA_MAINNET_CAIP2, x402v1: "solana", mpp: "mainnet-beta" },
  "solana-devnet": { x402: SOLANA_DEVNET_CAIP2, x402v1: "solana-devnet", mpp: "devnet" },
  "solana-testnet": { x402: SOLANA_TESTNET_CAIP2, x402v1: "solana-testnet", mpp: "testnet" },
  "solana-localnet": { x402: SOLANA_DEVNET_CAIP2, x402v1: "solana-devnet", mpp: "localnet" },
};

/** The standard names of a ledger whose spec 2.4 `network` is `network`; null for one we cannot name. */
export function standardNetworks(network: string): StandardNetworks | null {
  return NAMES[network] ?? null;
}
