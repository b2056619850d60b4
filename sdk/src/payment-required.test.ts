import { describe, expect, it } from "vitest";
import { explorerUrl } from "./client.js";
import { PaymentProtocolError } from "./errors.js";
import { readPaymentChallenges, readPaymentOffer } from "./payment-required.js";
import { readMppReceipt, readPaymentReceipt, readX402Receipt } from "./receipts.js";

const X402 = {
  scheme: "exact",
  network: "solana-localnet",
  token: "Mint111",
  amount: "50000",
  payTo: "Payee111",
  resource: "http://api.test/x",
};
const MPP = {
  protocol: "mpp/1.0",
  amount: { value: "0.02", currency: "USDC" },
  paymentMethods: ["stablecoin", "card"],
  sessionSupported: true,
  paymentEndpoint: "http://api.test/mpp/pay",
};

describe("reading a 402 body", () => {
  it("recognises spec 2.7 and forwards only its fields", () => {
    expect(readPaymentOffer({ ...X402, x402Version: 1, extra: { nested: true } }, "http://api.test/x")).toEqual({ x402: X402 });
  });

  it("recognises spec 2.9 and forwards only its fields", () => {
    expect(readPaymentOffer({ ...MPP, description: "a report" }, "http://api.test/x")).toEqual({ mpp: MPP });
  });

  it("reads both offers from a list or from x402/mpp members", () => {
    expect(readPaymentOffer([X402, MPP], "e")).toEqual({ x402: X402, mpp: MPP });
    expect(readPaymentOffer({ x402: X402, mpp: MPP }, "e")).toEqual({ x402: X402, mpp: MPP });
  });

  it("anything else is a PaymentProtocolError naming the endpoint", () => {
    for (const body of [
      null,
      "pay me",
      { protocol: "lightning/1", invoice: "lnbc" },
      { protocol: "mpp/2.0", amount: MPP.amount, paymentMethods: ["x"], paymentEndpoint: "u" },
      { ...X402, scheme: "upto" },
      { ...X402, amount: 50000 },
      { ...MPP, paymentMethods: [] },
      { ...MPP, amount: { value: 0.02, currency: "USDC" } },
      // x402 v1 bodies are read (below); an unknown version is nothing.
      { x402Version: 3, accepts: [{ scheme: "exact", maxAmountRequired: "1" }] },
      { x402Version: 1, error: "X-PAYMENT header is required" },
    ]) {
      const error = (() => {
        try {
          readPaymentOffer(body, "http://api.test/x");
        } catch (caught) {
          return caught;
        }
        return undefined;
      })();
      expect(error, JSON.stringify(body)).toBeInstanceOf(PaymentProtocolError);
      expect((error as PaymentProtocolError).endpoint).toBe("http://api.test/x");
    }
  });
});

