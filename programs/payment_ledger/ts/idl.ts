/**
 * The payment_ledger IDL, generated from the program source by `npm run build:idl` and checked in.
 * Every encoder and decoder in this folder is driven by it; nothing here packs bytes by hand.
 */
import type { Idl } from "@coral-xyz/anchor";
import { PublicKey } from "@solana/web3.js";
import idlJson from "../idl/payment_ledger.json" with { type: "json" };

export const PAYMENT_LEDGER_IDL: Idl = idlJson as Idl;

/**
 * The address the program source declares (`declare_id!`) and the IDL names: the local ledger's
 * and the tests' program. Services take the address from configuration (PROGRAM_ID) and pass it
 * to every builder, PDA and decoder here, so a program deployed elsewhere needs no rebuild of them.
 */
export const PAYMENT_LEDGER_PROGRAM_ID: PublicKey = new PublicKey(PAYMENT_LEDGER_IDL.address);
