/**
 * Offline checks of api/gateway/transfers: the real offers read strictly where money is concerned
 * (and skipped, with the reason, when not ours), the transaction laid out as the official
 * facilitator and MPP server verify it, the agent's signature valid over the message, and the
 * headers that carry it decoding to what the official servers read.
 */
import { getAssociatedTokenAddressSync } from "@solana/spl-token";
import { ComputeBudgetProgram, Keypair, PublicKey, VersionedTransaction } from "@solana/web3.js";
import bs58 from "bs58";
import { describe, expect, it } from "vitest";
import { ServiceError } from "../../api/shared/errors.js";
import { ledgerNetworks, LOCAL_DEVNET_ALIASES, paymentHeaders } from "../../api/gateway/transfers/index.js";
import { type OfferContext, readMppChallenges, readX402V1, readX402V2 } from "../../api/gateway/transfers/offers.js";
import { signTransfer } from "../../api/gateway/transfers/transaction.js";
import { verifySignature } from "../../api/gateway/chain/signer.js";

const mint = Keypair.generate().publicKey;
const payTo = Keypair.generate().publicKey.toBase58();
const facilitator = Keypair.generate().publicKey.toBase58();
const DEVNET = "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1";
const context: OfferContext = {
  networks: ledgerNetworks("solana-localnet", LOCAL_DEVNET_ALIASES),
  mint: mint.toBase58(),
  decimals: 6,
  now: new Date("2030-01-01T00:00:00Z"),
};

const requirement = (extra: Record<string, unknown> = {}) => ({
  scheme: "exact",
  network: DEVNET,
  amount: "25000",
  asset: mint.toBase58(),
  payTo,
  maxTimeoutSeconds: 60,
  extra: { feePayer: facilitator },
  ...extra,
});
const v2 = (...accepts: unknown[]) => ({ x402Version: 2, resource: { url: "http://api.test/r" }, accepts });
const b64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
const challenge = (request: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  id: "c1",
  realm: "api.test",
  method: "solana",
  intent: "charge",
  request: b64url({
    amount: "40000",
    currency: mint.toBase58(),
    recipient: payTo,
    methodDetails: { network: "localnet", decimals: 6 },
    ...request,
  }),
  ...extra,
});

function fieldOf(run: () => unknown): string | undefined {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(ServiceError);
    return (error as ServiceError).field;
  }
  return undefined;
}

