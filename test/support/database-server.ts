/**
 * The PostgreSQL server tests and benches create their databases on.
 *
 * With `DATABASE_URL` set, that server is used and nothing starts here. Without it, a disposable
 * embedded server (scripts/embedded-postgres.ts: no fsync, in a temporary directory) is started:
 * - once for a whole vitest run (the default export is vitest's global setup): it sets
 *   `DATABASE_URL` before any test worker starts, so every suite, and every process a suite
 *   spawns, inherits it; each suite still gets its own database (test/indexer/fresh-database.ts);
 * - once per process for a bench (`testServerUrl`), stopped and removed when the process exits.
 */
import { rmSync } from "node:fs";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type EmbeddedPostgres, startEmbeddedPostgres } from "../../scripts/embedded-postgres.js";

function given(): string | null {
  const url = process.env.DATABASE_URL;
  return url === undefined || url === "" ? null : url;
}

async function startTestPostgres(): Promise<{ server: EmbeddedPostgres; root: string }> {
  const root = await mkdtemp(join(tmpdir(), "apg-test-postgres-"));
  // As root the server runs as the postgres user, which must be able to enter this directory.
  await chmod(root, 0o755);
  return { server: await startEmbeddedPostgres({ dataDir: join(root, "data"), durable: false }), root };
}

let processServer: Promise<string> | null = null;

/** `DATABASE_URL`, else this process's own embedded server (started at the first call). */
export function testServerUrl(): Promise<string> {
  const url = given();
  if (url !== null) return Promise.resolve(url);
  processServer ??= startTestPostgres().then(({ server, root }) => {
    // The server was asked to stop at exit (scripts/embedded-postgres.ts); its files go with it.
    process.once("exit", () => rmSync(root, { recursive: true, force: true }));
    server.unref();
    return server.url;
  });
  return processServer;
}

/** Vitest global setup: one server for the whole run. */
export default async function setup(): Promise<(() => Promise<void>) | undefined> {
  if (given() !== null) return undefined;
  const { server, root } = await startTestPostgres();
  process.env.DATABASE_URL = server.url;
  return async () => {
    await server.stop();
    await rm(root, { recursive: true, force: true });
  };
}
