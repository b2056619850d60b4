/**
 * Random histories of the program's events for the indexer's equivalence tests: trees of payments
 * under invocations (opened in the same stream or not), several events per transaction, unknown
 * block times, settlement references verified and not. Encoded by the IDL coder, as the program
 * emits them, so no ledger is needed.
 */
import { randomBytes } from "node:crypto";
import anchor, { BorshCoder } from "@coral-xyz/anchor";
import { Keypair, type PublicKey } from "@solana/web3.js";
import bs58 from "bs58";
import type { SettlementTransfer } from "../../indexer/decode/settlement.js";
import type { RawTransaction } from "../../indexer/sources/source.js";
import { EVENT_IX_TAG, eventAuthorityPda, PAYMENT_LEDGER_IDL, PAYMENT_LEDGER_PROGRAM_ID } from "../../programs/payment_ledger/ts/index.js";
import { mulberry32 } from "../support/random.js";

const { BN } = anchor;
const coder = new BorshCoder(PAYMENT_LEDGER_IDL);
const programId = PAYMENT_LEDGER_PROGRAM_ID.toBase58();
const authority = eventAuthorityPda(PAYMENT_LEDGER_PROGRAM_ID).address.toBase58();

function eventData(name: string, fields: Record<string, unknown>): Uint8Array {
  const discriminator = PAYMENT_LEDGER_IDL.events!.find((event) => event.name === name)!.discriminator;
  return new Uint8Array([...EVENT_IX_TAG, ...discriminator, ...coder.types.encode(name, fields)]);
}

interface Invocation {
  readonly key: PublicKey;
  /** The only payer under the invocation: the program checks it. */
  readonly subAgent: PublicKey;
  readonly parentSignature: Uint8Array;
  readonly budget: number;
  spent: number;
  opened: boolean;
}

export interface History {
  readonly transactions: RawTransaction[];
  readonly settlements: SettlementTransfer[];
  readonly payments: number;
}

/** A random history: trees of payments under invocations, opened in the same stream or not. */
export function randomHistory(seed: number, size: number): History {
  const random = mulberry32(seed);
  const int = (n: number): number => Math.floor(random() * n);
  const agents = Array.from({ length: 6 }, () => Keypair.generate().publicKey);
  const mint = Keypair.generate().publicKey;
  const signatures: Uint8Array[] = [];
  const invocations: Invocation[] = [];
  const transactions: RawTransaction[] = [];
  const settlements: SettlementTransfer[] = [];
  let payments = 0;
  const baseTime = 1_767_225_600;
  for (let i = 0; i < size; i += 1) {
    const slot = 1 + Math.floor(i / 3);
    const signature = Uint8Array.from(randomBytes(64));
    const events: Uint8Array[] = [];
    // Sometimes open an invocation under an earlier payment (its parent).
    if (signatures.length > 0 && int(6) === 0) {
      const invocation: Invocation = {
        key: Keypair.generate().publicKey,
        subAgent: agents[int(agents.length)]!,
        parentSignature: signatures[int(signatures.length)]!,
        budget: 1_000_000,
        spent: 0,
        opened: int(4) !== 0,
      };
      invocations.push(invocation);
      if (invocation.opened) {
        events.push(
          eventData("InvocationOpened", {
            invocation: invocation.key,
            invoker: agents[int(agents.length)],
            sub_agent: invocation.subAgent,
            parent_signature: Array.from(invocation.parentSignature),
            budget: new BN(invocation.budget),
            opened_at: new BN(baseTime + i),
            slot: new BN(slot),
          }),
        );
      }
    }
    for (let k = 1 + int(3); k > 0; k -= 1) {
      const under = invocations.length > 0 && int(2) === 0 ? invocations[int(invocations.length)]! : null;
      const payer = under?.subAgent ?? agents[int(agents.length)]!;
      const payee = agents[int(agents.length)]!;
      const amount = 1 + int(5_000);
      if (under !== null) under.spent += amount;
      const settled = int(8) === 0 ? Uint8Array.from(randomBytes(64)) : null;
      if (settled !== null) {
        const verified = int(2) === 0;
        settlements.push({
          signature: bs58.encode(settled),
          slot: BigInt(slot),
          failed: false,
          transfer: {
            sourceOwner: payer.toBase58(),
            destinationOwner: payee.toBase58(),
            authority: payer.toBase58(),
            mint: mint.toBase58(),
            amountUnits: BigInt(verified ? amount : amount + 1),
            decimals: 6,
          },
        });
      }
      payments += 1;
      events.push(
        eventData("PaymentRecorded", {
          payer,
          payee,
          payment_id: new BN(i * 4 + k),
          amount: new BN(amount),
          mint,
          protocol: int(3) === 0 ? { Mpp: {} } : { X402: {} },
          rail: { Stablecoin: {} },
          endpoint_hash: Array.from({ length: 32 }, (_, j) => (int(4) * 31 + j) & 0xff),
          atomic: settled === null,
          settlement_reference: settled === null ? null : Array.from(settled),
          parent:
            under === null
              ? null
              : {
                  invocation: under.key,
                  parent_signature: Array.from(under.parentSignature),
                  budget: new BN(under.budget),
                  spent: new BN(under.spent),
                },
          recorded_at: new BN(baseTime + i * 7),
          slot: new BN(slot),
        }),
      );
    }
    signatures.push(signature);
    transactions.push({
      signature: bs58.encode(signature),
      slot: BigInt(slot),
      blockTime: int(5) === 0 ? null : baseTime + i * 7 + 1,
      indexInBlock: i % 3,
      commitment: "confirmed",
      err: null,
      accountKeys: [agents[0]!.toBase58(), programId, authority],
      instructions: [{ programIdIndex: 1, accounts: [0], data: new Uint8Array([1]), stackHeight: 1 }],
      innerInstructions: [{ index: 0, instructions: events.map((data) => ({ programIdIndex: 1, accounts: [2], data, stackHeight: 2 })) }],
      logs: null,
      preTokenBalances: [],
      postTokenBalances: [],
    });
  }
  return { transactions, settlements, payments };
}
