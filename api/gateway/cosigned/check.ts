/**
 * The checks a payer's own transfer transaction must pass before the gateway co-signs it as fee
 * payer (protocols.md §1.5 for x402 `exact` on Solana, §2.7 for MPP `solana` charges). Pure: no
 * chain read (the simulation is the caller's, cosigned.ts), so every rule is unit-testable.
 *
 * The fee payer signs whatever it co-signs, so the rules are about what its signature could be
 * abused for: it must be the transaction's fee payer and nothing else (in no instruction's
 * accounts, not the transfer authority), the transaction may hold only compute-budget
 * instructions with a bounded limit and price (on both layouts), exactly one SPL
 * `TransferChecked` of exactly the price from the payer's own token account to the payee's
 * associated token account of the settlement mint, and memos; and it is signed by exactly one other key, the payer, whose signature is valid.
 * Two layouts: x402 `exact` is positional (compute limit, compute price, transfer, then memos or
 * Lighthouse assertions, 3 to 7 instructions) as the official facilitator requires; an MPP
 * charge is a set (the `@solana/mpp` client orders price before limit and adds a memo only for
 * an `externalId`).
 *
 * Refusals use the official x402 SVM reason codes (`invalid_exact_svm_…`), which the MPP side
 * reports as its verification detail. Imported by cosigned.ts and the tests.
 */
import { getAssociatedTokenAddressSync } from "@solana/spl-token";
import { PublicKey, VersionedTransaction } from "@solana/web3.js";
import bs58 from "bs58";
import { verifySignature } from "../chain/signer.js";

export const TOKEN_PROGRAM = "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA";
export const TOKEN_2022_PROGRAM = "TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb";
export const COMPUTE_BUDGET_PROGRAM = "ComputeBudget111111111111111111111111111111";
export const MEMO_PROGRAM = "MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr";
/** Wallet-injected assertion program (Phantom, Solflare) the official facilitator tolerates after the transfer. */
export const LIGHTHOUSE_PROGRAM = "L2TExMFKdjpN9kozasaurPirfHy9P8sbXoAN1qA3S95";

/** Solana's packet limit: a larger transaction can never be sent. */
export const MAX_TRANSACTION_BYTES = 1_232;
/** 5 lamports per compute unit, as the x402 SVM spec bounds the priority fee (micro-lamports). */
export const MAX_COMPUTE_UNIT_PRICE_MICROLAMPORTS = 5_000_000n;
/**
 * The bound on the compute-unit limit, on both layouts (what `@solana/mpp` servers accept; the
 * official x402 client asks for 20,000). With the price bound it caps the fee the fee payer can
 * be made to pay for one transaction: 2 signatures × 5,000 + 200,000 × 5 lamports = 1,010,000
 * lamports (`MAX_COSIGNED_FEE_LAMPORTS`).
 */
export const MAX_COMPUTE_UNIT_LIMIT = 200_000;
/** The most one co-signed transaction can cost the fee payer, in lamports (see `MAX_COMPUTE_UNIT_LIMIT`). */
export const MAX_COSIGNED_FEE_LAMPORTS = 2n * 5_000n + (BigInt(MAX_COMPUTE_UNIT_LIMIT) * MAX_COMPUTE_UNIT_PRICE_MICROLAMPORTS) / 1_000_000n;
const MAX_MEMO_BYTES = 566;
const SET_COMPUTE_UNIT_LIMIT = 2;
const SET_COMPUTE_UNIT_PRICE = 3;
const TRANSFER_CHECKED = 12;

export type TransferLayout = "x402-exact" | "mpp-charge";

/** What the transfer must pay, as the resource server's terms say. */
export interface TransferTerms {
  /** The gateway's fee payer: the transaction's fee payer, in no instruction. */
  readonly feePayer: string;
  readonly mint: string;
  readonly decimals: number;
  /** The token program that owns `mint`. */
  readonly tokenProgram: string;
  /** The payee wallet (owner of the destination token account). */
  readonly payTo: string;
  readonly amountUnits: bigint;
  /** x402 `extra.memo` / MPP `externalId`: when set, exactly one memo with this text. */
  readonly memo?: string | undefined;
}

