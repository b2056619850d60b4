/**
 * The SPL Token `TransferChecked` of a settlement transaction (a payment settled by a third-party
 * facilitator, recorded by a second transaction naming this one), and whether a record matches it.
 */
import type { RawInstruction, RawTransaction } from "../sources/source.js";

export const TOKEN_PROGRAM = "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA";
export const TOKEN_2022_PROGRAM = "TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb";
/** SPL Token instruction tag of TransferChecked. */
const TRANSFER_CHECKED = 12;

export interface SettlementTransfer {
  readonly signature: string;
  readonly slot: bigint;
  readonly failed: boolean;
  /** Null when the transaction holds no TransferChecked. */
  readonly transfer: {
    readonly sourceOwner: string | null;
    readonly destinationOwner: string | null;
    readonly authority: string;
    readonly mint: string;
    readonly amountUnits: bigint;
    readonly decimals: number;
  } | null;
}

function ownerOf(tx: RawTransaction, accountIndex: number): string | null {
  const balance =
    tx.postTokenBalances.find((b) => b.accountIndex === accountIndex) ?? tx.preTokenBalances.find((b) => b.accountIndex === accountIndex);
  return balance?.owner ?? null;
}

function allInstructions(tx: RawTransaction): RawInstruction[] {
  return [...tx.instructions, ...tx.innerInstructions.flatMap((group) => group.instructions)];
}

/** The first TransferChecked in the transaction (top level or CPI). */
export function decodeSettlementTransfer(tx: RawTransaction): SettlementTransfer {
  const base = { signature: tx.signature, slot: tx.slot, failed: tx.err !== null && tx.err !== undefined };
  for (const ix of allInstructions(tx)) {
    const program = tx.accountKeys[ix.programIdIndex];
    if (program !== TOKEN_PROGRAM && program !== TOKEN_2022_PROGRAM) continue;
    if (ix.data.length < 10 || ix.data[0] !== TRANSFER_CHECKED || ix.accounts.length < 4) continue;
    const [source, mint, destination, authority] = ix.accounts as [number, number, number, number];
    const amountUnits = Buffer.from(ix.data.subarray(1, 9)).readBigUInt64LE(0);
    return {
      ...base,
      transfer: {
        sourceOwner: ownerOf(tx, source),
        destinationOwner: ownerOf(tx, destination),
        authority: tx.accountKeys[authority] ?? "",
        mint: tx.accountKeys[mint] ?? "",
        amountUnits,
        decimals: ix.data[9]!,
      },
    };
  }
  return { ...base, transfer: null };
}
