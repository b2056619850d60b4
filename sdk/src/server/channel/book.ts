/**
 * The payee's book of channel sessions: accepts each voucher locally (no ledger or gateway round
 * trip per request), makes it durable in the journal before the paid handler runs, and settles
 * accepted vouchers through the gateway (`POST /v1/channels/{c}/settlements`) in batches.
 *
 * Authority: the ledger's Channel account for payer, payee, mint, deposit, expiry and settled
 * state (read once per channel); the journal for what this payee accepted and what the gateway
 * confirmed. Vouchers of one channel are checked one at a time, each against the one accepted
 * right before it, so two concurrent requests cannot spend the same step.
 *
 * Non-guarantees: vouchers accepted after the gateway closed the channel are refused by it;
 * `MemoryVoucherJournal` loses unsettled vouchers in a crash.
 */
import type { KeyObject } from "node:crypto";
import { callGateway, type GatewayConfig, GatewayUnavailableError, isObject } from "../gateway.js";
import { type ChannelAccount, type LedgerRpc, readChannelAccount } from "./account.js";
import { base58Decode } from "./base58.js";
import { SessionVoucherError } from "./errors.js";
import type { JournalRecord, VoucherJournal } from "./journal.js";
import {
  ed25519PublicKey,
  endpointHash,
  endpointText,
  nextDigest,
  publicKeyBytes,
  type VoucherState,
  verifyEd25519,
  voucherMessage,
} from "./voucher.js";

/** A voucher as the payer's credential carries it (parsed: session-intent.ts). */
export interface PresentedVoucher {
  readonly channel: string;
  readonly cumulativeUnits: bigint;
  readonly sequence: bigint;
  readonly paymentId: bigint;
  readonly amountUnits: bigint;
  readonly endpoint: string;
  readonly digest: Uint8Array;
  readonly signer: string;
  /** Base58 text as sent (kept for settlement) and its bytes. */
  readonly signature: string;
}

export interface SettlementPolicy {
  /** Settle once this many charges wait (≤ 25 per settle_channel transaction at the gateway); 100 by default. */
  readonly maxCharges?: number;
  /** Settle once this much money waits (base units); 1 USDC by default. */
  readonly maxUnits?: bigint;
  /** Settle whatever waits this often; 30 s by default; 0 = never on time. */
  readonly intervalMs?: number;
}

export interface ChannelBookOptions extends GatewayConfig {
  /** The payee wallet (base58): a channel to anyone else is refused. */
  readonly payTo: string;
  readonly ledger: LedgerRpc;
  readonly journal: VoucherJournal;
  readonly settlement?: SettlementPolicy;
  /** A voucher is refused this close to the channel's expiry (it must be settled before); 60 s by default. */
  readonly expiryMarginSeconds?: number;
  /** The mint the payee accepts (the challenge's `currency`); any, and the gateway's, when absent. */
  readonly mint?: string;
  /** The challenge's `methodDetails.network`; the gateway's MPP network (or `localnet`) when absent. */
  readonly network?: string;
  readonly now?: () => number;
}

export interface AcceptedVoucher {
  readonly channel: string;
  readonly payer: string;
  readonly acceptedCumulativeUnits: bigint;
  readonly sequence: bigint;
  readonly depositUnits: bigint;
}

interface PendingCharge {
  readonly sequence: bigint;
  readonly paymentId: bigint;
  readonly amountUnits: bigint;
  readonly endpoint: string;
}

interface ChannelEntry {
  readonly channel: string;
  readonly channelBytes: Uint8Array;
  readonly payer: string;
  readonly payerKey: KeyObject;
  readonly depositUnits: bigint;
  readonly expiresAtSeconds: number;
  accepted: VoucherState;
  lastPaymentId: bigint;
  lastSignature: string | null;
  /** Accepted since the last charge the gateway confirmed, oldest first. */
  pending: PendingCharge[];
  confirmedSequence: bigint;
  confirmedCumulativeUnits: bigint;
  settlementTxs: string[];
  /** The tail of this channel's voucher chain (serializes acceptance). */
  lock: Promise<unknown>;
  settling: Promise<void> | null;
  finalized: boolean;
}

