/**
 * The endpoint text the ledger hashes keeps a fragment (an MCP tool is `host/mcp#tool`), and the
 * SDK's copy for channel vouchers agrees with the program binding's, so a voucher's endpoint hash
 * is the one the gateway records.
 */
import { describe, expect, it } from "vitest";
import { endpointHash, endpointText } from "../../programs/payment_ledger/ts/index.js";
import { endpointHash as voucherEndpointHash, endpointText as voucherEndpointText } from "../../sdk/src/server/channel/voucher.js";

describe("endpoint text", () => {
  it("names an MCP tool by its fragment, and drops the scheme and the query", () => {
    expect(endpointText("http://127.0.0.1:4100/mcp?x=1#forecast")).toBe("127.0.0.1:4100/mcp#forecast");
    expect(endpointText("https://api.example.com/v1/quote?x=1")).toBe("api.example.com/v1/quote");
  });

  it("the SDK's copy and the program binding's agree, fragment or not", () => {
    for (const endpoint of ["https://tools.example.com/mcp#quote", "https://api.example.com/v1/quote?x=1", "api.example.com/raw"]) {
      expect(voucherEndpointText(endpoint)).toBe(endpointText(endpoint));
      expect(voucherEndpointHash(endpoint)).toEqual(endpointHash(endpoint));
    }
  });
});
