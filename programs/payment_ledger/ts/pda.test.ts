import { PublicKey } from "@solana/web3.js";
import bs58 from "bs58";
import { describe, expect, it } from "vitest";
import { PAYMENT_LEDGER_PROGRAM_ID } from "./idl.js";
import { channelPda, configPda, escrowPda, eventAuthorityPda, invocationPda, payerStatePda } from "./pda.js";

// Vectors computed independently of web3.js (sha256 over seeds, bump, program id and
// "ProgramDerivedAddress", with an ed25519 on-curve check) for program
// 2Mxhjn4faicAv1UyhyFyiBnVbgahkgxmjCVpEkGffD3t.
const payer = new PublicKey(Uint8Array.from({ length: 32 }, (_, i) => i + 1));
const subAgent = new PublicKey(Uint8Array.from({ length: 32 }, (_, i) => i + 101));
const parentSignature = Uint8Array.from({ length: 64 }, (_, i) => i);

describe("payment_ledger PDAs", () => {
  it("the config lives at the known address", () => {
    const pda = configPda(PAYMENT_LEDGER_PROGRAM_ID);
    expect(pda.address.toBase58()).toBe("5JCsztgPZNh3pnAat9VKApRayt19TCia1256knDVeqGY");
    expect(pda.bump).toBe(254);
  });

  it("the event authority lives at the known address", () => {
    const pda = eventAuthorityPda(PAYMENT_LEDGER_PROGRAM_ID);
    expect(pda.address.toBase58()).toBe("3h8QYRzPXZjcVtD81g7jcAvRTaXoCpsy1CqcS5FNvAWJ");
    expect(pda.bump).toBe(252);
  });

  it("each payer has its own payer state", () => {
    expect(payer.toBase58()).toBe("4wBqpZM9xaSheZzJSMawUKKwhdpChKbZ5eu5ky4Vigw");
    const pda = payerStatePda(payer, PAYMENT_LEDGER_PROGRAM_ID);
    expect(pda.address.toBase58()).toBe("Hs2bNrck8MoGFN5pF3XWn2iGBteub2sij4XoqrbmkZKU");
    expect(pda.bump).toBe(255);
    expect(payerStatePda(subAgent, PAYMENT_LEDGER_PROGRAM_ID).address.equals(pda.address)).toBe(false);
  });

  it("an invocation is keyed by both halves of the parent signature and the sub-agent", () => {
    expect(bs58.encode(parentSignature)).toBe("1GMkH3brNXiNNs1tiFZHu4yZSRrzJwxi5wB9bHFtMinfCXNnR1adh8Vo8NTheK4evneedH4qmvjeqcBBNAefgS");
    const pda = invocationPda(parentSignature, subAgent, PAYMENT_LEDGER_PROGRAM_ID);
    expect(pda.address.toBase58()).toBe("51fvP4SiJ7PpWNQpiXAjVY3SZthZko3myfVNuw1jQBph");
    expect(pda.bump).toBe(255);

    const otherHalf = parentSignature.slice();
    otherHalf[63] = 255;
    expect(invocationPda(otherHalf, subAgent, PAYMENT_LEDGER_PROGRAM_ID).address.equals(pda.address)).toBe(false);
    expect(invocationPda(parentSignature, payer, PAYMENT_LEDGER_PROGRAM_ID).address.equals(pda.address)).toBe(false);
  });

  it("an invocation refuses a parent signature that is not 64 bytes", () => {
    expect(() => invocationPda(new Uint8Array(63), subAgent, PAYMENT_LEDGER_PROGRAM_ID)).toThrow(RangeError);
  });
});

describe("payment channel PDAs", () => {
  // The same vectors are asserted by programs/runtime/tests/payment_channels.rs.
  const payee = new PublicKey(Uint8Array.from({ length: 32 }, (_, i) => i + 101));
  const channelId = Uint8Array.from({ length: 32 }, (_, i) => i);

  it("a channel is keyed by payer, payee and the payer's channel id, its escrow by the channel", () => {
    const channel = channelPda(payer, payee, channelId, PAYMENT_LEDGER_PROGRAM_ID).address;
    expect(channel.toBase58()).toBe("GQPS7cvwQFxY8TngBsvkxiKkG4KRuExiTV1aKsfMAasC");
    expect(escrowPda(channel, PAYMENT_LEDGER_PROGRAM_ID).address.toBase58()).toBe("koiXHFy1mNPYCuzbNxiexWdzmWCkoR9nd1fzq5yLomr");

    const otherId = channelId.slice();
    otherId[31] = 0xff;
    expect(channelPda(payer, payee, otherId, PAYMENT_LEDGER_PROGRAM_ID).address.equals(channel)).toBe(false);
    expect(channelPda(payee, payer, channelId, PAYMENT_LEDGER_PROGRAM_ID).address.equals(channel)).toBe(false);
  });

  it("a channel id must be 32 bytes", () => {
    expect(() => channelPda(payer, payee, new Uint8Array(31), PAYMENT_LEDGER_PROGRAM_ID)).toThrow(RangeError);
  });
});
