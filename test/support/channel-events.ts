/**
 * Ledger transactions of a channel's life, built as the program emits them: events encoded with
 * the IDL coder inside `emit_cpi` inner instructions (the shape indexer/decode/transaction.test.ts
 * pins), decoded by the REAL decoder and stored by the REAL ingest. The local ledger cannot settle
 * at a chosen time or fork on demand; these can, which the rollback and read-side tests need.
 * One instruction per `instructions` entry; its events in order (ChannelSettled before its charges,
 * docs/ledger.md §5).
 */
import { createHash, randomBytes } from "node:crypto";
import anchor, { BorshCoder } from "@coral-xyz/anchor";
import { Keypair, type PublicKey } from "@solana/web3.js";
import bs58 from "bs58";
import type pg from "pg";
import { decodeRawTransaction } from "../../indexer/decode/transaction.js";
import type { RawTransaction } from "../../indexer/sources/source.js";
import { ingestBatch } from "../../indexer/store/ingest.js";
import {
  EVENT_IX_TAG,
  endpointHash,
  eventAuthorityPda,
  PAYMENT_LEDGER_IDL,
  PAYMENT_LEDGER_PROGRAM_ID,
} from "../../programs/payment_ledger/ts/index.js";

const { BN } = anchor;
const coder = new BorshCoder(PAYMENT_LEDGER_IDL);
const PROGRAM = PAYMENT_LEDGER_PROGRAM_ID.toBase58();
const EVENT_AUTHORITY = eventAuthorityPda(PAYMENT_LEDGER_PROGRAM_ID).address.toBase58();

export const CLUSTER = "http://127.0.0.1:8899";

function encodeEvent(name: string, data: Record<string, unknown>): Uint8Array {
  const discriminator = PAYMENT_LEDGER_IDL.events?.find((event) => event.name === name)?.discriminator;
  if (discriminator === undefined) throw new Error(`no event ${name}`);
  return new Uint8Array(Buffer.concat([Buffer.from(discriminator), coder.types.encode(name, data)]));
}

const bn = (value: bigint | number): InstanceType<typeof BN> => new BN(value.toString());

export interface ChannelFacts {
  readonly channel: PublicKey;
  readonly payer: PublicKey;
  readonly payee: PublicKey;
  readonly mint: PublicKey;
  readonly channelId: Uint8Array;
  readonly protocol: "mpp" | "x402";
}

export function newChannel(payer: PublicKey, payee: PublicKey, protocol: "mpp" | "x402" = "mpp"): ChannelFacts {
  return {
    channel: Keypair.generate().publicKey,
    payer,
    payee,
    mint: Keypair.generate().publicKey,
    channelId: Keypair.generate().publicKey.toBytes(),
    protocol,
  };
}

const protocolVariant = (protocol: "mpp" | "x402") => (protocol === "mpp" ? { Mpp: {} } : { X402: {} });

export const channelEvents = {
  opened(c: ChannelFacts, deposit: bigint, openedAt: number, expiresAt: number, slot: bigint): Uint8Array {
    return encodeEvent("ChannelOpened", {
      channel: c.channel,
      payer: c.payer,
      payee: c.payee,
      mint: c.mint,
      channel_id: Array.from(c.channelId),
      deposit: bn(deposit),
      protocol: protocolVariant(c.protocol),
      invocation: null,
      expires_at: bn(expiresAt),
      withdraw_delay: bn(60),
      opened_at: bn(openedAt),
      slot: bn(slot),
    });
  },
  toppedUp(c: ChannelFacts, amount: bigint, deposit: bigint, slot: bigint): Uint8Array {
    return encodeEvent("ChannelToppedUp", { channel: c.channel, amount: bn(amount), deposit: bn(deposit), slot: bn(slot) });
  },
  settled(c: ChannelFacts, settled: { cumulative: bigint; delta: bigint; sequence: bigint; charges: number }, slot: bigint): Uint8Array {
    return encodeEvent("ChannelSettled", {
      channel: c.channel,
      payer: c.payer,
      payee: c.payee,
      settler: c.payee,
      cumulative_amount: bn(settled.cumulative),
      delta: bn(settled.delta),
      sequence: bn(settled.sequence),
      charge_count: settled.charges,
      charges_digest: Array.from({ length: 32 }, (_, i) => (i + Number(settled.sequence)) % 256),
      slot: bn(slot),
    });
  },
  /** A charge a settlement carries. */
  charge(c: ChannelFacts, paymentId: bigint, amount: bigint, endpoint: string, recordedAt: number, slot: bigint): Uint8Array {
    return encodeEvent("PaymentRecorded", {
      payer: c.payer,
      payee: c.payee,
      payment_id: bn(paymentId),
      amount: bn(amount),
      mint: c.mint,
      protocol: protocolVariant(c.protocol),
      rail: { Stablecoin: {} },
      endpoint_hash: Array.from(endpointHash(endpoint)),
      atomic: true,
      settlement_reference: null,
      parent: null,
      recorded_at: bn(recordedAt),
      slot: bn(slot),
    });
  },
  closeRequested(c: ChannelFacts, by: PublicKey, at: number, slot: bigint): Uint8Array {
    return encodeEvent("ChannelCloseRequested", {
      channel: c.channel,
      requested_by: by,
      close_requested_at: bn(at),
      refundable_at: bn(at + 60),
      slot: bn(slot),
    });
  },
  closed(c: ChannelFacts, totals: { deposit: bigint; settled: bigint; sequence: bigint; forced?: boolean }, slot: bigint): Uint8Array {
    return encodeEvent("ChannelClosed", {
      channel: c.channel,
      payer: c.payer,
      payee: c.payee,
      closed_by: c.payee,
      deposit: bn(totals.deposit),
      settled: bn(totals.settled),
      refunded: bn(totals.deposit - totals.settled),
      sequence: bn(totals.sequence),
      forced: totals.forced ?? false,
      slot: bn(slot),
    });
  },
};

