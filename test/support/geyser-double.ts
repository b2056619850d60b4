/**
 * TEST DOUBLE of a Yellowstone ("Dragon's Mouth") gRPC Geyser server, which runs inside a validator
 * and so cannot run here: a `@grpc/grpc-js` server on 127.0.0.1 speaking the real protocol
 * (`/geyser.Geyser/*`, the codecs of `@triton-one/yellowstone-grpc`), so the production client
 * talks to it as to a provider.
 *
 * It serves what the local ledger executed (polled over JSON-RPC) in the plugin's order: a slot's
 * transactions, its block meta, then its CONFIRMED / FINALIZED status. Honoured: `transactions`
 * filters, `slots` (filterByCommitment), `blocksMeta`, `commitment`, `fromSlot` replay within
 * `retentionSlots` (else OUT_OF_RANGE; retention 0 → INTERNAL, as the real plugin), pings both
 * ways. Not modelled: accounts, blocks, entries, transactionsStatus, forks (except the test hook
 * that injects a DEAD slot status).
 */
import {
  type Server,
  type ServerDuplexStream,
  type ServerUnaryCall,
  type sendUnaryData,
  type ServiceDefinition,
  Server as GrpcServer,
  ServerCredentials,
  status as GrpcStatus,
} from "@grpc/grpc-js";
import {
  CommitmentLevel,
  GetBlockHeightRequest,
  GetBlockHeightResponse,
  GetLatestBlockhashRequest,
  GetLatestBlockhashResponse,
  GetSlotRequest,
  GetSlotResponse,
  GetVersionRequest,
  GetVersionResponse,
  PingRequest,
  PongResponse,
  SlotStatus,
  SubscribeReplayInfoRequest,
  SubscribeReplayInfoResponse,
  SubscribeRequest,
  SubscribeRequestFilterAccounts,
  SubscribeRequestFilterBlocks,
  SubscribeRequestFilterBlocksMeta,
  SubscribeRequestFilterEntry,
  SubscribeRequestFilterSlots,
  SubscribeRequestFilterTransactions,
  SubscribeUpdate,
  type SubscribeUpdateTransactionInfo,
} from "@triton-one/yellowstone-grpc";
import bs58 from "bs58";
import { pollUntil } from "./poll.js";

// ---- codecs ----------------------------------------------------------------------------------

interface Codec<T> {
  encode(message: T): { finish(): Uint8Array };
  decode(input: Uint8Array): T;
}

function method<Req, Res>(name: string, req: Codec<Req>, res: Codec<Res>, requestStream: boolean, responseStream: boolean) {
  return {
    path: `/geyser.Geyser/${name}`,
    requestStream,
    responseStream,
    requestSerialize: (m: Req) => Buffer.from(req.encode(m).finish()),
    requestDeserialize: (b: Buffer) => req.decode(b),
    responseSerialize: (m: Res) => Buffer.from(res.encode(m).finish()),
    responseDeserialize: (b: Buffer) => res.decode(b),
  };
}

// The napi client re-encodes requests with prost, which writes a map entry whose value is the
// default message (e.g. `blocksMeta: { name: {} }`) as the key alone. The Rust plugin reads that as
// an empty filter; ts-proto's decoder drops the entry. Restore such entries as the plugin would.
const MAP_FIELDS: Record<number, [keyof SubscribeRequest, () => object]> = {
  1: ["accounts", () => SubscribeRequestFilterAccounts.fromPartial({})],
  2: ["slots", () => SubscribeRequestFilterSlots.fromPartial({})],
  3: ["transactions", () => SubscribeRequestFilterTransactions.fromPartial({})],
  4: ["blocks", () => SubscribeRequestFilterBlocks.fromPartial({})],
  5: ["blocksMeta", () => SubscribeRequestFilterBlocksMeta.fromPartial({})],
  8: ["entry", () => SubscribeRequestFilterEntry.fromPartial({})],
  10: ["transactionsStatus", () => SubscribeRequestFilterTransactions.fromPartial({})],
};

function varint(bytes: Uint8Array, at: number): [number, number] {
  let value = 0;
  let shift = 1;
  for (;;) {
    const byte = bytes[at];
    if (byte === undefined) throw new Error("truncated varint");
    at += 1;
    value += (byte & 0x7f) * shift;
    if (byte < 0x80) return [value, at];
    shift *= 128;
  }
}

