/**
 * The direct GraphQL path (api/query/direct-graphql.ts) answers exactly as yoga does. Two query
 * services on one store, the direct path on and off, get the same requests over raw HTTP (every
 * header as sent: no client adds Accept or Content-Length on its own): successes, every kind of
 * refusal and error, other media types and methods. Status, body and every response header but
 * Date must be equal; a plugin watching yoga's hooks tells which path answered, so a request
 * meant for the direct path cannot pass by falling back unnoticed. Two accounts read only their
 * own payments through it, an agent key only its agent's, and a revoked key is refused.
 */
import { request } from "node:http";
import bs58 from "bs58";
import type { Plugin } from "graphql-yoga";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RecentlyUsed } from "../../api/query/direct-graphql.js";
import { MAX_GRAPHQL_BODY_BYTES } from "../../api/query/graphql-request.js";
import { type ApiServer, createApiServer } from "../../api/query/server.js";
import { issueApiKey, revokeApiKey } from "../../api/shared/keys.js";
import { createOpsMetrics, currentRequestId, type OpsRoutes, useOpsRoutes } from "../../api/shared/ops/index.js";
import { seedPayments } from "../../bench/http/store.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { pollUntil } from "../support/poll.js";

interface Sent {
  readonly method?: string;
  readonly path?: string;
  readonly headers?: Record<string, string>;
  readonly body?: string | Buffer;
  /** Sent with Transfer-Encoding: chunked (no Content-Length). */
  readonly chunked?: boolean;
}

interface Answer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

/** One request as given, on its own connection. */
function send(port: number, sent: Sent): Promise<Answer> {
  const body = sent.body === undefined ? undefined : Buffer.from(sent.body);
  const headers: Record<string, string> = { ...sent.headers };
  if (body !== undefined && sent.chunked !== true && headers["content-length"] === undefined)
    headers["content-length"] = String(body.byteLength);
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, method: sent.method ?? "POST", path: sent.path ?? "/graphql", headers, agent: false });
    req.once("error", reject);
    req.once("response", (response) => {
      const chunks: Buffer[] = [];
      response.on("data", (chunk: Buffer) => chunks.push(chunk));
      response.once("end", () => {
        const { date: _date, ...rest } = response.headers;
        resolve({ status: response.statusCode ?? 0, headers: rest, body: Buffer.concat(chunks).toString("utf8") });
      });
    });
    if (body !== undefined && sent.chunked === true) req.write(body);
    req.end(sent.chunked === true ? undefined : body);
  });
}

const NOW = new Date("2026-01-01T06:00:00Z");
const TRANSACTIONS = `query T($limit: Int, $agentId: ID) { transactions(limit: $limit, agentId: $agentId) {
  nodes { id txHash agentId protocol amountPaidUnits endpoint domain timestamp depth status } pageInfo { hasNextPage endCursor } } }`;

let db: FreshDatabase;
let direct: ApiServer;
let reference: ApiServer;
let ports: { direct: number; reference: number };
let ops: { direct: OpsRoutes; reference: OpsRoutes };
/** Requests to /graphql that reached yoga's hooks, per server. */
const reachedYoga = { direct: 0, reference: 0 };
let keys: { A: string; B: string; agentA: string };
let accounts: { A: string; B: string };

const watch = (name: keyof typeof reachedYoga): Plugin => ({
  onRequest({ url }) {
    if (url.pathname === "/graphql") reachedYoga[name] += 1;
  },
});

beforeAll(async () => {
  db = await createFreshDatabase();
  // Two accounts, agent k in account k % 2, 4,000 payments from 2026-01-01T00:00Z.
  const A = await seedPayments(db.pool, { payments: 4_000, agents: 10, accounts: 2 });
  const B = (await db.pool.query<{ id: string }>("SELECT id::text FROM accounts WHERE id <> $1", [A])).rows[0]!.id;
  accounts = { A, B };
  keys = {
    A: (await issueApiKey(db.pool, A)).apiKey,
    B: (await issueApiKey(db.pool, B)).apiKey,
    agentA: (await issueApiKey(db.pool, A, { kind: "agent", agentId: "bench-agent-0" })).apiKey,
  };
  const opsFor = (): OpsRoutes =>
    useOpsRoutes({ metrics: createOpsMetrics({ pool: db.pool, processMetrics: false }), readiness: { pool: db.pool } });
  ops = { direct: opsFor(), reference: opsFor() };
  const common = { pool: db.pool, databaseUrl: db.url, liveFeed: false, now: () => NOW } as const;
  direct = createApiServer({ ...common, ops: ops.direct, plugins: [watch("direct")] });
  reference = createApiServer({ ...common, ops: ops.reference, plugins: [watch("reference")], directPath: false });
  ports = { direct: await direct.listen(0), reference: await reference.listen(0) };
});