/** A fresh transaction signature (64 random bytes, base58). */
export function newSignature(): string {
  return bs58.encode(Buffer.concat([Keypair.generate().secretKey]));
}

/** A successful program transaction: one top-level instruction per entry, each emitting its events. */
export function ledgerTransaction(slot: bigint, blockTime: number, instructions: readonly (readonly Uint8Array[])[]): RawTransaction {
  const signer = Keypair.generate().publicKey.toBase58();
  return {
    signature: newSignature(),
    slot,
    blockTime,
    indexInBlock: null,
    commitment: "confirmed",
    err: null,
    accountKeys: [signer, PROGRAM, EVENT_AUTHORITY],
    instructions: instructions.map(() => ({ programIdIndex: 1, accounts: [0], data: new Uint8Array([1]), stackHeight: 1 })),
    innerInstructions: instructions.map((events, index) => ({
      index,
      instructions: events.map((event) => ({
        programIdIndex: 1,
        accounts: [2],
        data: new Uint8Array([...EVENT_IX_TAG, ...event]),
        stackHeight: 2,
      })),
    })),
    logs: [`Program ${PROGRAM} invoke [1]`, `Program ${PROGRAM} success`],
    preTokenBalances: [],
    postTokenBalances: [],
  };
}

/** Decodes and ingests transactions as one batch (the indexer's own path). */
export async function ingestTransactions(
  pool: pg.Pool,
  transactions: readonly RawTransaction[],
  extra: { deadSlots?: readonly bigint[]; finalizedSlot?: bigint } = {},
): Promise<void> {
  await ingestBatch(
    pool,
    { transactions: transactions.map((t) => decodeRawTransaction(t, PAYMENT_LEDGER_PROGRAM_ID)), ...extra },
    { cluster: CLUSTER },
  );
}

export interface GatewayCharge {
  readonly sequence: number;
  readonly paymentId: number;
  readonly amount: bigint;
  readonly status: "signed" | "accepted" | "settled" | "void";
  readonly settlementTx?: string;
}

/**
 * The gateway's rows of a session and its charges, as api/gateway writes them
 * (migrations/025_channel_sessions.sql): every charge on `endpoint`, cumulative in order.
 */
export async function insertGatewaySession(
  pool: pg.Pool,
  c: ChannelFacts,
  agentId: string,
  accountId: string,
  session: {
    status: string;
    deposit: bigint;
    openTx: string | null;
    accepted: bigint;
    acceptedSequence: number;
    charges: GatewayCharge[];
    openedAt: Date;
    expiresAt: Date;
    endpoint: string;
    serviceOrigin: string;
  },
): Promise<void> {
  const signed = session.charges.reduce((sum, charge) => sum + charge.amount, 0n);
  const settled = session.charges.filter((charge) => charge.status === "settled");
  await pool.query(
    `INSERT INTO channel_sessions (channel, account_id, agent_id, payer, payee, mint, channel_id, protocol, service_origin,
                                   deposit, expires_at, withdraw_delay_seconds, status, open_tx, signed_cumulative, signed_sequence,
                                   accepted_cumulative, accepted_sequence, settled_cumulative, settled_sequence, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, 'mpp', $19, $8, $9, 60, $10, $11, $12, $13, $14, $15, $16, $17, $18)`,
    [
      c.channel.toBase58(),
      accountId,
      agentId,
      c.payer.toBase58(),
      c.payee.toBase58(),
      c.mint.toBase58(),
      Buffer.from(c.channelId).toString("hex"),
      session.deposit.toString(),
      session.expiresAt,
      session.status,
      session.openTx,
      signed.toString(),
      session.charges.length,
      session.accepted.toString(),
      session.acceptedSequence,
      settled.reduce((sum, charge) => sum + charge.amount, 0n).toString(),
      settled.length,
      session.openedAt,
      session.serviceOrigin,
    ],
  );
  let cumulative = 0n;
  for (const charge of session.charges) {
    cumulative += charge.amount;
    await pool.query(
      `INSERT INTO channel_charges (channel, sequence, payment_id, amount, cumulative, endpoint, endpoint_hash, digest, signature,
                                    status, settlement_tx, accepted_at, settled_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
      [
        c.channel.toBase58(),
        charge.sequence,
        charge.paymentId,
        charge.amount.toString(),
        cumulative.toString(),
        session.endpoint,
        Buffer.from(endpointHash(session.endpoint)),
        createHash("sha256").update(`${charge.sequence}`).digest(),
        randomBytes(64).toString("hex"),
        charge.status,
        charge.settlementTx ?? null,
        charge.status === "signed" || charge.status === "void" ? null : session.openedAt,
        charge.status === "settled" ? session.openedAt : null,
      ],
    );
  }
}