export type CheckReason =
  | "invalid_exact_svm_payload_transaction_could_not_be_decoded"
  | "invalid_exact_svm_payload_transaction"
  | "invalid_exact_svm_fee_payer_mismatch"
  | "invalid_exact_svm_payload_excessive_signers"
  | "invalid_exact_svm_payload_signature_invalid"
  | "invalid_exact_svm_payload_transaction_fee_payer_transferring_funds"
  | "invalid_exact_svm_payload_transaction_instructions_length"
  | "invalid_exact_svm_payload_transaction_instructions_compute_limit_instruction"
  | "invalid_exact_svm_payload_transaction_instructions_compute_limit_instruction_too_high"
  | "invalid_exact_svm_payload_transaction_instructions_compute_price_instruction"
  | "invalid_exact_svm_payload_transaction_instructions_compute_price_instruction_too_high"
  | "invalid_exact_svm_payload_no_transfer_instruction"
  | "invalid_exact_svm_payload_unknown_optional_instruction"
  | "invalid_exact_svm_payload_mint_mismatch"
  | "invalid_exact_svm_payload_recipient_mismatch"
  | "invalid_exact_svm_payload_amount_mismatch"
  | "invalid_exact_svm_payload_memo_count"
  | "invalid_exact_svm_payload_memo_mismatch";

export interface CheckedTransfer {
  readonly ok: true;
  readonly transaction: VersionedTransaction;
  /** The transfer authority, the one other signer: who paid. */
  readonly payer: string;
  readonly source: string;
  readonly destination: string;
  readonly blockhash: string;
}

export interface RefusedTransfer {
  readonly ok: false;
  readonly reason: CheckReason;
  readonly detail: string;
  /** The transfer authority when it could be read (x402 answers name it). */
  readonly payer: string;
}

interface Instruction {
  readonly program: string;
  readonly accounts: readonly string[];
  readonly data: Uint8Array;
}

const refuse = (reason: CheckReason, detail: string, payer = ""): RefusedTransfer => ({ ok: false, reason, detail, payer });

/** Strict padded standard base64 (what both protocols send), decoded; null for anything else. */
function base64Bytes(text: string): Uint8Array | null {
  if (text.length === 0 || text.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(text)) return null;
  return new Uint8Array(Buffer.from(text, "base64"));
}

function u32(data: Uint8Array, offset: number): number {
  return Buffer.from(data).readUInt32LE(offset);
}

function u64(data: Uint8Array, offset: number): bigint {
  return Buffer.from(data).readBigUInt64LE(offset);
}

