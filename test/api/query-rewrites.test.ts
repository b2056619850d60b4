/**
 * The rewritten listing, spend and metrics queries (api/query/read/: keys first, per agent through
 * a lateral) return exactly what the queries before the rewrite returned
 * (test/api/read-reference.ts), on random data: payments ingested through the real path
 * (synthetic transactions, ingestBatch) by random payers of three accounts (and one payer no
 * account knows), rejections at random times, then random filters, pages, windows and
 * resolutions. Payments carry reservations with and without a policy version (several for some, the
 * first with one counts) and tree edges; rejections carry versions too. The listing read with a
 * subset of its columns (what a GraphQL selection asks) answers the same values for them.
 * Seeded, so a failure replays.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readMetricBuckets, readSpendCells, type SpendScope } from "../../api/query/read/spend.js";
import { type ListingColumn, listTransactions, type TransactionFilter } from "../../api/query/read/transactions.js";
import { createAccount } from "../../api/shared/keys.js";
import type { PaymentRow } from "../../api/shared/rows.js";
import { decodeRawTransaction } from "../../indexer/decode/transaction.js";
import { ingestBatch } from "../../indexer/store/ingest.js";
import { SYNTHETIC_BASE_TIME, SYNTHETIC_ENDPOINTS, syntheticPayers, syntheticTransaction } from "../../bench/indexer/synthetic.js";
import { PAYMENT_LEDGER_PROGRAM_ID } from "../../programs/payment_ledger/ts/index.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { mulberry32 } from "../support/random.js";
import { listTransactionsBefore, readMetricBucketsBefore, readSpendCellsBefore } from "./read-reference.js";

const PAYMENTS = 3_000;
const PAYERS = 13;
const ACCOUNTS = 3;
const MINUTE = 60_000;
/** Payments are 50 per second of block time from SYNTHETIC_BASE_TIME (a whole minute): 3,000 span one minute. */
const START = SYNTHETIC_BASE_TIME * 1000;

let db: FreshDatabase;
const accountIds: string[] = [];
const agentIds: string[][] = [];

beforeAll(async () => {
  db = await createFreshDatabase();
  const next = mulberry32(0x17_e0);
  const payers = syntheticPayers(PAYERS);
  for (let a = 0; a < ACCOUNTS; a += 1) {
    accountIds.push(await createAccount(db.pool, `account ${a}`));
    agentIds.push([]);
  }
  // Payer k is agent-k of account k % 3, except the last one: no account knows it.
  for (let k = 0; k < PAYERS - 1; k += 1) {
    await db.pool.query("INSERT INTO agents (agent_id, account_id, name, wallet_address) VALUES ($1, $2, $3, $4)", [
      `agent-${k}`,
      accountIds[k % ACCOUNTS],
      `agent ${k}`,
      payers[k]!.toBase58(),
    ]);
    agentIds[k % ACCOUNTS]!.push(`agent-${k}`);
  }
  // The gateway knows the text of half the endpoints; the others list under their hash.
  const hashes = SYNTHETIC_ENDPOINTS.map((bytes) => Buffer.from(bytes).toString("hex")).filter((_, i) => i % 2 === 0);
  await db.pool.query("INSERT INTO endpoints (endpoint_hash, endpoint, domain) SELECT * FROM unnest($1::text[], $2::text[], $3::text[])", [
    hashes,
    hashes.map((_, i) => `${i % 3 === 0 ? "v2." : ""}api${i % 2}.example.com/data`),
    hashes.map((_, i) => `${i % 3 === 0 ? "v2." : ""}api${i % 2}.example.com`),
  ]);
  // Each payment by a random payer; 50 share each second of block time (ties broken by id).
  for (let at = 0; at < PAYMENTS; at += 500) {
    const batch = Array.from({ length: 500 }, (_, k) =>
      decodeRawTransaction(syntheticTransaction(at + k, [payers[Math.floor(next() * PAYERS)]!]), PAYMENT_LEDGER_PROGRAM_ID),
    );
    await ingestBatch(
      db.pool,
      { transactions: batch, checkpoint: { source: "test", slot: batch.at(-1)!.slot, blockhash: null } },
      {
        cluster: "devnet",
      },
    );
  }
  // Rejections at random times of the same span, some on a payment's exact second.
  for (let i = 0; i < 200; i += 1) {
    const k = Math.floor(next() * (PAYERS - 1));
    const at = new Date(START + Math.floor(next() * 60) * 1000 + (next() < 0.5 ? 0 : Math.floor(next() * 1000)));
    await db.pool.query(
      `INSERT INTO payment_rejections (agent_id, amount_units, endpoint, domain, protocol, reason_code, reason, created_at, policy_version)
       VALUES ($1, $2, $3, $4, $5, 'per_call_limit_exceeded', 'per_call_limit_exceeded: test', $6, $7)`,
      [
        `agent-${k}`,
        1_000 + i,
        `api${i % 2}.example.com/data`,
        `api${i % 2}.example.com`,
        next() < 0.3 ? null : next() < 0.5 ? "x402" : "mpp",
        at,
        next() < 0.3 ? null : Math.floor(next() * 5),
      ],
    );
  }
  // Reservations of a tenth of the payments: one to three each, a version on some (the listing
  // shows the version of the first reservation that has one); tree edges under a tenth more.
  const payments = await db.pool.query<{ event_id: string; tx_hash: string; agent_id: string | null }>(
    `SELECT t.event_id, t.tx_hash, a.agent_id FROM transactions t LEFT JOIN agents a ON a.wallet_address = t.agent ORDER BY t.event_id`,
  );
  for (const payment of payments.rows) {
    if (next() < 0.1) {
      for (let r = Math.floor(next() * 3); r >= 0; r -= 1) {
        await db.pool.query(
          `INSERT INTO spend_reservations (agent_id, amount_units, endpoint, domain, protocol, status, created_at, budget_window_start, tx_hash, policy_version)
           VALUES ($1, 1000, 'api0.example.com/data', 'api0.example.com', 'x402', 'released', $2, $2, $3, $4)`,
          [payment.agent_id ?? "nobody", new Date(START), payment.tx_hash, next() < 0.4 ? null : 1 + Math.floor(next() * 9)],
        );
      }
    }
    if (next() < 0.1) {
      await db.pool.query(
        `INSERT INTO payment_edges (child_event_id, parent_tx_hash, child_tx_hash, invocation, depth, child_payer)
         VALUES ($1::bigint, 'parent-' || $1::text, $2, 'invocation-' || $1::text, $3, 'payer')
         ON CONFLICT (child_event_id) DO NOTHING`,
        [payment.event_id, payment.tx_hash, 1 + Math.floor(next() * 4)],
      );
    }
  }
  await db.pool.query("ANALYZE");
}, 120_000);

