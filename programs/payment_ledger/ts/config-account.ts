/**
 * The `Config` account (programs/payment_ledger/src/state.rs, PDA `["config"]`): the authority
 * that signs every record, the settlement mint and its decimals, and the treasury. What an
 * operator's preflight and `init-cluster` compare with their configuration. Decoded by the IDL's
 * coder; the discriminator is checked.
 */
import { BorshCoder } from "@coral-xyz/anchor";
import type { PublicKey } from "@solana/web3.js";
import { PAYMENT_LEDGER_IDL } from "./idl.js";

const coder = new BorshCoder(PAYMENT_LEDGER_IDL);

export interface ConfigState {
  readonly authority: PublicKey;
  readonly settlementMint: PublicKey;
  readonly treasury: PublicKey;
  readonly decimals: number;
}

export function decodeConfigAccount(data: Uint8Array): ConfigState {
  const raw = coder.accounts.decode("Config", Buffer.from(data)) as {
    authority: PublicKey;
    settlement_mint: PublicKey;
    treasury: PublicKey;
    decimals: number;
  };
  return { authority: raw.authority, settlementMint: raw.settlement_mint, treasury: raw.treasury, decimals: raw.decimals };
}
