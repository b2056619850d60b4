/**
 * The text rule (api/shared/text.ts) on every REST route and GraphQL argument: each string field
 * (path parameter, query parameter, body string at any depth, GraphQL literal or variable) gets
 * random Unicode: NUL and other controls, lone surrogates, astral characters, very long strings.
 * No answer is a 5xx; a value with a refused character gets 400 BAD_USER_INPUT naming that field,
 * and leaves every table as it was. Real gateway (real HTTP, real ledger, fresh Postgres); seeded.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { Keypair } from "@solana/web3.js";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createGatewayServer } from "../../api/gateway/server.js";
import { AgentWallets, generateWalletEncryptionKey, keystoreFromEnv, LocalTreasuryFundingSource } from "../../api/gateway/wallets/index.js";
import { localSettlementLedger } from "../../api/gateway/chain/index.js";
import { SecretBox } from "../../api/gateway/webhooks/index.js";
import type { ApiServer } from "../../api/query/server.js";
import { createAccount, issueApiKey } from "../../api/shared/keys.js";
import { unstorableText } from "../../api/shared/text.js";
import { type Localnet, startLocalnet } from "../../scripts/localnet.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { mulberry32 } from "../support/random.js";
import { type RestAnswer, restCall } from "../support/rest.js";

let localnet: Localnet;
let db: FreshDatabase;
let server: ApiServer;
let base: string;
let apiKey: string;
let fingerprintSql: string;

const AGENT = "fuzz-agent";
const WALLET = Keypair.generate().publicKey.toBase58();
const HASH = "5".repeat(87);
const UUID = "00000000-0000-4000-8000-000000000001";

beforeAll(async () => {
  [localnet, db] = await Promise.all([startLocalnet(), createFreshDatabase()]);
  const ledger = localSettlementLedger(localnet);
  const keystore = keystoreFromEnv({ WALLET_ENCRYPTION_KEY: generateWalletEncryptionKey() });
  const wallets = new AgentWallets({
    pool: db.pool,
    keystore,
    ledger,
    fundingSource: LocalTreasuryFundingSource.fromLocalnet(ledger, localnet),
  });
  server = createGatewayServer({
    pool: db.pool,
    liveFeed: false,
    logger: pino({ level: "silent" }),
    gateway: { wallets, keystore, secretBox: new SecretBox(randomBytes(32)) },
  });
  base = `http://127.0.0.1:${await server.listen(0)}`;
  apiKey = (await issueApiKey(db.pool, await createAccount(db.pool, "text fuzz"))).apiKey;
  expect((await restCall(base, "POST", "/v1/agents", { key: apiKey, body: { agentId: AGENT, name: "Fuzz" } })).status).toBe(201);
  // Every table but the key's last use (written by every authenticated call, refused or not).
  const { rows } = await db.pool.query<{ name: string }>(
    "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY 1",
  );
  fingerprintSql = rows
    .map(({ name }) =>
      name === "api_keys"
        ? `SELECT 'api_keys', md5(coalesce(string_agg(k.id::text || k.revoked_at::text, ',' ORDER BY k.id), '')) FROM api_keys k`
        : `SELECT '${name}', md5(coalesce(string_agg(t::text, ',' ORDER BY t::text), '')) FROM "${name}" t`,
    )
    .join(" UNION ALL ");
}, 240_000);

afterAll(async () => {
  await server?.close();
  await localnet?.stop();
  await db?.drop();
});

async function fingerprint(): Promise<string> {
  const { rows } = await db.pool.query<Record<string, string>>(fingerprintSql);
  return JSON.stringify(rows);
}

/** Random text: printable ASCII, any BMP scalar, astral pairs, lone surrogates, controls; now and then very long. */
function randomText(next: () => number, long = 6_000): string {
  const pick = (low: number, high: number) => low + Math.floor(next() * (high - low + 1));
  const piece = (): string => {
    const kind = Math.floor(next() * 9);
    if (kind <= 2) return String.fromCharCode(pick(0x20, 0x7e));
    if (kind === 3) return String.fromCharCode(next() < 0.5 ? pick(0xa0, 0xd7ff) : pick(0xe000, 0xfffd));
    if (kind === 4) return String.fromCodePoint(pick(0x10000, 0x10ffff));
    if (kind === 5) return String.fromCharCode(pick(0xd800, 0xdfff));
    if (kind === 6) return "\u0000";
    if (kind === 7) return String.fromCharCode(pick(0x01, 0x1f));
    return String.fromCharCode(pick(0x7f, 0x9f));
  };
  const length = next() < 0.1 ? pick(long / 3, long) : pick(1, 24);
  let out = "";
  for (let i = 0; i < length; i++) out += piece();
  // Half the values hold no refused character: they must reach the route and still get no 5xx.
  // biome-ignore lint/suspicious/noControlCharactersInRegex: removing control characters is the point
  return next() < 0.5 ? out.replace(/[\u0000-\u001f\u007f-\u009f\ud800-\udfff]/g, "x") : out;
}