/** Decodes and checks `wire` (base64 of the partially signed wire transaction) against `terms`. */
export function checkTransferTransaction(wire: string, terms: TransferTerms, layout: TransferLayout): CheckedTransfer | RefusedTransfer {
  const bytes = base64Bytes(wire);
  if (bytes === null || bytes.length > MAX_TRANSACTION_BYTES) {
    return refuse("invalid_exact_svm_payload_transaction_could_not_be_decoded", "not base64 of a wire transaction of at most 1232 bytes");
  }
  let transaction: VersionedTransaction;
  try {
    transaction = VersionedTransaction.deserialize(bytes);
  } catch (error) {
    return refuse("invalid_exact_svm_payload_transaction_could_not_be_decoded", (error as Error).message);
  }
  const message = transaction.message;
  // Lookup tables would hide accounts from these checks (and need a chain read to resolve).
  if (message.addressTableLookups.length > 0)
    return refuse("invalid_exact_svm_payload_transaction", "address lookup tables are not accepted");
  const keys = message.staticAccountKeys.map((key) => key.toBase58());
  if (keys[0] !== terms.feePayer) return refuse("invalid_exact_svm_fee_payer_mismatch", `the fee payer must be ${terms.feePayer}`);
  let instructions: Instruction[];
  try {
    instructions = message.compiledInstructions.map((ix) => {
      const program = keys[ix.programIdIndex];
      const accounts = ix.accountKeyIndexes.map((index) => keys[index]);
      if (program === undefined || accounts.some((key) => key === undefined)) throw new Error("an account index is out of range");
      return { program, accounts: accounts as string[], data: ix.data };
    });
  } catch (error) {
    return refuse("invalid_exact_svm_payload_transaction_could_not_be_decoded", (error as Error).message);
  }
  if (instructions.some((ix) => ix.program === terms.feePayer || ix.accounts.includes(terms.feePayer))) {
    return refuse("invalid_exact_svm_payload_transaction_fee_payer_transferring_funds", "the fee payer may appear in no instruction");
  }

  const layoutCheck = layout === "x402-exact" ? checkExactLayout(instructions) : checkChargeLayout(instructions);
  if (!layoutCheck.ok) return layoutCheck;
  const transfer = instructions[layoutCheck.transferIndex]!;
  const [source, mint, destination, authority] = transfer.accounts as [string, string, string, string];
  const payer = authority;

  // The one signer besides the fee payer must be the transfer's authority, and its signature valid.
  const signers = message.header.numRequiredSignatures;
  if (signers > 2)
    return refuse("invalid_exact_svm_payload_excessive_signers", `${signers} signers; only the fee payer and the payer sign`, payer);
  if (signers < 2) return refuse("invalid_exact_svm_payload_signature_invalid", "the payer's signature is missing", payer);
  if (keys[1] !== authority)
    return refuse("invalid_exact_svm_payload_signature_invalid", "the second signer is not the transfer authority", payer);
  const signature = transaction.signatures[1];
  if (signature === undefined || !verifySignature(authority, message.serialize(), signature)) {
    return refuse("invalid_exact_svm_payload_signature_invalid", `no valid signature of ${authority}`, payer);
  }

  if (transfer.program !== terms.tokenProgram || mint !== terms.mint) {
    return refuse("invalid_exact_svm_payload_mint_mismatch", `the transfer must be of ${terms.mint} under ${terms.tokenProgram}`, payer);
  }
  if (transfer.data[9] !== terms.decimals)
    return refuse("invalid_exact_svm_payload_mint_mismatch", `decimals must be ${terms.decimals}`, payer);
  const mintKey = new PublicKey(terms.mint);
  const tokenProgram = new PublicKey(terms.tokenProgram);
  let expectedDestination: string;
  try {
    expectedDestination = getAssociatedTokenAddressSync(mintKey, new PublicKey(terms.payTo), true, tokenProgram).toBase58();
  } catch {
    return refuse("invalid_exact_svm_payload_recipient_mismatch", `${terms.payTo} has no associated token address`, payer);
  }
  if (destination !== expectedDestination) {
    return refuse("invalid_exact_svm_payload_recipient_mismatch", `the destination must be ${expectedDestination}`, payer);
  }
  // The recorded payer is the source's owner: the indexer checks that owner moved the tokens.
  const expectedSource = getAssociatedTokenAddressSync(mintKey, new PublicKey(authority), true, tokenProgram).toBase58();
  if (source !== expectedSource) {
    return refuse("invalid_exact_svm_payload_transaction", "the source must be the payer's associated token account", payer);
  }
  const amount = u64(transfer.data, 1);
  if (amount !== terms.amountUnits)
    return refuse("invalid_exact_svm_payload_amount_mismatch", `${amount} instead of ${terms.amountUnits}`, payer);

  const memos = instructions.filter((ix) => ix.program === MEMO_PROGRAM);
  if (memos.some((memo) => memo.data.length > MAX_MEMO_BYTES || memo.accounts.length > 0)) {
    return refuse("invalid_exact_svm_payload_unknown_optional_instruction", "memos carry at most 566 bytes and no signer", payer);
  }
  if (terms.memo !== undefined) {
    if (memos.length !== 1) return refuse("invalid_exact_svm_payload_memo_count", `exactly one memo must carry ${terms.memo}`, payer);
    if (Buffer.from(memos[0]!.data).toString("utf8") !== terms.memo) {
      return refuse("invalid_exact_svm_payload_memo_mismatch", `the memo must be ${terms.memo}`, payer);
    }
  } else if (layout === "mpp-charge" && memos.length > 0) {
    return refuse("invalid_exact_svm_payload_unknown_optional_instruction", "the charge names no externalId, so no memo", payer);
  }
  return { ok: true, transaction, payer, source, destination, blockhash: message.recentBlockhash };
}

type LayoutResult = { readonly ok: true; readonly transferIndex: number } | RefusedTransfer;

function isTransferChecked(ix: Instruction): boolean {
  return (ix.program === TOKEN_PROGRAM || ix.program === TOKEN_2022_PROGRAM) && ix.data.length === 10 && ix.data[0] === TRANSFER_CHECKED;
}