afterAll(async () => {
  await direct?.close();
  await reference?.close();
  await db?.drop();
});

const post = (body: unknown, options: { key?: string | null; headers?: Record<string, string> } = {}): Sent => ({
  headers: {
    "content-type": "application/json",
    ...(options.key === null ? {} : { authorization: `Bearer ${options.key ?? keys.A}` }),
    ...options.headers,
  },
  body: typeof body === "string" || Buffer.isBuffer(body) ? body : JSON.stringify(body),
});

let requestNumber = 0;

/** Sends `sent` to both services; asserts equal answers and which path the direct service took. */
async function same(sent: Sent, path: "direct" | "yoga"): Promise<Answer> {
  requestNumber += 1;
  const withId: Sent = { ...sent, headers: { "x-request-id": `eq-${requestNumber}`, ...sent.headers } };
  const before = { ...reachedYoga };
  const viaDirect = await send(ports.direct, withId);
  const viaYoga = await send(ports.reference, withId);
  expect(viaDirect).toEqual(viaYoga);
  // Yoga's hooks saw it on the direct service exactly when (and as often as) they did without it.
  expect(reachedYoga.direct - before.direct).toBe(path === "direct" ? 0 : reachedYoga.reference - before.reference);
  return viaDirect;
}

const data = (answer: Answer): any => {
  const body = JSON.parse(answer.body) as { data?: unknown; errors?: unknown };
  expect(body.errors).toBeUndefined();
  return body.data;
};
const codes = (answer: Answer): unknown[] =>
  ((JSON.parse(answer.body) as { errors?: { extensions?: { code?: unknown } }[] }).errors ?? []).map((e) => e.extensions?.code);