/** Percent-encodes every UTF-16 unit, a lone surrogate as the 3 bytes no decoder accepts. */
function encodeUnits(text: string): string {
  let out = "";
  for (const char of text) {
    const code = char.codePointAt(0)!;
    if (code >= 0xd800 && code <= 0xdfff) {
      out += [0xe0 | (code >> 12), 0x80 | ((code >> 6) & 0x3f), 0x80 | (code & 0x3f)]
        .map((b) => `%${b.toString(16).toUpperCase()}`)
        .join("");
    } else out += encodeURIComponent(char);
  }
  return out;
}

/** Lone surrogates as U+FFFD, as a UTF-8 encoder writes them. */
function wellFormed(text: string): string {
  return text.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, "\ufffd");
}

interface RouteCase {
  readonly method: string;
  /** With `:name` parameters, filled from `params`. */
  readonly path: string;
  readonly params?: Record<string, string>;
  readonly query?: Record<string, string>;
  readonly body?: unknown;
  /** The service behind the route is not set up here: a value that passes the text rule gets 503 SERVICE_UNAVAILABLE. */
  readonly unconfigured?: true;
}

const x402 = {
  scheme: "exact",
  network: "solana-localnet",
  token: "USDC",
  amount: "1",
  payTo: WALLET,
  resource: "https://api.example.com/a",
};

