/**
 * The listing answers each row's time from its epoch microseconds (api/query/read/transactions.ts
 * dateOfMicros), not from Postgres's timestamp text: the Date must be the one the driver parses
 * from that text, for any time (sub-millisecond fractions, before 1970, far future) and any
 * session time zone, and a listing's rows must carry the times their payments have.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dateOfMicros, listTransactions } from "../../api/query/read/transactions.js";
import { createAccount } from "../../api/shared/keys.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { mulberry32 } from "../support/random.js";

let db: FreshDatabase;

beforeAll(async () => {
  db = await createFreshDatabase();
});

afterAll(async () => {
  await db?.drop();
});

/** Random epoch microseconds: any fraction, 1900 to 2200, and the millisecond's edges. */
function randomMicros(next: () => number, n: number): bigint[] {
  const out: bigint[] = [];
  const span = 300 * 365 * 86_400; // seconds
  for (let i = 0; i < n; i += 1) {
    const seconds = BigInt(Math.floor(next() * span) - 70 * 365 * 86_400);
    const edge = [0n, 1n, 999n, 1_000n, 999_000n, 999_999n][i % 6]!;
    const fraction = i % 2 === 0 ? edge : BigInt(Math.floor(next() * 1_000_000));
    out.push(seconds * 1_000_000n + fraction);
  }
  return out;
}

describe("listing times", () => {
  it("the Date of a time's microseconds is the Date the driver parses from its text, in any session time zone", async () => {
    const next = mulberry32(0x7173);
    const client = await db.pool.connect();
    try {
      for (const zone of ["UTC", "Asia/Kolkata", "America/St_Johns", "Europe/Paris"]) {
        await client.query(`SET TimeZone = '${zone}'`);
        const micros = randomMicros(next, 3_000);
        const result = await client.query<{ micros: string; at: Date }>(
          `SELECT m::text AS micros, timestamptz 'epoch' + m * interval '1 microsecond' AS at FROM unnest($1::bigint[]) m`,
          [micros.map(String)],
        );
        expect(result.rows).toHaveLength(micros.length);
        for (const row of result.rows) expect([row.micros, dateOfMicros(row.micros).getTime()]).toEqual([row.micros, row.at.getTime()]);
      }
    } finally {
      await client.query("RESET TimeZone");
      client.release();
    }
  });

  it("a listing's rows carry their payments' times, fractions of a millisecond cut as the driver cuts them", async () => {
    const account = await createAccount(db.pool, "times");
    await db.pool.query(`INSERT INTO agents (agent_id, account_id, name, wallet_address) VALUES ('agent-t', $1, 'agent t', 'wallet-t')`, [
      account,
    ]);
    const micros = randomMicros(mulberry32(0x7174), 60).map((m) => (m < 0n ? -m : m));
    await db.pool.query(
      `INSERT INTO transactions (event_id, tx_hash, instruction_index, agent, payee, mint, payment_id, protocol, rail,
                                 amount_units, endpoint_hash, atomic, explorer_url, "timestamp", slot, status)
       SELECT o, 'tx-' || o, 0, 'wallet-t', 'payee', 'mint', o, 'x402', 'stablecoin', 1000, md5('e'), false, 'https://explorer.example/tx/' || o,
              timestamptz 'epoch' + m * interval '1 microsecond', o, 'finalized'
       FROM unnest($1::bigint[]) WITH ORDINALITY AS u(m, o)`,
      [micros.map(String)],
    );
    const want = await db.pool.query<{ id: string; timestamp: Date }>(
      `SELECT event_id::text AS id, "timestamp" FROM transactions WHERE agent = 'wallet-t'`,
    );
    const byId = new Map(want.rows.map((row) => [row.id, row.timestamp.getTime()]));
    for (const columns of [undefined, new Set(["timestamp"] as const)]) {
      const rows = await listTransactions(db.pool, { accountId: account, limit: 100 }, columns);
      expect(rows).toHaveLength(60);
      for (const row of rows) expect([row.id, row.timestamp.getTime()]).toEqual([row.id, byId.get(row.id)]);
    }
    // Not asked, not answered.
    const bare = await listTransactions(db.pool, { accountId: account, limit: 100 }, new Set(["amount_units"] as const));
    expect(bare.every((row) => !("timestamp" in row))).toBe(true);
  });
});