/** A compute-budget instruction within bounds, or the refusal. */
function checkComputeBudget(ix: Instruction, expected: "limit" | "price" | "either", limitCap: number): RefusedTransfer | null {
  const limitReason = "invalid_exact_svm_payload_transaction_instructions_compute_limit_instruction";
  const priceReason = "invalid_exact_svm_payload_transaction_instructions_compute_price_instruction";
  const isLimit = ix.data[0] === SET_COMPUTE_UNIT_LIMIT && ix.data.length === 5;
  const isPrice = ix.data[0] === SET_COMPUTE_UNIT_PRICE && ix.data.length === 9;
  if (ix.program !== COMPUTE_BUDGET_PROGRAM || ix.accounts.length > 0 || !(isLimit || isPrice)) {
    return refuse(expected === "price" ? priceReason : limitReason, "not a SetComputeUnitLimit / SetComputeUnitPrice instruction");
  }
  if (expected === "limit" && !isLimit) return refuse(limitReason, "instruction 0 must be SetComputeUnitLimit");
  if (expected === "price" && !isPrice) return refuse(priceReason, "instruction 1 must be SetComputeUnitPrice");
  if (isLimit && u32(ix.data, 1) > limitCap) {
    return refuse(`${limitReason}_too_high`, `more than ${limitCap} compute units`);
  }
  if (isPrice && u64(ix.data, 1) > MAX_COMPUTE_UNIT_PRICE_MICROLAMPORTS) {
    return refuse(`${priceReason}_too_high`, `more than ${MAX_COMPUTE_UNIT_PRICE_MICROLAMPORTS} micro-lamports per unit`);
  }
  return null;
}

/** x402 `exact`: [limit, price, TransferChecked, memo / Lighthouse …], 3 to 7 instructions. */
function checkExactLayout(instructions: readonly Instruction[]): LayoutResult {
  if (instructions.length < 3 || instructions.length > 7) {
    return refuse("invalid_exact_svm_payload_transaction_instructions_length", `${instructions.length} instructions; 3 to 7 expected`);
  }
  const limit = checkComputeBudget(instructions[0]!, "limit", MAX_COMPUTE_UNIT_LIMIT);
  if (limit !== null) return limit;
  const price = checkComputeBudget(instructions[1]!, "price", MAX_COMPUTE_UNIT_LIMIT);
  if (price !== null) return price;
  const transfer = instructions[2]!;
  if (!isTransferChecked(transfer) || transfer.accounts.length !== 4) {
    return refuse("invalid_exact_svm_payload_no_transfer_instruction", "instruction 2 must be a TransferChecked with four accounts");
  }
  for (const ix of instructions.slice(3)) {
    if (ix.program !== MEMO_PROGRAM && ix.program !== LIGHTHOUSE_PROGRAM) {
      return refuse("invalid_exact_svm_payload_unknown_optional_instruction", `${ix.program} is not allowed after the transfer`);
    }
  }
  return { ok: true, transferIndex: 2 };
}

/** MPP `solana` charge: compute budget (each at most once), exactly one TransferChecked, memos. */
function checkChargeLayout(instructions: readonly Instruction[]): LayoutResult {
  let transferIndex = -1;
  const seen = new Set<number>();
  for (const [index, ix] of instructions.entries()) {
    if (ix.program === COMPUTE_BUDGET_PROGRAM) {
      const refused = checkComputeBudget(ix, "either", MAX_COMPUTE_UNIT_LIMIT);
      if (refused !== null) return refused;
      if (seen.has(ix.data[0]!))
        return refuse("invalid_exact_svm_payload_transaction_instructions_length", "a compute budget instruction twice");
      seen.add(ix.data[0]!);
    } else if (isTransferChecked(ix) && ix.accounts.length === 4) {
      if (transferIndex >= 0) return refuse("invalid_exact_svm_payload_transaction_instructions_length", "more than one transfer");
      transferIndex = index;
    } else if (ix.program !== MEMO_PROGRAM) {
      return refuse("invalid_exact_svm_payload_unknown_optional_instruction", `${ix.program} is not allowed in a charge`);
    }
  }
  if (transferIndex < 0) return refuse("invalid_exact_svm_payload_no_transfer_instruction", "no TransferChecked with four accounts");
  return { ok: true, transferIndex };
}

/** Base58 of the transaction's first signature: its id once the fee payer signed. */
export function transactionId(transaction: VersionedTransaction): string {
  const first = transaction.signatures[0];
  if (first === undefined) throw new Error("the transaction has no signature slot");
  return bs58.encode(first);
}
