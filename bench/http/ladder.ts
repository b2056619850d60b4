/**
 * `npm run bench:http`: the query service's request path as a ladder, one layer per rung, each
 * measured with the same load generator (`wrk`, --connections at once, --seconds per rung after a
 * warmup) against a server in its own process (bench/http/rungs.ts) on the same machine:
 *
 *   1. bare node:http answering a fixed GraphQL-shaped body (the floor);
 *   2. + API-key authentication (the `Authorization: Bearer` lookup every request makes);
 *   3. + GraphQL: the query service answering an authenticated `{ __typename }`;
 *   4. + a read: `transactions(limit: 50)` for one account of a store of --payments payments;
 *   5. the REST authorize route (`POST /v1/agents/{agent}/payments/authorize`, an x402 offer): the
 *      policy check, the reservation under the agent's lock, the signed payment, over --payers
 *      agents in turn, on a whole system (local ledger, indexer, gateway) with a database of its own;
 *      each request with an Idempotency-Key of its own, as the SDKs send.
 *
 * Rungs 2-4 run the current path and the previous ones (`old`: every request reads its key from
 * Postgres, graphql-js executes; `all through yoga`: no direct path for POST /graphql) interleaved,
 * round after round, so each lever is judged against
 * the code it replaced under the same load of the machine; rungs 3-4 also run through
 * --workers processes sharing one port (QUERY_WORKERS). Each figure is the median of --rounds.
 * The query service's rungs run under the Node options its `npm run query` script gives
 * (package.json; a --baseline checkout's own), as the service is deployed.
 * --baseline DIR (another checkout of the repository, with its node_modules, e.g. the previous
 * commit's `git archive` unpacked) adds rung 4 as that code runs it, interleaved with the others:
 * its own rung process, on a store seeded and migrated by its own code (its schema, its indexes);
 * and rung 5 (its own system, on a database of its own; a checkout older than that rung fails it).
 * Rung 5's CPU per request counts the whole system's process (its indexer too) and the ledger's.
 *
 * The store is seeded set-based (INSERT … SELECT generate_series) straight into the tables the
 * listing reads (`accounts`, `agents`, `endpoints`, `transactions`): the read is measured, not
 * the ingest (bench/api/queries.ts seeds through the indexer instead, far slower).
 *
 *   npm run bench:http [-- --payments 1000000 --seconds 5 --warmup 2 --rounds 3 --connections 32 --workers 2 --baseline DIR]
 *
 * Uses a throwaway database (DATABASE_URL's server, else its own embedded one), dropped at the end.
 */
import { type ChildProcess, execFile, execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import pg from "pg";
import { issueApiKey } from "../../api/shared/keys.js";
import { createFreshDatabase } from "../../test/indexer/fresh-database.js";
import { startRungProcess } from "./rung-process.js";
import { seedPayments } from "./store.js";

const { values: flags } = parseArgs({
  options: {
    payments: { type: "string", default: "1000000" },
    agents: { type: "string", default: "1000" },
    accounts: { type: "string", default: "50" },
    seconds: { type: "string", default: "5" },
    warmup: { type: "string", default: "2" },
    rounds: { type: "string", default: "3" },
    connections: { type: "string", default: "32" },
    workers: { type: "string", default: "2" },
    /** Agents the authorize rung pays from in turn (each under its own lock). */
    payers: { type: "string", default: "32" },
    /** Only the rungs whose label matches (the floor always runs): to look at one layer. */
    only: { type: "string" },
    /** Another checkout whose rung 4 runs interleaved with this one's, on its own store. */
    baseline: { type: "string" },
  },
});
const PAYMENTS = Number(flags.payments);
const AGENTS = Number(flags.agents);
const ACCOUNTS = Number(flags.accounts);
const SECONDS = Number(flags.seconds);
const WARMUP = Number(flags.warmup);
const ROUNDS = Number(flags.rounds);
const CONNECTIONS = Number(flags.connections);
const WORKERS = Number(flags.workers);
const PAYERS = Number(flags.payers);
const WRK = process.env.WRK ?? "/usr/bin/wrk";
const GOAL_TYPENAME_SHARE = 0.25;
const GOAL_TRANSACTIONS_RPS = 2_000;
const GOAL_TRANSACTIONS_P99_MS = 20;

const TYPENAME = JSON.stringify({ query: "{ __typename }" });
const TRANSACTIONS = JSON.stringify({
  query: `query T($limit: Int) { transactions(limit: $limit) {
    nodes { id txHash agentId protocol amountPaidUnits endpoint domain timestamp depth status }
    pageInfo { hasNextPage endCursor } } }`,
  variables: { limit: 50 },
});

interface Config {
  readonly label: string;
  readonly rung: "bare" | "auth" | "graphql" | "authorize";
  readonly args: readonly string[];
  readonly body: string;
  /** Runs from the --baseline checkout, on its store. */
  readonly baseline?: true;
}

/** Where a rung runs: the checkout's directory, its store, a key of that store. */
interface Target {
  readonly dir: string;
  readonly databaseUrl: string;
  readonly apiKey: string;
}

interface Figure {
  readonly rps: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** CPU per answered request of the rung's processes and of Postgres's backends on its store, µs. */
  readonly nodeUs: number;
  readonly pgUs: number;
}

/** Clock ticks per second of /proc's CPU times. */
const CLOCK_TICKS = Number(execFileSync("getconf", ["CLK_TCK"]).toString().trim());

/** user + system CPU ticks of each process, and each one's parent, from /proc. */
function processTicks(): Map<number, { ppid: number; ticks: number }> {
  const table = new Map<number, { ppid: number; ticks: number }>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // Fields after the command's closing parenthesis: state ppid … utime (12th) stime (13th).
      const fields = readFileSync(`/proc/${entry}/stat`, "utf8").split(") ").at(-1)!.split(" ");
      table.set(Number(entry), { ppid: Number(fields[1]), ticks: Number(fields[11]) + Number(fields[12]) });
    } catch {
      // The process ended while the table was read.
    }
  }
  return table;
}

