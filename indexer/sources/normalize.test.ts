/**
 * Both sources put a v0 transaction's keys in the runtime's order (static, loaded writable, loaded
 * read-only) and count the looked-up keys they were not told about. The payee-side suite
 * (test/indexer/payee-transactions.test.ts) runs the same over real lookup-table transactions.
 */
import { Keypair, MessageV0, type VersionedTransactionResponse } from "@solana/web3.js";
import type { SubscribeUpdateTransactionInfo } from "@triton-one/yellowstone-grpc";
import bs58 from "bs58";
import { describe, expect, it } from "vitest";
import { toRawTransaction } from "./rpc.js";
import { unresolvedKeyCount } from "./source.js";
import { normalizeTransaction } from "./yellowstone.js";

const [payer, program, table, loadedW, loadedR1, loadedR2] = Array.from({ length: 6 }, () => Keypair.generate().publicKey);
const lookups = [{ accountKey: table!, writableIndexes: [3], readonlyIndexes: [0, 7] }];

function rpcResponse(loaded: { writable: (typeof loadedW)[]; readonly: (typeof loadedW)[] } | undefined): VersionedTransactionResponse {
  const message = new MessageV0({
    header: { numRequiredSignatures: 1, numReadonlySignedAccounts: 0, numReadonlyUnsignedAccounts: 1 },
    staticAccountKeys: [payer!, program!],
    recentBlockhash: bs58.encode(new Uint8Array(32)),
    compiledInstructions: [{ programIdIndex: 1, accountKeyIndexes: [0, 2, 3, 4], data: new Uint8Array([1]) }],
    addressTableLookups: lookups,
  });
  return {
    slot: 9,
    blockTime: null,
    version: 0,
    transaction: { message, signatures: ["sig"] },
    meta: {
      err: null,
      fee: 5_000,
      preBalances: [],
      postBalances: [],
      innerInstructions: [],
      logMessages: [],
      preTokenBalances: [],
      postTokenBalances: [],
      ...(loaded === undefined ? {} : { loadedAddresses: loaded }),
    },
  } as VersionedTransactionResponse;
}

function grpcInfo(loaded: { writable: Uint8Array[]; readonly: Uint8Array[] }): SubscribeUpdateTransactionInfo {
  return {
    signature: new Uint8Array(64),
    isVote: false,
    index: "0",
    transaction: {
      signatures: [new Uint8Array(64)],
      message: {
        header: undefined,
        accountKeys: [payer!.toBytes(), program!.toBytes()],
        recentBlockhash: new Uint8Array(32),
        instructions: [],
        versioned: true,
        addressTableLookups: lookups.map((l) => ({
          accountKey: l.accountKey.toBytes(),
          writableIndexes: Uint8Array.from(l.writableIndexes),
          readonlyIndexes: Uint8Array.from(l.readonlyIndexes),
        })),
      },
    },
    meta: { loadedWritableAddresses: loaded.writable, loadedReadonlyAddresses: loaded.readonly, logMessagesNone: true },
  } as unknown as SubscribeUpdateTransactionInfo;
}

describe("keys of a transaction with address-table lookups", () => {
  it("JSON-RPC: static ++ loaded writable ++ loaded read-only; a missing loadedAddresses is counted", () => {
    const full = toRawTransaction(rpcResponse({ writable: [loadedW!], readonly: [loadedR1!, loadedR2!] }), "confirmed");
    expect(full.accountKeys).toEqual([payer, program, loadedW, loadedR1, loadedR2].map((k) => k!.toBase58()));
    expect(full.unresolvedKeys).toBe(0);
    expect(toRawTransaction(rpcResponse(undefined), "confirmed").unresolvedKeys).toBe(3);
    expect(toRawTransaction(rpcResponse({ writable: [loadedW!], readonly: [] }), "confirmed").unresolvedKeys).toBe(2);
  });

  it("Yellowstone: the meta's loaded addresses follow the static keys; missing ones are counted", () => {
    const bytes = (k: typeof payer) => k!.toBytes();
    const full = normalizeTransaction(grpcInfo({ writable: [bytes(loadedW)], readonly: [bytes(loadedR1), bytes(loadedR2)] }), 9n, null);
    expect(full.accountKeys).toEqual([payer, program, loadedW, loadedR1, loadedR2].map((k) => k!.toBase58()));
    expect(full.unresolvedKeys).toBe(0);
    expect(normalizeTransaction(grpcInfo({ writable: [], readonly: [] }), 9n, null).unresolvedKeys).toBe(3);
  });

  it("more loaded keys than the lookups name is as unknown as fewer", () => {
    expect(unresolvedKeyCount(2, 2)).toBe(0);
    expect(unresolvedKeyCount(3, 1)).toBe(2);
    expect(unresolvedKeyCount(1, 3)).toBe(1);
  });
});