const ROUTES: readonly RouteCase[] = [
  { method: "POST", path: "/v1/agents", body: { agentId: "fuzz-new", name: "A name" } },
  { method: "GET", path: "/v1/agents", query: { includeArchived: "false" } },
  { method: "GET", path: "/v1/agents/:agentId", params: { agentId: AGENT } },
  { method: "DELETE", path: "/v1/agents/:agentId", params: { agentId: "fuzz-absent" }, query: { force: "false" } },
  { method: "GET", path: "/v1/agents/:agentId/wallet", params: { agentId: AGENT } },
  { method: "GET", path: "/v1/agents/:agentId/wallet/balance", params: { agentId: AGENT } },
  { method: "POST", path: "/v1/agents/:agentId/wallet/withdraw", params: { agentId: AGENT }, body: { to: WALLET, usdc: 5 } },
  { method: "GET", path: "/v1/agents/:agentId/wallet/operations/:operationId", params: { agentId: AGENT, operationId: UUID } },
  { method: "GET", path: "/v1/policies/:agentId", params: { agentId: AGENT } },
  {
    method: "PUT",
    path: "/v1/policies/:agentId",
    params: { agentId: AGENT },
    body: { dailyBudget: 1, allowedDomains: ["api.example.com"], blockedDomains: ["evil.example.com"], protocolPreference: "auto" },
  },
  {
    method: "POST",
    path: "/v1/agents/:agentId/payments/authorize",
    params: { agentId: AGENT },
    body: { endpoint: "https://api.example.com/a?q=1", protocolPreference: "x402", x402 },
  },
  {
    method: "POST",
    path: "/v1/agents/:agentId/payments/domain-check",
    params: { agentId: AGENT },
    body: { endpoint: "https://evil.example.com/a" },
  },
  {
    method: "POST",
    path: "/v1/agents/:agentId/payments/:reservationId/complete",
    params: { agentId: AGENT, reservationId: UUID },
    body: { txHash: HASH },
  },
  { method: "POST", path: "/v1/agents/:agentId/payments/:reservationId/release", params: { agentId: AGENT, reservationId: UUID } },
  { method: "GET", path: "/v1/agents/:agentId/invocations/:parentTxHash", params: { agentId: AGENT, parentTxHash: HASH } },
  { method: "DELETE", path: "/v1/api-keys/:keyId", params: { keyId: UUID } },
  {
    method: "POST",
    path: "/v1/agents/:agentId/channels",
    unconfigured: true,
    params: { agentId: AGENT },
    body: { payee: WALLET, serviceOrigin: "https://api.example.com", deposit: 1, protocol: "mpp" },
  },
  { method: "GET", unconfigured: true, path: "/v1/channels/:channel", params: { channel: WALLET } },
  { method: "POST", unconfigured: true, path: "/v1/channels/:channel/close", params: { channel: WALLET } },
  {
    method: "POST",
    path: "/v1/channels/:channel/vouchers",
    params: { channel: WALLET },
    body: {
      cumulative: "1",
      sequence: "1",
      signature: "sig",
      charges: [{ sequence: "1", paymentId: "p", amountUnits: "1", endpoint: "https://api.example.com/a" }],
    },
  },
  {
    method: "POST",
    path: "/v1/alerts",
    body: { agentId: AGENT, type: "budget_pct", notify: "email:ops@example.com", threshold: 80, window: "24h" },
  },
  { method: "GET", path: "/v1/alerts/:alertId", params: { alertId: UUID } },
  { method: "DELETE", path: "/v1/alerts/:alertId", params: { alertId: UUID } },
  {
    method: "POST",
    path: "/v1/webhooks",
    body: { url: "https://hooks.example.com/w", eventTypes: ["payment.settled"], description: "ops" },
  },
  { method: "DELETE", path: "/v1/webhooks/:endpointId", params: { endpointId: UUID } },
  { method: "POST", path: "/v1/webhooks/:endpointId/rotate-secret", params: { endpointId: UUID } },
  {
    method: "POST",
    path: "/v1/x402/facilitator/verify",
    unconfigured: true,
    body: { payment: { x402Version: 1, payload: { transaction: "AA" } }, requirement: x402 },
  },
  { method: "POST", unconfigured: true, path: "/v1/x402/verify", body: { payment: { payload: { signature: "s" } }, requirement: x402 } },
  {
    method: "POST",
    path: "/v1/mpp/sessions/redeem",
    unconfigured: true,
    body: { token: "t", endpoint: "https://api.example.com/a", amount: "1", payTo: WALLET, serviceOrigin: "https://api.example.com" },
  },
  {
    method: "POST",
    path: "/v1/mpp/solana/charge",
    unconfigured: true,
    body: { transaction: "AA", amount: "1", recipient: WALLET, endpoint: "https://api.example.com/a", externalId: "e" },
  },
  {
    method: "GET",
    path: "/v1/transactions",
    query: { agentId: AGENT, domain: "api.example.com", since: "24h", protocol: "x402", status: "settled", limit: "5" },
  },
  { method: "GET", path: "/v1/transactions/:txHash", params: { txHash: HASH } },
  { method: "GET", path: "/v1/transactions/:txHash/chain", params: { txHash: HASH }, query: { maxDepth: "3" } },
  {
    method: "GET",
    path: "/v1/agents/:agentId/metrics",
    params: { agentId: AGENT },
    query: { window: "24h", resolution: "1h", metrics: "spend" },
  },
];