/** Top-level fields of a protobuf message: [field number, bytes of length-delimited fields]. */
function fields(bytes: Uint8Array): [number, Uint8Array | null][] {
  const out: [number, Uint8Array | null][] = [];
  let at = 0;
  while (at < bytes.length) {
    let tag: number;
    [tag, at] = varint(bytes, at);
    const wire = tag & 7;
    const field = Math.floor(tag / 8);
    if (wire === 0) [, at] = varint(bytes, at);
    else if (wire === 1) at += 8;
    else if (wire === 5) at += 4;
    else if (wire === 2) {
      let length: number;
      [length, at] = varint(bytes, at);
      out.push([field, bytes.subarray(at, at + length)]);
      at += length;
      continue;
    } else throw new Error(`unsupported wire type ${wire}`);
    out.push([field, null]);
  }
  return out;
}

function decodeSubscribeRequest(bytes: Uint8Array): SubscribeRequest {
  const request = SubscribeRequest.decode(bytes);
  for (const [field, body] of fields(bytes)) {
    const map = MAP_FIELDS[field];
    if (map === undefined || body === null) continue;
    const entry = fields(body);
    if (entry.some(([f]) => f === 2)) continue; // has a value: ts-proto decoded it
    const key = entry.find(([f]) => f === 1)?.[1];
    if (key === undefined || key === null) continue;
    const [name, empty] = map;
    (request[name] as Record<string, object>)[new TextDecoder().decode(key)] = empty();
  }
  return request;
}

const GEYSER_SERVICE = {
  Subscribe: {
    ...method("Subscribe", SubscribeRequest, SubscribeUpdate, true, true),
    requestDeserialize: (b: Buffer) => decodeSubscribeRequest(b),
  },
  SubscribeReplayInfo: method("SubscribeReplayInfo", SubscribeReplayInfoRequest, SubscribeReplayInfoResponse, false, false),
  Ping: method("Ping", PingRequest, PongResponse, false, false),
  GetSlot: method("GetSlot", GetSlotRequest, GetSlotResponse, false, false),
  GetBlockHeight: method("GetBlockHeight", GetBlockHeightRequest, GetBlockHeightResponse, false, false),
  GetLatestBlockhash: method("GetLatestBlockhash", GetLatestBlockhashRequest, GetLatestBlockhashResponse, false, false),
  GetVersion: method("GetVersion", GetVersionRequest, GetVersionResponse, false, false),
} as const;

// ---- the ledger's JSON-RPC shapes (json encoding) ----------------------------------------------

interface JsonInstruction {
  programIdIndex: number;
  accounts: number[];
  data: string;
  stackHeight?: number | null;
}
interface JsonTokenBalance {
  accountIndex: number;
  mint: string;
  owner?: string;
  programId?: string;
  uiTokenAmount: { amount: string; decimals: number; uiAmount: number | null; uiAmountString: string };
}
interface JsonTransaction {
  transaction: {
    signatures: string[];
    message: {
      header: { numRequiredSignatures: number; numReadonlySignedAccounts: number; numReadonlyUnsignedAccounts: number };
      accountKeys: string[];
      recentBlockhash: string;
      instructions: JsonInstruction[];
      addressTableLookups?: { accountKey: string; writableIndexes: number[]; readonlyIndexes: number[] }[];
    };
  };
  meta: {
    err: unknown;
    fee: number;
    preBalances: number[];
    postBalances: number[];
    innerInstructions?: { index: number; instructions: JsonInstruction[] }[] | null;
    logMessages?: string[] | null;
    preTokenBalances?: JsonTokenBalance[] | null;
    postTokenBalances?: JsonTokenBalance[] | null;
    loadedAddresses?: { writable: string[]; readonly: string[] } | null;
    computeUnitsConsumed?: number;
    returnData?: { programId: string; data: [string, string] } | null;
  };
  version?: number | "legacy";
}
interface JsonBlock {
  blockhash: string;
  previousBlockhash: string;
  parentSlot: number;
  blockTime: number | null;
  blockHeight: number | null;
  transactions: JsonTransaction[];
}

// ---- TransactionError → bincode (what the plugin puts in meta.err.err) ------------------------

