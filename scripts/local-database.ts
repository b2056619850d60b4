/**
 * The database of the local system (`npm start`, `npm run reset`, `npm run admin`): `apg_local`
 * on the PostgreSQL server of `DATABASE_URL` when it is set, else on the embedded server whose
 * data directory is `.data/postgres` (scripts/embedded-postgres.ts). Never dropped except by a
 * reset: the local system keeps its state across restarts.
 *
 * Who owns the embedded server: `npm start` starts it and stops it with the system. A command run
 * beside a running system (`npm run admin`) connects to that server; run alone, it starts the
 * server for its own duration. A server left behind by a SIGKILLed `npm start` is stopped by the
 * next start, which then owns a server again.
 */
import pg from "pg";
import { runningServer, runningServerUrl, startEmbeddedPostgres, stopServerOf, withoutPassword } from "./embedded-postgres.js";

export const LOCAL_DATABASE = "apg_local";

export interface LocalDatabase {
  /** URL of `apg_local` (with the embedded server's password: never log it). */
  readonly url: string;
  /** What to print: the server, embedded or given, without its password. */
  readonly description: string;
  /** Whether `apg_local` was created by this call. */
  readonly created: boolean;
  /** Stops the embedded server when this call started it; nothing otherwise. */
  stop(): Promise<void>;
}

export interface LocalDatabaseOptions {
  readonly env: Readonly<Record<string, string | undefined>>;
  /** `.data/postgres`: the embedded server's data directory. */
  readonly dataDir: string;
  /**
   * `own`: this process runs the system and owns the server (a leftover server is stopped first);
   * `share`: use the running server when there is one, else start one for this process.
   */
  readonly mode: "own" | "share";
}

interface Server {
  readonly adminUrl: string;
  readonly description: string;
  stop(): Promise<void>;
}

function given(env: LocalDatabaseOptions["env"]): string | null {
  const url = env.DATABASE_URL;
  return url === undefined || url === "" ? null : url;
}

async function server(options: LocalDatabaseOptions): Promise<Server> {
  const url = given(options.env);
  if (url !== null) return { adminUrl: url, description: withoutPassword(url), stop: async () => undefined };
  const { dataDir } = options;
  const running = await runningServer(dataDir);
  if (running !== null && options.mode === "share") {
    const adminUrl = await runningServerUrl(dataDir, running.port);
    return { adminUrl, description: `embedded (${dataDir}, running)`, stop: async () => undefined };
  }
  if (running !== null) await stopServerOf(dataDir);
  const embedded = await startEmbeddedPostgres({ dataDir });
  return {
    adminUrl: embedded.url,
    description: `embedded PostgreSQL 127.0.0.1:${embedded.port} (data in ${dataDir})`,
    stop: () => embedded.stop(),
  };
}

function databaseUrlOn(adminUrl: string): string {
  const url = new URL(adminUrl);
  url.pathname = `/${LOCAL_DATABASE}`;
  return url.toString();
}

/** Opens `apg_local`, creating it (empty) when the server has none. */
export async function openLocalDatabase(options: LocalDatabaseOptions): Promise<LocalDatabase> {
  const host = await server(options);
  try {
    const admin = new pg.Client({ connectionString: host.adminUrl });
    await admin.connect();
    let created = false;
    try {
      const { rowCount } = await admin.query("SELECT 1 FROM pg_database WHERE datname = $1", [LOCAL_DATABASE]);
      if (rowCount === 0) {
        await admin.query(`CREATE DATABASE ${LOCAL_DATABASE}`);
        created = true;
      }
    } finally {
      await admin.end();
    }
    return { url: databaseUrlOn(host.adminUrl), description: host.description, created, stop: () => host.stop() };
  } catch (error) {
    await host.stop();
    throw error;
  }
}

/**
 * Drops `apg_local` from the server of `DATABASE_URL`. The embedded server needs no drop: a reset
 * removes its whole data directory.
 */
export async function dropGivenLocalDatabase(env: LocalDatabaseOptions["env"]): Promise<boolean> {
  const url = given(env);
  if (url === null) return false;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${LOCAL_DATABASE} WITH (FORCE)`);
  } finally {
    await admin.end();
  }
  return true;
}
