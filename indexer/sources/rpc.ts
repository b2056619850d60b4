/**
 * JSON-RPC source: backfill by `getSignaturesForAddress` (newest first, paged with `before`) +
 * `getTransaction`, and live following by polling new signatures (`until` the newest seen) and
 * the finalized slot. Works against the local ledger, solana-test-validator, devnet and mainnet.
 */
import { setTimeout as delay } from "node:timers/promises";
import {
  type ConfirmedSignatureInfo,
  Connection,
  type Finality,
  type PublicKey,
  type TokenBalance,
  type VersionedTransactionResponse,
} from "@solana/web3.js";
import bs58 from "bs58";
import {
  type ChainSource,
  type Commitment,
  type RawInstruction,
  type RawTokenBalance,
  type RawTransaction,
  type SlotRange,
  type SourceUpdate,
  unresolvedKeyCount,
} from "./source.js";

export interface RpcSourceOptions {
  readonly rpcUrl: string;
  readonly programId: PublicKey;
  readonly commitment?: Finality;
  /** Live polling interval. */
  readonly pollMs?: number;
  /** getTransaction calls in flight at once. */
  readonly fetchConcurrency?: number;
  readonly name?: string;
}

export const SIGNATURE_PAGE_LIMIT = 1_000;
/** Upper bound on pages walked for one backfill (1,000 signatures each). */
export const MAX_SIGNATURE_PAGES = 100_000;
const DEFAULT_POLL_MS = 200;
const DEFAULT_FETCH_CONCURRENCY = 8;
/** Reads of a transaction whose looked-up keys the node did not report, before giving up. */
const UNRESOLVED_ATTEMPTS = 3;
const UNRESOLVED_RETRY_MS = 100;

function tokenBalances(list: readonly TokenBalance[] | null | undefined): RawTokenBalance[] {
  return (list ?? []).map((b) => ({
    accountIndex: b.accountIndex,
    mint: b.mint,
    owner: b.owner ?? null,
    programId: b.programId ?? null,
    amount: BigInt(b.uiTokenAmount.amount),
    decimals: b.uiTokenAmount.decimals,
  }));
}

/** web3.js `getTransaction` (json encoding) -> the normalized transaction. */
export function toRawTransaction(
  tx: VersionedTransactionResponse,
  commitment: Commitment,
  indexInBlock: number | null = null,
): RawTransaction {
  const message = tx.transaction.message;
  const loaded = tx.meta?.loadedAddresses;
  const accountKeys = [
    ...message.staticAccountKeys.map((k) => k.toBase58()),
    ...(loaded?.writable ?? []).map((k) => k.toBase58()),
    ...(loaded?.readonly ?? []).map((k) => k.toBase58()),
  ];
  const looked = message.addressTableLookups.reduce((n, l) => n + l.writableIndexes.length + l.readonlyIndexes.length, 0);
  const loadedCount = (loaded?.writable.length ?? 0) + (loaded?.readonly.length ?? 0);
  const instructions: RawInstruction[] = message.compiledInstructions.map((ix) => ({
    programIdIndex: ix.programIdIndex,
    accounts: [...ix.accountKeyIndexes],
    data: Uint8Array.from(ix.data),
    stackHeight: 1,
  }));
  const innerInstructions = (tx.meta?.innerInstructions ?? []).map((group) => ({
    index: group.index,
    instructions: group.instructions.map((ix) => ({
      programIdIndex: ix.programIdIndex,
      accounts: [...ix.accounts],
      data: bs58.decode(ix.data),
      stackHeight: (ix as { stackHeight?: number }).stackHeight ?? null,
    })),
  }));
  return {
    signature: tx.transaction.signatures[0] ?? "",
    slot: BigInt(tx.slot),
    blockTime: tx.blockTime ?? null,
    indexInBlock,
    commitment,
    err: tx.meta === null ? "no meta" : tx.meta.err,
    accountKeys,
    unresolvedKeys: unresolvedKeyCount(looked, loadedCount),
    instructions,
    innerInstructions,
    logs: tx.meta?.logMessages ?? null,
    preTokenBalances: tokenBalances(tx.meta?.preTokenBalances),
    postTokenBalances: tokenBalances(tx.meta?.postTokenBalances),
  };
}

export class RpcSource implements ChainSource {
  readonly name: string;
  readonly connection: Connection;
  private readonly programId: PublicKey;
  private readonly commitment: Finality;
  private readonly pollMs: number;
  private readonly concurrency: number;