const TX_ERRORS = [
  "AccountInUse",
  "AccountLoadedTwice",
  "AccountNotFound",
  "ProgramAccountNotFound",
  "InsufficientFundsForFee",
  "InvalidAccountForFee",
  "AlreadyProcessed",
  "BlockhashNotFound",
  "InstructionError",
  "CallChainTooDeep",
  "MissingSignatureForFee",
  "InvalidAccountIndex",
  "SignatureFailure",
  "InvalidProgramForExecution",
  "SanitizeFailure",
  "ClusterMaintenance",
  "AccountBorrowOutstanding",
  "WouldExceedMaxBlockCostLimit",
  "UnsupportedVersion",
  "InvalidWritableAccount",
  "WouldExceedMaxAccountCostLimit",
  "WouldExceedAccountDataBlockLimit",
  "TooManyAccountLocks",
  "AddressLookupTableNotFound",
  "InvalidAddressLookupTableOwner",
  "InvalidAddressLookupTableData",
  "InvalidAddressLookupTableIndex",
  "InvalidRentPayingAccount",
  "WouldExceedMaxVoteCostLimit",
  "WouldExceedAccountDataTotalLimit",
  "DuplicateInstruction",
  "InsufficientFundsForRent",
  "MaxLoadedAccountsDataSizeExceeded",
  "InvalidLoadedAccountsDataSizeLimit",
  "ResanitizationNeeded",
  "ProgramExecutionTemporarilyRestricted",
  "UnbalancedTransaction",
  "ProgramCacheHitMaxLimit",
  "CommitCancelled",
];
const INSTRUCTION_ERRORS = [
  "GenericError",
  "InvalidArgument",
  "InvalidInstructionData",
  "InvalidAccountData",
  "AccountDataTooSmall",
  "InsufficientFunds",
  "IncorrectProgramId",
  "MissingRequiredSignature",
  "AccountAlreadyInitialized",
  "UninitializedAccount",
  "UnbalancedInstruction",
  "ModifiedProgramId",
  "ExternalAccountLamportSpend",
  "ExternalAccountDataModified",
  "ReadonlyLamportChange",
  "ReadonlyDataModified",
  "DuplicateAccountIndex",
  "ExecutableModified",
  "RentEpochModified",
  "NotEnoughAccountKeys",
  "AccountDataSizeChanged",
  "AccountNotExecutable",
  "AccountBorrowFailed",
  "AccountBorrowOutstanding",
  "DuplicateAccountOutOfSync",
  "Custom",
  "InvalidError",
  "ExecutableDataModified",
  "ExecutableLamportChange",
  "ExecutableAccountNoRentExemption",
  "UnsupportedProgramId",
  "CallDepth",
  "MissingAccount",
  "ReentrancyNotAllowed",
  "MaxSeedLengthExceeded",
  "InvalidSeeds",
  "InvalidRealloc",
  "ComputationalBudgetExceeded",
  "PrivilegeEscalation",
  "ProgramEnvironmentSetupFailure",
  "ProgramFailedToComplete",
  "ProgramFailedToCompile",
  "Immutable",
  "IncorrectAuthority",
  "BorshIoError",
  "AccountNotRentExempt",
  "InvalidAccountOwner",
  "ArithmeticOverflow",
  "UnsupportedSysvar",
  "IllegalOwner",
  "MaxAccountsDataAllocationsExceeded",
  "MaxAccountsExceeded",
  "MaxInstructionTraceLengthExceeded",
  "BuiltinProgramsMustConsumeComputeUnits",
];

const u32le = (n: number): number[] => [n & 0xff, (n >>> 8) & 0xff, (n >>> 16) & 0xff, (n >>> 24) & 0xff];

function variant(names: readonly string[], name: string): number {
  const index = names.indexOf(name);
  if (index < 0) throw new Error(`geyser double: cannot encode error variant ${name}`);
  return index;
}

