/**
 * Yellowstone gRPC ("Dragon's Mouth") source: live program transactions, slot statuses and block
 * meta from a Geyser gRPC endpoint through `@triton-one/yellowstone-grpc` (the napi client).
 *
 * - Subscribes at CONFIRMED to one transaction filter (accountInclude = the program, no votes, no
 *   failed transactions), to slots and to block meta; routes updates by `update.filters`.
 * - Holds a slot's transactions until its block meta arrives (the plugin sends, per slot at
 *   confirmed: transactions, block meta, slot status) so they carry `blockTime`, then yields them in
 *   block order, then the slot's `confirmed` SlotUpdate with blockhash and parent blockhash.
 * - Answers server pings (resends the current filters with `ping`, so servers that treat every
 *   request as a filter replacement keep the same filters).
 * - Resumes with `fromSlot`. Asks `subscribeReplayInfo` first; when the server cannot replay that
 *   far (replay disabled, or `fromSlot` older than its first available slot — also when the stream
 *   fails with OUT_OF_RANGE or INTERNAL "from_slot is not supported") it throws
 *   `ReplayUnavailableError` before yielding anything, so the caller backfills through RPC.
 * - No historical backfill: Geyser is a live feed. `backfill()` throws.
 */
import YellowstoneModule, {
  CommitmentLevel,
  SlotStatus,
  type SubscribeRequest,
  type SubscribeUpdate,
  type SubscribeUpdateBlockMeta,
  type SubscribeUpdateTransactionInfo,
  txErrDecode,
} from "@triton-one/yellowstone-grpc";
import bs58 from "bs58";
import {
  type ChainSource,
  type RawInstruction,
  type RawTokenBalance,
  type RawTransaction,
  ReplayUnavailableError,
  type SlotRange,
  type SlotStatus as RawSlotStatus,
  type SlotUpdate,
  type SourceUpdate,
  unresolvedKeyCount,
} from "./source.js";

// The package runs as ESM (its `exports` map has an `import` entry, whose default export is the
// client class) but ships one .d.ts that TypeScript reads as CommonJS under NodeNext, typing the
// default import as the module object. Accept both shapes.
type ClientClass = typeof YellowstoneModule.default;
const Client: ClientClass =
  typeof YellowstoneModule === "function" ? (YellowstoneModule as unknown as ClientClass) : YellowstoneModule.default;

/** Block metas (and unflushed transactions) kept this many slots behind the newest confirmed slot. */
const HELD_SLOTS = 512n;

export const TRANSACTIONS_FILTER = "program";
export const SLOTS_FILTER = "slots";
export const BLOCKS_META_FILTER = "blocks_meta";

export interface YellowstoneSourceOptions {
  /** e.g. `https://<provider>:443` or `http://127.0.0.1:10000`. */
  readonly endpoint: string;
  readonly xToken?: string;
  /** Base58 program id whose transactions are followed. */
  readonly programId: string;
  /** Passed to the napi client as is (keepalive, timeouts, message size). */
  readonly channelOptions?: ConstructorParameters<ClientClass>[2];
}

type TokenBalanceProto = NonNullable<SubscribeUpdateTransactionInfo["meta"]>["preTokenBalances"][number];

function tokenBalance(b: TokenBalanceProto): RawTokenBalance {
  return {
    accountIndex: b.accountIndex,
    mint: b.mint,
    owner: b.owner === "" ? null : b.owner,
    programId: b.programId === "" ? null : b.programId,
    amount: BigInt(b.uiTokenAmount?.amount ?? "0"),
    decimals: b.uiTokenAmount?.decimals ?? 0,
  };
}

/** The gRPC `meta.err` (bincode TransactionError) as the RPC JSON form, or null. */
export function decodeTransactionError(err: { err: Uint8Array } | undefined): unknown {
  if (err === undefined || err.err.length === 0) return null;
  const decoded: unknown = txErrDecode.decode(err.err);
  if (typeof decoded === "string") {
    try {
      return JSON.parse(decoded) as unknown;
    } catch {
      return decoded;
    }
  }
  return decoded;
}

