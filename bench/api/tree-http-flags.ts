/**
 * `npm run bench:api:flags`: the GraphQL tree over HTTP (5,000 nodes, the API's node limit) served
 * by the query service under different Node options, each in its own process on the same store,
 * the requests alternating between them so load from elsewhere falls on all alike. It weighs
 * V8 heap settings for the services' scripts in package.json: a tree answer keeps the pg rows, the
 * loader's nodes, the resolver's records, graphql-jit's result and its JSON text alive together,
 * and a young generation too small for that copies them from scavenge to scavenge.
 * Prints p50/p99/mean latency and the server process's CPU time per request for each.
 *
 *   npx tsx bench/api/tree-http-flags.ts [--iterations 30 --rounds 3 --flags= --flags=--max-semi-space-size=64]
 *
 * Uses a throwaway database (DATABASE_URL's server, else its own embedded one), dropped at the end.
 */
import type { ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { availableParallelism, loadavg } from "node:os";
import { parseArgs } from "node:util";
import { issueApiKey } from "../../api/shared/keys.js";
import { TREE_NODE_LIMIT_MAX } from "../../api/shared/validation.js";
import { createFreshDatabase } from "../../test/indexer/fresh-database.js";
import { startRungProcess } from "../http/rung-process.js";
import { seedFixture } from "./tree-fixture.js";

const { values: options } = parseArgs({
  options: {
    iterations: { type: "string", default: "30" },
    rounds: { type: "string", default: "3" },
    warmup: { type: "string", default: "3" },
    flags: { type: "string", multiple: true },
  },
});
const ITERATIONS = Number(options.iterations);
const ROUNDS = Number(options.rounds);
const WARMUP = Number(options.warmup);
const FLAG_SETS = options.flags ?? ["", "--max-semi-space-size=64"];

const TREE_QUERY = `query Tree($root: String!, $nodeLimit: Int) {
  paymentTree(rootTxHash: $root, nodeLimit: $nodeLimit) {
    nodes { txHash parentTxHash depth agentId amount amountUnits protocol endpoint timestamp solanaExplorer status }
    totals { amount amountUnits transactionCount agentCount }
    truncated } }`;

interface Server {
  readonly flags: string;
  readonly child: ChildProcess;
  readonly port: number;
  readonly ms: number[];
  cpuMs: number;
}

/** user + system CPU milliseconds of a process (Linux ticks of 10 ms). */
function cpuMsOf(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** The query service (bench/http/rungs.ts, rung graphql) under `flags`, on `databaseUrl`. */
async function startServer(flags: string, databaseUrl: string): Promise<Server> {
  const { child, port } = await startRungProcess(["graphql"], { databaseUrl, nodeOptions: flags.split(" ").filter(Boolean) });
  return { flags, child, port, ms: [], cpuMs: 0 };
}

const percentile = (sorted: number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * p) - 1)]!;

async function main(): Promise<void> {
  const db = await createFreshDatabase();
  const servers: Server[] = [];
  try {
    const fixture = await seedFixture(db.pool, {
      treeNodes: 10_000,
      treeDepth: 10,
      foreignBranch: 100,
      backgroundPayments: 100_000,
      accounts: 20,
      agentsPerAccount: 40,
    });
    await db.pool.query("VACUUM ANALYZE");
    const { apiKey } = await issueApiKey(db.pool, fixture.accountId);
    for (const flags of FLAG_SETS) servers.push(await startServer(flags, db.url));
    const body = JSON.stringify({ query: TREE_QUERY, variables: { root: fixture.rootTxHash, nodeLimit: TREE_NODE_LIMIT_MAX } });
    const request = async (server: Server, measured: boolean): Promise<void> => {
      const cpuBefore = cpuMsOf(server.child.pid!);
      const started = performance.now();
      const response = await fetch(`http://127.0.0.1:${server.port}/graphql`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
        body,
      });
      const answer = (await response.json()) as { data?: { paymentTree?: { nodes: unknown[] } | null } };
      const elapsed = performance.now() - started;
      if (response.status !== 200 || answer.data?.paymentTree?.nodes.length !== TREE_NODE_LIMIT_MAX) {
        throw new Error(`server "${server.flags}": HTTP ${response.status}, not a tree of ${TREE_NODE_LIMIT_MAX} nodes`);
      }
      if (measured) {
        server.ms.push(elapsed);
        server.cpuMs += cpuMsOf(server.child.pid!) - cpuBefore;
      }
    };
    for (const server of servers) for (let i = 0; i < WARMUP; i += 1) await request(server, false);
    for (let round = 0; round < ROUNDS; round += 1) {
      for (let i = 0; i < ITERATIONS; i += 1) for (const server of servers) await request(server, true);
    }
    console.log(`GraphQL paymentTree over HTTP, ${TREE_NODE_LIMIT_MAX} nodes, ${ROUNDS * ITERATIONS} requests each, alternating`);
    console.log(
      `${"node options".padEnd(32)}${"p50".padStart(10)}${"p99".padStart(10)}${"mean".padStart(10)}${"server CPU/req".padStart(16)}`,
    );
    for (const server of servers) {
      const sorted = [...server.ms].sort((a, b) => a - b);
      const mean = sorted.reduce((sum, ms) => sum + ms, 0) / sorted.length;
      console.log(
        `${(server.flags || "(none)").padEnd(32)}${`${percentile(sorted, 0.5).toFixed(1)} ms`.padStart(10)}` +
          `${`${percentile(sorted, 0.99).toFixed(1)} ms`.padStart(10)}${`${mean.toFixed(1)} ms`.padStart(10)}` +
          `${`${(server.cpuMs / sorted.length).toFixed(1)} ms`.padStart(16)}`,
      );
    }
    console.log(
      `load average at the end on ${availableParallelism()} cores: ${loadavg()
        .map((l) => l.toFixed(1))
        .join(" / ")}`,
    );
  } finally {
    for (const server of servers) server.child.kill("SIGTERM");
    await db.drop();
  }
}

await main();