/** Where a string sits in a body: its path as the refusal names it, and a setter. */
function stringLeaves(value: unknown, path = ""): Array<{ field: string; set: (root: unknown, text: string) => unknown }> {
  if (typeof value === "string") return [{ field: path, set: (_root, text) => text }];
  const out: Array<{ field: string; set: (root: unknown, text: string) => unknown }> = [];
  const children: Array<[string | number, unknown, string]> = Array.isArray(value)
    ? value.map((item, i) => [i, item, `${path}[${i}]`])
    : typeof value === "object" && value !== null
      ? Object.entries(value).map(([key, item]) => [key, item, path === "" ? key : `${path}.${key}`])
      : [];
  for (const [key, item, field] of children) {
    for (const leaf of stringLeaves(item, field)) {
      out.push({
        field: leaf.field,
        set: (root, text) => {
          const copy = Array.isArray(root) ? [...root] : { ...(root as Record<string, unknown>) };
          (copy as Record<string | number, unknown>)[key] = leaf.set((root as Record<string | number, unknown>)[key], text);
          return copy;
        },
      });
    }
  }
  return out;
}

function send(route: RouteCase, params: Record<string, string>, query: Record<string, string>, body: unknown): Promise<RestAnswer> {
  const path = route.path.replace(/:(\w+)/g, (_, name: string) => encodeUnits(params[name]!));
  const search = Object.entries(query)
    .map(([key, value]) => `${encodeUnits(key)}=${encodeUnits(value)}`)
    .join("&");
  return restCall(base, route.method, search === "" ? path : `${path}?${search}`, {
    key: apiKey,
    lenientJson: true,
    ...(body === undefined ? {} : { body }),
    ...(route.method === "POST" ? { idem: randomUUID() } : {}),
  });
}

const PER_FIELD = 6;

describe("every REST route's text fields under random Unicode", () => {
  it("no 5xx; a refused character is 400 BAD_USER_INPUT naming the field, and nothing is written", async () => {
    const next = mulberry32(0x7e47);
    let refused = 0;
    let passed = 0;
    for (const route of ROUTES) {
      const params = route.params ?? {};
      const query = route.query ?? {};
      const targets: Array<{ field: string; where: "path" | "query" | "body"; apply: (text: string) => RouteCase }> = [
        ...Object.keys(params).map((name) => ({
          field: name,
          where: "path" as const,
          apply: (text: string) => ({ ...route, params: { ...params, [name]: text === "." || text === ".." ? `${text}x` : text } }),
        })),
        ...Object.keys(query).map((name) => ({
          field: name,
          where: "query" as const,
          apply: (text: string) => ({ ...route, query: { ...query, [name]: text } }),
        })),
        ...stringLeaves(route.body).map((leaf) => ({
          field: leaf.field,
          where: "body" as const,
          apply: (text: string) => ({ ...route, body: leaf.set(route.body, text) }),
        })),
      ];
      for (const target of targets) {
        for (let i = 0; i < PER_FIELD; i++) {
          // Bodies take very long strings; a URL longer than node's 16 KiB header limit is answered 431 by node itself.
          const text = i === 0 ? "a\u0000b" : randomText(next, target.where === "body" ? 6_000 : 600);
          const mutated = target.apply(text);
          const label = `${route.method} ${route.path} ${target.field}=${JSON.stringify(text.slice(0, 40))}`;
          // A query value reaches the server as UTF-8: a lone surrogate arrives as U+FFFD.
          const seen = target.where === "query" ? wellFormed(text) : text;
          // In a path a lone surrogate's bytes do not decode: refused as a malformed segment.
          const refusable = unstorableText(seen) !== null;
          const before = refusable ? await fingerprint() : "";
          const answer = await send(mutated, mutated.params ?? {}, mutated.query ?? {}, mutated.body);
          if (route.unconfigured === true && answer.status === 503) expect(answer.body?.code, label).toBe("SERVICE_UNAVAILABLE");
          else expect(answer.status, `${label} ${answer.text.slice(0, 300)}`).toBeLessThan(500);
          if (refusable) {
            refused += 1;
            expect(answer.status, label).toBe(400);
            expect(answer.body, label).toMatchObject({ code: "BAD_USER_INPUT", field: target.field });
            expect(await fingerprint(), label).toBe(before);
          } else {
            passed += 1;
          }
        }
      }
    }
    // Both halves were exercised.
    expect(refused).toBeGreaterThan(100);
    expect(passed).toBeGreaterThan(100);
  }, 120_000);
});

