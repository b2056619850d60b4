import { Keypair, PublicKey } from "@solana/web3.js";
import { describe, expect, it } from "vitest";
import { InvalidAddressError, InvalidAmountUnitsError } from "./errors.js";
import { checkAmountUnits, MEMO_PROGRAM_ID, parseAddress, walletOperationMemo } from "./ledger.js";

describe("parseAddress", () => {
  it("accepts on-curve keys and program-derived (off-curve) owners", () => {
    const key = Keypair.generate().publicKey;
    expect(parseAddress(key.toBase58()).equals(key)).toBe(true);
    const [pda] = PublicKey.findProgramAddressSync([Buffer.from("vault")], key);
    expect(parseAddress(pda.toBase58()).equals(pda)).toBe(true);
  });

  it.each([
    ["empty", ""],
    ["not base58 (0, O, I, l)", "0OIl0OIl0OIl0OIl0OIl0OIl0OIl0OIl"],
    ["too short", "abc"],
    ["too long for 32 bytes", "1".repeat(45)],
    ["the all-zero address", "11111111111111111111111111111111"],
    ["with whitespace", ` ${Keypair.generate().publicKey.toBase58()}`],
  ])("refuses %s", (_, text) => {
    expect(() => parseAddress(text)).toThrow(InvalidAddressError);
  });
});

describe("checkAmountUnits", () => {
  it("accepts 1 unit up to u64::MAX and refuses 0, negatives and more than a u64", () => {
    expect(() => checkAmountUnits(1n)).not.toThrow();
    expect(() => checkAmountUnits((1n << 64n) - 1n)).not.toThrow();
    for (const bad of [0n, -1n, 1n << 64n]) expect(() => checkAmountUnits(bad)).toThrow(InvalidAmountUnitsError);
  });
});

describe("walletOperationMemo", () => {
  it("names the operation in a memo v2 instruction with no accounts, so two operations never share a message", () => {
    const memo = walletOperationMemo("42");
    expect(memo.programId.equals(MEMO_PROGRAM_ID)).toBe(true);
    expect(MEMO_PROGRAM_ID.toBase58()).toBe("MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr");
    expect(memo.keys).toEqual([]);
    expect(memo.data.toString("utf8")).toBe("apg:wallet-operation:42");
    expect(walletOperationMemo("43").data.equals(memo.data)).toBe(false);
  });

  it.each(["", "abc", "1 2", "-1", "1".repeat(21)])("refuses %j, which is not a row id", (id) => {
    expect(() => walletOperationMemo(id)).toThrow(/not a row id/);
  });
});
