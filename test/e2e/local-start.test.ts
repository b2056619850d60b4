/**
 * `npm start` as a newcomer runs it (scripts/start.ts as its own process) on a machine whose
 * PostgreSQL it must not need: DATABASE_URL is removed from its environment, so it runs its own
 * embedded server, with its state in a temporary APG_DATA_DIR and every port free.
 *
 * A restart keeps the account, its keys and agents; `--reset` empties everything; a ledger and a
 * database that do not belong together are refused with the command that fixes it; a second
 * start on the same state is refused while the first runs.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { freePortPair } from "../../scripts/localnet.js";
import { TYPESCRIPT_LOADER } from "../../scripts/typescript/loader.js";
import { restCall } from "../support/rest.js";

const BANNER_DEADLINE_MS = 90_000;

interface Started {
  readonly child: ChildProcess;
  readonly apiUrl: string;
  readonly accountId: string;
  /** The demo key, printed at the first start only. */
  readonly apiKey: string | null;
  readonly banner: string;
}

interface Ended {
  readonly code: number | null;
  readonly stderr: string;
}

const dirs: string[] = [];
const children: ChildProcess[] = [];

async function stateDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "apg-start-"));
  // As root the embedded server runs as the postgres user, which must enter this directory.
  await chmod(dir, 0o755);
  dirs.push(dir);
  return dir;
}

async function environment(dataDir: string): Promise<NodeJS.ProcessEnv> {
  const env: NodeJS.ProcessEnv = { ...process.env, APG_DATA_DIR: dataDir, PORT: "0", LOCALNET_RPC_PORT: String(await freePortPair()) };
  delete env.DATABASE_URL;
  return env;
}

