/**
 * The chain as channel sessions read it: the `Channel` account (the truth for deposit, settled
 * state and whether the channel exists), and the one way a channel transaction is built: signed
 * locally with the authority as fee payer, so its signature is stored before it is sent.
 */
import { type Keypair, type PublicKey, Transaction, type TransactionInstruction } from "@solana/web3.js";
import { type ChannelState, decodeChannelAccount } from "../../../programs/payment_ledger/ts/index.js";
import { COMMITMENT, recentBlockhash, type SettlementLedger, type SignedTransaction, signTransaction } from "../wallets/ledger.js";

/** The channel account now (`confirmed`), or null when it does not exist (never opened, or closed). */
export async function readChannel(ledger: SettlementLedger, channel: PublicKey): Promise<ChannelState | null> {
  const info = await ledger.connection.getAccountInfo(channel, COMMITMENT);
  return info === null ? null : decodeChannelAccount(info.data);
}

/** `instructions` signed by the authority (fee payer) and `cosigners`, with a shared recent blockhash. */
export async function signChannelTransaction(
  ledger: SettlementLedger,
  instructions: readonly TransactionInstruction[],
  cosigners: readonly Keypair[] = [],
): Promise<SignedTransaction> {
  return signTransaction(ledger, new Transaction().add(...instructions), await recentBlockhash(ledger), cosigners);
}
