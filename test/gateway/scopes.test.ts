/**
 * Key scopes on REST /v1 and GraphQL, over real HTTP on loopback (api/shared/scopes.ts, docs/rest.md
 * "Scopes"): every route the gateway serves, taken from the router's own tables, called with every kind of key (admin, approver, the
 * agent key of the path's agent, another agent's key). Each call is either allowed (any answer but
 * 401 or 403 FORBIDDEN_SCOPE) or refused with its typed answer and every table unchanged. A route
 * missing from the expected table below, or a route in it the router no longer has, fails the
 * test, so a new route cannot go unjudged.
 */
import { randomBytes } from "node:crypto";
import bs58 from "bs58";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runAdmin } from "../../api/gateway/admin.js";
import { handleSession } from "../../api/gateway/dashboard/session.js";
import { GATEWAY_ROUTES, useGatewayRoutes } from "../../api/gateway/http/index.js";
import { generateWalletEncryptionKey, keystoreFromEnv } from "../../api/gateway/wallets/index.js";
import { SecretBox } from "../../api/gateway/webhooks/index.js";
import { parse } from "graphql";
import { createSchema } from "graphql-yoga";
import { FIELD_SCOPES } from "../../api/query/field-scopes.js";
import { resolvers } from "../../api/query/resolvers/index.js";
import { typeDefs } from "../../api/query/schema.js";
import { type ApiServer, createApiServer } from "../../api/query/server.js";
import { QUERY_ROUTES } from "../../api/query/rest/index.js";
import { createApproval } from "../../api/shared/approvals/store.js";
import { Router } from "../../api/shared/http/router.js";
import { createAccount, issueApiKey, registerAgent } from "../../api/shared/keys.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { type RestAnswer, type RestOptions, restCall } from "../support/rest.js";

type Subject = "admin" | "approver" | "own" | "other";
const SUBJECTS: readonly Subject[] = ["other", "approver", "own", "admin"];

/**
 * Who may call each route. `own` is the key of the agent in the path (or owning the addressed
 * object); `other` another agent's key of the same account. `otherGets`: the refusal `other` gets
 * when it is refused for asking about another agent's object (404, as for no object), instead of
 * 403 FORBIDDEN_SCOPE.
 */
const EVERYONE: Subject[] = ["admin", "approver", "own", "other"];
const READERS: Subject[] = ["admin", "approver", "own"];
const PAYERS: Subject[] = ["admin", "own"];
const ACCOUNT: Subject[] = ["admin", "approver"];
const ADMIN: Subject[] = ["admin"];

