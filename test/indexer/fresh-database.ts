/**
 * A fresh Postgres database per test file (random name), migrated, dropped after. Uses the server
 * of `DATABASE_URL` (else the machine's local one), so every suite runs the same code path.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { createPool, databaseUrl } from "../../indexer/db/database.js";
import { migrate } from "../../indexer/db/migrate.js";

export interface FreshDatabase {
  readonly url: string;
  readonly pool: pg.Pool;
  drop(): Promise<void>;
}

export async function createFreshDatabase(): Promise<FreshDatabase> {
  const adminUrl = databaseUrl();
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
