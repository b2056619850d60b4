import { createCipheriv, randomBytes, sign } from "node:crypto";
import nacl from "tweetnacl";
import { Keypair } from "@solana/web3.js";
import { describe, expect, it } from "vitest";
import { WalletKeyError } from "../chain/errors.js";
import { generateWalletEncryptionKey, Keystore, keystoreFromEnv } from "./keystore.js";

const keystore = (version = "v1", key: Uint8Array = randomBytes(32)) => new Keystore({ currentVersion: version, currentKey: key });

function ownerOf(keypair: Keypair, agentId = "agent-a") {
  return { agentId, address: keypair.publicKey.toBase58() };
}

describe("keystore", () => {
  it("a sealed key opens to the same keypair, and the ciphertext is not the seed", () => {
    const store = keystore();
    const keypair = Keypair.generate();
    const sealed = store.seal(keypair, ownerOf(keypair));
    expect(sealed.keyVersion).toBe("v1");
    expect(sealed.ciphertext).toHaveLength(48);
    expect(sealed.ciphertext.includes(Buffer.from(keypair.secretKey.subarray(0, 32)))).toBe(false);
    const opened = store.open(sealed, ownerOf(keypair));
    expect(Buffer.from(opened.secretKey).equals(Buffer.from(keypair.secretKey))).toBe(true);
  });

  it("opens to the keypair web3.js derives from the seed, for any seed", () => {
    const store = keystore();
    for (let i = 0; i < 200; i += 1) {
      const keypair = Keypair.fromSeed(randomBytes(32));
      const opened = store.open(store.seal(keypair, ownerOf(keypair)), ownerOf(keypair));
      expect(Buffer.from(opened.secretKey).equals(Buffer.from(keypair.secretKey))).toBe(true);
      expect(opened.publicKey.equals(keypair.publicKey)).toBe(true);
      // The checked key it carries is the seed's: its signatures are tweetnacl's for this keypair.
      const message = randomBytes(1 + (i % 64));
      expect(Buffer.from(sign(null, message, opened.signingKey)).equals(Buffer.from(nacl.sign.detached(message, keypair.secretKey)))).toBe(
        true,
      );
    }
  });

  it("an authentic ciphertext whose seed is not the address's key does not open", () => {
    const key = randomBytes(32);
    const store = keystore("v1", key);
    const owner = ownerOf(Keypair.generate());
    const nonce = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", key, nonce, { authTagLength: 16 });
    cipher.setAAD(Buffer.from(`apg.agent-wallet.v1\n${owner.agentId}\n${owner.address}`, "utf8"));
    const ciphertext = Buffer.concat([cipher.update(randomBytes(32)), cipher.final(), cipher.getAuthTag()]);
    expect(() => store.open({ ciphertext, nonce, keyVersion: "v1" }, owner)).toThrow(/does not match its address/);
    expect(() => store.open({ ciphertext, nonce, keyVersion: "v1" }, owner)).toThrow(WalletKeyError);
  });

  it("two seals of one key differ (fresh nonce each time)", () => {
    const store = keystore();
    const keypair = Keypair.generate();
    const a = store.seal(keypair, ownerOf(keypair));
    const b = store.seal(keypair, ownerOf(keypair));
    expect(a.nonce.equals(b.nonce)).toBe(false);
    expect(a.ciphertext.equals(b.ciphertext)).toBe(false);
  });

  it("a wrong key does not open it", () => {
    const keypair = Keypair.generate();
    const sealed = keystore("v1").seal(keypair, ownerOf(keypair));
    expect(() => keystore("v1").open(sealed, ownerOf(keypair))).toThrow(WalletKeyError);
  });

  it("a ciphertext moved to another agent does not open", () => {
    const store = keystore();
    const keypair = Keypair.generate();
    const sealed = store.seal(keypair, ownerOf(keypair, "agent-a"));
    expect(() => store.open(sealed, ownerOf(keypair, "agent-b"))).toThrow(WalletKeyError);
    const other = Keypair.generate();
    expect(() => store.open(sealed, { agentId: "agent-a", address: other.publicKey.toBase58() })).toThrow(WalletKeyError);
  });

  it("a tampered ciphertext does not open", () => {
    const store = keystore();
    const keypair = Keypair.generate();
    const sealed = store.seal(keypair, ownerOf(keypair));
    const flipped = Buffer.from(sealed.ciphertext);
    flipped[3]! ^= 1;
    expect(() => store.open({ ...sealed, ciphertext: flipped }, ownerOf(keypair))).toThrow(WalletKeyError);
  });

  it("after rotation old ciphertexts open with the retired key and new ones use the current", () => {
    const oldKey = randomBytes(32);
    const keypair = Keypair.generate();
    const sealed = keystore("v1", oldKey).seal(keypair, ownerOf(keypair));
    const rotated = new Keystore({ currentVersion: "v2", currentKey: randomBytes(32), retiredKeys: new Map([["v1", oldKey]]) });
    expect(rotated.isStale(sealed)).toBe(true);
    expect(rotated.open(sealed, ownerOf(keypair)).publicKey.toBase58()).toBe(keypair.publicKey.toBase58());
    expect(rotated.seal(keypair, ownerOf(keypair)).keyVersion).toBe("v2");
    expect(() => keystore("v2").open(sealed, ownerOf(keypair))).toThrow(/version v1 is not configured/);
  });

  it("configuration needs a 32-byte base64 key", () => {
    expect(() => keystoreFromEnv({})).toThrow(/WALLET_ENCRYPTION_KEY is not set/);
    expect(() => keystoreFromEnv({ WALLET_ENCRYPTION_KEY: randomBytes(16).toString("base64") })).toThrow(/32 bytes/);
    const old = generateWalletEncryptionKey();
    const store = keystoreFromEnv({
      WALLET_ENCRYPTION_KEY: generateWalletEncryptionKey(),
      WALLET_ENCRYPTION_KEY_VERSION: "k2",
      WALLET_ENCRYPTION_RETIRED_KEYS: `k1:${old}`,
    });
    expect(store.currentVersion).toBe("k2");
    const keypair = Keypair.generate();
    const oldStore = keystoreFromEnv({ WALLET_ENCRYPTION_KEY: old, WALLET_ENCRYPTION_KEY_VERSION: "k1" });
    const sealedOld = oldStore.seal(keypair, ownerOf(keypair));
    expect(store.open(sealedOld, ownerOf(keypair)).publicKey.equals(keypair.publicKey)).toBe(true);
  });

  it("error messages never contain key material", () => {
    const key = randomBytes(32);
    const keypair = Keypair.generate();
    const sealed = keystore("v1", key).seal(keypair, ownerOf(keypair));
    try {
      keystore("v1").open(sealed, ownerOf(keypair));
    } catch (error) {
      const text = String((error as Error).message);
      expect(text).not.toContain(key.toString("base64"));
      expect(text).not.toContain(sealed.ciphertext.toString("base64"));
    }
  });
});