afterAll(async () => {
  await db?.drop();
});

const pick = <T>(next: () => number, items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
const maybe = <T>(next: () => number, value: T): T | undefined => (next() < 0.5 ? value : undefined);

function cursorAfter(row: PaymentRow): TransactionFilter["after"] {
  return { timeMicros: BigInt(row.time_micros), kind: row.kind, id: BigInt(row.id) };
}

describe("queries rewritten for scale", () => {
  it("the transactions listing returns the same pages as before the rewrite, under random filters", async () => {
    const next = mulberry32(0x11_57);
    let rows = 0;
    for (let round = 0; round < 150; round += 1) {
      const a = Math.floor(next() * ACCOUNTS);
      let filter: TransactionFilter = {
        accountId: accountIds[a]!,
        agentId: maybe(next, pick(next, agentIds[a]!)),
        protocol: maybe(next, pick(next, ["x402", "mpp"] as const)),
        domain: next() < 0.3 ? pick(next, ["example.com", "api0.example.com", "v2.api1.example.com", "other.io"]) : undefined,
        since: maybe(next, new Date(START + Math.floor(next() * 60) * 1000)),
        status: next() < 0.4 ? pick(next, ["confirmed", "finalized", "rejected"] as const) : undefined,
        limit: 1 + Math.floor(next() * 60),
      };
      // Up to four pages, each one's cursor taken from the last row of the previous page.
      for (let page = 0; page < 4; page += 1) {
        const got = await listTransactions(db.pool, filter);
        const want = await listTransactionsBefore(db.pool, filter);
        expect(got).toEqual(want);
        rows += got.length;
        if (got.length <= filter.limit) break;
        filter = { ...filter, after: cursorAfter(got[filter.limit - 1]!) };
      }
    }
    // The random filters did reach rows (an all-empty run would prove nothing).
    expect(rows).toBeGreaterThan(1_000);
  });

  it("a listing read with some of its columns answers the same values for them as with all, under random filters", async () => {
    const next = mulberry32(0xc0_15);
    const all = Object.keys(await listTransactions(db.pool, { accountId: accountIds[0]!, limit: 1 }).then((r) => r[0]!)) as ListingColumn[];
    let versions = 0;
    for (let round = 0; round < 60; round += 1) {
      const a = Math.floor(next() * ACCOUNTS);
      const filter: TransactionFilter = {
        accountId: accountIds[a]!,
        agentId: maybe(next, pick(next, agentIds[a]!)),
        protocol: maybe(next, pick(next, ["x402", "mpp"] as const)),
        status: next() < 0.3 ? pick(next, ["confirmed", "finalized", "rejected"] as const) : undefined,
        limit: 1 + Math.floor(next() * 80),
      };
      const asked = new Set(all.filter(() => next() < 0.3));
      const answered = new Set<ListingColumn>([...asked, "kind", "id", "time_micros"]);
      const full = await listTransactions(db.pool, filter);
      const got = await listTransactions(db.pool, filter, asked);
      expect(got).toEqual(
        full.map((row) => Object.fromEntries(Object.entries(row).filter(([column]) => answered.has(column as ListingColumn)))),
      );
      versions += full.filter((row) => row.policy_version !== null).length;
    }
    // Versions were there to be read (of both kinds: reservations' and rejections').
    expect(versions).toBeGreaterThan(50);
  });

  it("spend cells and metric buckets are the same as before the rewrite, for random windows and agents", async () => {
    const next = mulberry32(0x5e_4d);
    let cells = 0;
    for (let round = 0; round < 80; round += 1) {
      const a = Math.floor(next() * ACCOUNTS);
      const from = new Date(START - MINUTE + Math.floor(next() * 3) * MINUTE);
      const to = new Date(from.getTime() + (1 + Math.floor(next() * 3)) * MINUTE);
      const scope: SpendScope = {
        accountId: accountIds[a]!,
        agentId: maybe(next, pick(next, agentIds[a]!)),
        window: { label: "custom", from, to },
      };
      const order = (x: { agentId: string; protocol: string; domain: string }, y: typeof x): number =>
        `${x.agentId}|${x.protocol}|${x.domain}`.localeCompare(`${y.agentId}|${y.protocol}|${y.domain}`);
      const got = (await readSpendCells(db.pool, scope)).sort(order);
      expect(got).toEqual((await readSpendCellsBefore(db.pool, scope)).sort(order));
      cells += got.length;
      const resolutionMs = pick(next, [MINUTE, 5 * MINUTE, 15 * MINUTE]);
      expect(await readMetricBuckets(db.pool, scope, resolutionMs)).toEqual(await readMetricBucketsBefore(db.pool, scope, resolutionMs));
    }
    expect(cells).toBeGreaterThan(100);
  });
});
