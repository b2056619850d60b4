/**
 * First pages read with a time bound (api/query/read/page-bounds.ts) answer exactly what the
 * listing answers without one (test/api/read-reference.ts), while the store changes under them:
 * payments arrive newer than the page and late (older than its last row), payments are rolled
 * back (deleted, those on the page too), become final, and rejections arrive at any time. The same
 * few filters are asked again and again (a `since` moving at each ask too), so bounds are used, and
 * kept or read again when short.
 * Seeded, so a failure replays.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PageBounds } from "../../api/query/read/page-bounds.js";
import { firstPageBounds, listTransactions, type TransactionFilter } from "../../api/query/read/transactions.js";
import { createAccount } from "../../api/shared/keys.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { mulberry32 } from "../support/random.js";
import { listTransactionsBefore } from "./read-reference.js";

const ACCOUNTS = 2;
const AGENTS = 8;
const START = Date.parse("2026-11-01T00:00:00Z");

let db: FreshDatabase;
const accountIds: string[] = [];
let nextEventId = 1;
let nextTime = START;

beforeAll(async () => {
  db = await createFreshDatabase();
  for (let a = 0; a < ACCOUNTS; a += 1) accountIds.push(await createAccount(db.pool, `account ${a}`));
  // Agent k in account k % 2.
  for (let k = 0; k < AGENTS; k += 1) {
    await db.pool.query("INSERT INTO agents (agent_id, account_id, name, wallet_address) VALUES ($1, $2, $3, $4)", [
      `agent-${k}`,
      accountIds[k % ACCOUNTS],
      `agent ${k}`,
      `wallet-${k}`,
    ]);
  }
  await db.pool.query(
    `INSERT INTO endpoints (endpoint_hash, endpoint, domain)
     SELECT md5('endpoint ' || e), 'api' || e || '.example.com/v1', 'api' || e || '.example.com' FROM generate_series(0, 2) e`,
  );
}, 60_000);

afterAll(async () => {
  await db?.drop();
});

/** A payment by a random agent at each of these times (microseconds since the epoch). */
async function addPayments(next: () => number, times: number[]): Promise<void> {
  for (const micros of times) {
    const id = nextEventId;
    nextEventId += 1;
    await db.pool.query(
      `INSERT INTO transactions (event_id, tx_hash, instruction_index, agent, payee, mint, payment_id, protocol, rail,
                                 amount_units, endpoint_hash, atomic, explorer_url, "timestamp", slot, status)
       VALUES ($1::bigint, md5($1::text), 0, $2, 'payee', 'mint', $1::bigint, $3, 'stablecoin', $4, md5('endpoint ' || $5), false,
               'https://explorer.example/tx/' || $1::text, 'epoch'::timestamptz + $6::bigint * interval '1 microsecond', $1::bigint, 'confirmed')`,
      [id, `wallet-${Math.floor(next() * AGENTS)}`, next() < 0.5 ? "x402" : "mpp", 1_000 + id, Math.floor(next() * 3), micros],
    );
  }
}

async function addRejection(next: () => number, micros: number): Promise<void> {
  await db.pool.query(
    `INSERT INTO payment_rejections (agent_id, amount_units, endpoint, domain, protocol, reason_code, reason, created_at)
     VALUES ($1, 1000, 'api0.example.com/v1', 'api0.example.com', $2, 'per_call_limit_exceeded', 'per_call_limit_exceeded: test',
             'epoch'::timestamptz + $3::bigint * interval '1 microsecond')`,
    [`agent-${Math.floor(next() * AGENTS)}`, next() < 0.5 ? "x402" : "mpp", micros],
  );
}

/** A time after every earlier one, or (late) a random one since the start. */
function timeOf(next: () => number, late: boolean): number {
  if (late) return START * 1000 + Math.floor(next() * (nextTime - START)) * 1000 + Math.floor(next() * 1000);
  // 0 to 2 ms later: ties on the millisecond and on the microsecond.
  nextTime += Math.floor(next() * 3);
  return nextTime * 1000 + (next() < 0.3 ? 0 : Math.floor(next() * 1000));
}

