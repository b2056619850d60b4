import { describe, expect, it } from "vitest";
import { CommitRuns, type Segment } from "./commit-runs.js";
import type { RawTransaction, SlotStatus, SourceUpdate } from "./sources/source.js";

const raw = (signature: string, slot: bigint): RawTransaction => ({
  signature,
  slot,
  blockTime: null,
  indexInBlock: null,
  commitment: "confirmed",
  err: null,
  accountKeys: [],
  instructions: [],
  innerInstructions: [],
  logs: null,
  preTokenBalances: [],
  postTokenBalances: [],
});
const tx = (signature: string, slot: bigint): SourceUpdate => ({ kind: "transaction", transaction: raw(signature, slot) });
const status = (slot: bigint, s: SlotStatus): SourceUpdate => ({ kind: "slot", slot: { slot, parent: slot - 1n, status: s } });

/** Every run `updates` make, as `signature@slot` and `status:slot` labels, one array per run. */
function runsOf(updates: readonly SourceUpdate[], batchSize: number, chained = true): string[][] {
  const runs = new CommitRuns(batchSize);
  for (const update of updates) runs.push(update);
  const out: string[][] = [];
  for (let run: Segment[] = runs.next(chained); run.length > 0; run = runs.next(chained)) {
    if (run.some((s) => s.status?.status === "confirmed")) chained = true;
    out.push(
      run.flatMap((s) => [
        ...s.transactions.map((t) => `${t.signature}@${t.slot}`),
        s.status === null ? "full" : `${s.status.status}:${s.status.slot}`,
      ]),
    );
  }
  return out;
}

describe("commit runs: which queued live updates commit together", () => {
  it("slot statuses and the transactions they close form one run", () => {
    const updates = [
      tx("a", 1n),
      status(1n, "confirmed"),
      status(2n, "confirmed"),
      tx("b", 3n),
      status(3n, "confirmed"),
      status(1n, "finalized"),
    ];
    expect(runsOf(updates, 500)).toEqual([["a@1", "confirmed:1", "confirmed:2", "b@3", "confirmed:3", "finalized:1"]]);
  });

  it("transactions no status closed yet wait for it", () => {
    expect(runsOf([status(1n, "confirmed"), tx("a", 2n)], 500)).toEqual([["confirmed:1"]]);
  });

  it("a dead status starts a run: its rollback comes first in a commit", () => {
    const updates = [tx("a", 1n), status(1n, "confirmed"), tx("b", 2n), status(2n, "dead"), tx("c", 3n), status(3n, "confirmed")];
    expect(runsOf(updates, 500)).toEqual([
      ["a@1", "confirmed:1"],
      ["b@2", "dead:2", "c@3", "confirmed:3"],
    ]);
  });

  it("a run holds at most a batch of transactions; a full batch closes a segment", () => {
    const updates = [tx("a", 1n), tx("b", 1n), tx("c", 1n), status(1n, "confirmed"), status(2n, "confirmed")];
    expect(runsOf(updates, 2)).toEqual([
      ["a@1", "b@1", "full"],
      ["c@1", "confirmed:1", "confirmed:2"],
    ]);
  });

  it("transactions of a slot the run already finalized start a run: one by one they came after the mark", () => {
    const updates = [status(5n, "finalized"), tx("a", 5n), status(6n, "confirmed")];
    expect(runsOf(updates, 500)).toEqual([["finalized:5"], ["a@5", "confirmed:6"]]);
  });

  it("a signature the run already holds starts a run", () => {
    const updates = [tx("a", 1n), status(1n, "confirmed"), tx("a", 1n), status(2n, "confirmed")];
    expect(runsOf(updates, 500)).toEqual([
      ["a@1", "confirmed:1"],
      ["a@1", "confirmed:2"],
    ]);
  });

  it("before the stream is chained, its first confirmed status starts a run (the chain check comes first)", () => {
    const updates = [status(1n, "finalized"), tx("a", 9n), status(9n, "confirmed"), status(10n, "confirmed")];
    expect(runsOf(updates, 500, false)).toEqual([["finalized:1"], ["a@9", "confirmed:9", "confirmed:10"]]);
  });
});