const EXPECTED: Record<string, { allowed: Subject[]; otherGets?: "NOT_FOUND" | "APPROVAL_NOT_FOUND" }> = {
  "GET /v1/policies/:agentId": { allowed: READERS },
  "PUT /v1/policies/:agentId": { allowed: ADMIN },
  "DELETE /v1/policies/:agentId": { allowed: ADMIN },
  "POST /v1/policies/:agentId/backtest": { allowed: READERS },
  "GET /v1/policies/:agentId/history": { allowed: READERS },
  "GET /v1/agents": { allowed: EVERYONE },
  "POST /v1/agents": { allowed: ADMIN },
  "GET /v1/agents/:agentId": { allowed: READERS },
  "DELETE /v1/agents/:agentId": { allowed: ADMIN },
  "GET /v1/agents/:agentId/wallet": { allowed: READERS },
  "GET /v1/agents/:agentId/wallet/balance": { allowed: READERS },
  "POST /v1/agents/:agentId/wallet/fund": { allowed: ADMIN },
  "POST /v1/agents/:agentId/wallet/withdraw": { allowed: ADMIN },
  "GET /v1/agents/:agentId/wallet/operations/:operationId": { allowed: READERS },
  "POST /v1/agents/:agentId/payments/authorize": { allowed: PAYERS },
  "POST /v1/agents/:agentId/payments/domain-check": { allowed: PAYERS },
  "POST /v1/agents/:agentId/payments/:reservationId/complete": { allowed: PAYERS },
  "POST /v1/agents/:agentId/payments/:reservationId/release": { allowed: PAYERS },
  "GET /v1/approvals": { allowed: ACCOUNT },
  "GET /v1/approvals/:approvalId": { allowed: READERS, otherGets: "APPROVAL_NOT_FOUND" },
  "POST /v1/approvals/:approvalId/approve": { allowed: ACCOUNT },
  "POST /v1/approvals/:approvalId/deny": { allowed: ACCOUNT },
  "GET /v1/agents/:agentId/invocations/:parentTxHash": { allowed: READERS },
  "POST /v1/agents/:agentId/channels": { allowed: PAYERS },
  "GET /v1/channels/:channel": { allowed: READERS, otherGets: "NOT_FOUND" },
  "POST /v1/channels/:channel/vouchers": { allowed: PAYERS, otherGets: "NOT_FOUND" },
  "POST /v1/channels/:channel/settlements": { allowed: ADMIN },
  "POST /v1/channels/:channel/close": { allowed: PAYERS, otherGets: "NOT_FOUND" },
  "GET /v1/x402/supported": { allowed: EVERYONE },
  "POST /v1/x402/verify": { allowed: ADMIN },
  "POST /v1/x402/settle": { allowed: ADMIN },
  "GET /v1/x402/facilitator/supported": { allowed: EVERYONE },
  "POST /v1/x402/facilitator/verify": { allowed: ADMIN },
  "POST /v1/x402/facilitator/settle": { allowed: ADMIN },
  "GET /v1/mpp/solana/supported": { allowed: EVERYONE },
  "POST /v1/mpp/solana/charge": { allowed: ADMIN },
  "POST /v1/mpp/payments": { allowed: ADMIN },
  "POST /v1/mpp/sessions/redeem": { allowed: ADMIN },
  "POST /v1/alerts": { allowed: ADMIN },
  "GET /v1/alerts": { allowed: ACCOUNT },
  "GET /v1/alerts/:alertId": { allowed: ACCOUNT },
  "DELETE /v1/alerts/:alertId": { allowed: ADMIN },
  "POST /v1/webhooks": { allowed: ADMIN },
  "GET /v1/webhooks": { allowed: ACCOUNT },
  "DELETE /v1/webhooks/:endpointId": { allowed: ADMIN },
  "POST /v1/webhooks/:endpointId/rotate-secret": { allowed: ADMIN },
  "POST /v1/api-keys": { allowed: ADMIN },
  "GET /v1/api-keys": { allowed: ACCOUNT },
  "DELETE /v1/api-keys/:keyId": { allowed: ADMIN },
  "GET /v1/keys/current": { allowed: EVERYONE },
  "GET /v1/agents/:agentId/metrics": { allowed: READERS },
  "GET /v1/transactions": { allowed: EVERYONE },
  "GET /v1/transactions/:txHash": { allowed: READERS, otherGets: "NOT_FOUND" },
  "GET /v1/transactions/:txHash/chain": { allowed: READERS, otherGets: "NOT_FOUND" },
};

const ALL_ROUTES = [...GATEWAY_ROUTES, ...QUERY_ROUTES];
const OWN = "researcher";
const OTHER = "scout";
const NOW = new Date("2026-03-01T12:00:00.000Z");

let db: FreshDatabase;
let api: ApiServer;
/** The gateway's base URL: REST /v1 and GraphQL on one server, over real HTTP on loopback. */
let handle: string;
let accountId: string;
let keys: Record<Subject, string>;
let spareKeyId: string;
const txHash = bs58.encode(randomBytes(64));
const otherTxHash = bs58.encode(randomBytes(64));
const channel = bs58.encode(randomBytes(32));
/** A pending approval of the own agent (seeded below). */
let approvalId: string;