/** A Yellowstone transaction update in the normalized form every source yields. */
export function normalizeTransaction(info: SubscribeUpdateTransactionInfo, slot: bigint, blockTime: number | null): RawTransaction {
  const message = info.transaction?.message;
  const meta = info.meta;
  if (message === undefined) throw new Error(`transaction ${bs58.encode(info.signature)} has no message`);
  const accountKeys = [...message.accountKeys, ...(meta?.loadedWritableAddresses ?? []), ...(meta?.loadedReadonlyAddresses ?? [])].map(
    (key) => bs58.encode(key),
  );
  // The meta carries what the lookups resolved to, as getTransaction's `loadedAddresses` does.
  const looked = (message.addressTableLookups ?? []).reduce((n, l) => n + l.writableIndexes.length + l.readonlyIndexes.length, 0);
  const loaded = (meta?.loadedWritableAddresses?.length ?? 0) + (meta?.loadedReadonlyAddresses?.length ?? 0);
  const instructions: RawInstruction[] = message.instructions.map((ix) => ({
    programIdIndex: ix.programIdIndex,
    accounts: Array.from(ix.accounts),
    data: ix.data,
    stackHeight: 1,
  }));
  return {
    signature: bs58.encode(info.signature),
    slot,
    blockTime,
    indexInBlock: Number(info.index),
    commitment: "confirmed",
    err: decodeTransactionError(meta?.err),
    accountKeys,
    unresolvedKeys: unresolvedKeyCount(looked, loaded),
    instructions,
    innerInstructions: (meta?.innerInstructions ?? []).map((group) => ({
      index: group.index,
      instructions: group.instructions.map((ix) => ({
        programIdIndex: ix.programIdIndex,
        accounts: Array.from(ix.accounts),
        data: ix.data,
        stackHeight: ix.stackHeight ?? null,
      })),
    })),
    logs: meta === undefined || meta.logMessagesNone ? null : meta.logMessages,
    preTokenBalances: (meta?.preTokenBalances ?? []).map(tokenBalance),
    postTokenBalances: (meta?.postTokenBalances ?? []).map(tokenBalance),
  };
}

const SLOT_STATUSES = new Map<SlotStatus, RawSlotStatus>([
  [SlotStatus.SLOT_CONFIRMED, "confirmed"],
  [SlotStatus.SLOT_FINALIZED, "finalized"],
  [SlotStatus.SLOT_DEAD, "dead"],
]);

/**
 * The stream error a server answers an unreplayable `fromSlot` with, as ReplayUnavailableError:
 * INTERNAL "from_slot is not supported" (replay disabled) or OUT_OF_RANGE "broadcast from X is not
 * available, last available: Y". Null for any other error.
 */
export function replayUnavailableFrom(error: unknown, fromSlot: bigint): ReplayUnavailableError | null {
  // The napi client reports "failed to open subscribe stream" / "subscribe stream receive failed"
  // with the gRPC status in the `cause` chain.
  const parts: string[] = [];
  for (let e: unknown = error, depth = 0; e !== undefined && e !== null && depth < 8; depth += 1) {
    parts.push(e instanceof Error ? e.message : String(e));
    e = e instanceof Error ? e.cause : undefined;
  }
  const text = parts.join(" | ");
  if (/from_slot is not supported/i.test(text)) return new ReplayUnavailableError(fromSlot, null);
  if (/out ?of ?range|OutOfRange|OUT_OF_RANGE|is not available/i.test(text)) {
    const match = /last available:?\s*(\d+)/i.exec(text);
    return new ReplayUnavailableError(fromSlot, match?.[1] === undefined ? null : BigInt(match[1]));
  }
  return null;
}

export class YellowstoneSource implements ChainSource {
  readonly name = "yellowstone";

  constructor(private readonly options: YellowstoneSourceOptions) {}

  // A live feed has no history to page through: backfill is the RPC source's job.
  // biome-ignore lint/correctness/useYield: it only refuses; an async generator keeps the ChainSource signature
  async *backfill(range: SlotRange, _signal?: AbortSignal): AsyncIterable<RawTransaction> {
    throw new Error(
      `backfill of slots ${range.fromSlot}..${range.toSlot ?? "tip"} is not supported by Yellowstone (a live Geyser feed); use the RPC source`,
    );
  }

  /** The subscription this source sends (exported for tests and operators' logs). */
  request(fromSlot: bigint | null): SubscribeRequest {
    return {
      accounts: {},
      slots: { [SLOTS_FILTER]: { filterByCommitment: false } },
      transactions: {
        [TRANSACTIONS_FILTER]: {
          vote: false,
          failed: false,
          accountInclude: [this.options.programId],
          accountExclude: [],
          accountRequired: [],
        },
      },
      transactionsStatus: {},
      blocks: {},
      blocksMeta: { [BLOCKS_META_FILTER]: {} },
      entry: {},
      commitment: CommitmentLevel.CONFIRMED,
      accountsDataSlice: [],
      ...(fromSlot === null ? {} : { fromSlot: fromSlot.toString() }),
    };
  }