/** The RPC JSON form of a TransactionError, bincode-encoded as the plugin sends it. */
export function encodeTransactionError(err: unknown): Uint8Array {
  if (typeof err === "string") return Uint8Array.from(u32le(variant(TX_ERRORS, err)));
  if (err !== null && typeof err === "object") {
    const [name, value] = Object.entries(err as Record<string, unknown>)[0] ?? [];
    if (name === "InstructionError" && Array.isArray(value)) {
      const [index, inner] = value as [number, unknown];
      const head = [...u32le(variant(TX_ERRORS, name)), index & 0xff];
      if (typeof inner === "string") return Uint8Array.from([...head, ...u32le(variant(INSTRUCTION_ERRORS, inner))]);
      const custom = (inner as { Custom?: number }).Custom;
      if (typeof custom === "number") return Uint8Array.from([...head, ...u32le(variant(INSTRUCTION_ERRORS, "Custom")), ...u32le(custom)]);
    }
    if (name === "DuplicateInstruction" && typeof value === "number") return Uint8Array.from([...u32le(variant(TX_ERRORS, name)), value]);
    if (
      (name === "InsufficientFundsForRent" || name === "ProgramExecutionTemporarilyRestricted") &&
      value !== null &&
      typeof value === "object"
    ) {
      return Uint8Array.from([...u32le(variant(TX_ERRORS, name)), (value as { account_index: number }).account_index]);
    }
  }
  throw new Error(`geyser double: cannot encode transaction error ${JSON.stringify(err)}`);
}

// ---- ledger JSON → geyser protobuf -----------------------------------------------------------

/** The local ledger finalizes a slot 32 slots after it (scripts/localnet FINALITY_DEPTH). */
const FINALITY_DEPTH = 32n;
const VOTE_PROGRAM = "Vote111111111111111111111111111111111111111";

interface StoredTransaction {
  readonly info: SubscribeUpdateTransactionInfo;
  readonly signature: string;
  readonly accountKeys: readonly string[];
  readonly failed: boolean;
  readonly vote: boolean;
}

interface StoredBlock {
  readonly slot: bigint;
  readonly parentSlot: bigint;
  readonly blockhash: string;
  readonly parentBlockhash: string;
  readonly blockTime: number | null;
  readonly blockHeight: number | null;
  readonly transactions: readonly StoredTransaction[];
}

function tokenBalances(balances: JsonTokenBalance[] | null | undefined) {
  return (balances ?? []).map((b) => ({
    accountIndex: b.accountIndex,
    mint: b.mint,
    owner: b.owner ?? "",
    programId: b.programId ?? "",
    uiTokenAmount: {
      amount: b.uiTokenAmount.amount,
      decimals: b.uiTokenAmount.decimals,
      uiAmount: b.uiTokenAmount.uiAmount ?? 0,
      uiAmountString: b.uiTokenAmount.uiAmountString,
    },
  }));
}

function toStoredTransaction(tx: JsonTransaction, index: number): StoredTransaction {
  const { message } = tx.transaction;
  const loaded = tx.meta.loadedAddresses ?? { writable: [], readonly: [] };
  const accountKeys = [...message.accountKeys, ...loaded.writable, ...loaded.readonly];
  const vote = message.instructions.some((ix) => accountKeys[ix.programIdIndex] === VOTE_PROGRAM);
  const signature = tx.transaction.signatures[0];
  if (signature === undefined) throw new Error("geyser double: transaction without signature");
  const info: SubscribeUpdateTransactionInfo = {
    signature: bs58.decode(signature),
    isVote: vote,
    transaction: {
      signatures: tx.transaction.signatures.map((s) => bs58.decode(s)),
      message: {
        header: message.header,
        accountKeys: message.accountKeys.map((k) => bs58.decode(k)),
        recentBlockhash: bs58.decode(message.recentBlockhash),
        instructions: message.instructions.map((ix) => ({
          programIdIndex: ix.programIdIndex,
          accounts: Uint8Array.from(ix.accounts),
          data: bs58.decode(ix.data),
        })),
        versioned: tx.version !== undefined && tx.version !== "legacy",
        addressTableLookups: (message.addressTableLookups ?? []).map((l) => ({
          accountKey: bs58.decode(l.accountKey),
          writableIndexes: Uint8Array.from(l.writableIndexes),
          readonlyIndexes: Uint8Array.from(l.readonlyIndexes),
        })),
      },
    },
    meta: {
      err: tx.meta.err === null || tx.meta.err === undefined ? undefined : { err: encodeTransactionError(tx.meta.err) },
      fee: String(tx.meta.fee),
      preBalances: tx.meta.preBalances.map(String),
      postBalances: tx.meta.postBalances.map(String),
      innerInstructions: (tx.meta.innerInstructions ?? []).map((group) => ({
        index: group.index,
        instructions: group.instructions.map((ix) => ({
          programIdIndex: ix.programIdIndex,
          accounts: Uint8Array.from(ix.accounts),
          data: bs58.decode(ix.data),
          stackHeight: ix.stackHeight ?? undefined,
        })),
      })),
      innerInstructionsNone: tx.meta.innerInstructions === null || tx.meta.innerInstructions === undefined,
      logMessages: tx.meta.logMessages ?? [],
      logMessagesNone: tx.meta.logMessages === null || tx.meta.logMessages === undefined,
      preTokenBalances: tokenBalances(tx.meta.preTokenBalances),
      postTokenBalances: tokenBalances(tx.meta.postTokenBalances),
      rewards: [],
      loadedWritableAddresses: loaded.writable.map((k) => bs58.decode(k)),
      loadedReadonlyAddresses: loaded.readonly.map((k) => bs58.decode(k)),
      returnData: tx.meta.returnData
        ? { programId: bs58.decode(tx.meta.returnData.programId), data: Buffer.from(tx.meta.returnData.data[0], "base64") }
        : undefined,
      returnDataNone: !tx.meta.returnData,
      computeUnitsConsumed: tx.meta.computeUnitsConsumed === undefined ? undefined : String(tx.meta.computeUnitsConsumed),
    },
    index: String(index),
  };
  return { info, signature, accountKeys, failed: info.meta?.err !== undefined, vote };
}

