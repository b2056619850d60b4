/**
 * What every chain source yields, whatever it reads from (Yellowstone gRPC, JSON-RPC, the local
 * ledger): transactions that mention the program, in chain order, and slot status changes.
 * Sources normalize here, once; decoding, the event store and projections see only these types.
 */

export type Commitment = "processed" | "confirmed" | "finalized";

export interface RawInstruction {
  /** Index into `RawTransaction.accountKeys`. */
  readonly programIdIndex: number;
  readonly accounts: readonly number[];
  readonly data: Uint8Array;
  /** 1 for top-level instructions, 2+ for CPIs; null when the source does not report it. */
  readonly stackHeight: number | null;
}

export interface RawTokenBalance {
  readonly accountIndex: number;
  readonly mint: string;
  readonly owner: string | null;
  readonly programId: string | null;
  /** Base units, exact. */
  readonly amount: bigint;
  readonly decimals: number;
}

export interface RawTransaction {
  /** Base58. */
  readonly signature: string;
  readonly slot: bigint;
  /** Unix seconds; null when the source does not know it (yet). */
  readonly blockTime: number | null;
  /** Position in its block when known (Yellowstone `index`); ordering key after `slot`. */
  readonly indexInBlock: number | null;
  readonly commitment: Commitment;
  /** The transaction error as the source reports it (RPC JSON or decoded gRPC); null on success. */
  readonly err: unknown;
  /** Static keys, then loaded writable, then loaded readonly (address lookup tables). */
  readonly accountKeys: readonly string[];
  /**
   * How many keys the message's address-table lookups name that the source did not report as
   * loaded (a node answering without `loadedAddresses`): instructions may then point at keys
   * missing from `accountKeys`, so the transaction cannot be decoded. Absent or 0: all resolved.
   */
  readonly unresolvedKeys?: number;
  readonly instructions: readonly RawInstruction[];
  /** Inner instructions grouped by the top-level instruction index that produced them. */
  readonly innerInstructions: readonly { readonly index: number; readonly instructions: readonly RawInstruction[] }[];
  /** Null when the source omitted logs. */
  readonly logs: readonly string[] | null;
  readonly preTokenBalances: readonly RawTokenBalance[];
  readonly postTokenBalances: readonly RawTokenBalance[];
}

/**
 * The `unresolvedKeys` of a transaction: the lookups name `looked` keys and the source reported
 * `loaded`. A count that differs either way leaves the indexes of `accountKeys` unknown.
 */
export function unresolvedKeyCount(looked: number, loaded: number): number {
  return looked === loaded ? 0 : Math.max(1, looked - loaded);
}

export type SlotStatus = "confirmed" | "finalized" | "dead";

export interface SlotUpdate {
  readonly slot: bigint;
  readonly parent: bigint | null;
  readonly status: SlotStatus;
  /** Present when the source knows the block (blockMeta / getBlock): used for fork checks. */
  readonly blockhash?: string;
  readonly parentBlockhash?: string;
  readonly blockTime?: number | null;
}

export type SourceUpdate =
  | { readonly kind: "transaction"; readonly transaction: RawTransaction }
  | { readonly kind: "slot"; readonly slot: SlotUpdate };

export interface SlotRange {
  /** Inclusive. */
  readonly fromSlot: bigint;
  /** Inclusive; undefined = up to the source's newest confirmed slot. */
  readonly toSlot?: bigint;
}

export interface ChainSource {
  readonly name: string;
  /**
   * Program transactions with `fromSlot <= slot <= toSlot`, oldest first (slot, then position in
   * block). Finite: ends when the range is exhausted.
   */
  backfill(range: SlotRange, signal?: AbortSignal): AsyncIterable<RawTransaction>;
  /**
   * Live: program transactions and slot updates from `fromSlot` on, in chain order, until
   * `signal` aborts. A source that cannot replay from `fromSlot` throws `ReplayUnavailableError`
   * before yielding anything, so the caller can backfill the gap through another source.
   */
  follow(fromSlot: bigint, signal: AbortSignal): AsyncIterable<SourceUpdate>;
}

/** A `follow` start no chain reaches: live updates from the source's current tip on, no replay. */
export const FROM_TIP = 2n ** 63n - 1n;

export class ReplayUnavailableError extends Error {
  constructor(
    readonly requestedSlot: bigint,
    readonly firstAvailableSlot: bigint | null,
  ) {
    super(`source cannot replay from slot ${requestedSlot} (first available: ${firstAvailableSlot ?? "unknown"})`);
    this.name = "ReplayUnavailableError";
  }
}
