/**
 * The payee's one read of the ledger per channel: the `Channel` account of payment_ledger
 * (programs/payment_ledger/src/state.rs) fetched over JSON-RPC `getAccountInfo` and decoded by
 * hand (the SDK has no dependencies; `account.test.ts` checks this decoder against the program's
 * IDL-driven one). Owner and discriminator are checked: data of another account is refused.
 */
import { createHash } from "node:crypto";
import type { FetchLike } from "../gateway.js";
import { base58Decode, base58Encode } from "./base58.js";
import type { VoucherState } from "./voucher.js";

export interface ChannelAccount {
  readonly payer: string;
  readonly payee: string;
  readonly mint: string;
  readonly depositUnits: bigint;
  /** The highest settled voucher. */
  readonly settled: VoucherState;
  readonly lastPaymentId: bigint;
  readonly openedSlot: bigint;
  readonly expiresAtSeconds: number;
  /** Null while open. */
  readonly closeRequestedAtSeconds: number | null;
}

const DISCRIMINATOR = createHash("sha256").update("account:Channel").digest().subarray(0, 8);

export class ChannelAccountError extends Error {
  constructor(detail: string) {
    super(detail);
    this.name = "ChannelAccountError";
  }
}

/** Decodes a Channel account's data (Anchor/borsh layout); throws ChannelAccountError otherwise. */
export function decodeChannel(data: Uint8Array): ChannelAccount {
  const bytes = Buffer.from(data);
  if (bytes.length < 8 || !bytes.subarray(0, 8).equals(DISCRIMINATOR)) throw new ChannelAccountError("not a Channel account");
  let at = 8;
  const take = (length: number): Buffer => {
    if (at + length > bytes.length) throw new ChannelAccountError("Channel account data is short");
    const part = bytes.subarray(at, at + length);
    at += length;
    return part;
  };
  const key = () => base58Encode(take(32));
  const u64 = () => take(8).readBigUInt64LE();
  const i64 = () => Number(take(8).readBigInt64LE());
  const payer = key();
  const payee = key();
  const mint = key();
  take(32); // channel_id
  take(32); // rent_payer
  if (take(1)[0] === 1) take(32); // invocation: Option<Pubkey>
  take(1); // protocol
  const depositUnits = u64();
  const cumulativeUnits = u64();
  const sequence = u64();
  const digest = new Uint8Array(take(32));
  const lastPaymentId = u64();
  i64(); // opened_at
  const openedSlot = u64();
  const expiresAtSeconds = i64();
  i64(); // withdraw_delay
  const closeRequestedAt = i64();
  return {
    payer,
    payee,
    mint,
    depositUnits,
    settled: { cumulativeUnits, sequence, digest },
    lastPaymentId,
    openedSlot,
    expiresAtSeconds,
    closeRequestedAtSeconds: closeRequestedAt === 0 ? null : closeRequestedAt,
  };
}

export interface LedgerRpc {
  readonly rpcUrl: string;
  /** payment_ledger's program id (base58): the account's owner. */
  readonly programId: string;
  readonly fetch?: FetchLike;
  readonly timeoutMs?: number;
}

/** The channel's account at `confirmed`; null when there is none (never opened, or closed and refunded). */
export async function readChannelAccount(rpc: LedgerRpc, channel: string): Promise<ChannelAccount | null> {
  if (base58Decode(channel)?.length !== 32) return null;
  const fetchFn = rpc.fetch ?? (globalThis.fetch as FetchLike);
  const response = await fetchFn(rpc.rpcUrl, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "getAccountInfo",
      params: [channel, { encoding: "base64", commitment: "confirmed" }],
    }),
    signal: AbortSignal.timeout(rpc.timeoutMs ?? 10_000),
  });
  if (!response.ok) throw new ChannelAccountError(`ledger RPC answered HTTP ${response.status}`);
  const body = (await response.json()) as { result?: { value: { owner: string; data: [string, string] } | null }; error?: unknown };
  if (body.result === undefined) throw new ChannelAccountError(`ledger RPC error: ${JSON.stringify(body.error)}`);
  const value = body.result.value;
  if (value === null) return null;
  if (value.owner !== rpc.programId) return null;
  return decodeChannel(Buffer.from(value.data[0], "base64"));
}