/**
 * The CPU ticks a rung has used so far: its process and every descendant (workers), and the
 * Postgres backends connected to its store (same machine: the server of DATABASE_URL or the
 * embedded one). CPU time is what a busy shared machine distorts least.
 */
async function rungTicks(rootPid: number, databaseUrl: string): Promise<{ node: number; pg: Map<number, number> }> {
  const table = processTicks();
  let node = 0;
  const tree = new Set([rootPid]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const [pid, { ppid }] of table) {
      if (tree.has(ppid) && !tree.has(pid)) {
        tree.add(pid);
        grew = true;
      }
    }
  }
  for (const pid of tree) node += table.get(pid)?.ticks ?? 0;
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const backends = await client.query<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
    );
    return { node, pg: new Map(backends.rows.map(({ pid }) => [pid, table.get(pid)?.ticks ?? 0])) };
  } finally {
    await client.end();
  }
}

const count = (n: number): string => Math.round(n).toLocaleString("en-US");

/** What the authorize rung made for its callers: its own database, key, agents and request body. */
interface RungCaller {
  readonly databaseUrl: string;
  readonly apiKey: string;
  readonly agents: readonly string[];
  readonly body: string;
}

/**
 * The Node options `npm run query` starts the query service with in `dir`'s package.json (the
 * words between `node` and `--import`): its rungs run under them, as the service is deployed.
 */
function queryServiceNodeOptions(dir: string): string[] {
  const scripts = (JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts;
  const words = (scripts.query ?? "").split(/\s+/);
  const end = words.indexOf("--import");
  return words[0] === "node" && end > 0 ? words.slice(1, end) : [];
}

/** Starts a rung's server process; resolves with it and its port once it listens. */
async function startRung(config: Config, target: Target): Promise<{ child: ChildProcess; port: number; caller: RungCaller | null }> {
  const args = config.rung === "authorize" ? ["--agents", String(PAYERS)] : [];
  const { child, port, output } = await startRungProcess([config.rung, ...config.args, ...args], {
    cwd: target.dir,
    databaseUrl: target.databaseUrl,
    nodeOptions: config.rung === "graphql" ? queryServiceNodeOptions(target.dir) : [],
  }).catch((error: unknown) => {
    throw new Error(`rung ${config.label}: ${error instanceof Error ? error.message : String(error)}`);
  });
  const made = /^caller (\S+) (\S+) (\S+) (\S+)$/m.exec(output);
  const caller =
    made === null
      ? null
      : { databaseUrl: made[1]!, apiKey: made[2]!, agents: made[3]!.split(","), body: Buffer.from(made[4]!, "base64").toString() };
  return { child, port, caller };
}

async function stopRung(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  await new Promise<void>((resolve) => {
    child.once("exit", () => resolve());
    child.kill("SIGTERM");
  });
}

function runWrk(url: string, script: string, seconds: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      WRK,
      ["-t1", `-c${CONNECTIONS}`, `-d${seconds}s`, "--timeout", "10s", "--latency", "-s", script, url],
      { maxBuffer: 1 << 20 },
      (error, stdout, stderr) => (error === null ? resolve(stdout) : reject(new Error(`${error.message}\n${stderr}`))),
    );
  });
}

