import { describe, expect, it } from "vitest";
import { explorerUrl } from "./client.js";
import { PaymentProtocolError } from "./errors.js";
import { readPaymentOffer } from "./payment-required.js";
import { readMppReceipt, readX402Receipt } from "./receipts.js";

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
      { x402Version: 1, accepts: [{ scheme: "exact", maxAmountRequired: "1" }] },
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
