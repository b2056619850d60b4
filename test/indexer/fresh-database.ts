/**
 * A fresh Postgres database per test file (random name), migrated, dropped after. Uses the server
 * of `DATABASE_URL` (the run's embedded server when the variable was not set: vitest's global
 * setup), or, in a bench run without it, the process's own embedded server
 * (test/support/database-server.ts), so every suite and bench runs the same code path.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { createPool } from "../../indexer/db/database.js";
import { MIGRATIONS_DIR, migrate, readMigrations } from "../../indexer/db/migrate.js";
import { testServerUrl } from "../support/database-server.js";

export interface FreshDatabase {
  readonly url: string;
  readonly pool: pg.Pool;
  drop(): Promise<void>;
}

export interface FreshDatabaseOptions {
  /** Only the migrations numbered below this one: the schema of an earlier time (a reference path's). */
  readonly before?: number;
  /** With `before`: these later migrations too (a change to tables the current projections write). */
  readonly also?: readonly number[];
  /** A copy of this database (`CREATE DATABASE ... TEMPLATE`: its files, not its rows one by one). */
  readonly copyOf?: FreshDatabase;
}

const nameOf = (url: string): string => new URL(url).pathname.slice(1);

/** Migrates `pool`, through every migration or only those numbered below `before` (and `also`). */
async function migrateUpTo(pool: pg.Pool, before: number | undefined, also: readonly number[] = []): Promise<void> {
  if (before === undefined) {
    await migrate(pool);
    return;
  }
  const dir = await mkdtemp(join(tmpdir(), "apg-migrations-"));
  try {
    for (const migration of await readMigrations()) {
      if (migration.version < before || also.includes(migration.version))
        await symlink(join(MIGRATIONS_DIR, migration.name), join(dir, migration.name));
    }
    await migrate(pool, dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export async function createFreshDatabase(options: FreshDatabaseOptions = {}): Promise<FreshDatabase> {
  const adminUrl = await testServerUrl();
  const name = `apg_test_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    if (options.copyOf === undefined) {
      await admin.query(`CREATE DATABASE ${name}`);
    } else {
      // A template must have no session: the source's pooled connections are closed (its pool
      // opens new ones at its next query).
      const source = nameOf(options.copyOf.url);
      await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", [source]);
      await admin.query(`CREATE DATABASE ${name} TEMPLATE ${source}`);
    }
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const pool = createPool(url.toString());
  if (options.copyOf === undefined) await migrateUpTo(pool, options.before, options.also);
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
