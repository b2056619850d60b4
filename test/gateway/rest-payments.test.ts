/**
 * REST payment authorization and the x402 facilitator routes against a real Postgres: the policy
 * decides and reserves in the same transaction as the Idempotency-Key, the agent's wallet key
 * signs, rejections are recorded once, and 50 concurrent requests with one key authorize one
 * payment. The facilitator's settler is a counting stand-in here (settlement on the real ledger is
 * covered by test/gateway/x402.test.ts and settlement.test.ts); these tests are about the routes.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { Keypair } from "@solana/web3.js";
import bs58 from "bs58";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createGatewayHandler } from "../../api/gateway/http/index.js";
import { createAccount, issueApiKey } from "../../api/shared/keys.js";
import { putPolicy } from "../../api/shared/policy/index.js";
import { AgentWallets, createAgentWallet, generateWalletEncryptionKey, keystoreFromEnv } from "../../api/gateway/wallets/index.js";
import type { SettlementLedger } from "../../api/gateway/chain/index.js";
import { SecretBox } from "../../api/gateway/webhooks/index.js";
import { X402Facilitator } from "../../api/gateway/x402/index.js";
import type { SettleRequest } from "../../api/gateway/settlement/index.js";
import { PAYMENT_LEDGER_PROGRAM_ID } from "../../programs/payment_ledger/ts/index.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { type RestAnswer, restCall } from "../support/rest.js";

const NETWORK = "solana-localnet";
const TOKEN = Keypair.generate().publicKey.toBase58();
const PAY_TO = Keypair.generate().publicKey.toBase58();
const ENDPOINT = "https://api.example.com/v1/data";

let db: FreshDatabase;
let keystore: ReturnType<typeof keystoreFromEnv>;
let accountId: string;
let serial = 0;
let handle: (request: Request) => Promise<Response | null>;
let apiKey: string;
/** A key of another account: a resource server verifying/settling our agents' payloads. */
let strangerKey: string;
const settled: SettleRequest[] = [];

beforeAll(async () => {
  db = await createFreshDatabase();
  keystore = keystoreFromEnv({ WALLET_ENCRYPTION_KEY: generateWalletEncryptionKey() });
  // Signing reads only the sealed key from Postgres; no ledger call is made by these routes.
  const ledger = { network: NETWORK } as unknown as SettlementLedger;
  const wallets = new AgentWallets({ pool: db.pool, keystore, ledger, fundingSource: { fund: () => Promise.reject(new Error("unused")) } });
  const facilitator = new X402Facilitator({
    programId: PAYMENT_LEDGER_PROGRAM_ID,
    pool: db.pool,
    agents: wallets,
    network: NETWORK,
    token: TOKEN,
    settler: {
      async settlePayment(request) {
        settled.push(request);
        return { txHash: bs58.encode(randomBytes(64)), slot: 1, paymentId: BigInt(settled.length) };
      },
    },
  });
  handle = createGatewayHandler({ pool: db.pool, wallets, keystore, facilitator, secretBox: new SecretBox(randomBytes(32)) });
  accountId = await createAccount(db.pool, "payments REST");
  apiKey = (await issueApiKey(db.pool, accountId)).apiKey;
  strangerKey = (await issueApiKey(db.pool, await createAccount(db.pool, "another resource server"))).apiKey;
  for (const agentId of ["payer", "limited", "racer"]) await createAgentWallet(db.pool, keystore, { accountId, agentId });
  await putPolicy(db.pool, "limited", { perCallLimitUnits: 1_000_000n });
});

afterAll(async () => {
  await db?.drop();
});

function call(method: string, path: string, body?: unknown, idem?: string, key = apiKey): Promise<RestAnswer> {
  return restCall(handle, method, path, { key, body, idem });
}

const requirement = (amount: string) => ({ scheme: "exact", network: NETWORK, token: TOKEN, amount, payTo: PAY_TO, resource: ENDPOINT });
const mppRequest = (value: string) => ({
  protocol: "mpp/1.0",
  amount: { value, currency: "USDC" },
  paymentMethods: ["card", "stablecoin"],
  sessionSupported: true,
  paymentEndpoint: "https://api.example.com/mpp/pay",
});

/** A new agent with a wallet: the reservations and settlements of its id are the calling test's only. */
async function newPayer(): Promise<string> {
  const agentId = `payer-${++serial}`;
  await createAgentWallet(db.pool, keystore, { accountId, agentId });
  return agentId;
}

async function reservations(agentId: string): Promise<number> {
  return (await db.pool.query("SELECT count(*)::int AS n FROM spend_reservations WHERE agent_id = $1", [agentId])).rows[0].n;
}