/** The batch trigger's ceiling: the gateway splits a presentation into ≤ 25 charges per transaction. */
const MAX_CHARGES_PER_PRESENTATION = 1_000;
/** Channels read from the ledger at once; more wait (a burst of new payers cannot flood the RPC). */
const MAX_CHANNELS = 100_000;

export class ChannelBook {
  readonly #channels = new Map<string, ChannelEntry>();
  readonly #loading = new Map<string, Promise<ChannelEntry>>();
  readonly #maxCharges: number;
  readonly #maxUnits: bigint;
  readonly #marginSeconds: number;
  readonly #now: () => number;
  #timer: NodeJS.Timeout | null = null;
  #started = false;
  /** Errors of background settlements (the last one), for logs and tests. */
  lastSettlementError: unknown = null;

  constructor(private readonly options: ChannelBookOptions) {
    if (publicKeyBytes(options.payTo) === undefined) throw new TypeError("ChannelBook: payTo must be a base58 address");
    this.#maxCharges = Math.min(options.settlement?.maxCharges ?? 100, MAX_CHARGES_PER_PRESENTATION);
    if (!(this.#maxCharges >= 1)) throw new TypeError("ChannelBook: settlement.maxCharges must be ≥ 1");
    this.#maxUnits = options.settlement?.maxUnits ?? 1_000_000n;
    this.#marginSeconds = options.expiryMarginSeconds ?? 60;
    this.#now = options.now ?? Date.now;
  }

  get payTo(): string {
    return this.options.payTo;
  }

  get mint(): string | undefined {
    return this.options.mint;
  }

  get network(): string | undefined {
    return this.options.network;
  }

  get programId(): string {
    return this.options.ledger.programId;
  }

  /** Replays the journal, then settles what it left pending. Call once before serving. */
  async start(): Promise<void> {
    if (this.#started) return;
    this.#started = true;
    for (const record of await this.options.journal.replay()) this.#apply(record);
    const interval = this.options.settlement?.intervalMs ?? 30_000;
    if (interval > 0) {
      this.#timer = setInterval(() => void this.flush().catch(() => {}), interval);
      this.#timer.unref();
    }
    await this.flush();
  }

  /** Stops the timer, settles what waits (best effort) and closes the journal. */
  async stop(): Promise<void> {
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
    await this.flush().catch(() => {});
    await this.options.journal.close();
  }

  /** What the payee holds of a channel; undefined when unknown here. */
  state(channel: string) {
    const entry = this.#channels.get(channel);
    if (entry === undefined) return undefined;
    return {
      payer: entry.payer,
      depositUnits: entry.depositUnits,
      acceptedCumulativeUnits: entry.accepted.cumulativeUnits,
      acceptedSequence: entry.accepted.sequence,
      confirmedCumulativeUnits: entry.confirmedCumulativeUnits,
      confirmedSequence: entry.confirmedSequence,
      pendingCharges: entry.pending.length,
      settlementTxs: [...entry.settlementTxs],
    };
  }

  /**
   * Checks `voucher` as the payment of one request to `endpoint` priced `priceUnits`, and makes it
   * durable. Throws SessionVoucherError for any refusal (nothing recorded then).
   */
  async accept(voucher: PresentedVoucher, request: { endpoint: string; priceUnits: bigint }): Promise<AcceptedVoucher> {
    if (!this.#started) throw new Error("ChannelBook: start() before accepting vouchers");
    const entry = await this.#entry(voucher.channel);
    const run = entry.lock.then(() => this.#acceptNext(entry, voucher, request));
    entry.lock = run.catch(() => {});
    const accepted = await run;
    if (entry.pending.length >= this.#maxCharges || this.#pendingUnits(entry) >= this.#maxUnits) {
      void this.#settle(entry).catch(() => {});
    }
    return accepted;
  }

  async #acceptNext(entry: ChannelEntry, v: PresentedVoucher, request: { endpoint: string; priceUnits: bigint }): Promise<AcceptedVoucher> {
    if (entry.finalized) throw new SessionVoucherError("channel-finalized", "the channel was closed");
    if (v.signer !== entry.payer) throw new SessionVoucherError("signer-mismatch", "the voucher is not signed by the channel's payer");
    const previous = entry.accepted;
    if (v.sequence !== previous.sequence + 1n) {
      throw new SessionVoucherError("sequence-mismatch", `expected sequence ${previous.sequence + 1n}, got ${v.sequence}`);
    }
    if (v.amountUnits !== request.priceUnits) {
      throw new SessionVoucherError("amount-mismatch", `this request costs ${request.priceUnits}, the voucher pays ${v.amountUnits}`);
    }
    if (v.cumulativeUnits !== previous.cumulativeUnits + v.amountUnits) {
      throw new SessionVoucherError("cumulative-mismatch", `expected cumulative ${previous.cumulativeUnits + v.amountUnits}`);
    }
    if (v.cumulativeUnits > entry.depositUnits) {
      throw new SessionVoucherError("amount-exceeds-deposit", `cumulative ${v.cumulativeUnits} passes the deposit ${entry.depositUnits}`);
    }
    if (v.paymentId <= entry.lastPaymentId) throw new SessionVoucherError("payment-id-reused", "the payment id does not increase");
    if (endpointText(v.endpoint) !== endpointText(request.endpoint)) {
      throw new SessionVoucherError("endpoint-mismatch", `the voucher pays ${endpointText(v.endpoint)}, not this request`);
    }
    if (this.#now() / 1000 >= entry.expiresAtSeconds - this.#marginSeconds) {
      throw new SessionVoucherError("channel-expired", "the channel expires too soon to settle this voucher");
    }
    // The digest of THIS request: the payer's digest must be the chain advanced by it.
    const digest = nextDigest(previous.digest, v.paymentId, v.amountUnits, endpointHash(request.endpoint));
    if (!Buffer.from(digest).equals(Buffer.from(v.digest))) {
      throw new SessionVoucherError("digest-mismatch", "the charges digest is not this charge's");
    }
    const signature = base58Decode(v.signature);
    const state: VoucherState = { cumulativeUnits: v.cumulativeUnits, sequence: v.sequence, digest };
    if (signature === undefined || !verifyEd25519(entry.payerKey, voucherMessage(entry.channelBytes, state), signature)) {
      throw new SessionVoucherError("invalid-signature", "the voucher signature does not verify");
    }
    // Durable before the handler runs (and before the state moves: a failed append accepts nothing).
    await this.options.journal.append({
      kind: "voucher",
      channel: entry.channel,
      sequence: v.sequence.toString(),
      paymentId: v.paymentId.toString(),
      amountUnits: v.amountUnits.toString(),
      cumulativeUnits: v.cumulativeUnits.toString(),
      endpoint: v.endpoint,
      digest: Buffer.from(digest).toString("hex"),
      signature: v.signature,
    });
    this.#applyVoucher(entry, v.sequence, v.paymentId, v.amountUnits, v.cumulativeUnits, v.endpoint, digest, v.signature);
    return {
      channel: entry.channel,
      payer: entry.payer,
      acceptedCumulativeUnits: v.cumulativeUnits,
      sequence: v.sequence,
      depositUnits: entry.depositUnits,
    };
  }

  /** The channel's entry, read from the ledger at its first voucher. */
  async #entry(channel: string): Promise<ChannelEntry> {
    const known = this.#channels.get(channel);
    if (known !== undefined) return known;
    let loading = this.#loading.get(channel);
    if (loading === undefined) {
      loading = this.#load(channel).finally(() => this.#loading.delete(channel));
      this.#loading.set(channel, loading);
    }
    return loading;
  }

  async #load(channel: string): Promise<ChannelEntry> {
    if (this.#channels.size >= MAX_CHANNELS) throw new SessionVoucherError("channel-not-found", "too many channels on this payee");
    let account: ChannelAccount | null;
    try {
      const { ledger } = this.options;
      account = await readChannelAccount({ ...ledger, fetch: ledger.fetch ?? this.options.fetch }, channel);
    } catch (error) {
      throw new GatewayUnavailableError(`ledger: ${error instanceof Error ? error.message : String(error)}`);
    }
    if (account === null) throw new SessionVoucherError("channel-not-found", "no open channel at this address");
    if (account.payee !== this.options.payTo) throw new SessionVoucherError("recipient-mismatch", "the channel pays another payee");
    if (this.options.mint !== undefined && account.mint !== this.options.mint) {
      throw new SessionVoucherError("recipient-mismatch", "the channel is in another mint");
    }
    if (account.closeRequestedAtSeconds !== null) throw new SessionVoucherError("channel-finalized", "the channel is closing");
    const raced = this.#channels.get(channel);
    if (raced !== undefined) return raced;
    const record: JournalRecord = {
      kind: "open",
      channel,
      payer: account.payer,
      payee: account.payee,
      mint: account.mint,
      depositUnits: account.depositUnits.toString(),
      openedSlot: account.openedSlot.toString(),
      expiresAtSeconds: account.expiresAtSeconds,
      settledCumulativeUnits: account.settled.cumulativeUnits.toString(),
      settledSequence: account.settled.sequence.toString(),
      settledDigest: Buffer.from(account.settled.digest).toString("hex"),
      lastPaymentId: account.lastPaymentId.toString(),
    };
    await this.options.journal.append(record);
    return this.#apply(record)!;
  }

  /** Replays one journal record into the book (start) or applies a fresh `open` one. */
  #apply(record: JournalRecord): ChannelEntry | undefined {
    if (record.kind === "open") {
      const entry: ChannelEntry = {
        channel: record.channel,
        channelBytes: publicKeyBytes(record.channel)!,
        payer: record.payer,
        payerKey: ed25519PublicKey(publicKeyBytes(record.payer)!),
        depositUnits: BigInt(record.depositUnits),
        expiresAtSeconds: record.expiresAtSeconds,
        accepted: {
          cumulativeUnits: BigInt(record.settledCumulativeUnits),
          sequence: BigInt(record.settledSequence),
          digest: Buffer.from(record.settledDigest, "hex"),
        },
        lastPaymentId: BigInt(record.lastPaymentId),
        lastSignature: null,
        pending: [],
        confirmedSequence: BigInt(record.settledSequence),
        confirmedCumulativeUnits: BigInt(record.settledCumulativeUnits),
        settlementTxs: [],
        lock: Promise.resolve(),
        settling: null,
        finalized: false,
      };
      this.#channels.set(record.channel, entry);
      return entry;
    }
    const entry = this.#channels.get(record.channel);
    if (entry === undefined) return undefined;
    if (record.kind === "voucher") {
      const digest = Buffer.from(record.digest, "hex");
      this.#applyVoucher(
        entry,
        BigInt(record.sequence),
        BigInt(record.paymentId),
        BigInt(record.amountUnits),
        BigInt(record.cumulativeUnits),
        record.endpoint,
        digest,
        record.signature,
      );
    } else {
      this.#applyConfirmed(entry, BigInt(record.sequence), BigInt(record.cumulativeUnits), record.transactions);
    }
    return entry;
  }

  #applyVoucher(
    entry: ChannelEntry,
    sequence: bigint,
    paymentId: bigint,
    amountUnits: bigint,
    cumulativeUnits: bigint,
    endpoint: string,
    digest: Uint8Array,
    signature: string,
  ): void {
    entry.accepted = { cumulativeUnits, sequence, digest };
    entry.lastPaymentId = paymentId;
    entry.lastSignature = signature;
    entry.pending.push({ sequence, paymentId, amountUnits, endpoint });
  }

