/**
 * Applies `migrations/NNN_name.sql` in order, each in its own transaction, recording applied
 * versions in `schema_migrations`. An advisory lock keeps two processes from migrating at once.
 */
import { readdir, readFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type pg from "pg";
import { inTransaction } from "./database.js";

export const MIGRATIONS_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "migrations");
const MIGRATION_FILE = /^(\d{3})_[a-z0-9_]+\.sql$/;
const MIGRATION_LOCK = 7_240_001;

export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

export async function readMigrations(dir: string = MIGRATIONS_DIR): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((file) => MIGRATION_FILE.test(file)).sort();
  const migrations: Migration[] = [];
  for (const file of files) {
    const version = Number(MIGRATION_FILE.exec(file)![1]);
    if (migrations.some((m) => m.version === version)) throw new Error(`two migrations with version ${version}`);
    migrations.push({ version, name: file, sql: await readFile(join(dir, file), "utf8") });
  }
  return migrations;
}

/** Returns the names of the migrations it applied. */
export async function migrate(pool: pg.Pool, dir: string = MIGRATIONS_DIR): Promise<string[]> {
  const migrations = await readMigrations(dir);
  const client = await pool.connect();
  const applied: string[] = [];
  try {
    await client.query("SELECT pg_advisory_lock($1)", [MIGRATION_LOCK]);
    await client.query(
      `CREATE TABLE IF NOT EXISTS schema_migrations (
         version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    const done = new Set((await client.query<{ version: number }>("SELECT version FROM schema_migrations")).rows.map((r) => r.version));
    for (const migration of migrations) {
      if (done.has(migration.version)) continue;
      try {
        await inTransaction(client, async (tx) => {
          await tx.query(migration.sql);
          await tx.query("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", [migration.version, migration.name]);
        });
      } catch (error) {
        throw new Error(`migration ${migration.name} failed: ${(error as Error).message}`, { cause: error });
      }
      applied.push(migration.name);
    }
  } finally {
    await client.query("SELECT pg_advisory_unlock($1)", [MIGRATION_LOCK]).catch(() => undefined);
    client.release();
  }
  return applied;
}