function milliseconds(text: string): number {
  const match = /^([\d.]+)(us|ms|s)$/.exec(text.trim());
  if (match === null) throw new Error(`unreadable latency ${text}`);
  const value = Number(match[1]);
  return match[2] === "us" ? value / 1000 : match[2] === "s" ? value * 1000 : value;
}

/** Requests/s and latency percentiles from wrk's report; any non-2xx answer or socket error fails the run. */
function parseWrk(label: string, output: string): Omit<Figure, "nodeUs" | "pgUs"> & { requests: number } {
  if (/Non-2xx or 3xx responses/.test(output) || /Socket errors/.test(output)) {
    throw new Error(`${label}: answers were not all 200\n${output}`);
  }
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(output)?.[1]);
  const p50 = /\s50%\s+(\S+)/.exec(output)?.[1];
  const p99 = /\s99%\s+(\S+)/.exec(output)?.[1];
  if (!Number.isFinite(rps) || p50 === undefined || p99 === undefined) throw new Error(`${label}: unreadable wrk output\n${output}`);
  const requests = Number(/(\d+) requests in/.exec(output)?.[1]);
  return { rps, p50Ms: milliseconds(p50), p99Ms: milliseconds(p99), requests };
}

/**
 * The wrk script: the POST of `body` with the Bearer key, to `paths` in turn; with `keyPrefix`,
 * each request carries its own `Idempotency-Key` (`<prefix>-<n>`), as the SDKs send one on every POST.
 */
function wrkScript(apiKey: string, body: string, paths: readonly string[], keyPrefix?: string): string {
  return `wrk.method = "POST"
wrk.body = ${JSON.stringify(body)}
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer ${apiKey}"
local paths = { ${paths.map((p) => JSON.stringify(p)).join(", ")} }
local i = 0
request = function()
  i = i + 1
${
  keyPrefix === undefined
    ? "  return wrk.format(nil, paths[(i % #paths) + 1])"
    : `  local headers = {}
  for name, value in pairs(wrk.headers) do headers[name] = value end
  headers["Idempotency-Key"] = "${keyPrefix}-" .. i
  return wrk.format(nil, paths[(i % #paths) + 1], headers)`
}
end
`;
}

/** One answer checked before the load: the rung answers what it should. */
async function checkAnswer(config: Config, response: Response): Promise<void> {
  const text = await response.text();
  if (response.status !== 200 || text.includes('"errors"')) throw new Error(`${config.label}: ${response.status} ${text.slice(0, 300)}`);
  if (config.rung === "authorize") {
    const answer = JSON.parse(text) as { reservationId?: unknown; headers?: Record<string, unknown> };
    if (typeof answer.reservationId !== "string" || answer.headers === undefined)
      throw new Error(`${config.label}: not a signed payment: ${text.slice(0, 300)}`);
  } else if (
    config.body === TRANSACTIONS &&
    (JSON.parse(text) as { data: { transactions: { nodes: unknown[] } } }).data.transactions.nodes.length !== 50
  ) {
    throw new Error(`${config.label}: not a full page`);
  }
}

async function measure(config: Config, target: Target, dir: string): Promise<Figure> {
  const { child, port, caller } = await startRung(config, target);
  try {
    const apiKey = caller?.apiKey ?? target.apiKey;
    const body = caller?.body ?? config.body;
    const databaseUrl = caller?.databaseUrl ?? target.databaseUrl;
    const paths = caller === null ? ["/graphql"] : caller.agents.map((agent) => `/v1/agents/${agent}/payments/authorize`);
    // The authorize rung's requests carry keys unique to each wrk run (the warmup's and the measured run's differ).
    const script = async (run: string): Promise<string> => {
      const file = join(dir, `${config.label.replace(/\W+/g, "-")}-${run}.lua`);
      await writeFile(file, wrkScript(apiKey, body, paths, caller === null ? undefined : randomUUID()));
      return file;
    };
    const url = `http://127.0.0.1:${port}`;
    await checkAnswer(
      config,
      await fetch(`${url}${paths[0]}`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
        body,
      }),
    );
    if (WARMUP > 0) parseWrk(config.label, await runWrk(url, await script("warmup"), WARMUP));
    const measured = await script("measured");
    const before = await rungTicks(child.pid!, databaseUrl);
    const { requests, ...figure } = parseWrk(config.label, await runWrk(url, measured, SECONDS));
    const after = await rungTicks(child.pid!, databaseUrl);
    // Backends present at both ends (the pool's, busy throughout); the bench's own idle ones add ~0.
    let pgTicks = 0;
    for (const [pid, ticks] of after.pg) pgTicks += ticks - (before.pg.get(pid) ?? 0);
    const perRequest = (ticks: number): number => ((ticks / CLOCK_TICKS) * 1e6) / requests;
    return { ...figure, nodeUs: perRequest(after.node - before.node), pgUs: perRequest(pgTicks) };
  } finally {
    await stopRung(child);
  }
}