/** An indexed payment row, as the indexer projects one (a read fixture: no chain needed to own it). */
async function seedPayment(hash: string, eventId: number, wallet: string): Promise<void> {
  await db.pool.query(
    `INSERT INTO transactions (event_id, tx_hash, instruction_index, agent, payee, mint, payment_id, protocol, rail, amount_units,
       endpoint_hash, atomic, explorer_url, "timestamp", slot, status)
     VALUES ($1::bigint, $2, 0, $3, 'Payee1111111111111111111111111111111111111', 'Mint11111111111111111111111111111111111111', $1::numeric, 'x402',
       'stablecoin', 1000, $4, true, 'https://explorer.test', $5, 1, 'confirmed')`,
    [eventId, hash, wallet, "00".repeat(32), NOW],
  );
}

beforeAll(async () => {
  db = await createFreshDatabase();
  const routes = useGatewayRoutes({
    pool: db.pool,
    now: () => NOW,
    keystore: keystoreFromEnv({ WALLET_ENCRYPTION_KEY: generateWalletEncryptionKey() }),
    secretBox: new SecretBox(randomBytes(32)),
  });
  api = createApiServer({ pool: db.pool, now: () => NOW, liveFeed: false, plugins: [routes] });
  handle = `http://127.0.0.1:${await api.listen(0)}`;
  accountId = await createAccount(db.pool, "scopes");
  const ownWallet = bs58.encode(randomBytes(32));
  const otherWallet = bs58.encode(randomBytes(32));
  await registerAgent(db.pool, accountId, { agentId: `${accountId}/${OWN}`, walletAddress: ownWallet });
  await registerAgent(db.pool, accountId, { agentId: `${accountId}/${OTHER}`, walletAddress: otherWallet });
  keys = {
    admin: (await issueApiKey(db.pool, accountId)).apiKey,
    approver: (await issueApiKey(db.pool, accountId, { kind: "approver" })).apiKey,
    own: (await issueApiKey(db.pool, accountId, { kind: "agent", agentId: OWN })).apiKey,
    other: (await issueApiKey(db.pool, accountId, { kind: "agent", agentId: OTHER })).apiKey,
  };
  await issueApiKey(db.pool, accountId);
  const { rows } = await db.pool.query<{ id: string }>("SELECT max(id)::text AS id FROM api_keys");
  spareKeyId = rows[0]!.id;
  await seedPayment(txHash, 1, ownWallet);
  await seedPayment(otherTxHash, 2, otherWallet);
  await db.pool.query(
    `INSERT INTO channel_sessions (channel, account_id, agent_id, payer, payee, mint, channel_id, protocol, service_origin, deposit,
       expires_at, withdraw_delay_seconds, status)
     VALUES ($1, $2, $3, $4, 'Payee1111111111111111111111111111111111111', 'Mint11111111111111111111111111111111111111', $5, 'mpp',
       'https://seller.test', 1000000, $6, 60, 'open')`,
    [channel, accountId, `${accountId}/${OWN}`, ownWallet, "ab".repeat(32), new Date(NOW.getTime() + 3_600_000)],
  );
  const held = await db.pool.query<{ id: string }>(
    `INSERT INTO spend_reservations (agent_id, amount_units, endpoint, domain, protocol, status, created_at, budget_window_start)
     VALUES ($1, 6000000, 'https://api.example.com/v1/report', 'api.example.com', 'x402', 'pending_approval', $2, $2) RETURNING id::text AS id`,
    [`${accountId}/${OWN}`, NOW],
  );
  approvalId = (
    await createApproval(db.pool, {
      accountId,
      agentKey: `${accountId}/${OWN}`,
      reservationId: held.rows[0]!.id,
      idempotencyKey: null,
      amountUnits: 6_000_000n,
      endpoint: "https://api.example.com/v1/report",
      domain: "api.example.com",
      rule: "above",
      reason: "approval_required: 6 usdc is above the approval threshold of 5 usdc",
      requestedAt: NOW,
      timeoutMs: 900_000,
      linkTokenHash: null,
    })
  ).id;
});