describe("reading the real protocols' 402 answers", () => {
  const V1 = {
    x402Version: 1,
    error: "X-PAYMENT header is required",
    accepts: [{ scheme: "exact", network: "solana", maxAmountRequired: "1000" }],
  };
  const V2 = {
    x402Version: 2,
    resource: { url: "http://api.test/x" },
    accepts: [{ scheme: "exact", network: "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1", amount: "1000", asset: "Mint111", payTo: "P" }],
  };
  const base64 = (value: unknown, padded = true) => {
    const text = Buffer.from(JSON.stringify(value)).toString("base64");
    return padded ? text : text.replace(/=+$/, "");
  };

  it("x402 v1: the body, forwarded whole", () => {
    expect(readPaymentOffer(V1, "e")).toEqual({ x402v1: V1 });
  });

  it("x402 v2: the PAYMENT-REQUIRED header (padding optional) whatever the body; a bad header is ignored", () => {
    expect(readPaymentOffer({}, "e", new Headers({ "payment-required": base64(V2) }))).toEqual({ x402v2: V2 });
    expect(readPaymentOffer({}, "e", new Headers({ "PAYMENT-REQUIRED": base64(V2, false) }))).toEqual({ x402v2: V2 });
    expect(() => readPaymentOffer({}, "e", new Headers({ "payment-required": "not base64!" }))).toThrow(PaymentProtocolError);
    expect(() => readPaymentOffer({}, "e", new Headers({ "payment-required": base64({ ...V2, x402Version: 1 }) }))).toThrow(
      PaymentProtocolError,
    );
  });

  it("MPP: every Payment challenge of WWW-Authenticate, quoted strings and escapes, other schemes skipped", () => {
    const header =
      'Bearer realm="api", Payment id="a1", realm="api.test", method="solana", intent="charge", request="eyJhIjoxfQ", ' +
      'expires="2030-01-01T00:00:00Z", description="say \\"hi\\", ok", Payment id=b2, realm=api.test, method=tempo, intent=session, request=e30';
    expect(readPaymentChallenges(header)).toEqual([
      {
        id: "a1",
        realm: "api.test",
        method: "solana",
        intent: "charge",
        request: "eyJhIjoxfQ",
        expires: "2030-01-01T00:00:00Z",
        description: 'say "hi", ok',
      },
      { id: "b2", realm: "api.test", method: "tempo", intent: "session", request: "e30" },
    ]);
    // A challenge missing a required parameter is not one.
    expect(readPaymentChallenges('Payment id="x", realm="r", method="solana", intent="charge"')).toEqual([]);
    expect(readPaymentChallenges(null)).toEqual([]);
  });

  it("a server offering everything at once: every offer is forwarded", () => {
    const headers = new Headers({
      "payment-required": base64(V2),
      "www-authenticate": 'Payment id="a", realm="r", method="solana", intent="charge", request="e30"',
    });
    expect(readPaymentOffer(X402, "e", headers)).toEqual({
      x402: X402,
      x402v2: V2,
      mppChallenges: [{ id: "a", realm: "r", method: "solana", intent: "charge", request: "e30" }],
    });
  });

  it("receipts: PAYMENT-RESPONSE, X-PAYMENT-RESPONSE (base64), Payment-Receipt (base64url)", () => {
    const settle = { success: true, transaction: "Tx9", network: "solana:x", payer: "P" };
    expect(readPaymentReceipt("x402-v2", new Headers({ "payment-response": base64(settle) }))).toEqual({
      header: "PAYMENT-RESPONSE",
      success: true,
      transaction: "Tx9",
      value: settle,
    });
    expect(readPaymentReceipt("x402-v1", new Headers({ "x-payment-response": base64({ ...settle, success: false }) }))).toMatchObject({
      success: false,
    });
    const mpp = { method: "solana", reference: "Tx8", status: "success", timestamp: "2030-01-01T00:00:00Z" };
    const receipt = Buffer.from(JSON.stringify(mpp)).toString("base64url");
    expect(readPaymentReceipt("mpp", new Headers({ "payment-receipt": receipt }))).toEqual({
      header: "Payment-Receipt",
      success: true,
      transaction: "Tx8",
      value: mpp,
    });
    expect(readPaymentReceipt("mpp", new Headers())).toBeUndefined();
  });
});

describe("receipts", () => {
  const b64 = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString("base64");

  it("x402: X-PAYMENT-RESPONSE base64 JSON", () => {
    const headers = new Headers({
      "x-payment-response": b64({ success: true, transaction: "Tx1", network: "solana-localnet", payer: "P" }),
    });
    expect(readX402Receipt(headers)).toEqual({ success: true, transaction: "Tx1", network: "solana-localnet", payer: "P" });
    expect(readX402Receipt(new Headers({ "x-payment-response": "%%%" }))).toBeUndefined();
    expect(readX402Receipt(new Headers({ "x-payment-response": b64({ success: true }) }))).toBeUndefined();
    expect(readX402Receipt(new Headers())).toBeUndefined();
  });

  it("MPP: X-MPP-Receipt first, the JSON body's txHash/sessionId otherwise", () => {
    const receipt = { txHash: "Tx2", sessionId: "s1", amount: { value: "0.02", currency: "USDC" }, method: "stablecoin", charged: true };
    expect(readMppReceipt(new Headers({ "x-mpp-receipt": b64(receipt) }), null)).toEqual(receipt);
    expect(readMppReceipt(new Headers(), { txHash: "Tx3", sessionId: "s2", data: 1 })).toEqual({ txHash: "Tx3", sessionId: "s2" });
    expect(readMppReceipt(new Headers(), { data: 1 })).toBeUndefined();
  });
});

describe("explorer links built from the network", () => {
  it("mainnet has no cluster, devnet/testnet name theirs, anything else is custom", () => {
    expect(explorerUrl("Tx", "solana-mainnet")).toBe("https://explorer.solana.com/tx/Tx");
    expect(explorerUrl("Tx", "solana-devnet")).toBe("https://explorer.solana.com/tx/Tx?cluster=devnet");
    expect(explorerUrl("Tx", "solana-localnet", "http://127.0.0.1:8899")).toBe(
      "https://explorer.solana.com/tx/Tx?cluster=custom&customUrl=http%3A%2F%2F127.0.0.1%3A8899",
    );
    expect(explorerUrl("Tx", undefined)).toBe("https://explorer.solana.com/tx/Tx?cluster=custom");
  });
});
