/**
 * The chain as channel sessions read it: the `Channel` account (the truth for deposit, settled
 * state and whether the channel exists), and the one way a channel transaction is built: signed
 * locally with the authority as fee payer, so its signature is stored before it is sent.
 */
import { createAssociatedTokenAccountIdempotentInstruction, getAssociatedTokenAddressSync } from "@solana/spl-token";
import { type Keypair, type PublicKey, Transaction, type TransactionInstruction } from "@solana/web3.js";
import { type ChannelState, decodeChannelAccount } from "../../../programs/payment_ledger/ts/index.js";
import { COMMITMENT, recentBlockhash, type SettlementLedger, type SignedTransaction, signTransaction, submit } from "../chain/ledger.js";

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

/**
 * The payee's token account in the channel's mint exists again: a payee may close it (SPL Token
 * lets its owner do so at any time), and a settlement or `close_channel` needs it, so the gateway
 * recreates it (idempotent; the authority pays its rent, as at the open) rather than leave the
 * agent's deposit locked. True when it had to be created and now exists.
 */
export async function ensurePayeeTokenAccount(ledger: SettlementLedger, payee: PublicKey, mint: PublicKey): Promise<boolean> {
  const token = getAssociatedTokenAddressSync(mint, payee, true);
  if ((await ledger.connection.getAccountInfo(token, COMMITMENT)) !== null) return false;
  const create = await signChannelTransaction(ledger, [
    createAssociatedTokenAccountIdempotentInstruction(ledger.authority.publicKey, token, payee, mint),
  ]);
  return (await submit(ledger, create)).status === "confirmed";
}