afterAll(async () => {
  await api?.close();
  await db?.drop();
});

function call(subject: Subject, method: string, path: string, options: RestOptions = {}): Promise<RestAnswer> {
  return restCall(handle, method, path, { key: keys[subject], ...options });
}

/** Every table's rows, hashed: equal before and after means nothing was written. */
async function snapshot(): Promise<Record<string, string>> {
  const { rows: tables } = await db.pool.query<{ name: string }>(
    "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY 1",
  );
  const out: Record<string, string> = {};
  for (const { name } of tables) {
    const { rows } = await db.pool.query<{ h: string | null }>(
      `SELECT md5(string_agg(t::text, ',' ORDER BY t::text)) AS h FROM "${name}" t`,
    );
    out[name] = rows[0]!.h ?? "";
  }
  return out;
}

function concretePath(path: string): string {
  const values: Record<string, string> = {
    agentId: OWN,
    keyId: spareKeyId,
    alertId: "1",
    endpointId: "1",
    operationId: "1",
    reservationId: "1",
    parentTxHash: txHash,
    txHash,
    channel,
    approvalId,
  };
  return path.replace(/:(\w+)/g, (_, name: string) => {
    const value = values[name];
    if (value === undefined) throw new Error(`no test value for :${name} in ${path}: add one`);
    return encodeURIComponent(value);
  });
}

describe("every REST route with every scope", () => {
  it("the expected table covers exactly the routes the router serves", () => {
    const served = ALL_ROUTES.map((route) => `${route.method} ${route.path}`).sort();
    expect(served).toEqual(Object.keys(EXPECTED).sort());
    for (const route of ALL_ROUTES) expect(route.scope, `${route.method} ${route.path}`).toBeDefined();
  });

  it("allows the declared scopes and refuses the others with a typed answer and nothing changed", async () => {
    const outcomes: string[] = [];
    for (const route of ALL_ROUTES) {
      const name = `${route.method} ${route.path}`;
      const expected = EXPECTED[name];
      if (expected === undefined) throw new Error(`${name} has no expected scopes: declare them in EXPECTED`);
      const path = concretePath(route.path);
      const body = route.method === "POST" || route.method === "PUT" ? { body: {} } : {};
      for (const subject of SUBJECTS) {
        const allowed = expected.allowed.includes(subject);
        const before = allowed ? null : await snapshot();
        const answer = await call(subject, route.method, path, { ...body, lenientJson: true });
        const code = answer.body?.code as string | undefined;
        if (allowed) {
          expect(answer.status, `${subject} ${name}: ${answer.text}`).not.toBe(401);
          expect(code, `${subject} ${name}: ${answer.text}`).not.toBe("FORBIDDEN_SCOPE");
        } else {
          const refusal = subject === "other" && expected.otherGets !== undefined ? expected.otherGets : "FORBIDDEN_SCOPE";
          expect({ status: answer.status, code }, `${subject} ${name}: ${answer.text}`).toEqual({
            status: refusal === "FORBIDDEN_SCOPE" ? 403 : 404,
            code: refusal,
          });
          if (refusal === "FORBIDDEN_SCOPE") {
            expect(answer.headers.get("content-type")).toContain("application/problem+json");
            expect(Array.isArray(answer.body.requiredScopes) && answer.body.requiredScopes.length > 0).toBe(true);
          }
          expect(await snapshot(), `${subject} ${name} changed a table`).toEqual(before);
        }
        outcomes.push(`${subject} ${name} ${allowed ? "allowed" : "refused"}`);
      }
    }
    expect(outcomes).toHaveLength(Object.keys(EXPECTED).length * SUBJECTS.length);
  });
});

