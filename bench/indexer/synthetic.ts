/**
 * Synthetic PaymentRecorded transactions for the indexer benches, encoded by the IDL coder exactly
 * as the program emits them (emit_cpi! inner instruction): 100 payers, 10 endpoints, a third MPP,
 * one in ten under an invocation; four per slot, fifty per second of block time. A bench that needs
 * more payers (bench/api/queries.ts) passes its own list: payment i is paid by payers[i % length].
 */
import { randomBytes } from "node:crypto";
import anchor, { BorshCoder } from "@coral-xyz/anchor";
import { Keypair, type PublicKey } from "@solana/web3.js";
import bs58 from "bs58";
import type { RawTransaction } from "../../indexer/sources/source.js";
import { EVENT_IX_TAG, eventAuthorityPda, PAYMENT_LEDGER_IDL, PAYMENT_LEDGER_PROGRAM_ID } from "../../programs/payment_ledger/ts/index.js";

const { BN } = anchor;
const coder = new BorshCoder(PAYMENT_LEDGER_IDL);
const discriminator = PAYMENT_LEDGER_IDL.events!.find((e) => e.name === "PaymentRecorded")!.discriminator;
const programId = PAYMENT_LEDGER_PROGRAM_ID.toBase58();
const authority = eventAuthorityPda(PAYMENT_LEDGER_PROGRAM_ID).address.toBase58();
const agents = syntheticPayers(100);
const payee = Keypair.generate().publicKey;
const mint = Keypair.generate().publicKey;
const invocation = Keypair.generate().publicKey;
/** The endpoint hashes payments cycle through (payment i: endpoints[i % 10]), as bytes. */
export const SYNTHETIC_ENDPOINTS: readonly number[][] = Array.from({ length: 10 }, (_, i) =>
  Array.from({ length: 32 }, (_, j) => (i * 31 + j) & 0xff),
);
/** Block time of payment 0, in seconds; payment i is at SYNTHETIC_BASE_TIME + floor(i / 50). */
export const SYNTHETIC_BASE_TIME = 1_767_225_600;
const baseTime = SYNTHETIC_BASE_TIME;

/** n fresh payer wallets. */
export function syntheticPayers(n: number): PublicKey[] {
  return Array.from({ length: n }, () => Keypair.generate().publicKey);
}

export function syntheticTransaction(i: number, payers: readonly PublicKey[] = agents): RawTransaction {
  const body = coder.types.encode("PaymentRecorded", {
    payer: payers[i % payers.length],
    payee,
    payment_id: new BN(i + 1),
    amount: new BN(1_000 + (i % 997)),
    mint,
    protocol: i % 3 === 0 ? { Mpp: {} } : { X402: {} },
    rail: { Stablecoin: {} },
    endpoint_hash: SYNTHETIC_ENDPOINTS[i % SYNTHETIC_ENDPOINTS.length],
    atomic: true,
    settlement_reference: null,
    parent:
      i % 10 === 0 ? { invocation, parent_signature: Array.from(randomBytes(64)), budget: new BN(1_000_000_000), spent: new BN(1) } : null,
    recorded_at: new BN(baseTime + Math.floor(i / 50)),
    slot: new BN(1 + Math.floor(i / 4)),
  });
  const data = new Uint8Array([...EVENT_IX_TAG, ...discriminator, ...body]);
  return {
    signature: bs58.encode(randomBytes(64)),
    slot: BigInt(1 + Math.floor(i / 4)),
    blockTime: baseTime + Math.floor(i / 50),
    indexInBlock: i % 4,
    commitment: "confirmed",
    err: null,
    accountKeys: [agents[0]!.toBase58(), programId, authority],
    instructions: [{ programIdIndex: 1, accounts: [0], data: new Uint8Array([1]), stackHeight: 1 }],
    innerInstructions: [{ index: 0, instructions: [{ programIdIndex: 1, accounts: [2], data, stackHeight: 2 }] }],
    logs: null,
    preTokenBalances: [],
    postTokenBalances: [],
  };
}
