/**
 * x402 formats without a ledger: the strict parsers of spec 2.7 and 2.8, the canonical signing
 * bytes, the retry headers of 4.3, and ed25519 signing with a web3.js keypair.
 */
import { Keypair } from "@solana/web3.js";
import bs58 from "bs58";
import { describe, expect, it } from "vitest";
import {
  canonicalPayloadBytes,
  decodePaymentHeaders,
  encodePaymentHeaders,
  parsePaymentPayload,
  parsePaymentRequirement,
  payloadBody,
  requirementBody,
  signPaymentPayload,
  X402FormatError,
  X_PAYMENT,
  X_PAYMENT_SIGNATURE,
} from "../../api/gateway/x402/index.js";
import { keypairSigner, verifySignature } from "../../api/gateway/chain/index.js";

const payTo = Keypair.generate().publicKey.toBase58();
const token = Keypair.generate().publicKey.toBase58();
const body = { scheme: "exact", network: "solana-mainnet", token, amount: "10000", payTo, resource: "https://api.example.com/v1/quote" };

function formatError(run: () => unknown): X402FormatError {
  try {
    run();
  } catch (error) {
    if (error instanceof X402FormatError) return error;
    throw error;
  }
  throw new Error("expected an X402FormatError");
}

describe("x402 payment requirement (spec 2.7)", () => {
  it("parses the six fields, the amount into bigint base units, and writes the same body back", () => {
    const requirement = parsePaymentRequirement(body);
    expect(requirement.amountUnits).toBe(10_000n);
    expect(requirementBody(requirement)).toEqual(body);
  });

  it.each([
    ["an unknown field", { ...body, extra: 1 }, "extra"],
    ["a missing field", { ...body, payTo: undefined }, "payTo"],
    ["another scheme", { ...body, scheme: "upto" }, "scheme"],
    ["a decimal amount", { ...body, amount: "0.01" }, "amount"],
    ["a zero amount", { ...body, amount: "0" }, "amount"],
    ["a leading zero", { ...body, amount: "010" }, "amount"],
    ["a number amount", { ...body, amount: 10000 }, "amount"],
    ["an amount beyond u64", { ...body, amount: "18446744073709551616" }, "amount"],
    ["a payTo that is not an address", { ...body, payTo: "0xabc" }, "payTo"],
    ["a token that is not an address", { ...body, token: "usdc" }, "token"],
    ["a relative resource", { ...body, resource: "/v1/quote" }, "resource"],
    ["a network with spaces", { ...body, network: "solana mainnet" }, "network"],
  ])("refuses %s", (_, input, field) => {
    const clean = Object.fromEntries(Object.entries(input).filter(([, v]) => v !== undefined));
    const error = formatError(() => parsePaymentRequirement(clean));
    expect(error.reason).toBe("malformed_requirement");
    expect(error.field).toBe(field);
  });
});