describe("agent keys", () => {
  it("cannot raise their own limits nor withdraw: 403 FORBIDDEN_SCOPE naming admin, nothing written", async () => {
    const before = await snapshot();
    const put = await call("own", "PUT", `/v1/policies/${OWN}`, { body: { dailyBudget: { usdc: 1000000 } } });
    expect(put.status).toBe(403);
    expect(put.body).toMatchObject({ code: "FORBIDDEN_SCOPE", scope: `agent:${OWN}`, requiredScopes: ["admin"] });
    const withdraw = await call("own", "POST", `/v1/agents/${OWN}/wallet/withdraw`, {
      body: { amount: { usdc: 1 }, to: "Payee1111111111111111111111111111111111111" },
      idem: "withdraw-1",
    });
    expect(withdraw.status).toBe(403);
    expect(withdraw.body.code).toBe("FORBIDDEN_SCOPE");
    expect(await snapshot()).toEqual(before);
  });

  it("are refused before the body is read: a malformed body still answers 403 FORBIDDEN_SCOPE", async () => {
    const before = await snapshot();
    for (const raw of ["{not json", '{"dailyBudget":{"usdc":1},"dailyBudget":{"usdc":2}}']) {
      const answer = await call("own", "PUT", `/v1/policies/${OWN}`, { raw });
      expect(answer.status, raw).toBe(403);
      expect(answer.body.code).toBe("FORBIDDEN_SCOPE");
    }
    expect((await call("admin", "PUT", `/v1/policies/${OWN}`, { raw: "{not json" })).body.code).toBe("INVALID_JSON");
    expect(await snapshot()).toEqual(before);
  });

  it("see only their own agent in lists and lookups", async () => {
    const agents = await call("own", "GET", "/v1/agents");
    expect(agents.body.agents.map((a: { agentId: string }) => a.agentId)).toEqual([OWN]);
    const all = await call("approver", "GET", "/v1/agents");
    expect(all.body.agents.map((a: { agentId: string }) => a.agentId).sort()).toEqual([OWN, OTHER]);
    const txs = await call("own", "GET", "/v1/transactions");
    expect(txs.status).toBe(200);
    expect(txs.body.transactions.map((t: { txHash: string }) => t.txHash)).toEqual([txHash]);
    const adminTxs = await call("admin", "GET", "/v1/transactions");
    expect(adminTxs.body.transactions.map((t: { txHash: string }) => t.txHash).sort()).toEqual([txHash, otherTxHash].sort());
    const asked = await call("own", "GET", `/v1/transactions?agentId=${OTHER}`);
    expect(asked.status).toBe(403);
    expect(asked.body.code).toBe("FORBIDDEN_SCOPE");
    expect((await call("own", "GET", `/v1/transactions/${txHash}`)).status).toBe(200);
    const foreign = await call("own", "GET", `/v1/transactions/${otherTxHash}`);
    expect(foreign.status).toBe(404);
    expect(foreign.body.code).toBe("NOT_FOUND");
    expect((await call("own", "GET", `/v1/channels/${channel}`)).status).not.toBe(404);
  });
});

