/**
 * `POST /v1/agents/{agentId}/payments/domain-check` against a real Postgres: the gateway's word on a
 * host a client refused by its own domain check. A refusal is recorded once (a retry with the same
 * Idempotency-Key answers the same), listed with status `rejected` and emits `policy.violation`
 * (delivered to the account's webhook),
 * exactly like an authorization's domain refusal; an allowed host is answered 200 and leaves nothing;
 * another account's agent is 404; an endpoint that is not an http(s) URL is 400.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { Keypair } from "@solana/web3.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createGatewayHandler } from "../../api/gateway/http/index.js";
import { AgentWallets, createAgentWallet, generateWalletEncryptionKey, keystoreFromEnv } from "../../api/gateway/wallets/index.js";
import type { SettlementLedger } from "../../api/gateway/chain/index.js";
import { SecretBox } from "../../api/gateway/webhooks/index.js";
import { createAccount, issueApiKey } from "../../api/shared/keys.js";
import { putPolicy } from "../../api/shared/policy/index.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { type RestAnswer, restCall } from "../support/rest.js";

let db: FreshDatabase;
let keystore: ReturnType<typeof keystoreFromEnv>;
let handle: (request: Request) => Promise<Response | null>;
let accountId: string;
let apiKey: string;
let strangerKey: string;
let serial = 0;

beforeAll(async () => {
  db = await createFreshDatabase();
  keystore = keystoreFromEnv({ WALLET_ENCRYPTION_KEY: generateWalletEncryptionKey() });
  const ledger = { network: "solana-localnet" } as unknown as SettlementLedger;
  const wallets = new AgentWallets({ pool: db.pool, keystore, ledger, fundingSource: { fund: () => Promise.reject(new Error("unused")) } });
  handle = createGatewayHandler({ pool: db.pool, wallets, keystore, secretBox: new SecretBox(randomBytes(32)) });
  accountId = await createAccount(db.pool, "domain check");
  apiKey = (await issueApiKey(db.pool, accountId)).apiKey;
  strangerKey = (await issueApiKey(db.pool, await createAccount(db.pool, "another account"))).apiKey;
});

afterAll(async () => {
  await db?.drop();
});

function call(method: string, path: string, body?: unknown, idem?: string, key = apiKey): Promise<RestAnswer> {
  return restCall(handle, method, path, { key, body, idem });
}

async function newAgent(): Promise<string> {
  const agentId = `checker-${++serial}`;
  await createAgentWallet(db.pool, keystore, { accountId, agentId });
  return agentId;
}

async function counts(agentId: string): Promise<{ rejections: number; violations: number; reservations: number }> {
  const { rows } = await db.pool.query(
    `SELECT (SELECT count(*)::int FROM payment_rejections WHERE agent_id = $1) AS rejections,
            (SELECT count(*)::int FROM gateway_events WHERE agent_id = $1 AND type = 'policy.violation') AS violations,
            (SELECT count(*)::int FROM spend_reservations WHERE agent_id = $1) AS reservations`,
    [agentId],
  );
  return rows[0];
}

const check = (agentId: string, endpoint: unknown, idem?: string, key?: string) =>
  call("POST", `/v1/agents/${agentId}/payments/domain-check`, { endpoint }, idem, key);

describe("domain-check", () => {
  it("a blocked host: recorded once as rejected, with policy.violation, answered as the authorization answers", async () => {
    const agentId = await newAgent();
    await putPolicy(db.pool, agentId, { blockedDomains: ["blocked.example"] });
    const hook = await call("POST", "/v1/webhooks", { url: "https://hooks.example.com/w", eventTypes: ["policy.violation"] });
    expect(hook.status).toBe(201);
    const endpoint = "https://api.blocked.example/v1/data?q=1";
    const idem = randomUUID();
    const refused = await check(agentId, endpoint, idem);
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({
      code: "POLICY_VIOLATION",
      errorClass: "DomainNotAllowedError",
      reasonCode: "domain_blocked",
      reason: "domain_blocked: api.blocked.example is blocked by the policy (blockedDomains entry blocked.example)",
      domain: "api.blocked.example",
      requested: null,
      limit: null,
      matchedEntry: "blocked.example",
    });
    expect(refused.body.detail).toBe(refused.body.reason);
    expect(refused.body.rejectionId).toBeTypeOf("string");

    // The same body and key: the same answer, recorded once.
    const replay = await check(agentId, endpoint, idem);
    expect(replay.status).toBe(403);
    expect(replay.text).toBe(refused.text);
    expect(await counts(agentId)).toEqual({ rejections: 1, violations: 1, reservations: 0 });
    // The policy.violation goes to the account's webhook (one delivery in the outbox).
    const deliveries = await db.pool.query<{ channel: string; destination: string; type: string; detail: string }>(
      `SELECT d.channel, d.destination, e.type, e.payload->>'detail' AS detail FROM event_deliveries d
       JOIN gateway_events e ON e.id = d.event_id WHERE e.agent_id = $1`,
      [agentId],
    );
    expect(deliveries.rows).toEqual([
      { channel: "webhook", destination: "https://hooks.example.com/w", type: "policy.violation", detail: refused.body.reason },
    ]);
    expect((await call("DELETE", `/v1/webhooks/${hook.body.id}`)).status).toBe(204);

    // The authorization's refusal of the same host gives the same problem (but for the amount).
    const authorized = await call("POST", `/v1/agents/${agentId}/payments/authorize`, {
      endpoint,
      x402: {
        scheme: "exact",
        network: "solana-localnet",
        token: Keypair.generate().publicKey.toBase58(),
        amount: "10000",
        payTo: Keypair.generate().publicKey.toBase58(),
        resource: endpoint,
      },
    });
    expect(authorized.status).toBe(403);
    const { rejectionId: _a, requested: _r, ...authorizeRest } = authorized.body;
    const { rejectionId: _b, requested: _s, ...checkRest } = refused.body;
    expect(checkRest).toEqual(authorizeRest);

    const listed = await call("GET", `/v1/transactions?agentId=${agentId}&status=rejected&limit=10`);
    expect(listed.status).toBe(200);
    expect(listed.body.transactions).toHaveLength(2);
    const fromCheck = listed.body.transactions.find((t: { amountPaid: { usdc: number } }) => t.amountPaid.usdc === 0);
    expect(fromCheck).toMatchObject({
      agentId,
      status: "rejected",
      rejectionCode: "domain_blocked",
      endpoint: "api.blocked.example/v1/data",
    });

    const events = await db.pool.query<{ reason: string; endpoint: string }>(
      "SELECT payload->>'detail' AS reason FROM gateway_events WHERE agent_id = $1 AND type = 'policy.violation' ORDER BY created_at, id",
      [agentId],
    );
    expect(events.rows.map((row) => row.reason)).toEqual([refused.body.reason, authorized.body.reason]);
  });

  it("a host off allowedDomains is refused as domain_not_allowed", async () => {
    const agentId = await newAgent();
    await putPolicy(db.pool, agentId, { allowedDomains: ["example.com"] });
    const refused = await check(agentId, "http://127.0.0.1:9/x");
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({
      errorClass: "DomainNotAllowedError",
      reasonCode: "domain_not_allowed",
      reason: "domain_not_allowed: 127.0.0.1 is not on the policy's allowedDomains",
      matchedEntry: null,
      requested: null,
    });
    expect(await counts(agentId)).toEqual({ rejections: 1, violations: 1, reservations: 0 });
  });

  it("an allowed host (the policy changed since the client read it): 200, nothing recorded", async () => {
    const agentId = await newAgent();
    await putPolicy(db.pool, agentId, { blockedDomains: ["other.example"], allowedDomains: ["example.com"] });
    const allowed = await check(agentId, "https://api.example.com/v1/data", randomUUID());
    expect(allowed.status).toBe(200);
    expect(allowed.body).toEqual({ agentId, endpoint: "https://api.example.com/v1/data", allowed: true });
    // No policy at all allows every host.
    const free = await newAgent();
    expect((await check(free, "https://anything.example.org/")).body).toMatchObject({ allowed: true });
    expect(await counts(agentId)).toEqual({ rejections: 0, violations: 0, reservations: 0 });
    expect(await counts(free)).toEqual({ rejections: 0, violations: 0, reservations: 0 });
  });

  it("another account's agent is 404 and nothing is recorded for it", async () => {
    const agentId = await newAgent();
    await putPolicy(db.pool, agentId, { blockedDomains: ["blocked.example"] });
    const foreign = await check(agentId, "https://blocked.example/", undefined, strangerKey);
    expect(foreign.status).toBe(404);
    expect(foreign.body).toMatchObject({ code: "NOT_FOUND" });
    expect(await counts(agentId)).toEqual({ rejections: 0, violations: 0, reservations: 0 });
  });

  it("an endpoint that is not an http(s) URL, a missing or extra field, or a NUL: 400 naming the field, nothing recorded", async () => {
    const agentId = await newAgent();
    await putPolicy(db.pool, agentId, { blockedDomains: ["blocked.example"] });
    for (const endpoint of ["not a url", "ftp://blocked.example/", 42, "https://blocked.example/a\u0000b"]) {
      const answer = await check(agentId, endpoint);
      expect(answer.status, String(endpoint)).toBe(400);
      expect(answer.body).toMatchObject({ code: "BAD_USER_INPUT", field: "endpoint" });
    }
    const missing = await call("POST", `/v1/agents/${agentId}/payments/domain-check`, {});
    expect(missing.status).toBe(400);
    const extra = await call("POST", `/v1/agents/${agentId}/payments/domain-check`, { endpoint: "https://blocked.example/", amount: 1 });
    expect(extra.status).toBe(400);
    expect(await counts(agentId)).toEqual({ rejections: 0, violations: 0, reservations: 0 });
  });
});
