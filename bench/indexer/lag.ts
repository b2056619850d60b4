/**
 * Chain-to-queryable lag: from the moment a payment is confirmed on the local ledger to the moment
 * its row is in the `transactions` read model, with `indexer run` (JSON-RPC source) following live.
 * Also prints the same measure at a slower source poll interval as the comparison in the same run.
 *
 *   npm run bench:indexer:lag [-- --payments 200 --poll-ms 20]
 *
 * Bounded by --payments per run; stops by itself.
 */
import { setTimeout as delay } from "node:timers/promises";
import { parseArgs } from "node:util";
import type pg from "pg";
import { IngestPipeline } from "../../indexer/pipeline.js";
import { RpcSource } from "../../indexer/sources/rpc.js";
import { endpointHash, PAYMENT_LEDGER_PROGRAM_ID } from "../../programs/payment_ledger/ts/index.js";
import { type AgentWallet, createAgentWallet, ledgerAccess, type PaymentTerms, recordPayment } from "../../scripts/agent-wallets.js";
import { startLocalnet } from "../../scripts/localnet.js";
import { createFreshDatabase } from "../../test/indexer/fresh-database.js";

const { values: flags } = parseArgs({
  options: {
    payments: { type: "string", default: "200" },
    "poll-ms": { type: "string", default: "20" },
    "baseline-poll-ms": { type: "string", default: "200" },
  },
});
const PAYMENTS = Number(flags.payments);
const POLL_MS = Number(flags["poll-ms"]);
const BASELINE_POLL_MS = Number(flags["baseline-poll-ms"]);
for (const [name, value] of [
  ["payments", PAYMENTS],
  ["poll-ms", POLL_MS],
  ["baseline-poll-ms", BASELINE_POLL_MS],
] as const) {
  if (!Number.isInteger(value) || value <= 0) throw new Error(`--${name} must be a positive integer`);
}
/** How often the bench looks for the row: far below the lags it measures. */
const WATCH_MS = 2;
const ROW_TIMEOUT_MS = 10_000;

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

async function waitForRow(pool: pg.Pool, signature: string): Promise<number> {
  const deadline = performance.now() + ROW_TIMEOUT_MS;
  while (performance.now() < deadline) {
    const found = await pool.query("SELECT 1 FROM transactions WHERE tx_hash = $1", [signature]);
    if (found.rowCount !== null && found.rowCount > 0) return performance.now();
    await delay(WATCH_MS);
  }
  throw new Error(`payment ${signature} not queryable after ${ROW_TIMEOUT_MS} ms`);
}

async function measure(pollMs: number): Promise<number[]> {
  const localnet = await startLocalnet();
  const database = await createFreshDatabase();
  const controller = new AbortController();
  try {
    const ledger = ledgerAccess(localnet);
    const agent: AgentWallet = await createAgentWallet(ledger, { usdcUnits: 1_000_000_000n });
    const service: AgentWallet = await createAgentWallet(ledger);

    const source = new RpcSource({ rpcUrl: localnet.rpcUrl, programId: PAYMENT_LEDGER_PROGRAM_ID, pollMs });
    const pipeline = new IngestPipeline({ pool: database.pool, programId: PAYMENT_LEDGER_PROGRAM_ID, cluster: localnet.rpcUrl });
    const running = pipeline.run(source, controller.signal).catch((error: unknown) => {
      if (!controller.signal.aborted) throw error;
    });

    const lags: number[] = [];
    for (let id = 1n; id <= BigInt(PAYMENTS); id++) {
      const terms: PaymentTerms = {
        paymentId: id,
        amountUnits: 1_000n + id,
        protocol: "x402",
        rail: "stablecoin",
        endpointHash: endpointHash("api.example.com/v1/quote"),
      };
      const signature = await recordPayment(ledger, agent, service, terms);
      const confirmedAt = performance.now();
      lags.push((await waitForRow(database.pool, signature)) - confirmedAt);
    }
    controller.abort();
    await running;
    return lags.sort((a, b) => a - b);
  } finally {
    controller.abort();
    await database.drop();
    await localnet.stop();
  }
}

const rows = [];
for (const [label, pollMs] of [
  [`source polls every ${POLL_MS} ms`, POLL_MS],
  [`baseline: source polls every ${BASELINE_POLL_MS} ms (default)`, BASELINE_POLL_MS],
] as const) {
  const lags = await measure(pollMs);
  rows.push({
    run: label,
    payments: lags.length,
    lag_ms_p50: Number(percentile(lags, 50).toFixed(1)),
    lag_ms_p99: Number(percentile(lags, 99).toFixed(1)),
    lag_ms_max: Number((lags.at(-1) ?? Number.NaN).toFixed(1)),
  });
}
console.log("chain-to-queryable lag: confirmed on the local ledger -> row in `transactions` (indexer run, JSON-RPC source)");
console.table(rows);
process.exit(0);