describe("issuing scoped keys", () => {
  it("POST /v1/api-keys takes a scope, lists it, and the key knows it (GET /v1/keys/current)", async () => {
    const issued = await call("admin", "POST", "/v1/api-keys", { body: { scope: `agent:${OTHER}` } });
    expect(issued.status).toBe(201);
    expect(issued.body.scope).toBe(`agent:${OTHER}`);
    const current = await restCall(handle, "GET", "/v1/keys/current", { key: issued.body.apiKey });
    expect(current.body).toEqual({ id: issued.body.id, scope: `agent:${OTHER}`, accountId });
    const listed = await call("approver", "GET", "/v1/api-keys");
    expect(listed.body.apiKeys.find((k: { id: string }) => k.id === issued.body.id).scope).toBe(`agent:${OTHER}`);
    expect(listed.body.apiKeys.filter((k: { scope: string }) => k.scope === "approver")).toHaveLength(1);
    const approverKey = await call("admin", "POST", "/v1/api-keys", { body: { scope: "approver" } });
    expect(approverKey.body.scope).toBe("approver");
    expect((await call("admin", "POST", "/v1/api-keys", {})).body.scope).toBe("admin");
  });

  it("an unknown scope is 400 and an unknown agent 404, and no key is made", async () => {
    const before = await snapshot();
    for (const scope of ["root", "agent:", "agent:bad id", 7, "Admin"]) {
      const answer = await call("admin", "POST", "/v1/api-keys", { body: { scope } });
      expect(answer.status, String(scope)).toBe(400);
      expect(answer.body).toMatchObject({ code: "BAD_USER_INPUT", field: "scope" });
    }
    const unknown = await call("admin", "POST", "/v1/api-keys", { body: { scope: "agent:nobody" } });
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({ code: "NOT_FOUND", field: "scope" });
    expect(await snapshot()).toEqual(before);
  });

  it("admin issue-key --scope issues a scoped key; unknown scopes and agents exit 2 with no key", async () => {
    const printed: string[] = [];
    const errors: string[] = [];
    const log = console.log;
    const error = console.error;
    console.log = (text: string) => printed.push(text);
    console.error = (text: string) => errors.push(text);
    try {
      expect(await runAdmin(db.pool, ["issue-key", accountId, "--scope", `agent:${OWN}`])).toBe(0);
      const issued = JSON.parse(printed[0]!) as { apiKey: string; scope: string };
      expect(issued.scope).toBe(`agent:${OWN}`);
      const current = await restCall(handle, "GET", "/v1/keys/current", { key: issued.apiKey });
      expect(current.body.scope).toBe(`agent:${OWN}`);
      const before = await snapshot();
      expect(await runAdmin(db.pool, ["issue-key", accountId, "--scope", "superuser"])).toBe(2);
      expect(await runAdmin(db.pool, ["issue-key", accountId, "--scope", "agent:nobody"])).toBe(2);
      expect(await runAdmin(db.pool, ["issue-key", "not-an-account", "--scope", "approver"])).toBe(2);
      expect(await runAdmin(db.pool, ["issue-key", accountId, "--scope"])).toBe(2);
      expect(await snapshot()).toEqual(before);
      expect(errors.join("\n")).toContain("unknown scope");
      expect(errors.join("\n")).toContain("no agent nobody");
    } finally {
      console.log = log;
      console.error = error;
    }
  });
});

describe("dashboard sign-in", () => {
  it("admin and approver keys sign in; an agent key is 403 FORBIDDEN_SCOPE and makes no session", async () => {
    const signIn = (key: string) =>
      handleSession(
        db.pool,
        new Request("http://gateway.test/dashboard/api/session", { method: "POST", headers: { authorization: `Bearer ${key}` } }),
      );
    const approver = await signIn(keys.approver);
    expect(approver.status).toBe(201);
    expect(((await approver.json()) as { scope: string }).scope).toBe("approver");
    const before = await snapshot();
    const agent = await signIn(keys.own);
    expect(agent.status).toBe(403);
    expect(((await agent.json()) as { code: string }).code).toBe("FORBIDDEN_SCOPE");
    expect(agent.headers.get("set-cookie")).toBeNull();
    expect(await snapshot()).toEqual(before);
  });
});

describe("route declarations", () => {
  it("a read or agent route that does not say how an agent key is held to its agent is refused when the router is built", () => {
    const handler = async () => ({ status: 204, body: null });
    expect(() => new Router([{ method: "GET", path: "/v1/things", scope: "read", handler }])).toThrow(/needs exactly one of/);
    expect(() => new Router([{ method: "GET", path: "/v1/things", scope: "admin", filtersByAgent: true, handler }])).toThrow(
      /only apply to read and agent routes/,
    );
    expect(() => new Router([{ method: "GET", path: "/v1/agents/:agentId/things", scope: "agent", handler }])).not.toThrow();
  });
});