  async *follow(fromSlot: bigint, signal: AbortSignal): AsyncIterable<SourceUpdate> {
    const client = new Client(this.options.endpoint, this.options.xToken, this.options.channelOptions);
    await client.connect();

    // Can the server replay from there? Ask before subscribing.
    const replay = await client.subscribeReplayInfo();
    const firstAvailable = replay.firstAvailable === undefined ? null : BigInt(replay.firstAvailable);
    const tip = BigInt((await client.getSlot(CommitmentLevel.CONFIRMED)).slot);
    let replayFrom: bigint | null;
    if (firstAvailable !== null && fromSlot >= firstAvailable) replayFrom = fromSlot;
    else if (fromSlot > tip)
      replayFrom = null; // nothing to replay: live from the tip on
    else throw new ReplayUnavailableError(fromSlot, firstAvailable);

    const request = this.request(replayFrom);
    let stream: Awaited<ReturnType<InstanceType<ClientClass>["subscribe"]>>;
    try {
      stream = await client.subscribe(request);
    } catch (error) {
      throw (replayFrom === null ? null : replayUnavailableFrom(error, fromSlot)) ?? error;
    }
    const onAbort = () => stream.destroy();
    if (signal.aborted) onAbort();
    signal.addEventListener("abort", onAbort, { once: true });

    const pending = new Map<bigint, SubscribeUpdateTransactionInfo[]>();
    const metas = new Map<bigint, SubscribeUpdateBlockMeta>();
    let yielded = false;
    let pingId = 0;

    const flush = function* (slot: bigint): Generator<SourceUpdate> {
      const txs = pending.get(slot);
      if (txs === undefined) return;
      pending.delete(slot);
      const meta = metas.get(slot);
      const blockTime = meta?.blockTime === undefined ? null : Number(meta.blockTime.timestamp);
      txs.sort((a, b) => Number(BigInt(a.index) - BigInt(b.index)));
      for (const tx of txs) yield { kind: "transaction", transaction: normalizeTransaction(tx, slot, blockTime) };
    };

    try {
      for await (const chunk of stream) {
        const update = chunk as SubscribeUpdate;
        if (update.ping !== undefined) {
          pingId += 1;
          const { fromSlot: _replayed, ...filters } = request;
          stream.write({ ...filters, ping: { id: pingId } });
          continue;
        }
        if (update.pong !== undefined) continue;
        const filters = new Set(update.filters);

        if (update.transaction !== undefined && filters.has(TRANSACTIONS_FILTER)) {
          const info = update.transaction.transaction;
          if (info === undefined || info.isVote) continue;
          const slot = BigInt(update.transaction.slot);
          const list = pending.get(slot) ?? [];
          list.push(info);
          pending.set(slot, list);
        } else if (update.blockMeta !== undefined && filters.has(BLOCKS_META_FILTER)) {
          const slot = BigInt(update.blockMeta.slot);
          metas.set(slot, update.blockMeta);
          for (const out of flush(slot)) {
            yielded = true;
            yield out;
          }
        } else if (update.slot !== undefined && filters.has(SLOTS_FILTER)) {
          const status = SLOT_STATUSES.get(update.slot.status);
          if (status === undefined) continue;
          const slot = BigInt(update.slot.slot);
          if (status === "dead") pending.delete(slot);
          else
            for (const out of flush(slot)) {
              yielded = true;
              yield out;
            }
          const meta = metas.get(slot);
          const parent = update.slot.parent ?? meta?.parentSlot;
          const slotUpdate: SlotUpdate = {
            slot,
            parent: parent === undefined ? null : BigInt(parent),
            status,
            ...(meta === undefined
              ? {}
              : {
                  blockhash: meta.blockhash,
                  parentBlockhash: meta.parentBlockhash,
                  blockTime: meta.blockTime === undefined ? null : Number(meta.blockTime.timestamp),
                }),
          };
          if (status !== "confirmed") metas.delete(slot);
          else {
            // Bound what is held for slots that never finalize or never got their status.
            for (const held of metas.keys()) if (held + HELD_SLOTS < slot) metas.delete(held);
            for (const held of pending.keys()) if (held + HELD_SLOTS < slot) pending.delete(held);
          }
          yielded = true;
          yield { kind: "slot", slot: slotUpdate };
        }
      }
    } catch (error) {
      if (signal.aborted) return;
      const replayError = replayFrom !== null && !yielded ? replayUnavailableFrom(error, fromSlot) : null;
      throw replayError ?? error;
    } finally {
      signal.removeEventListener("abort", onAbort);
      stream.destroy();
    }
  }
}