describe("the direct path answers as yoga does", () => {
  it("successes: the same status, body and headers, answered without yoga", async () => {
    const typename = await same(post({ query: "{ __typename }" }), "direct");
    expect(typename.status).toBe(200);
    expect(typename.body).toBe('{"data":{"__typename":"Query"}}');
    expect(typename.headers["x-request-id"]).toBe(`eq-${requestNumber}`);
    // Held compiled: the second time is a cache hit.
    await same(post({ query: "{ __typename }" }), "direct");
    const page = await same(post({ query: TRANSACTIONS, variables: { limit: 5 } }), "direct");
    expect(data(page).transactions.nodes).toHaveLength(5);
    await same(post({ query: TRANSACTIONS, variables: { limit: 5 }, operationName: "T" }), "direct");
    await same(post({ query: TRANSACTIONS, variables: { limit: 3 }, operationName: null, extensions: {} }), "direct");
    await same(post({ query: '{ __schema { queryType { name } } __type(name: "Transaction") { name fields { name } } }' }), "direct");
    await same(post({ query: "fragment F on Transaction { txHash } { transactions(limit: 2) { nodes { ...F } } }" }), "direct");
    // No such payment: null, no error.
    await same(post({ query: `{ transaction(txHash: "${bs58.encode(Buffer.alloc(64, 7))}") { txHash } }` }), "direct");
    // Media types and Accept values the direct path knows; a BOM before the JSON.
    await same(post({ query: "{ __typename }" }, { headers: { accept: "application/graphql-response+json" } }), "direct");
    await same(post({ query: "{ __typename }" }, { headers: { accept: "*/*" } }), "direct");
    await same(post({ query: "{ __typename }" }, { headers: { accept: "application/json" } }), "direct");
    await same(post({ query: "{ __typename }" }, { headers: { "content-type": "application/json; charset=utf-8" } }), "direct");
    await same(post({ query: "{ __typename }" }, { headers: { "content-type": "application/graphql+json" } }), "direct");
    await same(post(`\uFEFF${JSON.stringify({ query: "{ __typename }" })}`), "direct");
    await same(post({ query: "{ __typename }" }, { headers: { authorization: `bearer  ${keys.A}` } }), "direct");
  });

  it("refusals and errors: yoga answers them, with the same answer either way", async () => {
    const cases: [string, Sent][] = [
      ["syntax error", post({ query: "{ agents { agentId " })],
      ["syntax error again (cached)", post({ query: "{ agents { agentId " })],
      ["unknown field", post({ query: "{ nope }" })],
      [
        "too deep",
        post({ query: `{ transaction(txHash: "x") { parent { parent { parent { parent { parent { parent { txHash } } } } } } } }` }),
      ],
      [
        "too costly",
        post({
          query: `{ ${Array.from({ length: 10 }, (_, i) => `t${i}: paymentTree(rootTxHash: "x", nodeLimit: 5000) { nodes { txHash depth amount } }`).join(" ")} }`,
        }),
      ],
      ["too many tokens", post({ query: `{ ${Array.from({ length: 2_100 }, () => "__typename").join(" ")} }` })],
      ["control character in a literal", post({ query: '{ transactions(domain: "a\\u0001b") { nodes { txHash } } }' })],
      ["variable of the wrong type", post({ query: TRANSACTIONS, variables: { limit: "x" } })],
      ["variable not a plain integer", post(`{"query":${JSON.stringify(TRANSACTIONS)},"variables":{"limit":1.5}}`)],
      ["limit out of range (the resolver refuses)", post({ query: TRANSACTIONS, variables: { limit: 500 } })],
      ["another agent's wallet (not found)", post({ query: '{ wallet(agentId: "nope") { agentId } }' })],
      ["unknown request parameter", post({ query: "{ __typename }", foo: 1 })],
      ["query missing", post({ variables: {} })],
      ["query not a string", post({ query: 1 })],
      ["batched", post([{ query: "{ __typename }" }])],
      ["invalid JSON", post("{")],
      ["duplicate keys", post('{"query":"{ __typename }","query":"{ __typename }"}')],
      ["not UTF-8", post(Buffer.from([0x7b, 0xff, 0x7d]))],
      ["two operations", post({ query: "query A { __typename } query B { __typename }", operationName: "A" })],
      ["operation name of none", post({ query: "query A { __typename }", operationName: "B" })],
      ["operation name of an anonymous one", post({ query: "{ __typename }", operationName: "A" })],
      ["subscription", post({ query: "subscription { transactionRecorded { txHash } }" })],
      ["missing key", post({ query: "{ __typename }" }, { key: null })],
      ["empty Authorization", post({ query: "{ __typename }" }, { headers: { authorization: " " } })],
      ["unknown key", post({ query: "{ __typename }" }, { key: `apg_${"A".repeat(43)}` })],
      ["malformed key", post({ query: "{ __typename }" }, { key: "nope" })],
      ["another scheme", post({ query: "{ __typename }" }, { headers: { authorization: "Basic YTpi" } })],
      ["a session cookie, no key", post({ query: "{ __typename }" }, { key: null, headers: { cookie: "apg_session=nope" } })],
      ["text/plain", post({ query: "{ __typename }" }, { headers: { "content-type": "text/plain" } })],
      ["no Content-Type", { headers: { authorization: `Bearer ${keys.A}` }, body: JSON.stringify({ query: "{ __typename }" }) }],
      ["Accept text/event-stream", post({ query: "{ __typename }" }, { headers: { accept: "text/event-stream" } })],
      ["Accept application/xml", post({ query: "{ __typename }" }, { headers: { accept: "application/xml" } })],
      [
        "Accept of both JSON types",
        post({ query: "{ __typename }" }, { headers: { accept: "application/graphql-response+json, application/json" } }),
      ],
      ["an Origin (CORS)", post({ query: "{ __typename }" }, { headers: { origin: "https://app.example" } })],
      ["chunked body", { ...post({ query: "{ __typename }" }), chunked: true }],
      ["empty body", post("")],
      ["oversize body", post({ query: "{ __typename }", extensions: { pad: "x".repeat(MAX_GRAPHQL_BODY_BYTES) } })],
      [
        "Content-Length over the bound",
        post({ query: "{ __typename }" }, { headers: { "content-length": String(MAX_GRAPHQL_BODY_BYTES + 1) } }),
      ],
      ["a query string", { ...post({ query: "{ __typename }" }), path: "/graphql?x=1" }],
      ["GET", { method: "GET", path: "/graphql?query=%7B__typename%7D", headers: { authorization: `Bearer ${keys.A}` } }],
      ["preflight", { method: "OPTIONS", headers: { origin: "https://app.example", "access-control-request-method": "POST" } }],
      ["an agent key reading another agent", post({ query: TRANSACTIONS, variables: { agentId: "bench-agent-2" } }, { key: keys.agentA })],
    ];
    const statuses = new Set<number>();
    for (const [name, sent] of cases) {
      const answer = await same(sent, "yoga").catch((error: unknown) => {
        throw new Error(`${name}: ${(error as Error).message}`);
      });
      statuses.add(answer.status);
    }
    // The cases reach refusals of several kinds, not one status for all.
    expect([...statuses].sort()).toEqual(expect.arrayContaining([200, 400, 401, 413, 415]));
  }, 60_000);

  it("each account reads its own payments only, an agent key its agent's", async () => {
    const agentsOf = async (accountId: string): Promise<Set<string>> =>
      new Set(
        (await db.pool.query<{ agent_id: string }>("SELECT agent_id FROM agents WHERE account_id = $1", [accountId])).rows.map(
          (r) => r.agent_id,
        ),
      );
    const pageOf = async (key: string): Promise<{ agentId: string; txHash: string }[]> =>
      data(await same(post({ query: TRANSACTIONS, variables: { limit: 50 } }, { key }), "direct")).transactions.nodes;
    const [ofA, ofB, ofAgent] = [await pageOf(keys.A), await pageOf(keys.B), await pageOf(keys.agentA)];
    const [agentsA, agentsB] = [await agentsOf(accounts.A), await agentsOf(accounts.B)];
    expect(ofA).toHaveLength(50);
    expect(ofB).toHaveLength(50);
    expect(ofA.every((node) => agentsA.has(node.agentId))).toBe(true);
    expect(ofB.every((node) => agentsB.has(node.agentId))).toBe(true);
    expect(new Set(ofAgent.map((node) => node.agentId))).toEqual(new Set(["bench-agent-0"]));
    // B's payment, addressed by hash with A's key: no such payment for A. (The store's hashes are
    // hex; the API takes base58 ones, so this payment gets one.)
    const hash = bs58.encode(Buffer.alloc(64, 9));
    await db.pool.query("UPDATE transactions SET tx_hash = $1 WHERE tx_hash = $2", [hash, ofB[0]!.txHash]);
    const lookup = `{ transaction(txHash: "${hash}") { txHash agentId } }`;
    expect(data(await same(post({ query: lookup }), "direct"))).toEqual({ transaction: null });
    expect(data(await same(post({ query: lookup }, { key: keys.B }), "direct"))).toEqual({
      transaction: { txHash: hash, agentId: ofB[0]!.agentId },
    });
  });

  it("counts its requests in the operator's metrics as yoga does, and leaves none in flight", async () => {
    const metricsOf = async (port: number): Promise<string[]> =>
      (await send(port, { method: "GET", path: "/metrics" })).body.split("\n").filter((line) => line.startsWith("apg_http_requests_total"));
    const viaDirect = await metricsOf(ports.direct);
    expect(viaDirect).toEqual(await metricsOf(ports.reference));
    expect(viaDirect.some((line) => line.includes('route="/graphql"') && line.includes('status="200"'))).toBe(true);
    expect(ops.direct.inFlight()).toBe(0);
  });

  it("a revoked key is refused through the direct path too", async () => {
    const { apiKey } = await issueApiKey(db.pool, accounts.A);
    expect((await same(post({ query: "{ __typename }" }, { key: apiKey }), "direct")).status).toBe(200);
    await revokeApiKey(db.pool, apiKey);
    // Each service's key cache hears the NOTIFY on its own connection (the 1 s bound itself is
    // test/api/key-cache.test.ts's, which goes through the direct path too).
    const refusedBy = async (port: number): Promise<boolean> =>
      (await send(port, post({ query: "{ __typename }" }, { key: apiKey }))).status === 401;
    await pollUntil(async () => (await refusedBy(ports.direct)) && (await refusedBy(ports.reference)), {
      timeoutMs: 5_000,
      intervalMs: 20,
      what: "both services to refuse the revoked key",
    });
    const refused = await same(post({ query: "{ __typename }" }, { key: apiKey }), "yoga");
    expect(refused.status).toBe(401);
    expect(codes(refused)).toEqual(["AUTHENTICATION_ERROR"]);
  });
});

