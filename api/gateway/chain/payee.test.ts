import { randomBytes } from "node:crypto";
import { Keypair, PublicKey } from "@solana/web3.js";
import bs58 from "bs58";
import { describe, expect, it } from "vitest";
import { payeeRefusal } from "./payee.js";

const MINT = Keypair.generate().publicKey.toBase58();

/** What rule 1's curve check must answer, decided afresh by web3.js. */
function expected(address: string): string | null {
  return PublicKey.isOnCurve(bs58.decode(address)) ? null : "payee_off_curve";
}

describe("checkPayee's curve check, remembered per address", () => {
  it("answers as web3.js's isOnCurve for random addresses, asked again, and after the memo was emptied", () => {
    // Random 32-byte strings: about half decode to curve points, half do not (as PDAs).
    const addresses = Array.from({ length: 10_100 }, () => bs58.encode(randomBytes(32)));
    const offCurve = addresses.filter((a) => expected(a) !== null).length;
    expect(offCurve).toBeGreaterThan(3_000);
    expect(offCurve).toBeLessThan(7_000);
    // The first pass fills the memo past its size (it is emptied once), the second reads it.
    for (const pass of [1, 2]) {
      for (const address of addresses.slice(0, pass === 1 ? addresses.length : 500).concat(addresses.slice(-500))) {
        expect(payeeRefusal(address, [MINT])?.reason ?? null, `${address}, pass ${pass}`).toBe(expected(address));
      }
    }
  });

  it("still refuses the mint and programs before the curve check", () => {
    const mint = Keypair.generate().publicKey.toBase58();
    expect(payeeRefusal(mint, [MINT])).toBeNull();
    expect(payeeRefusal(mint, [mint])?.reason).toBe("payee_is_mint");
    expect(payeeRefusal("11111111111111111111111111111111", [MINT])?.reason).toBe("payee_is_program");
  });
});
