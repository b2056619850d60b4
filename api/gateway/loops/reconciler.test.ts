import { describe, expect, it } from "vitest";
import { runReconciler } from "./reconciler.js";
import type { ReconcileReport } from "../settlement/settlement.js";

const empty: ReconcileReport = { confirmed: [], failed: [], pending: [] };

describe("runReconciler", () => {
  it("passes at start and on every tick, survives errors, and stops on abort", async () => {
    const controller = new AbortController();
    let passes = 0;
    let operationPasses = 0;
    const errors: unknown[] = [];
    const settlement = {
      async reconcilePending(): Promise<ReconcileReport> {
        passes += 1;
        if (passes === 2) throw new Error("rpc down");
        if (passes === 4) controller.abort();
        return empty;
      },
    };
    const wallets = {
      async reconcilePendingOperations() {
        operationPasses += 1;
        return { confirmed: 0, failed: 0, pending: 0 };
      },
    };
    await runReconciler(settlement, wallets, { intervalMs: 5, signal: controller.signal, onError: (e) => errors.push(e) });
    expect(passes).toBe(4);
    expect(errors).toHaveLength(1);
    expect(operationPasses).toBe(3);
  });

  it("a full batch is followed at once by another pass", async () => {
    const controller = new AbortController();
    const full: ReconcileReport = { confirmed: Array.from({ length: 256 }, (_, i) => `sig${i}`), failed: [], pending: [] };
    const reports = [full, full, empty];
    let passes = 0;
    const settlement = {
      async reconcilePending(): Promise<ReconcileReport> {
        const report = reports[passes] ?? empty;
        passes += 1;
        if (passes === 3) controller.abort();
        return report;
      },
    };
    const started = Date.now();
    await runReconciler(settlement, null, { intervalMs: 60_000, signal: controller.signal });
    expect(passes).toBe(3);
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});