/** `db.pool` calling `onQuery` before each `query`; an error it returns fails that statement instead. */
function watchedPool(onQuery: () => Error | undefined): typeof db.pool {
  return new Proxy(db.pool, {
    get(target, property) {
      if (property === "query") {
        return (...args: unknown[]) => {
          const failure = onQuery();
          if (failure !== undefined) return Promise.reject(failure);
          return (target.query as (...a: unknown[]) => unknown)(...args);
        };
      }
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

describe("the direct path's request scope", () => {
  it("reads run inside the request's id scope, as on yoga's path (its id on every log line)", async () => {
    const seen: (string | undefined)[] = [];
    // The read pool, watched: the request id each statement of the listing runs under.
    const readPool = watchedPool(() => void seen.push(currentRequestId()));
    const server = createApiServer({ pool: db.pool, readPool, databaseUrl: db.url, liveFeed: false, now: () => NOW });
    try {
      const port = await server.listen(0);
      const answer = await send(port, {
        ...post({ query: TRANSACTIONS, variables: { limit: 5 } }),
        headers: { ...post({}).headers, "x-request-id": "scope-1" },
      });
      expect(answer.status).toBe(200);
      expect(seen.length).toBeGreaterThan(0);
      expect(new Set(seen)).toEqual(new Set(["scope-1"]));
    } finally {
      await server.close();
    }
  });
});

describe("a query whose result carries errors", () => {
  it("runs once: yoga answers it from the direct path's result, as it would have", async () => {
    /** While set, the read pools' statements fail with an error no client may see. */
    let failing = false;
    /** A read pool counting the statements sent through it. */
    const counted = (): { pool: typeof db.pool; statements: () => number } => {
      let statements = 0;
      const pool = watchedPool(() => {
        statements += 1;
        return failing ? new Error("internal detail: connection to 10.0.0.7 lost") : undefined;
      });
      return { pool, statements: () => statements };
    };
    const reads = { direct: counted(), reference: counted() };
    const common = { pool: db.pool, databaseUrl: db.url, liveFeed: false, now: () => NOW } as const;
    const servers = {
      direct: createApiServer({ ...common, readPool: reads.direct.pool }),
      reference: createApiServer({ ...common, readPool: reads.reference.pool, directPath: false }),
    };
    try {
      const at = { direct: await servers.direct.listen(0), reference: await servers.reference.listen(0) };
      const notFound = (answer: Answer): void => expect(codes(answer)).toContain("NOT_FOUND");
      const cases: { name: string; sent: Sent; fails?: true; check: (answer: Answer) => void }[] = [
        { name: "not found", sent: post({ query: '{ wallet(agentId: "nope") { agentId } }' }), check: notFound },
        { name: "data and an error", sent: post({ query: '{ agents { agentId } wallet(agentId: "nope") { agentId } }' }), check: notFound },
        {
          name: "data and an error, variables",
          sent: post({
            query: TRANSACTIONS.replace("{ transactions", '{ w: wallet(agentId: "nope") { agentId } transactions'),
            variables: { limit: 3 },
          }),
          check: notFound,
        },
        {
          name: "an unexpected error, masked",
          sent: post({ query: "{ agents { agentId } }" }),
          fails: true,
          check: (answer) => {
            expect(answer.body).toContain("Unexpected error.");
            expect(answer.body).not.toContain("internal detail");
          },
        },
      ];
      let statements = 0;
      for (const [k, { name, sent: unnamed, fails, check }] of cases.entries()) {
        const sent: Sent = { ...unnamed, headers: { "x-request-id": `once-${k}`, ...unnamed.headers } };
        // Once to fill the key caches (authentication reads the primary, not these pools), then counted.
        for (const side of ["direct", "reference"] as const) await send(at[side], sent);
        const before = { direct: reads.direct.statements(), reference: reads.reference.statements() };
        failing = fails === true;
        const answers = { direct: await send(at.direct, sent), reference: await send(at.reference, sent) };
        failing = false;
        expect(answers.direct, name).toEqual(answers.reference);
        check(answers.direct);
        const ran = { direct: reads.direct.statements() - before.direct, reference: reads.reference.statements() - before.reference };
        expect(ran.direct, name).toBe(ran.reference);
        statements += ran.reference;
      }
      expect(statements).toBeGreaterThan(0);
    } finally {
      await servers.direct.close();
      await servers.reference.close();
    }
  });
});

describe("the compiled documents the direct path holds", () => {
  it("are bounded, the least recently used dropped first, each made once while held", () => {
    const cache = new RecentlyUsed<string>(3);
    const made: string[] = [];
    const make = (key: string): string => {
      made.push(key);
      return key.toUpperCase();
    };
    for (const key of ["a", "b", "c"]) expect(cache.get(key, make)).toBe(key.toUpperCase());
    // "a" read again: now the most recent, so "b" is the one dropped for "d".
    expect(cache.get("a", make)).toBe("A");
    cache.get("d", make);
    expect(cache.size).toBe(3);
    expect(["a", "b", "c", "d"].map((key) => cache.has(key))).toEqual([true, false, true, true]);
    expect(made).toEqual(["a", "b", "c", "d"]);
  });
});
