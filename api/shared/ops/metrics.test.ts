import type pg from "pg";
import { describe, expect, it } from "vitest";
import { createOpsMetrics } from "./metrics.js";

describe("the service's own SOL on /metrics", () => {
  it("exports the SOL spent by kind as the gateway counted it, exact in lamports", async () => {
    let spent = { fee_payer_fee: 0n, authority_fee: 0n, authority_rent: 0n };
    const metrics = createOpsMetrics({ pool: {} as pg.Pool, processMetrics: false, solSpent: () => spent });
    spent = { fee_payer_fee: 10_005n, authority_fee: 5_000n, authority_rent: 2_178_480n };
    const text = await metrics.registry.getSingleMetricAsString("apg_service_sol_spent_lamports");
    expect(text).toContain('apg_service_sol_spent_lamports{kind="fee_payer_fee"} 10005');
    expect(text).toContain('apg_service_sol_spent_lamports{kind="authority_fee"} 5000');
    expect(text).toContain('apg_service_sol_spent_lamports{kind="authority_rent"} 2178480');
  });

  it("has no SOL series on a process without the gateway's counters", () => {
    const metrics = createOpsMetrics({ pool: {} as pg.Pool, processMetrics: false });
    expect(metrics.registry.getSingleMetric("apg_service_sol_spent_lamports")).toBeUndefined();
    expect(metrics.registry.getSingleMetric("apg_service_sol_balance_lamports")).toBeUndefined();
  });
});