describe("GraphQL arguments under random Unicode", () => {
  const QUERIES: ReadonlyArray<{ query: string; variables: Record<string, string> }> = [
    { query: "query($v: String!) { transaction(txHash: $v) { txHash } }", variables: { v: HASH } },
    { query: "query($v: String) { transactions(domain: $v) { edges { node { txHash } } } }", variables: { v: "api.example.com" } },
    { query: "query($v: String) { transactions(since: $v) { edges { node { txHash } } } }", variables: { v: "24h" } },
    { query: "query($v: String) { transactions(after: $v) { edges { node { txHash } } } }", variables: { v: "abc" } },
    { query: "query($v: ID) { transactions(agentId: $v) { edges { node { txHash } } } }", variables: { v: AGENT } },
    { query: "query($v: String!) { paymentTree(rootTxHash: $v) { totalNodes } }", variables: { v: HASH } },
    { query: "query($v: String) { spendSummary(window: $v) { total } }", variables: { v: "24h" } },
    { query: "query($v: String) { metrics(resolution: $v) { window } }", variables: { v: "1h" } },
    { query: "query($v: String!) { invocation(txHash: $v) { txHash } }", variables: { v: HASH } },
    {
      query: 'query($v: String!) { checkPolicy(agentId: "fuzz-agent", endpoint: $v, amount: "0.1") { allowed } }',
      variables: { v: "https://api.example.com/a" },
    },
    {
      query: 'query($v: String!) { checkPolicy(agentId: "fuzz-agent", endpoint: "https://api.example.com/a", amount: $v) { allowed } }',
      variables: { v: "0.1" },
    },
    { query: "query($v: String!) { channel(address: $v) { address } }", variables: { v: WALLET } },
    { query: "query($v: String) { channels(after: $v) { edges { node { address } } } }", variables: { v: "abc" } },
  ];

  const post = (body: unknown) =>
    restCall(base, "POST", "/graphql", { key: apiKey, body, lenientJson: true }) as Promise<RestAnswer & { body: { errors?: any[] } }>;

  it("as variables and as literals: no 5xx, no unexpected error; a refused character is BAD_USER_INPUT naming the argument", async () => {
    const next = mulberry32(0x6a41);
    const before = await fingerprint();
    let refused = 0;
    for (const { query, variables } of QUERIES) {
      const argument = /(\w+): \$v/.exec(query)![1]!;
      for (let i = 0; i < PER_FIELD * 2; i++) {
        const text = i === 0 ? "a\u0000b" : randomText(next);
        const refusable = unstorableText(text) !== null;
        const asVariable = await post({ query, variables: { ...variables, v: text } });
        const literal = query.replace(/query\(\$v: [\w!]+\) /, "").replace("$v", JSON.stringify(text));
        const asLiteral = await post({ query: literal });
        for (const [how, answer] of [
          ["variable", asVariable],
          ["literal", asLiteral],
        ] as const) {
          const label = `${how} ${argument}=${JSON.stringify(text.slice(0, 40))}`;
          expect(answer.status, `${label} ${answer.text.slice(0, 300)}`).toBeLessThan(500);
          const codes = (answer.body?.errors ?? []).map((error: any) => error.extensions?.code);
          expect(codes, label).not.toContain(undefined);
          expect(codes, label).not.toContain("INTERNAL_SERVER_ERROR");
          if (refusable) {
            // A lone surrogate cannot be written as a GraphQL string literal: the parser refuses it first.
            const expected =
              how === "literal" && /[\ud800-\udfff]/.test(wellFormed(text) === text ? "" : text)
                ? ["BAD_USER_INPUT", "GRAPHQL_PARSE_FAILED"]
                : ["BAD_USER_INPUT"];
            expect(expected, label).toContain(codes[0]);
            if (codes[0] === "BAD_USER_INPUT") {
              const named = answer.body.errors[0].extensions.field ?? answer.body.errors[0].extensions.argument;
              expect(named, label).toBe(how === "variable" ? "variables.v" : argument);
            }
          }
        }
        if (refusable) refused += 1;
      }
    }
    expect(refused).toBeGreaterThan(20);
    expect(await fingerprint()).toBe(before);
  }, 60_000);
});
