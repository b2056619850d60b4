/**
 * A recorded sample of the system's wire answers, to show that a refactor changed no behaviour:
 * `npx tsx scripts/wire-sample.ts --out before.json` on the old tree, `--out after.json` on the
 * new one, then `diff` the two files.
 *
 * It starts the whole system in this process (scripts/system.ts: the local ledger, an embedded
 * PostgreSQL in a temporary directory, the indexer, the API) and makes one fixed sequence of REST
 * and GraphQL calls: successes, every refusal it can provoke and malformed requests. A settled x402
 * payment goes through the SDK against a local paid server; every fetch the SDK and the paid
 * server's middleware make is recorded too. Each answer is kept as method, path, status, the
 * headers that carry meaning and the body, with what differs between runs (uuids, base58 keys and
 * signatures, timestamps, API keys, hex digests, ports, slots) replaced by placeholders numbered in
 * the order they are first seen, so two runs of one tree write identical files. Nothing is sorted:
 * the order the API answers in is part of what is compared.
 */
import { writeFileSync } from "node:fs";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { Client } from "../sdk/src/client.js";
import { type NodeRequest, x402Middleware } from "../sdk/src/server/index.js";
import { startEmbeddedPostgres } from "./embedded-postgres.js";
import { startSystem, type System } from "./system.js";

/** Headers left out: transport and per-response values that say nothing about the API. */
const DROPPED_HEADERS = new Set(["date", "connection", "keep-alive", "transfer-encoding", "content-length", "x-request-id"]);
/** Keys whose numeric values follow the clock or the ledger's slot, not the sequence. */
const VOLATILE_NUMBERS = new Set(["slot", "secondsSinceCheckpoint", "retry-after", "validUntil", "validAfter"]);
/** Keys whose values are random tokens of no recognisable shape (key prefixes, page cursors). */
const OPAQUE_KEYS = new Set(["prefix", "endCursor", "nextCursor"]);
const PATTERNS: readonly [string, RegExp][] = [
  ["time", /\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}(?::?\d{2})?)?/g],
  ["uuid", /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi],
  ["key", /apg_[A-Za-z0-9_-]{43}/g],
];
/** A long token: hex digest, base58 key or signature, or base64(url) blob, told apart in `kindOf`. */
const TOKEN = /(?<![A-Za-z0-9+_-])[A-Za-z0-9+_-]{32,}={0,2}(?![A-Za-z0-9+_=-])/g;

function kindOf(token: string): string | null {
  if (/^[0-9a-f]+$/.test(token)) return "hex";
  if (/^[1-9A-HJ-NP-Za-km-z]+$/.test(token) && token.length <= 88) return "b58";
  return token.length >= 40 ? "b64" : null;
}

/** Stable placeholders by first-seen order, one numbering per kind. */
class Normalizer {
  private readonly seen = new Map<string, string>();
  private readonly counts = new Map<string, number>();
  private readonly origins: [string, string][] = [];

  origin(url: string, name: string): void {
    this.origins.push([url, `<${name}>`], [encodeURIComponent(url), `<${name}>`], [new URL(url).host, `<${name}-host>`]);
  }

  placeholder(kind: string, value: string): string {
    const known = this.seen.get(value);
    if (known !== undefined) return known;
    const n = (this.counts.get(kind) ?? 0) + 1;
    this.counts.set(kind, n);
    const made = `<${kind}#${n}>`;
    this.seen.set(value, made);
    return made;
  }