/**
 * GraphQL: every root field of the schema (read from the schema itself), with every key kind. The
 * fields are reads: admin, approver and the agent's own key are answered; another agent's key is
 * refused (403 FORBIDDEN_SCOPE) when it names the agent, answered null for an object of the agent,
 * or given a list without the agent's items. Account-wide fields (the dashboard's overview, budget
 * use) answer admin and approver keys only.
 */
const GRAPHQL_OTHER: Record<string, "forbidden" | "null" | "filtered" | "accountWide"> = {
  "Query.agents": "filtered",
  "Query.wallet": "forbidden",
  "Query.transaction": "null",
  "Query.transactions": "forbidden",
  "Query.receivedPayments": "forbidden",
  "Query.paymentTree": "null",
  "Query.spendSummary": "forbidden",
  "Query.metrics": "forbidden",
  "Query.invocation": "null",
  "Query.invocations": "filtered",
  "Query.policy": "forbidden",
  "Query.policies": "filtered",
  "Query.checkPolicy": "forbidden",
  "Query.simulatePolicy": "forbidden",
  "Query.policyHistory": "forbidden",
  "Query.channels": "forbidden",
  "Query.channel": "null",
  "Query.approvals": "accountWide",
  "Query.approval": "null",
  "Query.agentList": "accountWide",
  "Query.budgetUse": "accountWide",
  "Query.rejectionCounts": "accountWide",
  "Query.webhookHealth": "accountWide",
  "Query.indexerStatus": "accountWide",
  "Query.runs": "forbidden",
  "Subscription.transactionRecorded": "forbidden",
  "Subscription.channelUpdated": "forbidden",
};

async function graphql(
  subject: Subject,
  query: string,
  accept = "application/graphql-response+json",
): Promise<{ status: number; text: string; body: any }> {
  const response = await fetch(`${handle}/graphql`, {
    method: "POST",
    headers: { authorization: `Bearer ${keys[subject]}`, "content-type": "application/json", accept },
    body: JSON.stringify({ query }),
  });
  const text = await response.text();
  let body: any = null;
  try {
    body = JSON.parse(text);
  } catch {
    body = null;
  }
  return { status: response.status, text, body };
}

/** A call of the field naming the own agent (and its payment, channel) wherever an argument allows. */
function fieldCall(field: { name: string; args: readonly { name: string }[] }): string {
  const values: Record<string, string> = {
    agentId: JSON.stringify(OWN),
    txHash: JSON.stringify(txHash),
    rootTxHash: JSON.stringify(txHash),
    txHashes: JSON.stringify([txHash]),
    address: JSON.stringify(channel),
    endpoint: JSON.stringify("api.example.com/v1/quote"),
    amount: JSON.stringify("0.5"),
    id: JSON.stringify(approvalId),
    policy: JSON.stringify("{}"),
    window: JSON.stringify("24h"),
  };
  const args = field.args.filter((arg) => values[arg.name] !== undefined).map((arg) => `${arg.name}: ${values[arg.name]}`);
  const selection: Record<string, string> = { agents: "agentId", policies: "agentId", invocations: "parentTxHash" };
  return `${field.name}${args.length === 0 ? "" : `(${args.join(", ")})`} { __typename ${selection[field.name] ?? ""} }`;
}