  constructor(options: RpcSourceOptions) {
    this.connection = new Connection(options.rpcUrl, { commitment: options.commitment ?? "confirmed" });
    this.programId = options.programId;
    this.commitment = options.commitment ?? "confirmed";
    this.pollMs = options.pollMs ?? DEFAULT_POLL_MS;
    this.concurrency = options.fetchConcurrency ?? DEFAULT_FETCH_CONCURRENCY;
    this.name = options.name ?? `rpc:${options.rpcUrl}`;
  }

  /**
   * One transaction by signature; null when the node does not have it. An answer whose lookups
   * did not resolve (no `loadedAddresses`) is asked again a few times, then handed over as it is
   * (the decoder marks it `unresolved` rather than reading it without its keys).
   */
  async transaction(signature: string): Promise<RawTransaction | null> {
    for (let attempt = 1; ; attempt += 1) {
      const tx = await this.connection.getTransaction(signature, {
        commitment: this.commitment,
        maxSupportedTransactionVersion: 0,
      });
      if (tx === null) return null;
      const raw = toRawTransaction(tx, this.commitment);
      if ((raw.unresolvedKeys ?? 0) === 0 || attempt >= UNRESOLVED_ATTEMPTS) return raw;
      await delay(UNRESOLVED_RETRY_MS * attempt);
    }
  }

  async currentSlot(commitment: Commitment = this.commitment): Promise<bigint> {
    return BigInt(await this.connection.getSlot(commitment));
  }

  /**
   * Signatures of program transactions newer than `until` (exclusive) and with slot >= fromSlot,
   * oldest first. Pages newest -> oldest with `before`.
   */
  private async signatures(fromSlot: bigint, until: string | undefined, signal?: AbortSignal): Promise<ConfirmedSignatureInfo[]> {
    const collected: ConfirmedSignatureInfo[] = [];
    let before: string | undefined;
    for (let page = 0; page < MAX_SIGNATURE_PAGES; page += 1) {
      if (signal?.aborted) break;
      const batch = await this.connection.getSignaturesForAddress(
        this.programId,
        { before, until, limit: SIGNATURE_PAGE_LIMIT },
        this.commitment,
      );
      let reachedStart = false;
      for (const info of batch) {
        if (BigInt(info.slot) < fromSlot) {
          reachedStart = true;
          break;
        }
        collected.push(info);
      }
      if (reachedStart || batch.length < SIGNATURE_PAGE_LIMIT) break;
      before = batch.at(-1)!.signature;
    }
    return collected.reverse();
  }

  private async *fetchAll(infos: readonly ConfirmedSignatureInfo[], signal?: AbortSignal): AsyncIterable<RawTransaction> {
    for (let start = 0; start < infos.length; start += this.concurrency) {
      if (signal?.aborted) return;
      const chunk = infos.slice(start, start + this.concurrency);
      const fetched = await Promise.all(chunk.map((info) => this.transaction(info.signature)));
      for (const [i, tx] of fetched.entries()) {
        if (tx === null) throw new Error(`getTransaction(${chunk[i]!.signature}) returned null`);
        yield tx;
      }
    }
  }

  async *backfill(range: SlotRange, signal?: AbortSignal): AsyncIterable<RawTransaction> {
    const infos = (await this.signatures(range.fromSlot, undefined, signal)).filter(
      (info) => range.toSlot === undefined || BigInt(info.slot) <= range.toSlot,
    );
    // Stable by slot: the node lists a block's transactions in block order.
    yield* this.fetchAll(infos, signal);
  }

  async *follow(fromSlot: bigint, signal: AbortSignal): AsyncIterable<SourceUpdate> {
    let newest: string | undefined;
    let lastFinalized = -1n;
    while (!signal.aborted) {
      // Read the slots first: every transaction at or below them is in the listing that follows.
      const slot = await this.currentSlot("confirmed");
      const finalized = await this.currentSlot("finalized");
      const infos = await this.signatures(fromSlot, newest, signal);
      if (infos.length > 0) newest = infos.at(-1)!.signature;
      for await (const transaction of this.fetchAll(infos, signal)) {
        yield { kind: "transaction", transaction };
      }
      yield { kind: "slot", slot: { slot, parent: null, status: "confirmed" } };
      if (finalized > lastFinalized) {
        lastFinalized = finalized;
        yield { kind: "slot", slot: { slot: finalized, parent: null, status: "finalized" } };
      }
      // An abort ends the wait early (the promise rejects, only then); the loop's check stops it.
      await delay(this.pollMs, undefined, { signal }).catch(() => undefined);
    }
  }
}
