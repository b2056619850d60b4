/**
 * The payment_ledger IDL, generated from the program source by `npm run build:idl` and checked in.
 * Every encoder and decoder in this folder is driven by it; nothing here packs bytes by hand.
 */
import type { Idl } from "@coral-xyz/anchor";
import { PublicKey } from "@solana/web3.js";
import idlJson from "../idl/payment_ledger.json" with { type: "json" };

export const PAYMENT_LEDGER_IDL: Idl = idlJson as Idl;

export const PAYMENT_LEDGER_PROGRAM_ID: PublicKey = new PublicKey(PAYMENT_LEDGER_IDL.address);