function matchesTransaction(filter: SubscribeRequestFilterTransactions, tx: StoredTransaction): boolean {
  if (filter.vote !== undefined && filter.vote !== tx.vote) return false;
  if (filter.failed !== undefined && filter.failed !== tx.failed) return false;
  if (filter.signature !== undefined && filter.signature !== tx.signature) return false;
  const keys = new Set(tx.accountKeys);
  if (filter.accountInclude.length > 0 && !filter.accountInclude.some((k) => keys.has(k))) return false;
  if (filter.accountExclude.some((k) => keys.has(k))) return false;
  if (!filter.accountRequired.every((k) => keys.has(k))) return false;
  return true;
}

// ---- subscribers -----------------------------------------------------------------------------

type Call = ServerDuplexStream<SubscribeRequest, SubscribeUpdate>;

interface Subscriber {
  readonly call: Call;
  request: SubscribeRequest | null;
  /** Next slot whose content (transactions, block meta, confirmed status) this stream gets. */
  nextSlot: bigint;
  /** Next slot whose FINALIZED status this stream gets. */
  nextFinalized: bigint;
  closed: boolean;
}

export interface GeyserDoubleOptions {
  /** The local ledger's JSON-RPC URL. */
  readonly rpcUrl: string;
  /** Slots kept for `fromSlot` replay (the plugin's `replay_stored_slots`); 0 disables replay. Default 150. */
  readonly retentionSlots?: number;
  /** Server `ping` updates on every stream; default 15,000 ms like the plugin. */
  readonly pingIntervalMs?: number;
  /** How often the ledger is polled for new blocks; default 40 ms. */
  readonly pollMs?: number;
}

export class GeyserDouble {
  /** `http://127.0.0.1:<port>`, what the Yellowstone client connects to. */
  readonly endpoint: string;
  /** Every request received on Subscribe streams, in order (for assertions). */
  readonly requests: SubscribeRequest[] = [];
  /** Ids of client pings answered with a pong. */
  readonly pongs: number[] = [];
  private readonly blocks = new Map<bigint, StoredBlock>();
  private readonly subscribers = new Set<Subscriber>();
  private confirmedUpTo = -1n;
  private finalizedUpTo = -1n;
  private fetchedUpTo = -1n;
  private polling: NodeJS.Timeout | undefined;
  private pinging: NodeJS.Timeout | undefined;
  private busy = false;
  private pollError: unknown = null;
  private readonly retention: bigint;

  private constructor(
    private readonly server: Server,
    port: number,
    private readonly options: GeyserDoubleOptions,
  ) {
    this.endpoint = `http://127.0.0.1:${port}`;
    this.retention = BigInt(options.retentionSlots ?? 150);
  }