describe("every GraphQL root field with every scope", () => {
  const schema = createSchema({ typeDefs, resolvers });
  const roots = [schema.getQueryType(), schema.getMutationType(), schema.getSubscriptionType()].filter((type) => type != null);
  const fields = roots.flatMap((type) =>
    Object.values(type.getFields()).map((field) => ({ key: `${type.name}.${field.name}`, field, type: type.name })),
  );

  it("every root field of the schema declares its scope, and the expected table covers exactly them", () => {
    expect(fields.map((f) => f.key).sort()).toEqual(Object.keys(FIELD_SCOPES).sort());
    expect(Object.keys(GRAPHQL_OTHER).sort()).toEqual(Object.keys(FIELD_SCOPES).sort());
  });

  it("a resolver map with an undeclared root field does not build", async () => {
    const { withFieldScopes } = await import("../../api/query/field-scopes.js");
    expect(() => withFieldScopes({ Query: { secrets: () => [] } })).toThrow(/declares no scope/);
  });

  it("admin, approver and the own agent are answered; another agent's key is refused, nulled or filtered, nothing changed", async () => {
    for (const { key, field, type } of fields) {
      const operation = type === "Subscription" ? "subscription" : "query";
      const document = `${operation} { ${fieldCall(field)} }`;
      parse(document);
      const accept = type === "Subscription" ? "text/event-stream" : "application/graphql-response+json";
      for (const subject of SUBJECTS) {
        const before = await snapshot();
        const answer = await graphql(subject, document, accept);
        expect(await snapshot(), `${subject} ${key} changed a table`).toEqual(before);
        const refused = answer.text.includes('"FORBIDDEN_SCOPE"');
        if (GRAPHQL_OTHER[key] === "accountWide" && (subject === "own" || subject === "other")) {
          // Account-wide figures: no agent key reads them, its own agent's included.
          expect(refused, `${subject} ${key}: ${answer.text}`).toBe(true);
          continue;
        }
        if (subject !== "other") {
          expect(refused, `${subject} ${key}: ${answer.text}`).toBe(false);
          expect(answer.status, `${subject} ${key}`).not.toBe(401);
          continue;
        }
        const expected = GRAPHQL_OTHER[key];
        if (expected === "forbidden") {
          expect(refused, `${subject} ${key}: ${answer.text}`).toBe(true);
          if (type !== "Subscription") expect(answer.body.data?.[field.name] ?? null, key).toBeNull();
        } else {
          expect(refused, `${subject} ${key}: ${answer.text}`).toBe(false);
          const value = answer.body.data[field.name];
          if (expected === "null") expect(value, `${key}: ${answer.text}`).toBeNull();
          else {
            // A list: nothing of the own agent (its agent row, policy, or a budget its payment opened).
            expect(Array.isArray(value), key).toBe(true);
            for (const item of value) {
              if (item.agentId !== undefined) expect(item.agentId, `${key}: ${answer.text}`).not.toBe(OWN);
              if (item.parentTxHash !== undefined) expect(item.parentTxHash, `${key}: ${answer.text}`).not.toBe(txHash);
            }
          }
        }
      }
    }
  });

  it("an agent key is answered its own agent only, with the agent filled in when omitted", async () => {
    const agents = await graphql("own", "{ agents { agentId } policies { agentId } }");
    expect(agents.body.data).toEqual({ agents: [{ agentId: OWN }], policies: [{ agentId: OWN }] });
    const txs = await graphql("own", `{ transactions { nodes { txHash } } transaction(txHash: ${JSON.stringify(txHash)}) { agentId } }`);
    expect(txs.body.data).toEqual({ transactions: { nodes: [{ txHash }] }, transaction: { agentId: OWN } });
    const all = await graphql("approver", "{ transactions { nodes { txHash } } }");
    expect(all.body.data.transactions.nodes.map((n: { txHash: string }) => n.txHash).sort()).toEqual([txHash, otherTxHash].sort());
    const other = await graphql("other", "{ transactions { nodes { txHash } } }");
    expect(other.body.data.transactions.nodes).toEqual([{ txHash: otherTxHash }]);
    const refused = await graphql("own", `{ policy(agentId: "${OTHER}") { agentId } }`);
    expect(refused.body.errors[0].extensions).toMatchObject({ code: "FORBIDDEN_SCOPE", scope: `agent:${OWN}` });
  });
});
