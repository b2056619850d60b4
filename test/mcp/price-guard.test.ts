/**
 * `maxPrice`: the ceiling compared with every price an offer names (spec bodies, x402 v1/v2, MPP
 * challenges), in base units, refusing when any is above it or none can be read.
 */
import { describe, expect, it } from "vitest";
import { checkCeiling } from "../../sdk/src/mcp/price-guard.js";

const challenge = (amount: string) => ({
  id: "c1",
  realm: "api.example.com",
  method: "solana",
  intent: "charge",
  request: Buffer.from(JSON.stringify({ amount, currency: "mint", recipient: "payee" })).toString("base64url"),
});

describe("maxPrice ceiling", () => {
  it("passes at the ceiling exactly, refuses one base unit above", () => {
    const offer = { x402v2: { x402Version: 2, accepts: [{ scheme: "exact", amount: "50000", payTo: "p" }] } };
    expect(() => checkCeiling(offer, 50_000n)).not.toThrow();
    expect(() => checkCeiling(offer, 49_999n)).toThrow("max_price_exceeded: requested 0.05 usdc, limit is 0.049999 usdc");
  });

  it("refuses when any offered price is above it, whichever protocol the gateway would pick", () => {
    const offer = {
      mpp: {
        protocol: "mpp/1.0" as const,
        amount: { value: "0.02", currency: "USDC" },
        paymentMethods: ["stablecoin"],
        sessionSupported: false,
        paymentEndpoint: "https://x/pay",
      },
      mppChallenges: [challenge("60000")],
    };
    expect(() => checkCeiling(offer, 50_000n)).toThrow("requested 0.06 usdc");
    expect(() => checkCeiling({ x402v1: { x402Version: 1, accepts: [{ maxAmountRequired: "10" }] } }, 10n)).not.toThrow();
  });

  it("refuses an offer whose price cannot be read", () => {
    expect(() => checkCeiling({ mppChallenges: [{ ...challenge("1"), request: "not-json" }] }, 1_000_000n)).toThrow(
      "max_price_exceeded: requested an unreadable price, limit is 1 usdc",
    );
    expect(() => checkCeiling({ x402v2: { x402Version: 2, accepts: [{ amount: "1e3" }] } }, 1_000_000n)).toThrow(/unreadable/);
  });
});
