/**
 * The `Channel` account (programs/payment_ledger/src/state.rs) as TypeScript reads it: what a payer
 * needs to sign its next voucher (opened slot, settled state) and a payee to accept it (deposit,
 * expiry, close request). Decoded by the IDL's coder; the discriminator is checked.
 */
import { BorshCoder } from "@coral-xyz/anchor";
import { PublicKey } from "@solana/web3.js";
import { fromAnchorEnum, type Protocol, PROTOCOLS } from "./enums.js";
import { PAYMENT_LEDGER_IDL } from "./idl.js";
import type { Voucher } from "./voucher.js";

const coder = new BorshCoder(PAYMENT_LEDGER_IDL);

export interface ChannelState {
  readonly payer: PublicKey;
  readonly payee: PublicKey;
  readonly mint: PublicKey;
  readonly channelId: Uint8Array;
  readonly rentPayer: PublicKey;
  readonly invocation: PublicKey | null;
  readonly protocol: Protocol;
  readonly depositUnits: bigint;
  /** The highest settled voucher: what the payee has been paid, the charges it covered. */
  readonly settled: Voucher;
  readonly lastPaymentId: bigint;
  readonly openedAtSeconds: number;
  readonly openedSlot: bigint;
  readonly expiresAtSeconds: number;
  readonly withdrawDelaySeconds: number;
  /** Null while open. */
  readonly closeRequestedAtSeconds: number | null;
}

type Raw = Record<string, unknown>;

const big = (raw: Raw, name: string): bigint => BigInt(String(raw[name]));
const key = (raw: Raw, name: string): PublicKey => {
  const value = raw[name];
  if (!(value instanceof PublicKey)) throw new TypeError(`channel field ${name} is not a public key`);
  return value;
};

/** Decodes a `Channel` account's data; throws for data of any other account. */
export function decodeChannelAccount(data: Uint8Array): ChannelState {
  const raw = coder.accounts.decode("Channel", Buffer.from(data)) as Raw;
  const invocation = raw.invocation;
  const closeRequestedAt = Number(big(raw, "close_requested_at"));
  return {
    payer: key(raw, "payer"),
    payee: key(raw, "payee"),
    mint: key(raw, "mint"),
    channelId: Uint8Array.from(raw.channel_id as number[]),
    rentPayer: key(raw, "rent_payer"),
    invocation: invocation === null ? null : key(raw, "invocation"),
    protocol: fromAnchorEnum(raw.protocol, PROTOCOLS, "protocol"),
    depositUnits: big(raw, "deposit"),
    settled: {
      cumulativeUnits: big(raw, "settled"),
      sequence: big(raw, "sequence"),
      chargesDigest: Uint8Array.from(raw.charges_digest as number[]),
    },
    lastPaymentId: big(raw, "last_payment_id"),
    openedAtSeconds: Number(big(raw, "opened_at")),
    openedSlot: big(raw, "opened_slot"),
    expiresAtSeconds: Number(big(raw, "expires_at")),
    withdrawDelaySeconds: Number(big(raw, "withdraw_delay")),
    closeRequestedAtSeconds: closeRequestedAt === 0 ? null : closeRequestedAt,
  };
}