describe("reading x402 offers", () => {
  it("v2: an exact requirement on this ledger in its mint is payable, with accepted echoed verbatim", () => {
    const { offers, skipped } = readX402V2(v2(requirement()), context);
    expect(skipped).toEqual([]);
    expect(offers).toEqual([
      expect.objectContaining({ format: "x402-v2", protocol: "x402", amountUnits: 25_000n, payTo, feePayer: facilitator, memo: null }),
    ]);
    expect(offers[0]!.wire).toEqual({
      format: "x402-v2",
      accepted: requirement(),
      resource: { url: "http://api.test/r" },
      extensions: null,
    });
  });

  it("skips other schemes, networks and assets, with the reason", () => {
    const { offers, skipped } = readX402V2(
      v2(
        requirement({ scheme: "upto" }),
        requirement({ network: "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp" }),
        requirement({ asset: Keypair.generate().publicKey.toBase58() }),
      ),
      context,
    );
    expect(offers).toEqual([]);
    expect(skipped).toEqual([
      expect.stringMatching(/accepts\[0\]: scheme upto/),
      expect.stringMatching(/accepts\[1\]: network .* is not this gateway's ledger/),
      expect.stringMatching(/accepts\[2\]: asset .* is not the settlement token/),
    ]);
  });

  it("refuses malformed money and addresses, naming the field", () => {
    expect(fieldOf(() => readX402V2(v2(requirement({ amount: "025000" })), context))).toBe("x402v2.accepts[0].amount");
    expect(fieldOf(() => readX402V2(v2(requirement({ amount: "18446744073709551616" })), context))).toBe("x402v2.accepts[0].amount");
    expect(fieldOf(() => readX402V2(v2(requirement({ amount: 25000 })), context))).toBe("x402v2.accepts[0].amount");
    expect(fieldOf(() => readX402V2(v2(requirement({ payTo: "not-base58!" })), context))).toBe("x402v2.accepts[0].payTo");
    expect(fieldOf(() => readX402V2(v2(requirement({ extra: {} })), context))).toBe("x402v2.accepts[0].extra.feePayer");
    expect(fieldOf(() => readX402V2({ ...v2(requirement()), x402Version: 1 }, context))).toBe("x402v2.x402Version");
    expect(fieldOf(() => readX402V2(v2(), context))).toBe("x402v2.accepts");
  });

  it("v1: maxAmountRequired, the v1 network name, the per-requirement resource", () => {
    const { offers } = readX402V1(
      {
        x402Version: 1,
        accepts: [
          { ...requirement({ network: "solana-devnet", resource: "http://api.test/r" }), amount: undefined, maxAmountRequired: "7" },
        ],
      },
      context,
    );
    expect(offers).toEqual([
      expect.objectContaining({ format: "x402-v1", amountUnits: 7n, network: "solana-devnet", resourceUrl: "http://api.test/r" }),
    ]);
  });
});

describe("reading MPP challenges", () => {
  it("solana/charge on localnet in the mint is payable; the fee payer only when the server sponsors it", () => {
    expect(readMppChallenges([challenge({})], context).offers).toEqual([
      expect.objectContaining({ format: "mpp", protocol: "mpp", amountUnits: 40_000n, payTo, feePayer: null, memo: null }),
    ]);
    const sponsored = challenge({
      externalId: "order-7",
      methodDetails: { network: "localnet", decimals: 6, feePayer: true, feePayerKey: facilitator },
    });
    expect(readMppChallenges([sponsored], context).offers).toEqual([expect.objectContaining({ feePayer: facilitator, memo: "order-7" })]);
  });

  it("skips what it does not sign: other methods and intents, networks, currencies, splits, expired challenges", () => {
    const { offers, skipped } = readMppChallenges(
      [
        { ...challenge({}), method: "tempo" },
        { ...challenge({}), intent: "session" },
        challenge({ methodDetails: { network: "mainnet-beta", decimals: 6 } }),
        challenge({ currency: "sol" }),
        challenge({ methodDetails: { network: "localnet", decimals: 6, splits: [{ recipient: payTo, amount: "1" }] } }),
        challenge({}, { expires: "2029-12-31T23:59:59Z" }),
      ],
      context,
    );
    expect(offers).toEqual([]);
    expect(skipped).toHaveLength(6);
    expect(skipped[5]).toMatch(/expired/);
  });

  it("refuses a request that is not base64url JSON", () => {
    expect(fieldOf(() => readMppChallenges([{ ...challenge({}), request: "!!" }], context))).toBe("mppChallenges[0].request");
  });
});

describe("the signed transfer", () => {
  const payer = Keypair.generate();
  const authority = Keypair.generate();
  const blockhash = bs58.encode(Buffer.alloc(32, 7));
  const sign = (offer: Parameters<typeof signTransfer>[0]) => signTransfer(offer, { payer, authority }, { mint, decimals: 6, blockhash });
  const decode = (wire: string) => VersionedTransaction.deserialize(Buffer.from(wire, "base64"));
  const programOf = (tx: VersionedTransaction, index: number) =>
    tx.message.staticAccountKeys[tx.message.compiledInstructions[index]!.programIdIndex]!.toBase58();

  it("x402: fee payer = extra.feePayer, [limit, price, TransferChecked, memo], only the agent's signature", () => {
    const offer = readX402V2(v2(requirement()), context).offers[0]!;
    const signed = sign(offer);
    const tx = decode(signed.wire);
    expect(tx.message.staticAccountKeys[0]!.toBase58()).toBe(facilitator);
    expect(tx.message.header.numRequiredSignatures).toBe(2);
    expect(tx.signatures[0]).toEqual(new Uint8Array(64));
    expect(verifySignature(payer.publicKey.toBase58(), tx.message.serialize(), tx.signatures[1]!)).toBe(true);
    expect(bs58.encode(tx.signatures[1]!)).toBe(signed.payerSignature);
    expect(signed.expectedTx).toBeNull();
    const ix = tx.message.compiledInstructions;
    expect(ix.map((_, i) => programOf(tx, i))).toEqual([
      ComputeBudgetProgram.programId.toBase58(),
      ComputeBudgetProgram.programId.toBase58(),
      "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA",
      "MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr",
    ]);
    expect(Buffer.from(ix[0]!.data)).toEqual(Buffer.from([2, 0x20, 0x4e, 0, 0])); // 20 000 units
    expect(Buffer.from(ix[1]!.data)).toEqual(Buffer.from([3, 1, 0, 0, 0, 0, 0, 0, 0])); // 1 µlamport
    const transfer = ix[2]!;
    expect(transfer.data[0]).toBe(12);
    expect(Buffer.from(transfer.data.subarray(1, 9)).readBigUInt64LE(0)).toBe(25_000n);
    expect(transfer.data[9]).toBe(6);
    const keys = transfer.accountKeyIndexes.map((i) => tx.message.staticAccountKeys[i]!.toBase58());
    expect(keys).toEqual([
      getAssociatedTokenAddressSync(mint, payer.publicKey).toBase58(),
      mint.toBase58(),
      getAssociatedTokenAddressSync(mint, new PublicKey(payTo)).toBase58(),
      payer.publicKey.toBase58(),
    ]);
    expect(Buffer.from(ix[3]!.data).toString("utf8")).toMatch(/^[0-9a-f]{32}$/);
    // Two payments with the same terms are different transactions.
    expect(sign(offer).payerSignature).not.toBe(signed.payerSignature);
  });

  it("x402 with a seller memo carries exactly that memo", () => {
    const offer = readX402V2(v2(requirement({ extra: { feePayer: facilitator, memo: "invoice-9" } })), context).offers[0]!;
    const tx = decode(sign(offer).wire);
    expect(Buffer.from(tx.message.compiledInstructions[3]!.data).toString("utf8")).toBe("invoice-9");
  });

  it("MPP without a sponsor: the gateway's authority pays the fee and signs, the id is known; no memo it did not ask for", () => {
    const offer = readMppChallenges([challenge({})], context).offers[0]!;
    const signed = sign(offer);
    const tx = decode(signed.wire);
    expect(tx.message.staticAccountKeys[0]!.toBase58()).toBe(authority.publicKey.toBase58());
    expect(verifySignature(authority.publicKey.toBase58(), tx.message.serialize(), tx.signatures[0]!)).toBe(true);
    expect(signed.expectedTx).toBe(bs58.encode(tx.signatures[0]!));
    expect(tx.message.compiledInstructions.map((_, i) => programOf(tx, i))).toEqual([
      ComputeBudgetProgram.programId.toBase58(),
      ComputeBudgetProgram.programId.toBase58(),
      "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA",
    ]);
    const [price, limit] = tx.message.compiledInstructions;
    expect(price!.data[0]).toBe(3);
    expect(limit!.data[0]).toBe(2);
    const units = Buffer.from(limit!.data.subarray(1, 5)).readUInt32LE(0);
    expect(units).toBeLessThanOrEqual(200_000);
    expect(units).toBeGreaterThan(200_000 - 4_096);
  });

  it("headers: PAYMENT-SIGNATURE, X-PAYMENT and Authorization: Payment decode to the official payloads", () => {
    const x402 = readX402V2(v2(requirement()), context).offers[0]!;
    const v2Header = paymentHeaders(x402.wire, "VFg=")["PAYMENT-SIGNATURE"]!;
    expect(JSON.parse(Buffer.from(v2Header, "base64").toString("utf8"))).toEqual({
      x402Version: 2,
      resource: { url: "http://api.test/r" },
      accepted: requirement(),
      payload: { transaction: "VFg=" },
    });
    const v1 = readX402V1({ x402Version: 1, accepts: [{ ...requirement({ network: "solana-devnet" }), maxAmountRequired: "7" }] }, context)
      .offers[0]!;
    expect(JSON.parse(Buffer.from(paymentHeaders(v1.wire, "VFg=")["X-PAYMENT"]!, "base64").toString("utf8"))).toEqual({
      x402Version: 1,
      scheme: "exact",
      network: "solana-devnet",
      payload: { transaction: "VFg=" },
    });
    const mpp = readMppChallenges([challenge({}, { expires: "2030-01-01T00:05:00Z", opaque: "e30" })], context).offers[0]!;
    const authorization = paymentHeaders(mpp.wire, "VFg=").Authorization!;
    expect(authorization).toMatch(/^Payment [A-Za-z0-9_-]+$/);
    expect(JSON.parse(Buffer.from(authorization.slice("Payment ".length), "base64url").toString("utf8"))).toEqual({
      challenge: { ...challenge({}), expires: "2030-01-01T00:05:00Z", opaque: "e30" },
      payload: { type: "transaction", transaction: "VFg=" },
    });
  });
});
