/**
 * Wallet balances (spec 2.4, 2.5): the settlement-mint balance of each agent wallet's associated
 * token account, read from the chain with one `getMultipleAccounts` call per 100 wallets (the RPC's
 * limit), so a listing of any size costs ceil(n / 100) calls. A wallet that was never funded has
 * no token account yet: its balance is 0, as spec 2.5's `{ usdc: number }` needs. The API works
 * without a reader (balance null: "not configured", never "unknown amount").
 */
import { getAssociatedTokenAddressSync, unpackAccount } from "@solana/spl-token";
import { type Connection, PublicKey } from "@solana/web3.js";

/** Balances in base units, in the order asked; 0 when the wallet has no token account. */
export type BalanceReader = (walletAddresses: readonly string[]) => Promise<bigint[]>;

const RPC_BATCH = 100;

export function rpcBalanceReader(connection: Connection, mint: PublicKey): BalanceReader {
  return async (walletAddresses) => {
    const tokenAccounts = walletAddresses.map((address) => getAssociatedTokenAddressSync(mint, new PublicKey(address), true));
    const balances: bigint[] = [];
    for (let start = 0; start < tokenAccounts.length; start += RPC_BATCH) {
      const slice = tokenAccounts.slice(start, start + RPC_BATCH);
      const infos = await connection.getMultipleAccountsInfo(slice, "confirmed");
      infos.forEach((info, i) => {
        balances.push(info === null ? 0n : unpackAccount(slice[i]!, info, info.owner).amount);
      });
    }
    return balances;
  };
}
