/**
 * A fresh Postgres database per test file (random name), migrated, dropped after. Uses the server
 * of `DATABASE_URL` (the run's embedded server when the variable was not set: vitest's global
 * setup), or, in a bench run without it, the process's own embedded server
 * (test/support/database-server.ts), so every suite and bench runs the same code path.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { createPool } from "../../indexer/db/database.js";
import { migrate } from "../../indexer/db/migrate.js";
import { testServerUrl } from "../support/database-server.js";

export interface FreshDatabase {
  readonly url: string;
  readonly pool: pg.Pool;
  drop(): Promise<void>;
}

export async function createFreshDatabase(): Promise<FreshDatabase> {
  const adminUrl = await testServerUrl();
  const name = `apg_test_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const pool = createPool(url.toString());
  await migrate(pool);
  return {
    url: url.toString(),
    pool,
    async drop() {
      // pool.end() can resolve before every client has closed; the forced drop then terminates
      // one, and an idle client's error must not surface as an unhandled one.
      pool.on("error", () => undefined);
      await pool.end();
      const client = new pg.Client({ connectionString: adminUrl });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}