  text(value: string): string {
    let out = value;
    for (const [from, to] of this.origins) out = out.split(from).join(to);
    for (const [kind, pattern] of PATTERNS) out = out.replace(pattern, (match) => this.placeholder(kind, match));
    // A whole value of base64 (signed payloads, protocol headers) is one token, slashes included.
    if (/^[A-Za-z0-9+_-][A-Za-z0-9+/_-]*={0,2}$/.test(out) && kindOf(out.replace(/\//g, "+")) === "b64") return this.opaque(out);
    return out.replace(TOKEN, (match) => {
      const kind = kindOf(match);
      if (kind === "b64") return this.opaque(match);
      return kind === null ? match : this.placeholder(kind, match);
    });
  }

  /** Base64 of JSON (x402 and MPP headers) is shown decoded and normalized; other base64 is a placeholder. */
  private opaque(token: string): string {
    try {
      const decoded: unknown = JSON.parse(Buffer.from(token, "base64").toString("utf8"));
      if (decoded !== null && typeof decoded === "object") return `base64:${JSON.stringify(this.value(decoded))}`;
    } catch {
      // not JSON
    }
    return this.placeholder("b64", token);
  }

  /** A path segment by segment, so that the slashes never join two tokens into one. */
  path(value: string): string {
    return value
      .split(/([/?&=])/)
      .map((part) => this.text(part))
      .join("");
  }

  value(value: unknown, key = ""): unknown {
    if (typeof value === "string") {
      if (OPAQUE_KEYS.has(key)) return this.placeholder(key, value);
      return VOLATILE_NUMBERS.has(key) && /^\d+$/.test(value) ? "<n>" : this.text(value);
    }
    if (typeof value === "number") return VOLATILE_NUMBERS.has(key) ? "<n>" : value;
    if (Array.isArray(value)) return value.map((item) => this.value(item));
    if (value !== null && typeof value === "object") {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [this.text(k), this.value(v, k)]));
    }
    return value;
  }
}

const normalizer = new Normalizer();
/** One answer: method, path, status, the headers that carry meaning, the body. */
const entries: { method: string; path: string; status: number; headers: Record<string, string>; body: unknown }[] = [];
const recordedOrigins: string[] = [];
const plainFetch = globalThis.fetch;

/** Every fetch to the API or the paid server is recorded, the SDK's and the middleware's included. */
globalThis.fetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
  const request = new Request(input, init);
  const response = await plainFetch(request);
  const url = new URL(request.url);
  if (!recordedOrigins.includes(url.origin)) return response;
  const text = await response.clone().text();
  let body: unknown = text;
  try {
    body = text === "" ? null : JSON.parse(text);
  } catch {
    // not JSON: kept as text
  }
  const headers: Record<string, string> = {};
  response.headers.forEach((value, name) => {
    if (!DROPPED_HEADERS.has(name)) headers[name] = String(normalizer.value(value, name));
  });
  entries.push({
    method: request.method,
    path: `${url.origin === recordedOrigins[0] ? "" : normalizer.text(url.origin)}${normalizer.path(`${url.pathname}${url.search}`)}`,
    status: response.status,
    headers,
    body: normalizer.value(body),
  });
  return response;
};

interface Call {
  readonly key?: string | null;
  readonly body?: unknown;
  readonly raw?: string;
  readonly contentType?: string;
}

/** A parsed JSON answer (fields read as `unknown`); a body that is not JSON is kept as `{ text }`. */
type Answer = Record<string, unknown> | null;

let api = "";
async function call(method: string, path: string, options: Call = {}): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (options.key != null) headers.authorization = `Bearer ${options.key}`;
  const sent = options.raw ?? (options.body === undefined ? undefined : JSON.stringify(options.body));
  if (sent !== undefined) headers["content-type"] = options.contentType ?? "application/json";
  const response = await fetch(`${api}${path}`, { method, headers, ...(sent === undefined ? {} : { body: sent }) });
  const text = await response.text();
  try {
    return text === "" ? null : (JSON.parse(text) as Answer);
  } catch {
    return { text };
  }
}

const graphql = (key: string, query: string, variables: Record<string, unknown> = {}) =>
  call("POST", "/graphql", { key, body: { query, variables } });

/** Waits, unrecorded, until the indexer shows the payment as finalized (a status that no longer changes). */
async function untilIndexed(key: string, txHash: string): Promise<void> {
  for (let attempt = 0; attempt < 600; attempt += 1) {
    const response = await plainFetch(`${api}/graphql`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ query: "query($h: String!) { transaction(txHash: $h) { status } }", variables: { h: txHash } }),
    });
    const answer = (await response.json()) as { data?: { transaction: { status: string } | null } };
    if (answer.data?.transaction?.status === "finalized") return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`payment ${txHash} was not indexed`);
}

