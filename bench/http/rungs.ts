/**
 * One rung of the HTTP ladder (bench/http/ladder.ts) as its own process, so the load generator,
 * the server under test and PostgreSQL each get the machine the way a deployment would: `wrk`
 * drives it from outside. Prints `port <n>` on stdout once listening; ends on SIGTERM.
 *
 *   tsx bench/http/rungs.ts <bare|auth|graphql|authorize> [--old] [--workers N]
 *
 * - bare: node:http answering a fixed GraphQL-shaped body after reading the request's body;
 * - auth: the same, after authenticating the Bearer key as every request of the services does;
 * - graphql: the query service itself (api/query/server.ts) on DATABASE_URL;
 * - authorize: the whole system (`startSystem`: local ledger, indexer, gateway) on a fresh database
 *   of DATABASE_URL's server, with `--agents` funded agents whose policy never binds; it prints
 *   `caller <database url> <API key> <agents,…> <request body, base64>` before its port, and the
 *   request is `POST /v1/agents/{agent}/payments/authorize` with an x402 requirement (spec 2.7).
 * `--old` runs the query service's previous request path (no key cache, graphql-js executor; for
 * authorize, no key cache), the baseline each lever is kept against; `--no-jit` keeps the key
 * cache but not the compiled executor (nor the direct path, which needs it); `--no-direct` keeps
 * both but sends every request through yoga (no direct path, api/query/direct-graphql.ts);
 * `--no-page-bounds` reads every listing without a first-page bound (api/query/read/page-bounds.ts),
 * as a first ask or a page after a cursor is read;
 * `--workers N` serves through N processes on one port (api/query/workers.ts).
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { parseArgs } from "node:util";
import { Keypair } from "@solana/web3.js";
import { pino } from "pino";
import { requirementBody } from "../../api/gateway/x402/index.js";
import { startSystem } from "../../scripts/system.js";
import { createFreshDatabase } from "../../test/indexer/fresh-database.js";
import { fundedAgent } from "../gateway/setup.js";
import { ApiKeyCache } from "../../api/shared/key-cache.js";
import { authenticate } from "../../api/shared/auth.js";
import { createApiServer } from "../../api/query/server.js";
import { firstPageBounds } from "../../api/query/read/transactions.js";
import { isWorker, startWorkers } from "../../api/query/workers.js";
import { createPool } from "../../indexer/db/database.js";

const { values: flags, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    old: { type: "boolean", default: false },
    "no-jit": { type: "boolean", default: false },
    "no-direct": { type: "boolean", default: false },
    "no-page-bounds": { type: "boolean", default: false },
    workers: { type: "string", default: "1" },
    port: { type: "string", default: "0" },
    agents: { type: "string", default: "32" },
  },
});
const rung = positionals[0];
const WORKERS = Number(flags.workers);
const BODY = JSON.stringify({ data: { __typename: "Query" } });

function readBody(request: IncomingMessage): Promise<void> {
  return new Promise((resolve, reject) => {
    request.on("data", () => undefined);
    request.on("end", resolve);
    request.on("error", reject);
  });
}

function answer(response: ServerResponse, status: number, body: string): void {
  response.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  response.end(body);
}

async function serve(port: number): Promise<number> {
  const databaseUrl = process.env.DATABASE_URL;
  if (rung === "bare") {
    const server = createServer((request, response) => {
      void readBody(request).then(() => answer(response, 200, BODY));
    });
    return listen(server, port);
  }
  if (databaseUrl === undefined) throw new Error("DATABASE_URL is required for this rung");
  if (rung === "auth") {
    const pool = createPool(databaseUrl);
    const keys = flags.old ? undefined : new ApiKeyCache({ connectionString: databaseUrl });
    await keys?.start();
    const server = createServer((request, response) => {
      void readBody(request)
        .then(() => authenticate(pool, request.headers.authorization ?? null, keys))
        .then(
          () => answer(response, 200, BODY),
          () => answer(response, 401, "{}"),
        );
    });
    return listen(server, port);
  }
  if (rung === "graphql") {
    if (flags["no-page-bounds"]) firstPageBounds.capacity = 0;
    const pool = createPool(databaseUrl);
    const api = createApiServer({
      pool,
      liveFeed: false,
      keyCache: !flags.old,
      compiledExecutor: !flags.old && !flags["no-jit"],
      directPath: !flags["no-direct"],
    });
    return api.listen(port);
  }
  if (rung === "authorize") return serveAuthorize(port);
  throw new Error(`unknown rung ${String(rung)}`);
}

/** The authorize rung: a whole system on its own database, dropped when the rung ends. */
async function serveAuthorize(port: number): Promise<number> {
  const db = await createFreshDatabase();
  const system = await startSystem({
    databaseUrl: db.url,
    port,
    allowPrivateNetworks: true,
    logger: pino({ level: "warn" }),
    keyCache: !flags.old,
  });
  process.once(
    "SIGTERM",
    () =>
      void system
        .stop()
        .then(() => db.drop())
        .then(() => process.exit(0)),
  );
  const customer = await system.createAccount("bench customer");
  const client = { gatewayUrl: system.apiUrl, apiKey: customer.apiKey };
  const agents = Array.from({ length: Number(flags.agents) }, (_, i) => `http-bench-${i}`);
  for (const agentId of agents) await fundedAgent(client, agentId, 100);
  const endpoint = "https://api.example.com/v1/data";
  const x402 = requirementBody({
    scheme: "exact",
    network: system.network,
    token: system.token,
    amountUnits: 1_000n,
    payTo: Keypair.generate().publicKey.toBase58(),
    resource: endpoint,
  });
  const body = Buffer.from(JSON.stringify({ endpoint, x402 })).toString("base64");
  process.stdout.write(`caller ${db.url} ${customer.apiKey} ${agents.join(",")} ${body}\n`);
  return system.port;
}

function listen(server: ReturnType<typeof createServer>, port: number): Promise<number> {
  return new Promise((resolve) => {
    server.listen(port, "127.0.0.1", () => {
      const address = server.address();
      resolve(typeof address === "object" && address !== null ? address.port : port);
    });
  });
}

async function main(): Promise<void> {
  if (WORKERS > 1 && !isWorker()) {
    // The service's own worker model (QUERY_WORKERS): each worker runs this script's `serve`.
    const workers = await startWorkers(WORKERS);
    process.stdout.write(`port ${workers.port}\n`);
    process.once("SIGTERM", () => void workers.stop().then(() => process.exit(0)));
    return;
  }
  const port = await serve(Number(flags.port));
  if (rung !== "authorize") process.once("SIGTERM", () => process.exit(0));
  if (!isWorker()) process.stdout.write(`port ${port}\n`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
