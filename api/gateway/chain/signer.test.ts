import { randomBytes } from "node:crypto";
import { Keypair } from "@solana/web3.js";
import nacl from "tweetnacl";
import { describe, expect, it } from "vitest";
import { keypairSigner, verifySignature } from "./signer.js";

describe("ed25519 through node:crypto's JWK import", () => {
  it("signs exactly as the reference implementation, and verifies only the right signature", async () => {
    for (let i = 0; i < 200; i += 1) {
      const keypair = Keypair.generate();
      const message = randomBytes(1 + (i % 300));
      const signature = await keypairSigner(keypair).sign(message);
      expect(Buffer.from(signature).equals(Buffer.from(nacl.sign.detached(message, keypair.secretKey)))).toBe(true);
      expect(verifySignature(keypair.publicKey.toBase58(), message, signature)).toBe(true);
      const flipped = Buffer.from(signature);
      flipped[i % 64]! ^= 1 << (i % 8);
      expect(verifySignature(keypair.publicKey.toBase58(), message, flipped)).toBe(false);
      expect(verifySignature(Keypair.generate().publicKey.toBase58(), message, signature)).toBe(false);
    }
  });

  it("refuses a secret key whose seed does not derive its public half", () => {
    const a = Keypair.generate();
    const b = Keypair.generate();
    const mixed = { secretKey: Buffer.concat([a.secretKey.subarray(0, 32), b.secretKey.subarray(32)]), publicKey: b.publicKey };
    expect(() => keypairSigner(mixed)).toThrow("does not match");
  });
});
