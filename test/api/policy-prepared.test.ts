/**
 * The reservation's statements are prepared once per connection (named in `pg`): a migration that
 * adds a column to a table they read must not break them on connections that prepared them before.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { putPolicy } from "../../api/shared/policy/index.js";
import { reserveWithinPolicy } from "../../api/gateway/reservations/store.js";
import { createPool } from "../../indexer/db/database.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";

let db: FreshDatabase;

beforeAll(async () => {
  db = await createFreshDatabase();
});

afterAll(async () => {
  await db?.drop();
});

it("a reservation still runs on a connection that prepared its statements before a column was added", async () => {
  const agent = "prepared";
  await putPolicy(db.pool, agent, { dailyBudgetUnits: 10_000n, rateLimit: { calls: 5, window: "1h" } });
  const one = createPool(db.url);
  one.options.max = 1;
  try {
    const request = {
      endpoint: "https://api.example.com/v1/data",
      amountUnits: 1_000n,
      protocol: "x402" as const,
      offeredProtocols: ["x402" as const],
    };
    const first = await reserveWithinPolicy(one, agent, request, new Date());
    expect(first.reservationId).not.toBeNull();
    await db.pool.query("ALTER TABLE policies ADD COLUMN added_later text");
    await db.pool.query("ALTER TABLE spend_reservations ADD COLUMN added_later text");
    const second = await reserveWithinPolicy(one, agent, request, new Date());
    expect(second.reservationId).not.toBeNull();
    expect(second.decision.decision).toBe("allow");
  } finally {
    await one.end();
  }
});