function median(figures: readonly Figure[]): Figure {
  const pick = (values: number[]): number => values.sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
  return {
    rps: pick(figures.map((f) => f.rps)),
    p50Ms: pick(figures.map((f) => f.p50Ms)),
    p99Ms: pick(figures.map((f) => f.p99Ms)),
    nodeUs: pick(figures.map((f) => f.nodeUs)),
    pgUs: pick(figures.map((f) => f.pgUs)),
  };
}

/** The --baseline checkout's own store: seeded and migrated by its code, so its schema is its own. */
async function baselineTarget(baselineDir: string): Promise<{ target: Target; drop(): Promise<void> }> {
  const from = (path: string): string => pathToFileURL(join(baselineDir, path)).href;
  const fresh = (await import(from("test/indexer/fresh-database.ts"))) as typeof import("../../test/indexer/fresh-database.js");
  const store = (await import(from("bench/http/store.ts"))) as typeof import("./store.js");
  const keys = (await import(from("api/shared/keys.ts"))) as typeof import("../../api/shared/keys.js");
  const db = await fresh.createFreshDatabase();
  const accountId = await store.seedPayments(db.pool, { payments: PAYMENTS, agents: AGENTS, accounts: ACCOUNTS });
  const { apiKey } = await keys.issueApiKey(db.pool, accountId);
  return { target: { dir: baselineDir, databaseUrl: db.url, apiKey }, drop: () => db.drop() };
}