function run(dataDir: string, env: NodeJS.ProcessEnv, args: readonly string[] = []): ChildProcess {
  // As `npm start` runs it: node with the project's TypeScript loader (package.json).
  const child = spawn(process.execPath, [...TYPESCRIPT_LOADER, "scripts/start.ts", ...args], {
    env: { ...env, APG_DATA_DIR: dataDir },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  return child;
}

function ended(child: ChildProcess): Promise<Ended> {
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => {
    stderr += chunk.toString("utf8");
  });
  return new Promise((resolve) => {
    if (child.exitCode !== null) resolve({ code: child.exitCode, stderr });
    child.once("exit", (code) => resolve({ code, stderr }));
  });
}

/** Starts the system and waits for its banner. */
async function start(dataDir: string, env: NodeJS.ProcessEnv, args: readonly string[] = []): Promise<Started> {
  const child = run(dataDir, env, args);
  const exit = ended(child);
  let out = "";
  const banner = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no banner after ${BANNER_DEADLINE_MS} ms:\n${out}`)), BANNER_DEADLINE_MS);
    child.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString("utf8");
      if (out.includes("Ctrl-C to stop")) {
        clearTimeout(timer);
        resolve(out);
      }
    });
    void exit.then(({ code, stderr }) => {
      clearTimeout(timer);
      reject(new Error(`npm start exited (${code}) before its banner:\n${stderr}`));
    });
  });
  const field = (label: string): string => {
    const match = new RegExp(`^\\s+${label}\\s+(\\S+)`, "m").exec(banner);
    if (match === null) throw new Error(`no "${label}" in the banner:\n${banner}`);
    return match[1]!;
  };
  const key = /^\s+demo API key\s+(apg_\S+)/m.exec(banner);
  return { child, apiUrl: field("GraphQL").replace(/\/graphql$/, ""), accountId: field("demo account"), apiKey: key?.[1] ?? null, banner };
}

/** Ctrl-C, and the exit code. */
async function stop(started: Started): Promise<number | null> {
  const exit = ended(started.child);
  started.child.kill("SIGINT");
  return (await exit).code;
}

afterAll(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGINT");
  await new Promise((resolve) => setTimeout(resolve, 2_000)); // a fixed pause: the servers stop on their own
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

describe("npm start on embedded defaults", () => {
  it("keeps the account, its keys and its agents across a restart, and says how to get a new key", async () => {
    const dir = await stateDir();
    const env = await environment(dir);
    const first = await start(dir, env);
    expect(first.banner).toContain("embedded PostgreSQL");
    expect(first.banner).toContain("new chain");
    expect(first.apiKey).not.toBeNull();
    const created = await restCall(first.apiUrl, "POST", "/v1/agents", { key: first.apiKey!, body: { agentId: "kept" } });
    expect(created.status, created.text).toBe(201);
    expect(await stop(first)).toBe(0);

    const second = await start(dir, env);
    expect(second.banner).toContain("resumed");
    expect(second.apiKey).toBeNull();
    expect(second.accountId).toBe(first.accountId);
    expect(second.banner).toContain(`npm run admin -- issue-key ${first.accountId}`);
    const agent = await restCall(second.apiUrl, "GET", "/v1/agents/kept", { key: first.apiKey! });
    expect(agent.status, agent.text).toBe(200);

    // The documented command issues a key while the system runs (it shares its database server).
    const admin = spawn(process.execPath, ["--import", "tsx", "scripts/admin.ts", "issue-key", first.accountId], {
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let adminOut = "";
    admin.stdout!.on("data", (chunk: Buffer) => {
      adminOut += chunk.toString("utf8");
    });
    expect((await ended(admin)).code).toBe(0);
    const issued = JSON.parse(adminOut) as { apiKey: string };
    expect((await restCall(second.apiUrl, "GET", "/v1/agents/kept", { key: issued.apiKey })).status).toBe(200);

    // A second system on the same state is refused while this one runs.
    const twice = await ended(run(dir, env));
    expect(twice.code).toBe(1);
    expect(twice.stderr).toContain("already running");
    expect(await stop(second)).toBe(0);
  });

  it("--reset starts an empty system: a new chain, a new demo key, the old key and agents gone", async () => {
    const dir = await stateDir();
    const env = await environment(dir);
    const first = await start(dir, env);
    expect((await restCall(first.apiUrl, "POST", "/v1/agents", { key: first.apiKey!, body: { agentId: "gone" } })).status).toBe(201);
    expect(await stop(first)).toBe(0);

    const reset = await start(dir, env, ["--reset"]);
    expect(reset.banner).toContain("new chain");
    expect(reset.apiKey).not.toBeNull();
    expect(reset.apiKey).not.toBe(first.apiKey);
    expect((await restCall(reset.apiUrl, "GET", "/v1/agents", { key: first.apiKey! })).status).toBe(401);
    const agents = await restCall(reset.apiUrl, "GET", "/v1/agents", { key: reset.apiKey! });
    expect(agents.status).toBe(200);
    expect(agents.body).toMatchObject({ agents: [] });
    expect(await stop(reset)).toBe(0);
  });

  it("refuses a ledger and a database that do not belong together, naming the reset command", async () => {
    const dir = await stateDir();
    const env = await environment(dir);
    expect(await stop(await start(dir, env))).toBe(0);

    // The ledger wiped by hand: the database holds another chain's history.
    await rm(join(dir, "localnet"), { recursive: true, force: true });
    const ledgerWiped = await ended(run(dir, env));
    expect(ledgerWiped.code).toBe(1);
    expect(ledgerWiped.stderr).toContain("do not belong together");
    expect(ledgerWiped.stderr).toContain("npm run reset");

    // Start afresh, then the database wiped by hand: the ledger's history has no database.
    expect(await stop(await start(dir, env, ["--reset"]))).toBe(0);
    await rm(join(dir, "postgres"), { recursive: true, force: true });
    const databaseWiped = await ended(run(dir, env));
    expect(databaseWiped.code).toBe(1);
    expect(databaseWiped.stderr).toContain("the database is new");
    expect(databaseWiped.stderr).toContain("npm run reset");
  });
});
