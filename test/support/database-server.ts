/**
 * Vitest global setup: the PostgreSQL server every suite of the run creates its databases on.
 *
 * With `DATABASE_URL` set, that server is used and nothing starts here. Without it, one embedded
 * server (scripts/embedded-postgres.ts) starts for the whole run in a temporary directory,
 * disposable (no fsync), and `DATABASE_URL` is set to it before any test worker starts, so every
 * suite, and every process a suite spawns, inherits it; each suite still gets its own database
 * (test/indexer/fresh-database.ts). The server and its directory are removed at the end of the run.
 */
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startEmbeddedPostgres } from "../../scripts/embedded-postgres.js";

export default async function setup(): Promise<(() => Promise<void>) | undefined> {
  if (process.env.DATABASE_URL !== undefined && process.env.DATABASE_URL !== "") return undefined;
  const root = await mkdtemp(join(tmpdir(), "apg-test-postgres-"));
  // As root the server runs as the postgres user, which must be able to enter this directory.
  await chmod(root, 0o755);
  const server = await startEmbeddedPostgres({ dataDir: join(root, "data"), durable: false });
  process.env.DATABASE_URL = server.url;
  return async () => {
    await server.stop();
    await rm(root, { recursive: true, force: true });
  };
}
