import { describe, expect, it } from "vitest";
import { EMPTY_FEED, FEED_MAX, mergeFeed } from "./feed-state";
import type { TransactionRow } from "./graphql/queries";

function tx(hash: string, second: number, status: TransactionRow["status"] = "confirmed"): TransactionRow {
  return {
    id: hash,
    txHash: status === "rejected" ? null : hash,
    agentId: "a",
    protocol: "x402",
    rail: "stablecoin",
    amountPaid: "0.100000",
    amountPaidUnits: "100000",
    endpoint: "api.example/x",
    domain: "api.example",
    parentTxHash: null,
    solanaExplorer: null,
    timestamp: new Date(Date.UTC(2026, 0, 1, 0, 0, second)).toISOString(),
    depth: 0,
    status,
    settlementStatus: null,
    rejectionCode: null,
    rejectionReason: null,
    rejectionRequested: null,
    rejectionLimit: null,
    rejectionUnit: null,
    policyVersion: null,
    childCount: 0,
  };
}

const hashes = (state: ReturnType<typeof mergeFeed>): string[] => state.rows.map((row) => row.tx.txHash!);

describe("the live feed's rows", () => {
  it("lists payments newest first, by block time", () => {
    let state = mergeFeed(EMPTY_FEED, [tx("b", 2)], { reread: false });
    state = mergeFeed(state, [tx("a", 1)], { reread: false });
    state = mergeFeed(state, [tx("c", 3)], { reread: false });
    expect(hashes(state)).toEqual(["c", "b", "a"]);
  });

  it("puts a later arrival of the same second above an earlier one", () => {
    let state = mergeFeed(EMPTY_FEED, [tx("first", 5)], { reread: false });
    state = mergeFeed(state, [tx("second", 5)], { reread: false });
    expect(hashes(state)).toEqual(["second", "first"]);
  });

  it("keeps a re-read page's own order (newest first) for payments of the same second", () => {
    const state = mergeFeed(EMPTY_FEED, [tx("newest", 7), tx("middle", 7), tx("oldest", 7)], { reread: true });
    expect(hashes(state)).toEqual(["newest", "middle", "oldest"]);
  });

  it("shows a payment once when the stream and a re-read both bring it, with the newer fields", () => {
    let state = mergeFeed(EMPTY_FEED, [tx("x", 1)], { reread: false });
    state = mergeFeed(state, [tx("y", 2), tx("x", 1, "finalized")], { reread: true });
    state = mergeFeed(state, [tx("y", 2)], { reread: false });
    expect(hashes(state)).toEqual(["y", "x"]);
    expect(state.rows[1]!.tx.status).toBe("finalized");
    expect(state.rows[1]!.live).toBe(true);
  });

  it("fills in what a re-read after a reconnect finds missing, in order", () => {
    let state = mergeFeed(EMPTY_FEED, [tx("p1", 1)], { reread: false });
    // Disconnected while p2 and p3 were recorded; p4 arrives on the new stream before the re-read answers.
    state = mergeFeed(state, [tx("p4", 4)], { reread: false });
    state = mergeFeed(state, [tx("p4", 4), tx("p3", 3), tx("p2", 2), tx("p1", 1)], { reread: true });
    expect(hashes(state)).toEqual(["p4", "p3", "p2", "p1"]);
  });

  it("leaves rejected payments out (they never reached the ledger)", () => {
    const state = mergeFeed(EMPTY_FEED, [tx("ok", 1), tx("refused", 2, "rejected")], { reread: true });
    expect(hashes(state)).toEqual(["ok"]);
  });

  it("keeps at most FEED_MAX rows, the newest", () => {
    const many = Array.from({ length: FEED_MAX + 10 }, (_, i) => tx(`t${i}`, i)).reverse();
    const state = mergeFeed(EMPTY_FEED, many, { reread: true });
    expect(state.rows).toHaveLength(FEED_MAX);
    expect(state.rows[0]!.tx.txHash).toBe(`t${FEED_MAX + 9}`);
    expect(state.rows.at(-1)!.tx.txHash).toBe("t10");
  });
});
