/**
 * Program-derived addresses of payment_ledger. Seeds mirror `programs/payment_ledger/src/state.rs`
 * and Anchor's `#[event_cpi]`. Each takes the program's address (PROGRAM_ID) explicitly: a PDA of
 * the wrong program is a silent miss, so there is no default.
 */
import { PublicKey } from "@solana/web3.js";

export const SIGNATURE_BYTES = 64;

export interface Pda {
  readonly address: PublicKey;
  readonly bump: number;
}

function derive(seeds: readonly Uint8Array[], programId: PublicKey): Pda {
  const [address, bump] = PublicKey.findProgramAddressSync(
    seeds.map((seed) => Buffer.from(seed.buffer, seed.byteOffset, seed.byteLength)),
    programId,
  );
  return { address, bump };
}

const utf8 = (text: string): Uint8Array => new TextEncoder().encode(text);

/** The service configuration, one per deployment: `["config"]`. */
export function configPda(programId: PublicKey): Pda {
  return derive([utf8("config")], programId);
}

/** One per agent wallet, holding its payment-id replay window: `["payer", payer]`. */
export function payerStatePda(payer: PublicKey, programId: PublicKey): Pda {
  return derive([utf8("payer"), payer.toBytes()], programId);
}

/**
 * One per `agents.invoke`: `["invocation", sig[0..32], sig[32..64], subAgent]`. A seed is at most
 * 32 bytes, so the 64-byte parent signature is split in two.
 */
export function invocationPda(parentSignature: Uint8Array, subAgent: PublicKey, programId: PublicKey): Pda {
  if (parentSignature.length !== SIGNATURE_BYTES) {
    throw new RangeError(`parent signature must be ${SIGNATURE_BYTES} bytes, got ${parentSignature.length}`);
  }
  return derive([utf8("invocation"), parentSignature.subarray(0, 32), parentSignature.subarray(32, 64), subAgent.toBytes()], programId);
}

/** The signer `emit_cpi!` uses to call the program with an event: `["__event_authority"]`. */
export function eventAuthorityPda(programId: PublicKey): Pda {
  return derive([utf8("__event_authority")], programId);
}

export const CHANNEL_ID_BYTES = 32;

/**
 * A payment channel: `["channel", payer, payee, channelId]`. The 32-byte channel id is the payer's
 * salt (random); a payer must never reuse one with the same payee.
 */
export function channelPda(payer: PublicKey, payee: PublicKey, channelId: Uint8Array, programId: PublicKey): Pda {
  if (channelId.length !== CHANNEL_ID_BYTES) {
    throw new RangeError(`channel id must be ${CHANNEL_ID_BYTES} bytes, got ${channelId.length}`);
  }
  return derive([utf8("channel"), payer.toBytes(), payee.toBytes(), channelId], programId);
}

/** The channel's escrow token account, owned by the channel: `["escrow", channel]`. */
export function escrowPda(channel: PublicKey, programId: PublicKey): Pda {
  return derive([utf8("escrow"), channel.toBytes()], programId);
}