describe("x402 PaymentPayload (spec 2.8) and its signature", () => {
  const keypair = Keypair.generate();
  const signer = keypairSigner(keypair);
  const requirement = parsePaymentRequirement(body);
  const now = new Date("2026-11-22T00:00:00Z");

  it("signs the canonical bytes with the wallet key; the address alone verifies it", async () => {
    const payload = await signPaymentPayload(signer, requirement, { nonce: "n".repeat(32), now });
    expect(payload.payload).toMatchObject({ from: keypair.publicKey.toBase58(), to: payTo, amountUnits: 10_000n, token });
    expect(payload.payload.validUntilSeconds).toBe(now.getTime() / 1000 + 60);
    const bytes = canonicalPayloadBytes(payload.scheme, payload.network, payload.payload);
    expect(verifySignature(signer.address, bytes, payload.signature)).toBe(true);
    expect(verifySignature(payTo, bytes, payload.signature)).toBe(false);
  });

  it("canonical bytes are length-prefixed UTF-8 fields in a fixed order after the domain tag", () => {
    const bytes = Buffer.from(
      canonicalPayloadBytes("exact", "n", { from: "f", to: "t", amountUnits: 5n, token: "k", nonce: "x", validUntilSeconds: 9 }),
    );
    const fields: string[] = [];
    for (let at = 0; at < bytes.length; ) {
      const length = bytes.readUInt32BE(at);
      fields.push(bytes.subarray(at + 4, at + 4 + length).toString("utf8"));
      at += 4 + length;
    }
    expect(fields).toEqual(["apg-x402-payment-v1", "exact", "n", "f", "t", "5", "k", "x", "9"]);
  });

  it("a field boundary cannot move: ('ab','c') and ('a','bc') sign different bytes", () => {
    const base = { from: "f", to: "t", amountUnits: 5n, token: "k", validUntilSeconds: 9 };
    const one = canonicalPayloadBytes("exact", "ab", { ...base, nonce: "c" });
    const two = canonicalPayloadBytes("exact", "a", { ...base, nonce: "bc" });
    expect(Buffer.from(one).equals(Buffer.from(two))).toBe(false);
  });

  it("the headers round-trip: X-PAYMENT is padded base64 of the JSON body, X-PAYMENT-SIGNATURE its base58 signature", async () => {
    const payload = await signPaymentPayload(signer, requirement, { now });
    const headers = encodePaymentHeaders(payload);
    expect(headers[X_PAYMENT]).toMatch(/^[A-Za-z0-9+/]+={0,2}$/);
    expect(JSON.parse(Buffer.from(headers[X_PAYMENT], "base64").toString("utf8"))).toEqual(payloadBody(payload));
    expect(bs58.decode(headers[X_PAYMENT_SIGNATURE])).toHaveLength(64);
    const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
    expect(decodePaymentHeaders(lower)).toEqual(payload);
    expect(decodePaymentHeaders(new Headers(headers))).toEqual(payload);
  });

  it("refuses headers that disagree, are missing, or are not base64 of a strict payload", async () => {
    const payload = await signPaymentPayload(signer, requirement, { now });
    const other = await signPaymentPayload(signer, requirement, { now });
    const headers = encodePaymentHeaders(payload);
    const mismatch = formatError(() =>
      decodePaymentHeaders({ ...headers, [X_PAYMENT_SIGNATURE]: encodePaymentHeaders(other)[X_PAYMENT_SIGNATURE] }),
    );
    expect(mismatch.field).toBe(X_PAYMENT_SIGNATURE);
    expect(formatError(() => decodePaymentHeaders({ [X_PAYMENT]: headers[X_PAYMENT] })).field).toBe(X_PAYMENT_SIGNATURE);
    expect(formatError(() => decodePaymentHeaders({ ...headers, [X_PAYMENT]: "not*base64" })).field).toBe(X_PAYMENT);
    const extra = { ...payloadBody(payload), x402Version: 1 };
    const error = formatError(() => parsePaymentPayload(extra));
    expect([error.reason, error.field]).toEqual(["malformed_payload", "x402Version"]);
    const shortSig = formatError(() => parsePaymentPayload({ ...payloadBody(payload), signature: bs58.encode(new Uint8Array(63)) }));
    expect(shortSig.field).toBe("signature");
    const nonce = formatError(() =>
      parsePaymentPayload({ ...payloadBody(payload), payload: { ...payloadBody(payload).payload, nonce: "short" } }),
    );
    expect(nonce.field).toBe("payload.nonce");
  });

  it("a keypair whose seed does not derive its public key is refused", () => {
    const a = Keypair.generate();
    const b = Keypair.generate();
    const broken = { secretKey: Uint8Array.from([...a.secretKey.subarray(0, 32), ...b.publicKey.toBytes()]), publicKey: b.publicKey };
    expect(() => keypairSigner(broken)).toThrow(/does not match/);
  });
});
