/**
 * Where an invocation lives: the program derives the account from the invoking transaction and
 * the sub-agent's wallet, so every part of the gateway computes it the same way without a read.
 */
import { PublicKey } from "@solana/web3.js";
import bs58 from "bs58";
import { invocationPda } from "../../../programs/payment_ledger/ts/index.js";

/** The invocation account of `subAgent`'s payments under the transaction `parentTxHash`, of the program at `programId`. */
export function invocationAddress(parentTxHash: string, subAgent: string, programId: PublicKey): string {
  return invocationPda(bs58.decode(parentTxHash), new PublicKey(subAgent), programId).address.toBase58();
}

/** The invocation account of `payer`'s payments under `parentTxHash`; null for a top-level payment. */
export function invocationOf(parentTxHash: string | null, payer: string, programId: PublicKey): string | null {
  return parentTxHash === null ? null : invocationAddress(parentTxHash, payer, programId);
}
