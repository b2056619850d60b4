/**
 * A program deployed at another address than the IDL's: the configuration takes any PROGRAM_ID
 * (whether a program is there is the preflight's check), the indexer keeps the configured
 * program's transactions and ignores the built-in one's, and the gateway's derived addresses and
 * refusal reading follow the configured id. The binding's own side is
 * programs/payment_ledger/ts/program-id.test.ts.
 */
import anchor, { BorshCoder } from "@coral-xyz/anchor";
import { Keypair, type PublicKey } from "@solana/web3.js";
import bs58 from "bs58";
import { describe, expect, it } from "vitest";
import { ledgerRefusal } from "../api/gateway/chain/ledger-errors.js";
import { sessionAccounts } from "../api/gateway/channels/deps.js";
import { invocationAddress, invocationOf } from "../api/gateway/invocations/address.js";
import { indexerConfig } from "../indexer/config/index.js";
import { decodeRawTransaction } from "../indexer/decode/transaction.js";
import type { RawTransaction } from "../indexer/sources/source.js";
import {
  channelPda,
  EVENT_IX_TAG,
  eventAuthorityPda,
  invocationPda,
  ledgerErrorCode,
  PAYMENT_LEDGER_IDL,
  PAYMENT_LEDGER_PROGRAM_ID,
} from "../programs/payment_ledger/ts/index.js";

const { BN } = anchor;
const other = Keypair.generate().publicKey;
const payer = Keypair.generate().publicKey;
const payee = Keypair.generate().publicKey;
const mint = Keypair.generate().publicKey;

const coder = new BorshCoder(PAYMENT_LEDGER_IDL);
const discriminator = PAYMENT_LEDGER_IDL.events!.find((event) => event.name === "PaymentRecorded")!.discriminator;
const payment = Buffer.concat([
  Buffer.from(discriminator),
  coder.types.encode("PaymentRecorded", {
    payer,
    payee,
    payment_id: new BN(1),
    amount: new BN(10),
    mint,
    protocol: { X402: {} },
    rail: { Stablecoin: {} },
    endpoint_hash: Array.from({ length: 32 }, (_, i) => i),
    atomic: true,
    settlement_reference: null,
    parent: null,
    recorded_at: new BN(1_767_225_600),
    slot: new BN(42),
  }),
]);

/** A transaction of the program at `program`, emitting one event through its event authority. */
function transactionOf(program: PublicKey): RawTransaction {
  const id = program.toBase58();
  return {
    signature: `sig-${id}`,
    slot: 42n,
    blockTime: 1_767_225_600,
    indexInBlock: null,
    commitment: "confirmed",
    err: null,
    accountKeys: [payer.toBase58(), id, eventAuthorityPda(program).address.toBase58()],
    instructions: [{ programIdIndex: 1, accounts: [0], data: new Uint8Array([1]), stackHeight: 1 }],
    innerInstructions: [
      {
        index: 0,
        instructions: [{ programIdIndex: 1, accounts: [2], data: new Uint8Array([...EVENT_IX_TAG, ...payment]), stackHeight: 2 }],
      },
    ],
    logs: [`Program ${id} invoke [1]`, `Program ${id} success`],
    preTokenBalances: [],
    postTokenBalances: [],
  };
}

describe("a program at another address", () => {
  it("the indexer's configuration takes any PROGRAM_ID and requires one", () => {
    const env = { DATABASE_URL: "postgres://apg@127.0.0.1:5432/apg", SOLANA_RPC_URL: "http://127.0.0.1:8899" };
    const loaded = indexerConfig({ ...env, PROGRAM_ID: other.toBase58() });
    expect(loaded.ok && loaded.config.programId.toBase58()).toBe(other.toBase58());
    expect(indexerConfig(env)).toEqual({ ok: false, problems: ["PROGRAM_ID: not set; expected a base58 address (32 bytes)"] });
  });

  it("the indexer keeps the configured program's transactions and ignores the built-in one's", () => {
    const ours = decodeRawTransaction(transactionOf(other), other);
    expect(ours.outcome).toBe("indexed");
    expect(ours.events.map((event) => event.name)).toEqual(["PaymentRecorded"]);
    expect(decodeRawTransaction(transactionOf(PAYMENT_LEDGER_PROGRAM_ID), other)).toMatchObject({ outcome: "foreign", events: [] });
    // An event instruction signed by the built-in program's event authority is not the configured program's.
    const forged = transactionOf(other);
    const keys = [...forged.accountKeys];
    keys[2] = eventAuthorityPda(PAYMENT_LEDGER_PROGRAM_ID).address.toBase58();
    expect(decodeRawTransaction({ ...forged, accountKeys: keys }, other).outcome).toBe("no_events");
  });

  it("the gateway derives channels and invocations in the configured program", () => {
    const channelId = Buffer.alloc(32, 7);
    const session = { payer: payer.toBase58(), payee: payee.toBase58(), mint: mint.toBase58(), channelId: channelId.toString("hex") };
    const accounts = sessionAccounts(session, other);
    expect(accounts.programId.toBase58()).toBe(other.toBase58());
    expect(accounts.channel.toBase58()).toBe(channelPda(payer, payee, channelId, other).address.toBase58());
    expect(accounts.channel.equals(channelPda(payer, payee, channelId, PAYMENT_LEDGER_PROGRAM_ID).address)).toBe(false);

    const parent = bs58.encode(Uint8Array.from({ length: 64 }, (_, i) => i + 3));
    const expected = invocationPda(bs58.decode(parent), payer, other).address.toBase58();
    expect(invocationAddress(parent, payer.toBase58(), other)).toBe(expected);
    expect(invocationOf(parent, payer.toBase58(), other)).toBe(expected);
    expect(invocationOf(parent, payer.toBase58(), PAYMENT_LEDGER_PROGRAM_ID)).not.toBe(expected);
  });

  it("the gateway names a refusal of the configured program only", () => {
    const code = ledgerErrorCode("DuplicatePaymentId");
    const err = { InstructionError: [0, { Custom: code }] };
    expect(ledgerRefusal({ kind: "included", err, programIds: [other] }, other)?.name).toBe("DuplicatePaymentId");
    expect(ledgerRefusal({ kind: "included", err, programIds: [PAYMENT_LEDGER_PROGRAM_ID] }, other)).toBeNull();
    const logs = [`Program ${other.toBase58()} failed: custom program error: 0x${code.toString(16)}`];
    expect(ledgerRefusal({ kind: "rejected", error: { logs } }, other)?.name).toBe("DuplicatePaymentId");
    expect(ledgerRefusal({ kind: "rejected", error: { logs } }, PAYMENT_LEDGER_PROGRAM_ID)).toBeNull();
  });
});
