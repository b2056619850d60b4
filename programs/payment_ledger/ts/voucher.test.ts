import { Ed25519Program, Keypair, PublicKey } from "@solana/web3.js";
import { describe, expect, it } from "vitest";
import { endpointHash } from "./endpoint-hash.js";
import { PAYMENT_LEDGER_PROGRAM_ID } from "./idl.js";
import { channelPda } from "./pda.js";
import {
  advanceVoucher,
  initialChargesDigest,
  nextChargesDigest,
  signVoucher,
  VOUCHER_MESSAGE_BYTES,
  type Voucher,
  verifyVoucherSignature,
  voucherMessage,
  voucherSignatureInstruction,
} from "./voucher.js";

// The same vectors are asserted by programs/runtime/tests/payment_channels.rs: the program
// checks exactly the bytes this module builds and signs.
const payer = new PublicKey(Uint8Array.from({ length: 32 }, (_, i) => i + 1));
const payee = new PublicKey(Uint8Array.from({ length: 32 }, (_, i) => i + 101));
const channel = channelPda(
  payer,
  payee,
  Uint8Array.from({ length: 32 }, (_, i) => i),
  PAYMENT_LEDGER_PROGRAM_ID,
).address;
const charges = [
  { paymentId: 1n, amountUnits: 100n, endpointHash: endpointHash("api.example.com/v1/search") },
  { paymentId: 5n, amountUnits: 2_500n, endpointHash: endpointHash("api.example.com/v1/quote") },
];
const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString("hex");

describe("channel vouchers", () => {
  const start: Voucher = { cumulativeUnits: 0n, sequence: 0n, chargesDigest: initialChargesDigest(channel, 42n) };
  const voucher = advanceVoucher(start, charges);
  const message = voucherMessage(channel, voucher);

  it("the digest chain and the message are the program's, byte for byte", () => {
    expect(hex(start.chargesDigest)).toBe("23c0674148b74b2e83c411ae6ab19fa1b19feff7d3a6a2d0b0c3b453410aad61");
    expect(voucher.cumulativeUnits).toBe(2_600n);
    expect(voucher.sequence).toBe(2n);
    expect(hex(voucher.chargesDigest)).toBe("729dc6c3e9ab00b845a5dc222951781f88c6fa0de9501e3be73b6dbabff7c881");
    expect(message.length).toBe(VOUCHER_MESSAGE_BYTES);
    expect(hex(message)).toBe(
      "7061796d656e745f6c65646765723a6368616e6e656c2d766f75636865723a7631" +
        "e4dd070f83dda6436bc78278448758e3b527c73715872978e15863de6e2469eb" +
        "280a000000000000" +
        "0200000000000000" +
        "729dc6c3e9ab00b845a5dc222951781f88c6fa0de9501e3be73b6dbabff7c881",
    );
    expect(Buffer.from(message.subarray(0, 33)).toString("ascii")).toBe("payment_ledger:channel-voucher:v1");
  });

  it("every charge field and the open slot change the digest", () => {
    const digest = nextChargesDigest(start.chargesDigest, charges[0]!);
    for (const changed of [
      { ...charges[0]!, paymentId: 2n },
      { ...charges[0]!, amountUnits: 101n },
      { ...charges[0]!, endpointHash: endpointHash("api.example.com/v1/other") },
    ]) {
      expect(hex(nextChargesDigest(start.chargesDigest, changed))).not.toBe(hex(digest));
    }
    expect(hex(initialChargesDigest(channel, 43n))).not.toBe(hex(start.chargesDigest));
  });

  it("advancing one charge at a time reaches the same voucher as advancing all at once", () => {
    const stepwise = advanceVoucher(advanceVoucher(start, charges.slice(0, 1)), charges.slice(1));
    expect(stepwise.cumulativeUnits).toBe(voucher.cumulativeUnits);
    expect(hex(stepwise.chargesDigest)).toBe(hex(voucher.chargesDigest));
    expect(() => advanceVoucher(start, [{ ...charges[0]!, amountUnits: 0n }])).toThrow(RangeError);
  });

  it("a payer's signature is ed25519 over the message and verifies only for its key and bytes", () => {
    const signer = Keypair.fromSeed(new Uint8Array(32).fill(7));
    expect(signer.publicKey.toBase58()).toBe("GmaDrppBC7P5ARKV8g3djiwP89vz1jLK23V2GBjuAEGB");
    const signature = signVoucher(signer, message);
    expect(hex(signature)).toBe(
      "2b6e480b84e1e5223ad53953ec4db6ac37913092889096ccbdd7020a4ff9b9b134d4f3ade08ff72c6dedc4727ef0fd13e01bab666ec8308e455b07611f25e006",
    );
    expect(verifyVoucherSignature(signer.publicKey, message, signature)).toBe(true);
    expect(verifyVoucherSignature(Keypair.generate().publicKey, message, signature)).toBe(false);
    const tampered = message.slice();
    tampered[70] = tampered[70]! ^ 1;
    expect(verifyVoucherSignature(signer.publicKey, tampered, signature)).toBe(false);
    expect(verifyVoucherSignature(signer.publicKey, message, signature.subarray(0, 63))).toBe(false);
  });

  it("the signature instruction carries key, signature and message in its own data", () => {
    const signer = Keypair.fromSeed(new Uint8Array(32).fill(7));
    const signature = signVoucher(signer, message);
    const instruction = voucherSignatureInstruction(signer.publicKey, message, signature);
    expect(instruction.programId.equals(Ed25519Program.programId)).toBe(true);
    const data = Buffer.from(instruction.data);
    expect(data[0]).toBe(1); // one signature
    const offsets = [2, 4, 6, 8, 10, 12, 14].map((at) => data.readUInt16LE(at));
    const [signatureOffset, signatureIx, keyOffset, keyIx, messageOffset, messageSize, messageIx] = offsets as [
      number,
      number,
      number,
      number,
      number,
      number,
      number,
    ];
    expect([signatureIx, keyIx, messageIx]).toEqual([0xffff, 0xffff, 0xffff]);
    expect(data.subarray(keyOffset, keyOffset + 32).equals(signer.publicKey.toBuffer())).toBe(true);
    expect(hex(data.subarray(signatureOffset, signatureOffset + 64))).toBe(hex(signature));
    expect(hex(data.subarray(messageOffset, messageOffset + messageSize))).toBe(hex(message));
    expect(() => voucherSignatureInstruction(signer.publicKey, message.subarray(1), signature)).toThrow(RangeError);
  });
});