describe("payment authorization", () => {
  it("x402: reserves, signs a payload the facilitator verifies and settles once", async () => {
    const agentId = await newPayer();
    const authorized = await call(
      "POST",
      `/v1/agents/${agentId}/payments/authorize`,
      { endpoint: ENDPOINT, x402: requirement("250000") },
      randomUUID(),
    );
    expect(authorized.status).toBe(200);
    expect(authorized.body).toMatchObject({ protocol: "x402", amount: { usdc: 0.25 }, agentId });
    expect(authorized.body.headers["X-PAYMENT"]).toBeTypeOf("string");
    expect(await reservations(agentId)).toBe(1);

    const payment = authorized.body.payment;
    const verified = await call("POST", "/v1/x402/verify", { payment, requirement: requirement("250000") });
    expect(verified.body).toEqual({ valid: true, payer: payment.payload.from, agentId });
    const wrongAmount = await call("POST", "/v1/x402/verify", { payment, requirement: requirement("250001") });
    expect(wrongAmount.body).toMatchObject({ valid: false, reason: "amount_mismatch" });

    const idem = randomUUID();
    const first = await call("POST", "/v1/x402/settle", { payment, requirement: requirement("250000") }, idem);
    expect(first.body).toMatchObject({ success: true, payer: payment.payload.from, agentId });
    const replay = await call("POST", "/v1/x402/settle", { payment, requirement: requirement("250000") }, idem);
    expect(replay.text).toBe(first.text);
    const again = await call("POST", "/v1/x402/settle", { payment, requirement: requirement("250000") }, randomUUID());
    expect(again.body).toMatchObject({ success: false, reason: "nonce_reused" });
    expect(settled.filter((s) => s.agentId === agentId)).toHaveLength(1);

    const completed = await call("POST", `/v1/agents/${agentId}/payments/${authorized.body.reservationId}/complete`, {
      txHash: first.body.txHash,
    });
    expect(completed.body).toMatchObject({ status: "settled" });
    const released = await call("POST", `/v1/agents/${agentId}/payments/${authorized.body.reservationId}/release`);
    expect(released.status).toBe(409);
  });

  it("x402 verify and settle answer the payer's agentId only to the account that owns the payer", async () => {
    const agentId = await newPayer();
    const authorized = await call("POST", `/v1/agents/${agentId}/payments/authorize`, { endpoint: ENDPOINT, x402: requirement("10000") });
    expect(authorized.status).toBe(200);
    const body = { payment: authorized.body.payment, requirement: requirement("10000") };
    const payer = authorized.body.payment.payload.from;

    const strangerVerify = await call("POST", "/v1/x402/verify", body, undefined, strangerKey);
    expect(strangerVerify.body).toEqual({ valid: true, payer });
    expect((await call("POST", "/v1/x402/verify", body)).body).toEqual({ valid: true, payer, agentId });

    const idem = randomUUID();
    const strangerSettle = await call("POST", "/v1/x402/settle", body, idem, strangerKey);
    expect(strangerSettle.body).toMatchObject({ success: true, payer });
    expect(strangerSettle.body).not.toHaveProperty("agentId");
    const replay = await call("POST", "/v1/x402/settle", body, idem, strangerKey);
    expect(replay.text).toBe(strangerSettle.text);
    await call("POST", `/v1/agents/${agentId}/payments/${authorized.body.reservationId}/complete`, { txHash: strangerSettle.body.txHash });
  });

  it("both protocols offered: x402 by default, MPP when preferred, with a signed submission", async () => {
    const agentId = await newPayer();
    const both = { endpoint: ENDPOINT, x402: requirement("100000"), mpp: mppRequest("0.1") };
    expect((await call("POST", `/v1/agents/${agentId}/payments/authorize`, both)).body.protocol).toBe("x402");
    const mpp = await call("POST", `/v1/agents/${agentId}/payments/authorize`, { ...both, protocolPreference: "mpp" });
    expect(mpp.status).toBe(200);
    expect(mpp.body).toMatchObject({ protocol: "mpp", method: "stablecoin", paymentEndpoint: "https://api.example.com/mpp/pay" });
    expect(mpp.body.submission.authorization.type).toBe("ed25519");
    const released = await call("POST", `/v1/agents/${agentId}/payments/${mpp.body.reservationId}/release`);
    expect(released.body.status).toBe("released");
  });

  it("the policy's protocol preference decides only where the offer leaves a choice, and the request's wins", async () => {
    const agentId = await newPayer();
    await putPolicy(db.pool, agentId, { protocolPreference: "mpp" });
    const authorize = async (body: Record<string, unknown>): Promise<string> => {
      const answer = await call("POST", `/v1/agents/${agentId}/payments/authorize`, { endpoint: ENDPOINT, ...body });
      expect(answer.status).toBe(200);
      await call("POST", `/v1/agents/${agentId}/payments/${answer.body.reservationId}/release`);
      return answer.body.protocol;
    };
    const both = { x402: requirement("100000"), mpp: mppRequest("0.1") };
    expect(await authorize(both)).toBe("mpp");
    expect(await authorize({ ...both, protocolPreference: "x402" })).toBe("x402");
    expect(await authorize({ x402: requirement("100000") })).toBe("x402");
    await putPolicy(db.pool, agentId, { protocolPreference: "x402" });
    expect(await authorize(both)).toBe("x402");
    expect(await authorize({ mpp: mppRequest("0.1") })).toBe("mpp");
    expect(await authorize({ ...both, protocolPreference: "mpp" })).toBe("mpp");
  });

  it("a policy rejection is 403 with the spec 7 class and reason, recorded once per key", async () => {
    const idem = randomUUID();
    const body = { endpoint: ENDPOINT, x402: requirement("2000000") };
    const rejected = await call("POST", "/v1/agents/limited/payments/authorize", body, idem);
    expect(rejected.status).toBe(403);
    expect(rejected.body).toMatchObject({
      code: "POLICY_VIOLATION",
      errorClass: "PolicyViolationError",
      reasonCode: "per_call_limit_exceeded",
      reason: "per_call_limit_exceeded: requested 2 usdc, limit is 1 usdc",
    });
    const replay = await call("POST", "/v1/agents/limited/payments/authorize", body, idem);
    expect(replay.text).toBe(rejected.text);
    const rows = await db.pool.query("SELECT count(*)::int AS n FROM payment_rejections WHERE agent_id = 'limited'");
    expect(rows.rows[0].n).toBe(1);
    expect(await reservations("limited")).toBe(0);

    // Spec 2.2 / 3: the rejected payment appears in the transactions listing with status rejected.
    const listed = await call("GET", "/v1/transactions?agentId=limited&status=rejected&limit=10");
    expect(listed.status).toBe(200);
    expect(listed.body.transactions).toHaveLength(1);
    expect(listed.body.transactions[0]).toMatchObject({ agentId: "limited", status: "rejected", amountPaid: { usdc: 2 } });
    expect(listed.text).toContain('"amountPaid":{"usdc":2}');
    expect((await call("GET", "/v1/transactions?limit=0")).status).toBe(400);
    expect((await call("GET", "/v1/transactions?protocol=ach")).status).toBe(400);
    expect((await call("GET", "/v1/transactions/not-a-hash")).status).toBe(400);
    expect((await call("GET", `/v1/transactions/${bs58.encode(randomBytes(64))}`)).status).toBe(404);
  });

  it("refusal texts say what a person needs: the domain and its rule, the daily budget with what is used and left, then exhausted until the reset", async () => {
    const agentId = await newPayer();
    await putPolicy(db.pool, agentId, { dailyBudgetUnits: 100_000n, blockedDomains: ["blocked.example"] });
    const authorize = (endpoint: string, units: string) =>
      call("POST", `/v1/agents/${agentId}/payments/authorize`, { endpoint, x402: { ...requirement(units), resource: endpoint } });

    const blocked = await authorize("https://api.blocked.example/x", "70000");
    expect(blocked.status).toBe(403);
    expect(blocked.body).toMatchObject({
      errorClass: "DomainNotAllowedError",
      reasonCode: "domain_blocked",
      reason: "domain_blocked: api.blocked.example is blocked by the policy (blockedDomains entry blocked.example)",
      limit: null,
      matchedEntry: "blocked.example",
    });
    expect(blocked.body.detail).toBe(blocked.body.reason);

    expect((await authorize(ENDPOINT, "80000")).status).toBe(200);
    const over = await authorize(ENDPOINT, "40000");
    expect(over.body).toMatchObject({
      errorClass: "DailyBudgetExceededError",
      reason: "daily_budget_exceeded: requested 0.04 usdc, limit is 0.1 usdc (used 0.08 usdc, left 0.02 usdc)",
      limit: "0.1",
      budget: { limit: "0.1", used: "0.08", left: "0.02", state: "warning" },
    });
    // The refusal exhausted the period (spec 3): even what would fit is refused, until the reset.
    const exhausted = await authorize(ENDPOINT, "10000");
    const resetsAt = exhausted.body.budget.resetsAt as string;
    expect(Date.parse(resetsAt)).toBeGreaterThan(Date.now());
    expect(exhausted.body).toMatchObject({
      reason: `daily_budget_exceeded: requested 0.01 usdc, limit is 0.1 usdc (used 0.08 usdc, exhausted until ${resetsAt})`,
      budget: { left: "0.02", state: "exhausted", resetsAt },
    });

    // The policy.violation events (webhooks, e-mail) carry the same texts.
    const events = await db.pool.query<{ reason: string }>(
      "SELECT payload->>'detail' AS reason FROM gateway_events WHERE agent_id = $1 AND type = 'policy.violation' ORDER BY created_at, id",
      [agentId],
    );
    expect(events.rows.map((row) => row.reason)).toEqual([blocked.body.reason, over.body.reason, exhausted.body.reason]);
  });

  it("bad input is 400 and reserves nothing", async () => {
    const before = await reservations("payer");
    for (const body of [
      {},
      { endpoint: ENDPOINT },
      { endpoint: ENDPOINT, x402: { ...requirement("1"), amount: 1 } },
      { endpoint: ENDPOINT, x402: { ...requirement("1"), scheme: "upto" } },
      { endpoint: "https://other.example.net/x", x402: requirement("1") },
      { endpoint: ENDPOINT, mpp: { ...mppRequest("0.1"), paymentMethods: ["lightning"] } },
      { endpoint: ENDPOINT, mpp: mppRequest("0.0000001") },
      { endpoint: ENDPOINT, x402: requirement("1"), protocolPreference: "fast" },
    ]) {
      const answer = await call("POST", "/v1/agents/payer/payments/authorize", body, randomUUID());
      expect(answer.status, JSON.stringify(body)).toBe(400);
    }
    expect(await reservations("payer")).toBe(before);
  });

  it("50 concurrent requests with one key: one payment authorized", async () => {
    const idem = randomUUID();
    const body = { endpoint: ENDPOINT, x402: requirement("10000") };
    const answers = await Promise.all(Array.from({ length: 50 }, () => call("POST", "/v1/agents/racer/payments/authorize", body, idem)));
    expect(answers.map((a) => a.status)).toEqual(Array(50).fill(200));
    expect(new Set(answers.map((a) => a.text)).size).toBe(1);
    expect(await reservations("racer")).toBe(1);
  });

  it("40 concurrent authorizations of one agent share transactions yet never pass its budget; answers, rows and rejections agree", async () => {
    const agentId = await newPayer();
    // 25 payments of 0.01 fit; 35 distinct requests (5 keys sent twice) race for them.
    await putPolicy(db.pool, agentId, { dailyBudgetUnits: 250_000n });
    // Which transaction each reservation committed in (its row's xmin is its savepoint's).
    await db.pool.query(`CREATE TABLE reservation_xacts (id bigint, xid text);
      CREATE FUNCTION note_xact() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN INSERT INTO reservation_xacts VALUES (NEW.id, pg_current_xact_id()::text); RETURN NEW; END $$;
      CREATE TRIGGER note_xact AFTER INSERT ON spend_reservations FOR EACH ROW EXECUTE FUNCTION note_xact()`);
    const keys = Array.from({ length: 35 }, () => randomUUID());
    const sent = [...keys, ...keys.slice(0, 5)];
    const body = { endpoint: ENDPOINT, x402: requirement("10000") };
    const answers = await Promise.all(sent.map((key) => call("POST", `/v1/agents/${agentId}/payments/authorize`, body, key)));
    for (let i = 0; i < 5; i += 1) expect(answers[35 + i]!.text).toBe(answers[i]!.text);
    const distinct = answers.slice(0, 35);
    const accepted = distinct.filter((a) => a.status === 200);
    expect(accepted).toHaveLength(25);
    expect(distinct.filter((a) => a.status === 403).every((a) => a.body.reasonCode === "daily_budget_exceeded")).toBe(true);
    expect(distinct.filter((a) => a.status === 403)).toHaveLength(10);
    const { rows } = await db.pool.query<{ id: string; amount_units: string; xid: string }>(
      `SELECT s.id::text, s.amount_units::text, x.xid FROM spend_reservations s JOIN reservation_xacts x ON x.id = s.id
       WHERE s.agent_id = $1`,
      [agentId],
    );
    await db.pool.query("DROP TRIGGER note_xact ON spend_reservations; DROP FUNCTION note_xact(); DROP TABLE reservation_xacts");
    expect(rows.map((r) => r.id).sort()).toEqual(accepted.map((a) => String(a.body.reservationId)).sort());
    expect(rows.every((r) => r.amount_units === "10000")).toBe(true);
    // Grouped: fewer transactions than reservations (the lock changed hands less often).
    expect(new Set(rows.map((r) => r.xid)).size).toBeLessThan(rows.length);
    const rejections = await db.pool.query("SELECT count(*)::int AS n FROM payment_rejections WHERE agent_id = $1", [agentId]);
    expect(rejections.rows[0].n).toBe(10);
  });
});