  static async start(options: GeyserDoubleOptions): Promise<GeyserDouble> {
    const server = new GrpcServer();
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))),
    );
    const double = new GeyserDouble(server, port, options);
    server.addService(GEYSER_SERVICE as unknown as ServiceDefinition, double.handlers());
    await double.poll(); // serve from the first request on
    double.polling = setInterval(() => void double.poll(), options.pollMs ?? 40);
    double.pinging = setInterval(() => double.pingAll(), options.pingIntervalMs ?? 15_000);
    return double;
  }

  /** Oldest slot a `fromSlot` request may name; null when replay is disabled. */
  firstAvailableSlot(): bigint | null {
    if (this.retention === 0n) return null;
    let first: bigint | null = null;
    for (const slot of this.blocks.keys()) if (first === null || slot < first) first = slot;
    return first;
  }

  /** Newest slot the double has served as confirmed. */
  confirmedSlot(): bigint {
    return this.confirmedUpTo;
  }

  /** Waits until the double has ingested the ledger up to `slot` (confirmed). */
  async waitForSlot(slot: bigint, timeoutMs = 10_000): Promise<void> {
    await pollUntil(
      () => {
        // The double's own polling failed: no later check can succeed, so say why at once.
        if (this.pollError !== null) throw this.pollError;
        return this.confirmedUpTo >= slot;
      },
      { timeoutMs, intervalMs: 20, what: `geyser double: slot ${slot} to be confirmed` },
    );
  }

  /** Test hook: a DEAD status for `slot` to every stream with a slots filter (lifecycle statuses go to every commitment). */
  injectDeadSlot(slot: bigint, deadError = "injected by the test double"): void {
    const parent = this.blocks.get(slot)?.parentSlot;
    for (const sub of this.subscribers) {
      const names = Object.keys(sub.request?.slots ?? {});
      if (names.length === 0) continue;
      this.send(sub, {
        filters: names,
        slot: { slot: String(slot), parent: parent === undefined ? undefined : String(parent), status: SlotStatus.SLOT_DEAD, deadError },
        createdAt: new Date(),
      });
    }
  }

  /** Test hook: ends every open Subscribe stream with UNAVAILABLE, as a dropped connection would. */
  dropStreams(): void {
    for (const sub of this.subscribers) this.fail(sub, GrpcStatus.UNAVAILABLE, "stream dropped by the test double");
  }

  get openStreams(): number {
    return this.subscribers.size;
  }

  async stop(): Promise<void> {
    clearInterval(this.polling);
    clearInterval(this.pinging);
    for (const sub of this.subscribers) this.fail(sub, GrpcStatus.UNAVAILABLE, "server shutting down");
    await new Promise<void>((resolve) => this.server.tryShutdown(() => resolve()));
    this.server.forceShutdown();
  }

  // ---- gRPC handlers -------------------------------------------------------------------------

  private handlers() {
    const unary =
      <Req, Res>(answer: (req: Req) => Res) =>
      (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>) => {
        try {
          callback(null, answer(call.request));
        } catch (error) {
          callback({ code: GrpcStatus.INTERNAL, details: String(error) });
        }
      };
    return {
      Subscribe: (call: Call) => this.subscribe(call),
      SubscribeReplayInfo: unary<SubscribeReplayInfoRequest, SubscribeReplayInfoResponse>(() => {
        const first = this.firstAvailableSlot();
        return first === null ? {} : { firstAvailable: String(first) };
      }),
      Ping: unary<PingRequest, PongResponse>((req) => ({ count: req.count })),
      GetSlot: unary<GetSlotRequest, GetSlotResponse>((req) => ({
        slot: String(req.commitment === CommitmentLevel.FINALIZED ? this.finalizedUpTo : this.confirmedUpTo),
      })),
      GetBlockHeight: unary<GetBlockHeightRequest, GetBlockHeightResponse>(() => ({
        blockHeight: String(this.blocks.get(this.confirmedUpTo)?.blockHeight ?? this.confirmedUpTo),
      })),
      GetLatestBlockhash: unary<GetLatestBlockhashRequest, GetLatestBlockhashResponse>(() => {
        const block = this.blocks.get(this.confirmedUpTo);
        return {
          slot: String(this.confirmedUpTo),
          blockhash: block?.blockhash ?? "",
          lastValidBlockHeight: String(this.confirmedUpTo + 150n),
        };
      }),
      GetVersion: unary<GetVersionRequest, GetVersionResponse>(() => ({
        version: JSON.stringify({ version: { package: "geyser-test-double", version: "0.0.0" } }),
      })),
    };
  }

  private subscribe(call: Call): void {
    const sub: Subscriber = {
      call,
      request: null,
      nextSlot: this.confirmedUpTo + 1n,
      nextFinalized: this.finalizedUpTo + 1n,
      closed: false,
    };
    this.subscribers.add(sub);
    const close = () => {
      sub.closed = true;
      this.subscribers.delete(sub);
    };
    call.on("data", (request: SubscribeRequest) => this.onRequest(sub, request));
    call.on("end", () => {
      if (!sub.closed) call.end();
      close();
    });
    call.on("error", close);
    call.on("cancelled", close);
  }

  private onRequest(sub: Subscriber, request: SubscribeRequest): void {
    this.requests.push(request);
    if (request.ping !== undefined) {
      this.pongs.push(request.ping.id);
      this.send(sub, { filters: [], pong: { id: request.ping.id }, createdAt: new Date() });
    }
    const hasFilters = [
      request.accounts,
      request.slots,
      request.transactions,
      request.transactionsStatus,
      request.blocks,
      request.blocksMeta,
      request.entry,
    ].some((m) => Object.keys(m).length > 0);
    if (request.ping !== undefined && !hasFilters) return; // ping only: filters unchanged
    const first = sub.request === null;
    sub.request = request;
    if (first && request.fromSlot !== undefined) {
      const from = BigInt(request.fromSlot);
      if (this.retention === 0n) {
        this.fail(sub, GrpcStatus.INTERNAL, "from_slot is not supported");
        return;
      }
      const firstAvailable = this.firstAvailableSlot() ?? this.confirmedUpTo + 1n;
      if (from < firstAvailable) {
        this.fail(sub, GrpcStatus.OUT_OF_RANGE, `broadcast from ${from} is not available, last available: ${firstAvailable}`);
        return;
      }
      sub.nextSlot = from;
      sub.nextFinalized = from;
    }
    this.pump(sub);
  }

  private fail(sub: Subscriber, code: GrpcStatus, details: string): void {
    if (sub.closed) return;
    sub.closed = true;
    this.subscribers.delete(sub);
    sub.call.emit("error", { code, details });
  }

  private send(sub: Subscriber, update: SubscribeUpdate): void {
    if (sub.closed) return;
    sub.call.write(update);
  }

  private pingAll(): void {
    for (const sub of this.subscribers) this.send(sub, { filters: [], ping: {}, createdAt: new Date() });
  }

  /** Sends a stream everything it has not had yet, in slot order. */
  private pump(sub: Subscriber): void {
    const request = sub.request;
    if (request === null || sub.closed) return;
    const commitment = request.commitment ?? CommitmentLevel.PROCESSED;
    const contentUpTo = commitment === CommitmentLevel.FINALIZED ? this.finalizedUpTo : this.confirmedUpTo;
    const slotFilters = Object.entries(request.slots);
    const slotNames = (status: SlotStatus) =>
      slotFilters.filter(([, f]) => !f.filterByCommitment || status === (commitment as number as SlotStatus)).map(([name]) => name);
    const statusUpdate = (block: StoredBlock, status: SlotStatus) => {
      const names = slotNames(status);
      if (names.length > 0) {
        this.send(sub, {
          filters: names,
          slot: { slot: String(block.slot), parent: String(block.parentSlot), status },
          createdAt: new Date(),
        });
      }
    };

    for (; sub.nextSlot <= contentUpTo; sub.nextSlot += 1n) {
      const block = this.blocks.get(sub.nextSlot);
      if (block === undefined) continue; // skipped slot, or pruned
      for (const tx of block.transactions) {
        const names = Object.entries(request.transactions)
          .filter(([, f]) => matchesTransaction(f, tx))
          .map(([name]) => name);
        if (names.length > 0)
          this.send(sub, { filters: names, transaction: { transaction: tx.info, slot: String(block.slot) }, createdAt: new Date() });
      }
      const metaNames = Object.keys(request.blocksMeta);
      if (metaNames.length > 0) {
        this.send(sub, {
          filters: metaNames,
          blockMeta: {
            slot: String(block.slot),
            blockhash: block.blockhash,
            rewards: { rewards: [], numPartitions: undefined },
            blockTime: block.blockTime === null ? undefined : { timestamp: String(block.blockTime) },
            blockHeight: block.blockHeight === null ? undefined : { blockHeight: String(block.blockHeight) },
            parentSlot: String(block.parentSlot),
            parentBlockhash: block.parentBlockhash,
            executedTransactionCount: String(block.transactions.length),
            entriesCount: "0",
          },
          createdAt: new Date(),
        });
      }
      if (commitment === CommitmentLevel.PROCESSED) statusUpdate(block, SlotStatus.SLOT_PROCESSED);
      if (commitment !== CommitmentLevel.FINALIZED) statusUpdate(block, SlotStatus.SLOT_CONFIRMED);
    }
    for (; sub.nextFinalized <= this.finalizedUpTo && sub.nextFinalized < sub.nextSlot; sub.nextFinalized += 1n) {
      const block = this.blocks.get(sub.nextFinalized);
      if (block !== undefined) statusUpdate(block, SlotStatus.SLOT_FINALIZED);
    }
  }

  // ---- reading the ledger --------------------------------------------------------------------

  private async rpc<T>(method: string, params: unknown[]): Promise<T> {
    const response = await fetch(this.options.rpcUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
      // A request that never answers must not wedge polling (`busy` would stay set for good).
      signal: AbortSignal.timeout(10_000),
    });
    const body = (await response.json()) as { result?: T; error?: { code: number; message: string } };
    if (body.error) throw new Error(`${method}: ${body.error.code} ${body.error.message}`);
    return body.result as T;
  }

  private async poll(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      // The ledger's getSlot is its current (open) slot; blocks exist for closed slots only, and a
      // slot is finalized FINALITY_DEPTH slots later (docs/ledger.md section 3).
      const tip = BigInt(await this.rpc<number>("getSlot", [{ commitment: "confirmed" }]));
      if (this.fetchedUpTo < 0n) {
        const first = BigInt(await this.rpc<number>("getFirstAvailableBlock", []));
        this.fetchedUpTo = first - 1n;
        if (this.retention > 0n && tip - this.retention > first) this.fetchedUpTo = tip - this.retention - 1n;
        if (this.retention === 0n && tip - 1n > first) this.fetchedUpTo = tip - 2n; // live only
      }
      while (this.fetchedUpTo < tip) {
        const start = this.fetchedUpTo + 1n;
        const end = tip < start + 499n ? tip : start + 499n;
        const slots = await this.rpc<number[]>("getBlocks", [Number(start), Number(end), { commitment: "confirmed" }]);
        if (slots.length === 0) break;
        for (const slot of slots) {
          const block = await this.rpc<JsonBlock>("getBlock", [
            slot,
            { encoding: "json", transactionDetails: "full", rewards: false, maxSupportedTransactionVersion: 0, commitment: "confirmed" },
          ]);
          this.blocks.set(BigInt(slot), {
            slot: BigInt(slot),
            parentSlot: BigInt(block.parentSlot),
            blockhash: block.blockhash,
            parentBlockhash: block.previousBlockhash,
            blockTime: block.blockTime,
            blockHeight: block.blockHeight,
            transactions: block.transactions.map(toStoredTransaction),
          });
          this.fetchedUpTo = BigInt(slot);
          this.confirmedUpTo = BigInt(slot);
        }
      }
      const finalized = tip - FINALITY_DEPTH;
      this.finalizedUpTo = finalized < this.confirmedUpTo ? finalized : this.confirmedUpTo;
      for (const sub of this.subscribers) this.pump(sub);
      this.prune();
    } catch (error) {
      this.pollError = error;
    } finally {
      this.busy = false;
    }
  }

  /** Keeps the last `retentionSlots` slots (at least the newest, which live streams still need). */
  private prune(): void {
    const keep = this.retention > 0n ? this.retention : 1n;
    const oldest = this.confirmedUpTo - keep + 1n;
    for (const slot of this.blocks.keys()) if (slot < oldest) this.blocks.delete(slot);
  }
}