async function paidServer(system: System, sellerKey: string, payTo: string): Promise<Server> {
  const gate = x402Middleware({
    facilitatorUrl: system.apiUrl,
    apiKey: sellerKey,
    amount: "100000",
    token: "usdc",
    network: system.network,
    payTo,
  });
  const server = createServer((req, res) =>
    gate(req as NodeRequest, res, () => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ data: "paid content" }));
    }),
  );
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  return server;
}

const TREE =
  "nodes { txHash parentTxHash depth agentId amount amountUnits protocol endpoint status } totals { amount transactionCount agentCount } truncated";
const SPEND =
  '{ spendSummary(window: "24h") { agentId window total totalUnits txCount byProtocol { protocol amount percent txCount } byDomain { domain amount txCount } byAgent { agentId amount txCount } } }';
const METRICS =
  '{ metrics(agentId: "payer", window: "24h", resolution: "6h", metrics: ["tx_count", "protocol_split"]) { agentId window resolution metrics { tx_count { count } protocol_split { x402 mpp } } } }';
const POLICY =
  '{ policy(agentId: "budget") { agentId dailyBudget perCallLimit allowedDomains blockedDomains rateLimit { calls window } usedToday budgetState rateUsage { calls limit window } } }';
const CHECK =
  "query($a: ID!, $e: String!, $m: String!) { checkPolicy(agentId: $a, endpoint: $e, amount: $m) { agentId allowed decision reasonCode reason errorClass domain budgetState budgetUsed budgetLimit warnings } }";
const TX =
  "id txHash agentId protocol rail amountPaid amountPaidUnits endpoint domain policyCheck parentTxHash depth status rejectionCode rejectionReason childCount";

