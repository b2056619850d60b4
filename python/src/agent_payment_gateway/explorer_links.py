"""Solana explorer links for a transaction hash, built locally: the fallback when the gateway has
not given its own link (it has not indexed the transaction yet). Pure; no request.
"""

from __future__ import annotations

from urllib.parse import quote


def explorer_url(tx_hash: str, network: str | None, rpc_url: str | None = None) -> str:
    """``https://explorer.solana.com/tx/<tx_hash>`` with the cluster of the network: none for
    mainnet, ``?cluster=devnet|testnet``, else a custom cluster (with ``customUrl`` when known)."""
    base = f"https://explorer.solana.com/tx/{quote(tx_hash, safe='')}"
    if network in ("solana-mainnet", "solana-mainnet-beta"):
        return base
    if network == "solana-devnet":
        return f"{base}?cluster=devnet"
    if network == "solana-testnet":
        return f"{base}?cluster=testnet"
    if rpc_url is None:
        return f"{base}?cluster=custom"
    return f"{base}?cluster=custom&customUrl={quote(rpc_url, safe='')}"
