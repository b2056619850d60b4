/**
 * Solana explorer links for a transaction hash, built locally: the fallback when the gateway has
 * not given its own link (it has not indexed the transaction yet). Pure; no request.
 */
/**
 * `https://explorer.solana.com/tx/<txHash>` with the cluster of the network: none for mainnet,
 * `?cluster=devnet|testnet`, else a custom cluster (with `customUrl` when the RPC URL is known).
 */
export function explorerUrl(txHash: string, network: string | undefined, rpcUrl?: string): string {
  const base = `https://explorer.solana.com/tx/${encodeURIComponent(txHash)}`;
  if (network === "solana-mainnet" || network === "solana-mainnet-beta") return base;
  if (network === "solana-devnet") return `${base}?cluster=devnet`;
  if (network === "solana-testnet") return `${base}?cluster=testnet`;
  return rpcUrl === undefined ? `${base}?cluster=custom` : `${base}?cluster=custom&customUrl=${encodeURIComponent(rpcUrl)}`;
}
