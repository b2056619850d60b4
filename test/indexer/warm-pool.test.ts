/**
 * `createPool`'s `keepWarm` (indexer/db/database.ts), as the services open their pools: the pool
 * and its siblings (the group commit's, the idempotency locks') keep their connections through a
 * quiet spell longer than their idle timeout, and the next queries open none; a pool without it
 * closes them and opens new ones.
 */
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPool, siblingPool } from "../../indexer/db/database.js";
import { createFreshDatabase, type FreshDatabase } from "./fresh-database.js";

let db: FreshDatabase;
beforeAll(async () => {
  db = await createFreshDatabase();
});
afterAll(async () => {
  await db?.drop();
});

const quiet = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Connections `pool` opens from now on. */
function opened(pool: pg.Pool): () => number {
  let count = 0;
  pool.on("connect", () => {
    count += 1;
  });
  return () => count;
}

/** Three queries at once (three connections), a quiet spell, three again: connections open after each. */
async function acrossQuiet(pool: pg.Pool, quietMs: number): Promise<{ before: number; idle: number; after: number }> {
  const count = opened(pool);
  const three = (): Promise<unknown> => Promise.all([0, 1, 2].map(() => pool.query("SELECT pg_sleep(0.05)")));
  await three();
  const before = count();
  await quiet(quietMs);
  const idle = pool.totalCount;
  await three();
  return { before, idle, after: count() - before };
}

describe("keepWarm", () => {
  it("a service's pool and its siblings keep their connections past the idle timeout; others do not", async () => {
    const pools: pg.Pool[] = [];
    try {
      const warm = createPool(db.url, { keepWarm: true });
      const cold = createPool(db.url);
      pools.push(warm, cold);
      // Siblings with a short idle timeout, as the idempotency locks' pool (1 s).
      const warmSibling = siblingPool(warm, { idleTimeoutMillis: 50 });
      const coldSibling = siblingPool(cold, { idleTimeoutMillis: 50 });
      pools.push(warmSibling, coldSibling);
      // The pools themselves idle out after 10 s (pg-pool's default).
      const [w, c, ws, cs] = await Promise.all([
        acrossQuiet(warm, 10_500),
        acrossQuiet(cold, 10_500),
        acrossQuiet(warmSibling, 300),
        acrossQuiet(coldSibling, 300),
      ]);
      expect(w).toEqual({ before: 3, idle: 3, after: 0 });
      expect(ws).toEqual({ before: 3, idle: 3, after: 0 });
      expect(c).toEqual({ before: 3, idle: 0, after: 3 });
      expect(cs).toEqual({ before: 3, idle: 0, after: 3 });
    } finally {
      await Promise.all(pools.map((pool) => pool.end()));
    }
  }, 30_000);
});
