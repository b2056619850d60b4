/**
 * The TypeScript client's side of `npm run bench:python` (bench/python/pay_overhead.py), in a
 * process of its own like the Python clients, so neither shares an event loop with the system.
 *
 * Configured by the environment (`APG_API_URL`, `APG_API_KEY`, `APG_RPC_URL`), it prints one line
 * `{"ready":true}` and answers JSON lines on stdin `{id, op: "bench", agentId, options}` with
 * `{id, ok, result}`: latency samples (ms) of `rounds` sequential rounds of a direct fetch, an x402
 * `client.pay` and an MPP `client.pay` on a reused session, then `concurrent` x402 pays at once
 * from one client. One `Client` per agent for the whole run, as the Python bench keeps one. Exits
 * when stdin closes.
 */
import { createInterface } from "node:readline";
import { Client } from "../../sdk/src/index.js";

const MAX_ROUNDS = 2_000;
const MAX_CONCURRENCY = 200;

interface BenchOptions {
  rounds: number;
  concurrent: number;
  direct: string;
  x402: string;
  mpp: string;
}

const apiUrl = required("APG_API_URL");
const apiKey = required("APG_API_KEY");
const rpcUrl = required("APG_RPC_URL");
const clients = new Map<string, Client>();

function required(name: string): string {
  const value = process.env[name];
  if (value === undefined || value === "") throw new Error(`${name} is required`);
  return value;
}

function clientOf(agentId: string): Client {
  let client = clients.get(agentId);
  if (client === undefined) {
    client = new Client({ agentId, apiKey, baseUrl: apiUrl, explorerRpcUrl: rpcUrl });
    clients.set(agentId, client);
  }
  return client;
}

async function time(work: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await work();
  return performance.now() - started;
}

async function bench(agentId: string, options: BenchOptions): Promise<Record<string, number[]>> {
  const rounds = Math.min(Math.max(0, Math.floor(options.rounds)), MAX_ROUNDS);
  const concurrent = Math.min(Math.max(0, Math.floor(options.concurrent)), MAX_CONCURRENCY);
  const client = clientOf(agentId);
  const mustPay = async (endpoint: string): Promise<void> => {
    const result = await client.pay({ endpoint });
    if (!result.paid) throw new Error(`${endpoint} was not paid`);
  };
  const samples = { direct: [] as number[], x402: [] as number[], mpp: [] as number[], concurrent: [] as number[] };
  for (let round = 0; round < rounds; round += 1) {
    samples.direct.push(await time(async () => (await fetch(options.direct)).text()));
    samples.x402.push(await time(() => mustPay(options.x402)));
    samples.mpp.push(await time(() => mustPay(options.mpp)));
  }
  let failures = 0;
  if (concurrent > 0) {
    // A payment that fails under the burst (e.g. a settlement slower than the middleware's gateway
    // timeout) is counted, not timed.
    const settled = await Promise.allSettled(Array.from({ length: concurrent }, () => time(() => mustPay(options.x402))));
    for (const outcome of settled) {
      if (outcome.status === "fulfilled") samples.concurrent.push(outcome.value);
      else failures += 1;
    }
  }
  return { ...samples, failures: [failures] };
}

const write = (line: unknown): void => {
  process.stdout.write(`${JSON.stringify(line)}\n`);
};

const input = createInterface({ input: process.stdin });
input.on("line", (line) => {
  if (line.trim() === "") return;
  const request = JSON.parse(line) as { id: unknown; op: string; agentId: string; options: BenchOptions };
  const work = request.op === "bench" ? bench(request.agentId, request.options) : Promise.reject(new Error(`unknown op ${request.op}`));
  work.then(
    (result) => write({ id: request.id, ok: true, result }),
    (error: unknown) => write({ id: request.id, ok: false, error: { message: String(error) } }),
  );
});
input.on("close", () => process.exit(0));
write({ ready: true });