async function run(): Promise<void> {
  const db = await createFreshDatabase();
  const dir = await mkdtemp(join(tmpdir(), "bench-http-"));
  const baselineDir = flags.baseline === undefined ? undefined : resolve(flags.baseline);
  let baseline: Awaited<ReturnType<typeof baselineTarget>> | undefined;
  try {
    const seedStart = performance.now();
    const accountId = await seedPayments(db.pool, { payments: PAYMENTS, agents: AGENTS, accounts: ACCOUNTS });
    const seedMs = performance.now() - seedStart;
    const { apiKey } = await issueApiKey(db.pool, accountId);
    const current: Target = { dir: process.cwd(), databaseUrl: db.url, apiKey };
    if (baselineDir !== undefined) baseline = await baselineTarget(baselineDir);
    console.log(
      `store: ${count(PAYMENTS)} payments of ${count(AGENTS)} agents in ${ACCOUNTS} accounts (seeded in ${(seedMs / 1000).toFixed(1)} s); ` +
        `wrk -t1 -c${CONNECTIONS}, ${SECONDS} s per rung after ${WARMUP} s warmup, median of ${ROUNDS} rounds`,
    );
    console.log(`query service rungs under the Node options of its \`npm run query\`: ${queryServiceNodeOptions(".").join(" ") || "none"}`);
    if (baseline !== undefined) console.log(`baseline: ${baselineDir} (its own store, seeded and migrated by its code)`);
    const workers = ["--workers", String(WORKERS)];
    const configs: Config[] = [
      { label: "bare node:http", rung: "bare", args: [], body: TYPENAME },
      { label: "+ API-key auth (old: SELECT per request)", rung: "auth", args: ["--old"], body: TYPENAME },
      { label: "+ API-key auth", rung: "auth", args: [], body: TYPENAME },
      { label: "+ GraphQL { __typename } (old path)", rung: "graphql", args: ["--old"], body: TYPENAME },
      { label: "+ GraphQL { __typename } (key cache, no jit)", rung: "graphql", args: ["--no-jit"], body: TYPENAME },
      { label: "+ GraphQL { __typename } (all through yoga)", rung: "graphql", args: ["--no-direct"], body: TYPENAME },
      ...(baseline === undefined
        ? []
        : [{ label: "+ GraphQL { __typename }, baseline", rung: "graphql", args: [], body: TYPENAME, baseline: true } as const]),
      { label: "+ GraphQL { __typename }", rung: "graphql", args: [], body: TYPENAME },
      { label: `+ GraphQL { __typename }, ${WORKERS} workers`, rung: "graphql", args: workers, body: TYPENAME },
      { label: "+ transactions(limit: 50) (old path)", rung: "graphql", args: ["--old"], body: TRANSACTIONS },
      { label: "+ transactions(limit: 50) (key cache, no jit)", rung: "graphql", args: ["--no-jit"], body: TRANSACTIONS },
      { label: "+ transactions(limit: 50) (all through yoga)", rung: "graphql", args: ["--no-direct"], body: TRANSACTIONS },
      ...(baseline === undefined
        ? []
        : [{ label: "+ transactions(limit: 50), baseline", rung: "graphql", args: [], body: TRANSACTIONS, baseline: true } as const]),
      { label: "+ transactions(limit: 50), no first-page bound", rung: "graphql", args: ["--no-page-bounds"], body: TRANSACTIONS },
      { label: "+ transactions(limit: 50)", rung: "graphql", args: [], body: TRANSACTIONS },
      { label: `+ transactions(limit: 50), ${WORKERS} workers`, rung: "graphql", args: workers, body: TRANSACTIONS },
      { label: "REST authorize (old: SELECT per request)", rung: "authorize", args: ["--old"], body: "" },
      ...(baseline === undefined
        ? []
        : [{ label: "REST authorize, baseline", rung: "authorize", args: [], body: "", baseline: true } as const]),
      { label: "REST authorize", rung: "authorize", args: [], body: "" },
    ];
    const only = flags.only === undefined ? null : new RegExp(flags.only);
    const chosen = configs.filter((c) => c.rung === "bare" || only === null || only.test(c.label));
    configs.splice(0, configs.length, ...chosen);
    const samples = new Map<string, Figure[]>(configs.map((c) => [c.label, []]));
    const loads: number[] = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      for (const config of configs) {
        const figure = await measure(config, config.baseline ? baseline!.target : current, dir);
        samples.get(config.label)!.push(figure);
        process.stderr.write(
          `round ${round + 1} ${config.label}: ${count(figure.rps)}/s p99 ${figure.p99Ms.toFixed(2)} ms, ` +
            `CPU per request ${count(figure.nodeUs)} µs node + ${count(figure.pgUs)} µs postgres\n`,
        );
      }
      loads.push(loadavg()[0]!);
    }
    const figures = new Map([...samples].map(([label, list]) => [label, median(list)]));
    const floor = figures.get("bare node:http")!;
    console.log(
      `machine: ${availableParallelism()} cores; 1-minute load average after each round: ${loads.map((l) => l.toFixed(1)).join(", ")}`,
    );
    console.log(
      `${"rung".padEnd(50)}${"requests/s".padStart(12)}${"p50".padStart(10)}${"p99".padStart(10)}${"of floor".padStart(10)}` +
        `${"node µs/req".padStart(13)}${"pg µs/req".padStart(11)}`,
    );
    for (const config of configs) {
      const f = figures.get(config.label)!;
      console.log(
        `${config.label.padEnd(50)}${count(f.rps).padStart(12)}${`${f.p50Ms.toFixed(2)} ms`.padStart(10)}` +
          `${`${f.p99Ms.toFixed(2)} ms`.padStart(10)}${`${((f.rps / floor.rps) * 100).toFixed(1)} %`.padStart(10)}` +
          `${count(f.nodeUs).padStart(13)}${count(f.pgUs).padStart(11)}`,
      );
    }
    const best = (labels: string[]): [string, Figure] =>
      labels.map((l) => [l, figures.get(l)!] as [string, Figure]).reduce((a, b) => (b[1].rps > a[1].rps ? b : a));
    if (only !== null) return;
    const [typenameLabel, typename] = best(["+ GraphQL { __typename }", `+ GraphQL { __typename }, ${WORKERS} workers`]);
    const [listLabel, list] = best(["+ transactions(limit: 50)", `+ transactions(limit: 50), ${WORKERS} workers`]);
    const share = typename.rps / floor.rps;
    console.log(
      `goal { __typename } >= ${GOAL_TYPENAME_SHARE * 100} % of the floor: ${share >= GOAL_TYPENAME_SHARE ? "met" : "NOT met"} ` +
        `(${(share * 100).toFixed(1)} %, ${typenameLabel.slice(2)})`,
    );
    const listMet = list.rps >= GOAL_TRANSACTIONS_RPS && list.p99Ms < GOAL_TRANSACTIONS_P99_MS;
    console.log(
      `goal transactions(limit: 50) >= ${count(GOAL_TRANSACTIONS_RPS)}/s and p99 < ${GOAL_TRANSACTIONS_P99_MS} ms: ` +
        `${listMet ? "met" : "NOT met"} (${count(list.rps)}/s, p99 ${list.p99Ms.toFixed(2)} ms, ${listLabel.slice(2)})`,
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
    await baseline?.drop();
    await db.drop();
  }
}

run().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