describe("first pages read with a time bound", () => {
  it("answer what the listing answers without one while payments arrive, are rolled back and rejections come", async () => {
    const next = mulberry32(0xb0_4d);
    await addPayments(
      next,
      Array.from({ length: 400 }, () => timeOf(next, false)),
    );
    const filters: TransactionFilter[] = [];
    for (const accountId of accountIds) {
      for (const limit of [1, 5, 20, 50]) {
        filters.push({ accountId, limit });
        filters.push({ accountId, limit, protocol: "mpp" });
        filters.push({ accountId, limit, status: "confirmed" });
        filters.push({ accountId, limit, domain: "api1.example.com" });
      }
      filters.push({ accountId, limit: 10, agentId: `agent-${accountIds.indexOf(accountId)}` });
      filters.push({ accountId, limit: 3, status: "rejected" });
      filters.push({ accountId, limit: 10, since: new Date(START + 100) });
    }
    const hitsBefore = firstPageBounds.hits;
    const fallbacksBefore = firstPageBounds.fallbacks;
    let rows = 0;
    for (let step = 0; step < 300; step += 1) {
      const change = next();
      if (change < 0.35) {
        await addPayments(
          next,
          Array.from({ length: 1 + Math.floor(next() * 4) }, () => timeOf(next, next() < 0.3)),
        );
      } else if (change < 0.55) {
        // A rollback: the newest payments, as a fork drops them, or any.
        const count = 1 + Math.floor(next() * 6);
        if (next() < 0.6) {
          await db.pool.query(
            `DELETE FROM transactions WHERE event_id IN (SELECT event_id FROM transactions ORDER BY "timestamp" DESC, event_id DESC LIMIT $1)`,
            [count],
          );
        } else {
          await db.pool.query(
            `DELETE FROM transactions WHERE event_id IN (SELECT event_id FROM transactions ORDER BY md5(event_id::text || $1) LIMIT $2)`,
            [String(step), count],
          );
        }
      } else if (change < 0.65) {
        await db.pool.query(
          `UPDATE transactions SET status = 'finalized' WHERE event_id IN (SELECT event_id FROM transactions ORDER BY md5(event_id::text || $1) LIMIT 5)`,
          [String(step)],
        );
      } else if (change < 0.8) {
        await addRejection(next, timeOf(next, next() < 0.5));
      }
      for (let ask = 0; ask < 4; ask += 1) {
        let filter = filters[Math.floor(next() * filters.length)]!;
        // A relative window ("24h") moves with every request: a since that differs at each ask.
        if (filter.since !== undefined && next() < 0.5)
          filter = { ...filter, since: new Date(START + Math.floor(next() * (nextTime - START))) };
        const got = await listTransactions(db.pool, filter);
        expect(got).toEqual(await listTransactionsBefore(db.pool, filter));
        rows += got.length;
      }
    }
    expect(rows).toBeGreaterThan(5_000);
    // Bounds were used, and short bounded answers were read again (both paths ran).
    expect(firstPageBounds.hits - hitsBefore).toBeGreaterThan(200);
    expect(firstPageBounds.fallbacks - fallbacksBefore).toBeGreaterThan(10);
  });

  it("keep at most their capacity, dropping the least recently used (none at 0)", async () => {
    const bounds = new PageBounds(2);
    bounds.set("a", 1n);
    bounds.set("b", 2n);
    expect(bounds.get("a")).toBe(1n);
    bounds.set("c", 3n);
    expect([bounds.get("a"), bounds.get("b"), bounds.get("c"), bounds.size]).toEqual([1n, undefined, 3n, 2]);
    bounds.delete("a");
    expect([bounds.get("a"), bounds.size]).toEqual([undefined, 1]);
    const none = new PageBounds(0);
    none.set("a", 1n);
    expect([none.get("a"), none.size]).toEqual([undefined, 0]);
  });
});