  #applyConfirmed(entry: ChannelEntry, sequence: bigint, cumulativeUnits: bigint, transactions: readonly string[]): void {
    if (sequence <= entry.confirmedSequence) return;
    entry.confirmedSequence = sequence;
    entry.confirmedCumulativeUnits = cumulativeUnits;
    entry.pending = entry.pending.filter((charge) => charge.sequence > sequence);
    for (const tx of transactions) if (!entry.settlementTxs.includes(tx)) entry.settlementTxs.push(tx);
  }

  #pendingUnits(entry: ChannelEntry): bigint {
    return entry.pending.reduce((sum, charge) => sum + charge.amountUnits, 0n);
  }

  /** Settles every channel with charges waiting (or only `channel`); resolves when the gateway answered. */
  async flush(channel?: string): Promise<void> {
    const entries = channel === undefined ? [...this.#channels.values()] : [this.#channels.get(channel)].filter((e) => e !== undefined);
    const results = await Promise.allSettled(entries.filter((e) => e.pending.length > 0).map((entry) => this.#settle(entry)));
    const failed = results.find((r) => r.status === "rejected");
    if (failed !== undefined) throw (failed as PromiseRejectedResult).reason;
  }

  /** One presentation at a time per channel; a call while one runs waits for it, then presents what remains. */
  async #settle(entry: ChannelEntry): Promise<void> {
    while (entry.settling !== null) await entry.settling.catch(() => {});
    if (entry.pending.length === 0 || entry.lastSignature === null) return;
    entry.settling = this.#present(entry).finally(() => {
      entry.settling = null;
    });
    return entry.settling;
  }

  async #present(entry: ChannelEntry): Promise<void> {
    // The highest accepted voucher covers every pending charge (acceptance only moves forward);
    // only its signature is kept, so every charge since the last confirmed one rides with it.
    const charges = [...entry.pending];
    const top = entry.accepted;
    const body = {
      cumulative: top.cumulativeUnits.toString(),
      sequence: Number(top.sequence),
      signature: entry.lastSignature,
      charges: charges.map((c) => ({
        sequence: Number(c.sequence),
        paymentId: c.paymentId.toString(),
        amountUnits: c.amountUnits.toString(),
        endpoint: c.endpoint,
      })),
    };
    try {
      const answer = await callGateway(this.options, "POST", `/v1/channels/${entry.channel}/settlements`, body);
      const result = answer.body;
      if (answer.status === 200 && isObject(result)) {
        const acceptedSequence = BigInt(String(result.acceptedSequence ?? "0"));
        if (acceptedSequence < top.sequence) throw new Error(`the gateway accepted up to ${acceptedSequence} only`);
        const txs = Array.isArray(result.settlementTxs) ? result.settlementTxs.filter((t): t is string => typeof t === "string") : [];
        const record: JournalRecord = {
          kind: "settled",
          channel: entry.channel,
          sequence: top.sequence.toString(),
          cumulativeUnits: top.cumulativeUnits.toString(),
          transactions: txs,
        };
        await this.options.journal.append(record);
        this.#applyConfirmed(entry, top.sequence, top.cumulativeUnits, txs);
        return;
      }
      if (isObject(result) && (result.code === "channel_closed" || answer.status === 410)) entry.finalized = true;
      throw new Error(`settlement refused: HTTP ${answer.status} ${JSON.stringify(result)}`);
    } catch (error) {
      this.lastSettlementError = error;
      throw error;
    }
  }

  /** The highest accepted voucher of a channel is settled now and no voucher is accepted after (payer's close). */
  async close(channel: string): Promise<void> {
    const entry = this.#channels.get(channel);
    if (entry === undefined) throw new SessionVoucherError("channel-not-found", "this payee holds no such channel");
    entry.lock = entry.lock.then(() => {
      entry.finalized = true;
    });
    await entry.lock;
    await this.#settle(entry);
  }
}