async function sequence(system: System): Promise<void> {
  const admin = (await system.createAccount("wire buyer")).apiKey;
  const seller = (await system.createAccount("wire seller")).apiKey;
  const A = { key: admin };

  // Keys and authentication.
  await call("GET", "/v1/keys/current", A);
  await call("GET", "/v1/keys/current");
  await call("GET", "/v1/keys/current", { key: "apg_not-a-key" });
  await call("GET", "/v1/api-keys", A);
  const issued = await call("POST", "/v1/api-keys", { key: admin, body: { scope: "admin" } });
  await call("POST", "/v1/api-keys", { key: admin, body: { scope: "root" } });
  await call("POST", "/v1/api-keys", { key: admin, body: { scope: "agent:nobody" } });
  await call("DELETE", `/v1/api-keys/${issued?.id}`, A);
  await call("GET", "/v1/keys/current", { key: String(issued?.apiKey) });

  // Agents and wallets, with malformed bodies.
  await call("GET", "/v1/agents", A);
  for (const agentId of ["payer", "limited", "domains", "budget", "rater"])
    await call("POST", "/v1/agents", { key: admin, body: { agentId } });
  await call("POST", "/v1/agents", { key: admin, body: { agentId: "payer" } });
  await call("POST", "/v1/agents", { key: admin, body: { agentId: "bad id" } });
  await call("POST", "/v1/agents", { key: admin, body: { agentId: "extra", color: "red" } });
  await call("POST", "/v1/agents", { key: admin, raw: '{"agentId":' });
  await call("POST", "/v1/agents", { key: admin, raw: "agentId=x", contentType: "text/plain" });
  const shop = await call("POST", "/v1/agents", { key: seller, body: { agentId: "shop" } });
  const payTo = String(shop?.address);
  await call("GET", "/v1/agents", A);
  await call("GET", "/v1/agents/payer", A);
  await call("GET", "/v1/agents/nobody", A);
  await call("GET", "/v1/agents/shop", A);
  await call("GET", "/v1/agents/payer/wallet", A);
  for (const agentId of ["payer", "limited", "domains", "budget", "rater"]) {
    await call("POST", `/v1/agents/${agentId}/wallet/fund`, { key: admin, body: { usdc: 2 } });
  }
  await call("POST", "/v1/agents/payer/wallet/fund", { key: admin, body: { usdc: -1 } });
  await call("POST", "/v1/agents/payer/wallet/fund", { key: admin, raw: '{"usdc":0.0000001}' });
  await call("POST", "/v1/agents/nobody/wallet/fund", { key: admin, body: { usdc: 1 } });
  await call("POST", "/v1/agents/payer/wallet/withdraw", { key: admin, body: { to: "not-an-address", usdc: 1 } });
  await call("POST", "/v1/agents/payer/wallet/withdraw", { key: admin, body: { to: system.token, usdc: 1000 } });
  await call("GET", "/v1/agents/payer/wallet/balance", A);

  // Policies: valid, invalid, read back.
  await call("PUT", "/v1/policies/limited", { key: admin, body: { perCallLimit: { usdc: 0.05 } } });
  await call("PUT", "/v1/policies/domains", {
    key: admin,
    body: { blockedDomains: ["blocked.example"], allowedDomains: ["api.example.com", "blocked.example"] },
  });
  await call("PUT", "/v1/policies/budget", { key: admin, body: { dailyBudget: { usdc: 0.1 } } });
  await call("PUT", "/v1/policies/rater", { key: admin, body: { rateLimit: { calls: 1, window: "1h" } } });
  await call("PUT", "/v1/policies/payer", { key: admin, body: { dailyBudget: { usdc: 1 }, perCallLimit: { usdc: 0.5 } } });
  await call("PUT", "/v1/policies/payer", { key: admin, body: { dailyBudget: { usdc: "1" } } });
  await call("PUT", "/v1/policies/payer", { key: admin, body: { rateLimit: { calls: 1.5, window: "1h" } } });
  await call("PUT", "/v1/policies/payer", { key: admin, body: { rateLimit: { calls: 3, window: "2h" } } });
  await call("PUT", "/v1/policies/payer", { key: admin, body: { perCallLimit: { usdc: 0.5 }, limit: 1 } });
  await call("PUT", "/v1/policies/nobody", { key: admin, body: { perCallLimit: { usdc: 1 } } });
  await call("GET", "/v1/policies/payer", A);
  await call("GET", "/v1/policies/limited", A);

  // Authorize: allowed, refused for each reason, bad input; complete and release.
  const endpoint = "https://api.example.com/v1/data";
  const x402 = (amount: string, resource = endpoint) => ({
    scheme: "exact",
    network: system.network,
    token: system.token,
    amount,
    payTo,
    resource,
  });
  const authorize = (agentId: string, amount: string, at = endpoint) =>
    call("POST", `/v1/agents/${agentId}/payments/authorize`, { key: admin, body: { endpoint: at, x402: x402(amount, at) } });
  const allowed = await authorize("payer", "20000");
  await call("POST", `/v1/agents/payer/payments/${allowed?.reservationId}/release`, A);
  await call("POST", `/v1/agents/payer/payments/${allowed?.reservationId}/release`, A);
  await call("POST", `/v1/agents/payer/payments/${allowed?.reservationId}/complete`, { key: admin, body: { txHash: "x" } });
  await authorize("limited", "60000");
  await authorize("domains", "10000", "https://api.blocked.example/x");
  await authorize("domains", "10000", "https://elsewhere.example.net/x");
  await call("POST", "/v1/agents/domains/payments/domain-check", { key: admin, body: { endpoint: "https://api.blocked.example/x" } });
  await call("POST", "/v1/agents/domains/payments/domain-check", { key: admin, body: { endpoint } });
  const used = await authorize("budget", "80000");
  await authorize("budget", "40000");
  await authorize("budget", "10000");
  await call("POST", `/v1/agents/budget/payments/${used?.reservationId}/release`, A);
  const rated = await authorize("rater", "10000");
  await authorize("rater", "10000");
  await call("POST", `/v1/agents/rater/payments/${rated?.reservationId}/release`, A);
  const mpp = {
    protocol: "mpp/1.0",
    amount: { value: "0.03", currency: "USDC" },
    paymentMethods: ["card", "stablecoin"],
    sessionSupported: true,
    paymentEndpoint: "https://api.example.com/mpp/pay",
  };
  const both = { endpoint, x402: x402("30000"), mpp, protocolPreference: "mpp" };
  const viaMpp = await call("POST", "/v1/agents/payer/payments/authorize", { key: admin, body: both });
  await call("POST", `/v1/agents/payer/payments/${viaMpp?.reservationId}/release`, A);
  const signed = await authorize("payer", "30000");
  await call("POST", "/v1/x402/verify", { key: admin, body: { payment: signed?.payment, requirement: x402("30000") } });
  await call("POST", "/v1/x402/verify", { key: seller, body: { payment: signed?.payment, requirement: x402("30001") } });
  await call("POST", `/v1/agents/payer/payments/${signed?.reservationId}/release`, A);
  await call("GET", "/v1/agents/payer/wallet/operations/1", A);
  await call("GET", `/v1/agents/payer/invocations/${"1".repeat(64)}`, A);
  await call("POST", "/v1/agents/payer/payments/authorize", { key: admin, body: { endpoint } });
  await call("POST", "/v1/agents/payer/payments/authorize", { key: admin, body: { endpoint, x402: { ...x402("1"), scheme: "upto" } } });
  await call("POST", "/v1/agents/payer/payments/authorize", {
    key: admin,
    body: { endpoint, x402: x402("1"), protocolPreference: "fast" },
  });
  await call("POST", "/v1/agents/payer/payments/00000000-0000-0000-0000-000000000000/complete", { key: admin, body: { txHash: "1" } });

  // A settled x402 payment through the SDK against a local paid server. Its timestamp is the
  // ledger's block time (whole seconds, when its slot opened): the pause makes it newer than every
  // refusal above, so the listings below order them the same way in every run.
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  await call("GET", "/v1/agents/shop/wallet", { key: seller });
  const server = await paidServer(system, seller, payTo);
  const paidUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  normalizer.origin(paidUrl, "paid");
  recordedOrigins.push(paidUrl);
  try {
    const client = new Client({ agentId: "payer", apiKey: admin, baseUrl: system.apiUrl, maxRetries: 0 });
    const paid = (await client.pay({ endpoint: `${paidUrl}/report` })) as { txHash: string };
    await untilIndexed(admin, paid.txHash);

    // Reads over REST.
    await call("GET", "/v1/transactions?limit=20", A);
    await call("GET", "/v1/transactions?agentId=budget&status=rejected", A);
    await call("GET", `/v1/transactions/${paid.txHash}`, A);
    await call("GET", `/v1/transactions/${paid.txHash}/chain`, A);
    await call("GET", "/v1/transactions/not-a-hash", A);
    await call("GET", `/v1/transactions/${"1".repeat(64)}`, A);
    await call("GET", "/v1/transactions?limit=0", A);
    await call("GET", "/v1/transactions?protocol=ach", A);
    await call("GET", "/v1/agents/payer/metrics?metrics=tx_count,protocol_split&window=24h&resolution=6h", A);
    await call("GET", "/v1/agents/payer/metrics?resolution=2m", A);
    await call("GET", "/v1/agents/payer/wallet/balance", A);
    await call("GET", "/v1/policies/payer", A);

    // Reads over GraphQL.
    const check = (a: string, m: string, e = endpoint) => [CHECK, { a, e, m }] as const;
    for (const [query, variables] of [
      ["{ agents { agentId name walletAddress balance balanceUnits archivedAt } }", {}],
      [`query($h: String!) { transaction(txHash: $h) { ${TX} } }`, { h: paid.txHash }],
      [`{ transactions(limit: 20) { nodes { ${TX} } pageInfo { hasNextPage } } }`, {}],
      [`{ transactions(status: rejected, reason: "daily_budget_exceeded") { nodes { ${TX} } } }`, {}],
      [`query($h: String!) { paymentTree(rootTxHash: $h) { rootTxHash ${TREE} } }`, { h: paid.txHash }],
      [SPEND, {}],
      [METRICS, {}],
      [POLICY, {}],
      ["{ policies { agentId dailyBudget perCallLimit blockedDomains protocolPreference } }", {}],
      check("payer", "0.1"),
      check("limited", "0.06"),
      check("domains", "0.01", "https://api.blocked.example/x"),
      check("rater", "0.01"),
      check("payer", "-1", "x"),
      ['{ wallet(agentId: "nobody") { address } }', {}],
      ["{ nothing }", {}],
      ["{ rejectionCounts { reasonCode count } runs { totalCount nodes { agentId total paymentCount agentCount } } }", {}],
    ] as const) {
      await graphql(admin, query, variables);
    }
    await call("POST", "/graphql", { key: admin, raw: "{" });
    await call("POST", "/graphql", { body: { query: "{ agents { agentId } }" } });
  } finally {
    server.closeAllConnections();
    await new Promise<void>((done) => server.close(() => done()));
  }

  // Scopes: an agent key on admin routes and on another agent.
  const scoped = await call("POST", "/v1/api-keys", { key: admin, body: { scope: "agent:payer" } });
  const S = { key: String(scoped?.apiKey) };
  await call("GET", "/v1/keys/current", S);
  await call("GET", "/v1/policies/payer", S);
  await call("PUT", "/v1/policies/payer", { ...S, body: { perCallLimit: { usdc: 1 } } });
  await call("GET", "/v1/agents/limited/wallet", S);
  await call("GET", "/v1/api-keys", S);
  await call("POST", "/v1/webhooks", { ...S, body: { url: "https://hooks.example.com/x" } });
  await graphql(String(scoped?.apiKey), "{ agents { agentId } policies { agentId } }");

  // Webhooks and alerts with bad input; unknown routes; archiving.
  await call("GET", "/v1/webhooks", A);
  await call("POST", "/v1/webhooks", { key: admin, body: { url: "http://127.0.0.1:9/hook" } });
  await call("POST", "/v1/webhooks", { key: admin, body: { url: "not a url" } });
  await call("POST", "/v1/webhooks", { key: admin, body: { url: "https://hooks.example.com/x", eventTypes: ["no.such.event"] } });
  await call("DELETE", "/v1/webhooks/00000000-0000-0000-0000-000000000000", A);
  await call("GET", "/v1/alerts", A);
  await call("POST", "/v1/alerts", { key: admin, body: {} });
  await call("GET", "/v1/nothing", A);
  await call("PATCH", "/v1/agents/payer", A);
  await call("DELETE", "/v1/agents/payer", A);
  await call("DELETE", "/v1/agents/limited?force=true", A);
  await call("GET", "/v1/agents/limited", A);
  await call("DELETE", "/v1/policies/domains", A);
  await call("GET", "/v1/policies/domains", A);
}

