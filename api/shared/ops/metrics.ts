/**
 * Prometheus metrics of a service process (`GET /metrics`, prom-client). Two kinds:
 * - observed in this process by the ops plugin (./plugin.ts): request latency per route template,
 *   with the payment routes' reservation and settlement latency as their own histograms;
 * - read at scrape time from what is already the truth: payments by protocol and outcome and
 *   refusals by reason from the gateway's tables, the webhook backlog, the indexer's slot lag
 *   against the cluster, and the pool's connections.
 * Labels never carry an agent, an account or an id: route templates, protocols, outcomes and
 * refusal codes are bounded sets.
 */
import type { Connection, PublicKey } from "@solana/web3.js";
import type pg from "pg";
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";

/** Seconds: from a fast local reservation to a slow cluster confirmation. */
const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** A scrape-time read gives up after this long (the metric is then left out of that scrape). */
const SCRAPE_QUERY_TIMEOUT_MS = 2_000;

export interface OpsMetricsOptions {
  readonly pool: pg.Pool;
  /** The cluster, for the indexer's slot lag; absent on a query service without one. */
  readonly connection?: Connection;
  /** Default process metrics (memory, CPU, event loop lag); true unless a test says otherwise. */
  readonly processMetrics?: boolean;
  /** The gateway's SOL spent by its own keys since start, by kind (api/gateway/settlement/sol-spent.ts). */
  readonly solSpent?: () => Readonly<Record<string, bigint>>;
  /** The service keys whose SOL balance is exported (fee payer, ledger authority), read at scrape time. */
  readonly serviceKeys?: readonly { readonly name: string; readonly key: PublicKey }[];
}

export interface OpsMetrics {
  readonly registry: Registry;
  readonly requests: Counter<"route" | "method" | "status">;
  readonly requestSeconds: Histogram<"route" | "method">;
  readonly reservationSeconds: Histogram<"outcome">;
  readonly settlementSeconds: Histogram<"outcome">;
}

function timed<T>(work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    work,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error("scrape read timed out")), SCRAPE_QUERY_TIMEOUT_MS);
    }),
  ]).finally(() => clearTimeout(timer));
}

export function createOpsMetrics(options: OpsMetricsOptions): OpsMetrics {
  const registry = new Registry();
  if (options.processMetrics !== false) collectDefaultMetrics({ register: registry, prefix: "apg_process_" });
  const { pool } = options;

  const requests = new Counter({
    name: "apg_http_requests_total",
    help: "HTTP requests by route template, method and status",
    labelNames: ["route", "method", "status"] as const,
    registers: [registry],
  });
  const requestSeconds = new Histogram({
    name: "apg_http_request_seconds",
    help: "HTTP request latency by route template",
    labelNames: ["route", "method"] as const,
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  const reservationSeconds = new Histogram({
    name: "apg_reservation_seconds",
    help: "Latency of payment authorizations (policy check and budget reservation), by outcome",
    labelNames: ["outcome"] as const,
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  const settlementSeconds = new Histogram({
    name: "apg_settlement_seconds",
    help: "Latency of settlements (complete, x402 and MPP settle routes), by outcome",
    labelNames: ["outcome"] as const,
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });

  new Gauge({
    name: "apg_payments",
    help: "Payment reservations by protocol and outcome (reserved, settled, released), from the database",
    labelNames: ["protocol", "outcome"] as const,
    registers: [registry],
    async collect() {
      this.reset();
      const { rows } = await timed(
        pool.query<{ protocol: string; status: string; n: string }>(
          "SELECT protocol, status, count(*)::text AS n FROM spend_reservations GROUP BY protocol, status",
        ),
      ).catch(() => ({ rows: [] }));
      for (const row of rows) this.set({ protocol: row.protocol, outcome: row.status }, Number(row.n));
    },
  });
  new Gauge({
    name: "apg_refusals",
    help: "Payments refused by policy, by reason code, from the database",
    labelNames: ["reason"] as const,
    registers: [registry],
    async collect() {
      this.reset();
      const { rows } = await timed(
        pool.query<{ reason_code: string; n: string }>(
          "SELECT reason_code, count(*)::text AS n FROM payment_rejections GROUP BY reason_code",
        ),
      ).catch(() => ({ rows: [] }));
      for (const row of rows) this.set({ reason: row.reason_code }, Number(row.n));
    },
  });
  new Gauge({
    name: "apg_webhook_backlog",
    help: "Webhook and alert deliveries not yet delivered (pending)",
    registers: [registry],
    async collect() {
      const { rows } = await timed(
        pool.query<{ n: string }>("SELECT count(*)::text AS n FROM event_deliveries WHERE status = 'pending'"),
      ).catch(() => ({ rows: [] as { n: string }[] }));
      if (rows[0] !== undefined) this.set(Number(rows[0].n));
    },
  });
  new Gauge({
    name: "apg_db_pool_connections",
    help: "Connections of this process's primary pool, by state",
    labelNames: ["state"] as const,
    registers: [registry],
    collect() {
      this.set({ state: "total" }, pool.totalCount);
      this.set({ state: "idle" }, pool.idleCount);
      this.set({ state: "waiting" }, pool.waitingCount);
    },
  });
  if (options.solSpent !== undefined) {
    const spent = options.solSpent;
    new Gauge({
      name: "apg_service_sol_spent_lamports",
      help: "Lamports the service's own keys spent since this process started, by kind (fees, rent)",
      labelNames: ["kind"] as const,
      registers: [registry],
      collect() {
        for (const [kind, lamports] of Object.entries(spent())) this.set({ kind }, Number(lamports));
      },
    });
  }
  if (options.connection !== undefined && options.serviceKeys !== undefined && options.serviceKeys.length > 0) {
    const connection = options.connection;
    const keys = options.serviceKeys;
    new Gauge({
      name: "apg_service_sol_balance_lamports",
      help: "SOL balance of the service's own keys (the fee payer, the ledger authority), in lamports",
      labelNames: ["key"] as const,
      registers: [registry],
      async collect() {
        const balances = await Promise.all(keys.map(({ key }) => timed(connection.getBalance(key, "confirmed")).catch(() => null)));
        keys.forEach(({ name }, i) => {
          const lamports = balances[i];
          if (lamports !== null && lamports !== undefined) this.set({ key: name }, lamports);
        });
      },
    });
  }
  if (options.connection !== undefined) {
    const connection = options.connection;
    new Gauge({
      name: "apg_indexer_slot_lag",
      help: "Slots between the cluster's confirmed slot and the indexer's checkpoint",
      registers: [registry],
      async collect() {
        const lag = await indexerSlotLag(pool, connection).catch(() => null);
        if (lag !== null) this.set(lag);
      },
    });
  }
  return { registry, requests, requestSeconds, reservationSeconds, settlementSeconds };
}

/** The cluster's confirmed slot minus the indexer's furthest checkpoint; null before any checkpoint. */
export async function indexerSlotLag(pool: pg.Pool, connection: Connection): Promise<number | null> {
  const [slot, checkpoint] = await Promise.all([
    timed(connection.getSlot("confirmed")),
    timed(pool.query<{ slot: string | null }>("SELECT max(slot)::text AS slot FROM checkpoints")),
  ]);
  const indexed = checkpoint.rows[0]?.slot;
  return indexed === null || indexed === undefined ? null : Math.max(0, slot - Number(indexed));
}
