/**
 * Wallet balances (spec 2.4): the settlement-mint balance of each agent wallet's associated token
 * account, read from the chain in one RPC call per batch. The API works without it (balance null).
 */
import { getAssociatedTokenAddressSync, unpackAccount } from "@solana/spl-token";
import { type Connection, PublicKey } from "@solana/web3.js";

/** Balances in base units, in the order asked; null when the wallet has no token account. */
export type BalanceReader = (walletAddresses: readonly string[]) => Promise<(bigint | null)[]>;

const RPC_BATCH = 100;

export function rpcBalanceReader(connection: Connection, mint: PublicKey): BalanceReader {
  return async (walletAddresses) => {
    const tokenAccounts = walletAddresses.map((address) => getAssociatedTokenAddressSync(mint, new PublicKey(address), true));
    const balances: (bigint | null)[] = [];
    for (let start = 0; start < tokenAccounts.length; start += RPC_BATCH) {
      const slice = tokenAccounts.slice(start, start + RPC_BATCH);
      const infos = await connection.getMultipleAccountsInfo(slice, "confirmed");
      infos.forEach((info, i) => {
        balances.push(info === null ? null : unpackAccount(slice[i]!, info, info.owner).amount);
      });
    }
    return balances;
  };
}
