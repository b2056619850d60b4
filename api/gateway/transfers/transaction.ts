/**
 * The transfer transaction a real x402 facilitator or MPP `solana` server expects, built and
 * signed with the agent's custodial key (protocols.md §1.5, §2.7; the official clients
 * `@x402/svm` exact and `@solana/mpp` charge build the same instructions):
 *
 * - x402 `exact`: v0 message, fee payer = `extra.feePayer`, instructions
 *   [SetComputeUnitLimit 20 000, SetComputeUnitPrice 1 µlamport, TransferChecked, Memo]; the memo
 *   is `extra.memo` when the seller set one, else 16 random bytes in hex, so two payments with
 *   the same terms and blockhash are different transactions.
 * - MPP `solana` charge (pull mode): [SetComputeUnitPrice 1, SetComputeUnitLimit, TransferChecked,
 *   Memo(externalId) when the request names one]. The method refuses any memo the request did not
 *   ask for, so uniqueness comes from the compute unit limit instead: 200 000 minus a random
 *   0..4095 (the server only bounds it from above).
 *
 * TransferChecked moves `amountUnits` of the mint from the agent's associated token account to
 * the payee's; the recipient's token account is not created (x402 facilitators refuse any other
 * instruction). The agent signs as transfer authority. When the payee's side pays the fee, that
 * signature is the only one (a partial signature: the facilitator adds the fee payer's and
 * broadcasts); otherwise the service authority signs as fee payer too and the transaction is
 * complete (the agent's wallet holds no SOL).
 *
 * Imported by pay/authorize.ts (via index.ts); no I/O.
 */
import { createTransferCheckedInstruction, getAssociatedTokenAddressSync, TOKEN_PROGRAM_ID } from "@solana/spl-token";
import {
  ComputeBudgetProgram,
  type Keypair,
  PublicKey,
  TransactionInstruction,
  TransactionMessage,
  VersionedTransaction,
} from "@solana/web3.js";
import bs58 from "bs58";
import { randomBytes, randomInt } from "node:crypto";
import type { TransferOffer } from "./offers.js";

const MEMO_PROGRAM = new PublicKey("MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr");
const X402_COMPUTE_UNIT_LIMIT = 20_000;
const MPP_COMPUTE_UNIT_LIMIT = 200_000;
const COMPUTE_UNIT_PRICE_MICROLAMPORTS = 1;

export interface TransferSigners {
  /** The agent's custodial key: owner of the source token account, the transfer authority. */
  readonly payer: Keypair;
  /** Pays the fee when the offer names no fee payer of the payee's side. */
  readonly authority: Keypair;
}

export interface SignedTransfer {
  /** Base64 wire bytes (partially signed when the payee's side is the fee payer). */
  readonly wire: string;
  /** Base58 of the agent's signature: identifies the transfer before it has an id. */
  readonly payerSignature: string;
  readonly feePayer: string;
  /** The transaction id when every signature is ours (the authority pays the fee), else null. */
  readonly expectedTx: string | null;
}

function memoInstruction(text: string): TransactionInstruction {
  return new TransactionInstruction({ programId: MEMO_PROGRAM, keys: [], data: Buffer.from(text, "utf8") });
}

/** Builds and signs the transfer for `offer` with a blockhash of the ledger. */
export function signTransfer(
  offer: TransferOffer,
  signers: TransferSigners,
  context: { readonly mint: PublicKey; readonly decimals: number; readonly blockhash: string },
): SignedTransfer {
  const { payer, authority } = signers;
  const payTo = new PublicKey(offer.payTo);
  const source = getAssociatedTokenAddressSync(context.mint, payer.publicKey, true);
  const destination = getAssociatedTokenAddressSync(context.mint, payTo, true);
  const transfer = createTransferCheckedInstruction(
    source,
    context.mint,
    destination,
    payer.publicKey,
    offer.amountUnits,
    context.decimals,
    [],
    TOKEN_PROGRAM_ID,
  );
  const feePayer = offer.feePayer === null ? authority.publicKey : new PublicKey(offer.feePayer);
  let instructions: TransactionInstruction[];
  if (offer.protocol === "x402") {
    instructions = [
      ComputeBudgetProgram.setComputeUnitLimit({ units: X402_COMPUTE_UNIT_LIMIT }),
      ComputeBudgetProgram.setComputeUnitPrice({ microLamports: COMPUTE_UNIT_PRICE_MICROLAMPORTS }),
      transfer,
      memoInstruction(offer.memo ?? randomBytes(16).toString("hex")),
    ];
  } else {
    instructions = [
      ComputeBudgetProgram.setComputeUnitPrice({ microLamports: COMPUTE_UNIT_PRICE_MICROLAMPORTS }),
      ComputeBudgetProgram.setComputeUnitLimit({ units: MPP_COMPUTE_UNIT_LIMIT - randomInt(4_096) }),
      transfer,
      ...(offer.memo === null ? [] : [memoInstruction(offer.memo)]),
    ];
  }
  const message = new TransactionMessage({ payerKey: feePayer, recentBlockhash: context.blockhash, instructions }).compileToV0Message();
  const transaction = new VersionedTransaction(message);
  const ours = offer.feePayer === null ? [authority, payer] : [payer];
  transaction.sign(ours);
  const signerKeys = message.staticAccountKeys.slice(0, message.header.numRequiredSignatures);
  const payerIndex = signerKeys.findIndex((key) => key.equals(payer.publicKey));
  return {
    wire: Buffer.from(transaction.serialize()).toString("base64"),
    payerSignature: bs58.encode(transaction.signatures[payerIndex]!),
    feePayer: feePayer.toBase58(),
    expectedTx: offer.feePayer === null ? bs58.encode(transaction.signatures[0]!) : null,
  };
}