async function main(argv: readonly string[]): Promise<number> {
  const at = argv.indexOf("--out");
  const out = at === -1 ? undefined : argv[at + 1];
  if (out === undefined) {
    console.error("usage: npx tsx scripts/wire-sample.ts --out <file.json>");
    return 2;
  }
  const root = await mkdtemp(join(tmpdir(), "apg-wire-sample-"));
  // As root the server runs as the postgres user, which must be able to enter this directory.
  await chmod(root, 0o755);
  const postgres = await startEmbeddedPostgres({ dataDir: join(root, "data"), durable: false });
  let system: System | null = null;
  try {
    system = await startSystem({
      databaseUrl: postgres.url,
      logger: pino({ level: "silent" }),
      reconcileIntervalMs: 500,
      pollIntervalMs: 50,
    });
    api = system.apiUrl;
    recordedOrigins.push(api);
    normalizer.origin(api, "api");
    normalizer.origin(system.localnet.info.rpcUrl, "rpc");
    await sequence(system);
  } finally {
    await system?.stop();
    await postgres.stop();
    await rm(root, { recursive: true, force: true });
  }
  writeFileSync(out, `${JSON.stringify(entries, null, 1)}\n`);
  console.log(`${entries.length} requests recorded in ${out}`);
  return 0;
}

process.exitCode = await main(process.argv.slice(2));
