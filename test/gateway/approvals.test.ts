/**
 * Approvals at the gateway (docs/rest.md "Approvals", docs/policy.md "Approvals") against a real
 * Postgres, through the REST handler: a payment above the policy's threshold is held (202, its
 * amount reserved `pending_approval`, nothing signed, `approval.requested` with a signed link), a
 * repeat with the same Idempotency-Key resumes it (still held; signed once approved, and the
 * facilitator settles it; 403 once denied or expired), approving re-runs the policy, the link
 * decides once, long-polls wake on the decision, and every bad input is a typed 4xx that changes
 * nothing. The facilitator's settler is a counting stand-in (settlement on the real ledger is
 * covered by test/gateway/x402.test.ts); these tests are about the approvals.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { Keypair } from "@solana/web3.js";
import bs58 from "bs58";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { expireApprovals } from "../../api/gateway/loops/index.js";
import { ApprovalWaits } from "../../api/gateway/payments/approvals/index.js";
import { createGatewayHandler } from "../../api/gateway/http/index.js";
import type { SettlementLedger } from "../../api/gateway/chain/index.js";
import { AgentWallets, createAgentWallet, generateWalletEncryptionKey, keystoreFromEnv } from "../../api/gateway/wallets/index.js";
import { SecretBox } from "../../api/gateway/webhooks/index.js";
import type { SettleRequest } from "../../api/gateway/settlement/index.js";
import { X402Facilitator } from "../../api/gateway/x402/index.js";
import { createAccount, issueApiKey } from "../../api/shared/keys.js";
import { reserveInTransaction } from "../../api/gateway/reservations/store.js";
import { putPolicy } from "../../api/shared/policy/index.js";
import { withTransaction } from "../../indexer/db/database.js";
import { PAYMENT_LEDGER_PROGRAM_ID } from "../../programs/payment_ledger/ts/index.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { type RestAnswer, restCall } from "../support/rest.js";

const NETWORK = "solana-localnet";
const TOKEN = Keypair.generate().publicKey.toBase58();
const PAY_TO = Keypair.generate().publicKey.toBase58();
const ENDPOINT = "https://api.example.com/v1/report";
const TIMEOUT_MS = 15 * 60_000;

let db: FreshDatabase;
let keystore: ReturnType<typeof keystoreFromEnv>;
let accountId: string;
let serial = 0;
let handle: (request: Request) => Promise<Response | null>;
let adminKey: string;
let approverKey: string;
let strangerKey: string;
/** The gateway's clock runs this far ahead of the wall clock (a test moves it past a deadline). */
let skewMs = 0;
const settled: SettleRequest[] = [];

beforeAll(async () => {
  db = await createFreshDatabase();
  keystore = keystoreFromEnv({ WALLET_ENCRYPTION_KEY: generateWalletEncryptionKey() });
  const ledger = { network: NETWORK } as unknown as SettlementLedger;
  const wallets = new AgentWallets({ pool: db.pool, keystore, ledger, fundingSource: { fund: () => Promise.reject(new Error("unused")) } });
  const facilitator = new X402Facilitator({
    pool: db.pool,
    agents: wallets,
    network: NETWORK,
    token: TOKEN,
    programId: PAYMENT_LEDGER_PROGRAM_ID,
    settler: {
      async settlePayment(request) {
        settled.push(request);
        return { txHash: bs58.encode(randomBytes(64)), slot: 1, paymentId: BigInt(settled.length) };
      },
    },
  });
  handle = createGatewayHandler({
    pool: db.pool,
    wallets,
    keystore,
    facilitator,
    secretBox: new SecretBox(randomBytes(32)),
    publicUrl: "https://gateway.test",
    now: () => new Date(Date.now() + skewMs),
  });
  accountId = await createAccount(db.pool, "approvals");
  adminKey = (await issueApiKey(db.pool, accountId)).apiKey;
  approverKey = (await issueApiKey(db.pool, accountId, { kind: "approver" })).apiKey;
  strangerKey = (await issueApiKey(db.pool, await createAccount(db.pool, "another account"))).apiKey;
});

afterAll(async () => {
  await db?.drop();
});

function call(method: string, path: string, body?: unknown, idem?: string, key = adminKey): Promise<RestAnswer> {
  return restCall(handle, method, path, { key, body, idem });
}

const requirement = (amount: string) => ({ scheme: "exact", network: NETWORK, token: TOKEN, amount, payTo: PAY_TO, resource: ENDPOINT });

/** A new agent whose policy holds payments above 5 usdc for 15 minutes (and any extra limits). */
async function heldAgent(extra: Parameters<typeof putPolicy>[2] = {}): Promise<string> {
  const agentId = `agent-${++serial}`;
  await createAgentWallet(db.pool, keystore, { accountId, agentId });
  await putPolicy(db.pool, agentId, {
    approval: { aboveUnits: 5_000_000n, domains: [], firstPaymentToDomain: false, timeoutMs: TIMEOUT_MS, onTimeout: "deny" },
    ...extra,
  });
  return agentId;
}

function authorize(agentId: string, units: string, idem?: string, key = adminKey): Promise<RestAnswer> {
  return call("POST", `/v1/agents/${agentId}/payments/authorize`, { endpoint: ENDPOINT, x402: requirement(units) }, idem, key);
}

async function reservationsOf(agentId: string): Promise<{ status: string; amount: string }[]> {
  const { rows } = await db.pool.query<{ status: string; amount: string }>(
    "SELECT status, amount_units::text AS amount FROM spend_reservations WHERE agent_id = $1 ORDER BY id",
    [agentId],
  );
  return rows;
}

async function eventsOf(approvalId: string): Promise<{ type: string; payload: Record<string, any> }[]> {
  const { rows } = await db.pool.query<{ type: string; payload: Record<string, any> }>(
    "SELECT type, payload FROM gateway_events WHERE payload->>'approvalId' = $1 ORDER BY created_at, id",
    [approvalId],
  );
  return rows;
}

/** The agent's current policy version (migrations/055_policy_versions.sql). */
async function currentVersion(agentId: string): Promise<number> {
  const { rows } = await db.pool.query<{ v: number }>("SELECT max(version) AS v FROM policy_versions WHERE agent_id = $1", [agentId]);
  expect(rows[0]!.v).toBeGreaterThanOrEqual(1);
  return rows[0]!.v;
}

/** Every row of the approvals and reservations tables, for "nothing changed". */
async function snapshot(): Promise<string> {
  const { rows } = await db.pool.query<{ h: string }>(
    `SELECT coalesce((SELECT md5(string_agg(a::text, ',' ORDER BY a.id)) FROM approvals a), '') ||
            coalesce((SELECT md5(string_agg(r::text, ',' ORDER BY r.id)) FROM spend_reservations r), '') ||
            coalesce((SELECT md5(string_agg(e.id, ',' ORDER BY e.id)) FROM gateway_events e), '') AS h`,
  );
  return rows[0]!.h;
}

/** The path and query of the signed link in the approval's `approval.requested`. */
async function linkOf(approvalId: string): Promise<string> {
  const requested = (await eventsOf(approvalId)).find((e) => e.type === "approval.requested");
  const url = new URL(requested!.payload.decideUrl as string);
  expect(url.origin).toBe("https://gateway.test");
  return `${url.pathname}${url.search}`;
}

function linkGet(path: string): Promise<RestAnswer> {
  return restCall(handle, "GET", path, { lenientJson: true });
}

function linkPost(path: string, form: string): Promise<RestAnswer> {
  return restCall(handle, "POST", path, { raw: form, contentType: "application/x-www-form-urlencoded", lenientJson: true });
}

describe("holding a payment", () => {
  it("above the threshold: 202 with the approval, the amount reserved pending_approval, nothing signed, approval.requested with the link", async () => {
    const agentId = await heldAgent();
    const idem = randomUUID();
    const held = await authorize(agentId, "6000000", idem);
    expect(held.status).toBe(202);
    expect(held.body.approval).toMatchObject({
      status: "pending",
      agentId,
      amount: { usdc: 6 },
      endpoint: ENDPOINT,
      domain: "api.example.com",
      rule: "above",
      reason: "approval_required: 6 usdc is above the approval threshold of 5 usdc",
      decidedAt: null,
    });
    expect(held.body).not.toHaveProperty("payment");
    const approval = held.body.approval;
    expect(new Date(approval.expiresAt).getTime() - new Date(approval.requestedAt).getTime()).toBe(TIMEOUT_MS);
    expect(await reservationsOf(agentId)).toEqual([{ status: "pending_approval", amount: "6000000" }]);
    const events = await eventsOf(approval.id);
    expect(events.map((e) => e.type)).toEqual(["approval.requested"]);
    expect(events[0]!.payload).toMatchObject({ agentId, amount: { usdc: 6 }, rule: "above", expiresAt: approval.expiresAt });
    expect(events[0]!.payload.decideUrl).toMatch(
      /^https:\/\/gateway\.test\/v1\/approvals\/[0-9a-f-]{36}\/decide\?token=[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}$/,
    );

    // The same request under the same key holds nothing more: the same approval, still 202.
    const again = await authorize(agentId, "6000000", idem);
    expect(again.status).toBe(202);
    expect(again.body.approval.id).toBe(approval.id);
    expect(await reservationsOf(agentId)).toHaveLength(1);
    // The key is tied to the approval: another amount under it is refused, nothing held.
    const other = await authorize(agentId, "7000000", idem);
    expect(other.status).toBe(422);
    expect(other.body.code).toBe("IDEMPOTENCY_KEY_REUSED");
    expect(await reservationsOf(agentId)).toHaveLength(1);
  });

  it("concurrent repeats under one key hold one payment: every answer is the same approval", async () => {
    const agentId = await heldAgent();
    const idem = randomUUID();
    const answers = await Promise.all(Array.from({ length: 10 }, () => authorize(agentId, "6000000", idem)));
    for (const answer of answers) expect(answer.status, answer.text).toBe(202);
    expect(new Set(answers.map((a) => a.body.approval.id)).size).toBe(1);
    expect(await reservationsOf(agentId)).toEqual([{ status: "pending_approval", amount: "6000000" }]);
  });

  it("webhook endpoints subscribed to the approval events get both, signed deliveries in the outbox; the default subscription does not", async () => {
    const hookAccount = await createAccount(db.pool, "approvals webhooks");
    const accountKey = (await issueApiKey(db.pool, hookAccount)).apiKey;
    const hooked = await restCall(handle, "POST", "/v1/webhooks", {
      key: accountKey,
      body: { url: "https://hooks.example.com/approvals", eventTypes: ["approval.requested", "approval.decided"] },
    });
    expect(hooked.status, hooked.text).toBe(201);
    expect(hooked.body.eventTypes).toEqual(["approval.requested", "approval.decided"]);
    const plain = await restCall(handle, "POST", "/v1/webhooks", { key: accountKey, body: { url: "https://hooks.example.com/plain" } });
    expect(plain.body.eventTypes).toEqual(["budget.warning", "policy.violation"]);
    const agentId = `agent-${++serial}`;
    await createAgentWallet(db.pool, keystore, { accountId: hookAccount, agentId });
    await putPolicy(db.pool, agentId, {
      approval: { aboveUnits: 0n, domains: [], firstPaymentToDomain: false, timeoutMs: TIMEOUT_MS, onTimeout: "deny" },
    });
    const held = await restCall(handle, "POST", `/v1/agents/${agentId}/payments/authorize`, {
      key: accountKey,
      body: { endpoint: ENDPOINT, x402: requirement("1000") },
      idem: randomUUID(),
    });
    expect(held.status, held.text).toBe(202);
    await restCall(handle, "POST", `/v1/approvals/${held.body.approval.id}/deny`, { key: accountKey, body: {} });
    const { rows } = await db.pool.query<{ type: string; destination: string }>(
      `SELECT e.type, d.destination FROM event_deliveries d JOIN gateway_events e ON e.id = d.event_id
       WHERE e.payload->>'approvalId' = $1 ORDER BY e.type`,
      [held.body.approval.id],
    );
    expect(rows).toEqual([
      { type: "approval.decided", destination: "https://hooks.example.com/approvals" },
      { type: "approval.requested", destination: "https://hooks.example.com/approvals" },
    ]);
  });

  it("at or below the threshold the payment is authorized at once", async () => {
    const agentId = await heldAgent();
    const paid = await authorize(agentId, "5000000", randomUUID());
    expect(paid.status).toBe(200);
    expect(paid.body.payment).toBeDefined();
    expect(await reservationsOf(agentId)).toEqual([{ status: "reserved", amount: "5000000" }]);
  });

  it("a held payment counts against the daily budget: held amounts cannot together exceed it", async () => {
    const agentId = await heldAgent({ dailyBudgetUnits: 10_000_000n });
    expect((await authorize(agentId, "6000000", randomUUID())).status).toBe(202);
    const small = await authorize(agentId, "4000000", randomUUID());
    expect(small.status).toBe(200);
    const over = await authorize(agentId, "6000000", randomUUID());
    expect(over.status).toBe(403);
    expect(over.body).toMatchObject({ code: "POLICY_VIOLATION", reasonCode: "daily_budget_exceeded" });
    expect((await reservationsOf(agentId)).map((r) => r.status)).toEqual(["pending_approval", "reserved"]);
  });

  it("a path that cannot wait for a person (a channel's deposit, a session's charge) refuses what the policy would hold", async () => {
    const agentId = await heldAgent();
    const request = { endpoint: ENDPOINT, amountUnits: 6_000_000n, protocol: "mpp", offeredProtocols: ["mpp"] } as const;
    const reserved = await withTransaction(db.pool, (client) => reserveInTransaction(client, agentId, request, new Date()), {
      isolation: "read committed",
    });
    expect(reserved.reservationId).toBeNull();
    expect(reserved.refusal).toMatchObject({ reasonCode: "approval_required", requested: "6", limit: "5" });
    const small = await withTransaction(
      db.pool,
      (client) => reserveInTransaction(client, agentId, { ...request, amountUnits: 5_000_000n }, new Date()),
      { isolation: "read committed" },
    );
    expect(small.reservationId).not.toBeNull();
  });

  it("a held payment counts against the rate limit like a reservation", async () => {
    const agentId = await heldAgent({ rateLimit: { calls: 1, window: "1h" } });
    expect((await authorize(agentId, "6000000", randomUUID())).status).toBe(202);
    const next = await authorize(agentId, "1000000", randomUUID());
    expect(next.status).toBe(403);
    expect(next.body.reasonCode).toBe("rate_limit_exceeded");
  });

  it("the first payment to a host is held (firstPaymentToDomain); once one settled there, the next goes at once", async () => {
    const agentId = `agent-${++serial}`;
    await createAgentWallet(db.pool, keystore, { accountId, agentId });
    await putPolicy(db.pool, agentId, {
      approval: { aboveUnits: null, domains: [], firstPaymentToDomain: true, timeoutMs: TIMEOUT_MS, onTimeout: "deny" },
    });
    const idem = randomUUID();
    const held = await authorize(agentId, "1000000", idem);
    expect(held.status).toBe(202);
    expect(held.body.approval).toMatchObject({
      rule: "firstPaymentToDomain",
      reason: "approval_required: first payment to api.example.com",
    });
    expect((await call("POST", `/v1/approvals/${held.body.approval.id}/approve`, {})).body.outcome).toBe("authorized");
    const resumed = await authorize(agentId, "1000000", idem);
    expect(resumed.status).toBe(200);
    const settle = await call(
      "POST",
      "/v1/x402/settle",
      { payment: resumed.body.payment, requirement: requirement("1000000") },
      randomUUID(),
    );
    expect(settle.body.success).toBe(true);
    const second = await authorize(agentId, "1000000", randomUUID());
    expect(second.status).toBe(200);
    expect(second.body.payment).toBeDefined();
  });

  it("a refusal wins over a hold: a payment the policy refuses is refused, never held", async () => {
    const agentId = await heldAgent({ perCallLimitUnits: 5_500_000n });
    const refused = await authorize(agentId, "6000000", randomUUID());
    expect(refused.status).toBe(403);
    expect(refused.body.reasonCode).toBe("per_call_limit_exceeded");
    expect(await reservationsOf(agentId)).toEqual([]);
  });
});

describe("resuming a held payment", () => {
  it("approved: the repeat answers the signed payment (200), the facilitator settles it once, a replay answers the same", async () => {
    const agentId = await heldAgent();
    const idem = randomUUID();
    const approval = (await authorize(agentId, "6000000", idem)).body.approval;
    const heldUnder = await currentVersion(agentId);
    // Changed while the payment waits: the re-check on approval decides under the new version.
    await putPolicy(db.pool, agentId, {
      approval: { aboveUnits: 5_000_000n, domains: [], firstPaymentToDomain: false, timeoutMs: TIMEOUT_MS, onTimeout: "deny" },
      dailyBudgetUnits: 100_000_000n,
    });
    const recheckedUnder = await currentVersion(agentId);
    expect(recheckedUnder).toBe(heldUnder + 1);
    const approved = await call("POST", `/v1/approvals/${approval.id}/approve`, { note: "ok for the report" }, undefined, approverKey);
    expect(approved.status).toBe(200);
    expect(approved.body).toMatchObject({
      id: approval.id,
      status: "approved",
      note: "ok for the report",
      outcome: "authorized",
      refusal: null,
    });
    expect(approved.body.decidedBy).toMatch(/^[1-9][0-9]*$/);
    expect(await reservationsOf(agentId)).toEqual([{ status: "reserved", amount: "6000000" }]);

    const resumed = await authorize(agentId, "6000000", idem);
    expect(resumed.status).toBe(200);
    expect(resumed.body).toMatchObject({ agentId, protocol: "x402", amount: { usdc: 6 }, policyVersion: recheckedUnder });
    const replay = await authorize(agentId, "6000000", idem);
    expect(replay.text).toBe(resumed.text);

    const settle = await call(
      "POST",
      "/v1/x402/settle",
      { payment: resumed.body.payment, requirement: requirement("6000000") },
      randomUUID(),
    );
    expect(settle.body).toMatchObject({ success: true, agentId });
    expect(settled.filter((s) => s.agentId === agentId)).toHaveLength(1);
    expect(await reservationsOf(agentId)).toEqual([{ status: "settled", amount: "6000000" }]);
    const decided = (await eventsOf(approval.id)).filter((e) => e.type === "approval.decided");
    expect(decided.map((e) => [e.payload.status, e.payload.outcome, e.payload.policyVersion])).toEqual([
      ["approved", "authorized", recheckedUnder],
    ]);
    const requested = (await eventsOf(approval.id)).filter((e) => e.type === "approval.requested");
    expect(requested.map((e) => e.payload.policyVersion)).toEqual([heldUnder]);

    const second = await call("POST", `/v1/approvals/${approval.id}/deny`, {}, undefined, approverKey);
    expect(second.status).toBe(409);
    expect(second.body).toMatchObject({ code: "APPROVAL_ALREADY_DECIDED", approval: { status: "approved" } });
  });

  it("denied: the repeat is 403 APPROVAL_DENIED with the note, the reservation released, nothing signed", async () => {
    const agentId = await heldAgent();
    const idem = randomUUID();
    const approval = (await authorize(agentId, "6000000", idem)).body.approval;
    const denied = await call("POST", `/v1/approvals/${approval.id}/deny`, { note: "not this vendor" });
    expect(denied.status).toBe(200);
    expect(denied.body).toMatchObject({ status: "denied", note: "not this vendor", outcome: null });
    expect(await reservationsOf(agentId)).toEqual([{ status: "released", amount: "6000000" }]);
    const resumed = await authorize(agentId, "6000000", idem);
    expect(resumed.status).toBe(403);
    expect(resumed.body).toMatchObject({
      code: "APPROVAL_DENIED",
      errorClass: "PolicyViolationError",
      reasonCode: "approval_denied",
      approvalId: approval.id,
      note: "not this vendor",
    });
    expect((await authorize(agentId, "6000000", idem)).text).toBe(resumed.text);
  });

  it("expired by the gateway's clock: decided once by the timeout loop, the repeat is 403 APPROVAL_EXPIRED", async () => {
    const agentId = await heldAgent();
    const idem = randomUUID();
    const approval = (await authorize(agentId, "6000000", idem)).body.approval;
    const after = new Date(new Date(approval.expiresAt).getTime() + 1);
    const statusOf = async () => (await db.pool.query("SELECT status FROM approvals WHERE id = $1", [approval.id])).rows[0].status;
    await expireApprovals(db.pool, new Date(new Date(approval.expiresAt).getTime() - 1));
    expect(await statusOf()).toBe("pending");
    expect((await expireApprovals(db.pool, after)).expired).toBeGreaterThanOrEqual(1);
    expect(await statusOf()).toBe("expired");
    expect((await expireApprovals(db.pool, after)).expired).toBe(0);
    expect(await reservationsOf(agentId)).toEqual([{ status: "released", amount: "6000000" }]);
    const decided = (await eventsOf(approval.id)).filter((e) => e.type === "approval.decided");
    expect(decided.map((e) => [e.payload.status, e.payload.decidedBy, e.payload.policyVersion])).toEqual([
      ["expired", "timeout", await currentVersion(agentId)],
    ]);
    const resumed = await authorize(agentId, "6000000", idem);
    expect(resumed.status).toBe(403);
    expect(resumed.body).toMatchObject({ code: "APPROVAL_EXPIRED", reasonCode: "approval_expired", expiresAt: approval.expiresAt });
    const late = await call("POST", `/v1/approvals/${approval.id}/approve`, {});
    expect(late.status).toBe(409);
    expect(late.body.approval.status).toBe("expired");
  });

  it("a decision arriving after the deadline expires the approval instead (the gateway's clock), answered 409", async () => {
    const agentId = await heldAgent();
    const approval = (await authorize(agentId, "6000000", randomUUID())).body.approval;
    skewMs = TIMEOUT_MS + 1_000;
    try {
      const late = await call("POST", `/v1/approvals/${approval.id}/approve`, {});
      expect(late.status).toBe(409);
      expect(late.body).toMatchObject({ code: "APPROVAL_ALREADY_DECIDED", approval: { status: "expired", decidedBy: "timeout" } });
    } finally {
      skewMs = 0;
    }
    expect(await reservationsOf(agentId)).toEqual([{ status: "released", amount: "6000000" }]);
  });

  it("approving re-runs the policy: a budget lowered meanwhile refuses, the reservation is released, the repeat answers the refusal", async () => {
    const agentId = await heldAgent({ dailyBudgetUnits: 20_000_000n });
    const idem = randomUUID();
    const approval = (await authorize(agentId, "6000000", idem)).body.approval;
    await putPolicy(db.pool, agentId, { dailyBudgetUnits: 5_500_000n });
    const approved = await call("POST", `/v1/approvals/${approval.id}/approve`, {});
    expect(approved.status).toBe(200);
    expect(approved.body).toMatchObject({ status: "approved", outcome: "refused", refusal: { reasonCode: "daily_budget_exceeded" } });
    const read = await call("GET", `/v1/approvals/${approval.id}`);
    expect(read.body).toMatchObject({ outcome: "refused", refusal: { reasonCode: "daily_budget_exceeded" } });
    expect(await reservationsOf(agentId)).toEqual([{ status: "released", amount: "6000000" }]);
    const resumed = await authorize(agentId, "6000000", idem);
    expect(resumed.status).toBe(403);
    expect(resumed.body).toMatchObject({ code: "POLICY_VIOLATION", reasonCode: "daily_budget_exceeded", approvalId: approval.id });
    const types = (await db.pool.query("SELECT type FROM gateway_events WHERE agent_id = $1 ORDER BY created_at, id", [agentId])).rows.map(
      (r) => r.type,
    );
    expect(types.sort()).toEqual(["approval.decided", "approval.requested", "policy.violation"]);
  });

  it("the held reservation is not counted twice on re-check: a payment exactly filling the budget is approved", async () => {
    const agentId = await heldAgent({ dailyBudgetUnits: 6_000_000n });
    const approval = (await authorize(agentId, "6000000", randomUUID())).body.approval;
    const approved = await call("POST", `/v1/approvals/${approval.id}/approve`, {});
    expect(approved.body.outcome).toBe("authorized");
    expect(await reservationsOf(agentId)).toEqual([{ status: "reserved", amount: "6000000" }]);
  });

  it("an approved payment never resumed is released by the approvals loop after its resume deadline", async () => {
    const agentId = await heldAgent();
    const idem = randomUUID();
    const approval = (await authorize(agentId, "6000000", idem)).body.approval;
    const approved = await call("POST", `/v1/approvals/${approval.id}/approve`, {});
    const deadline = new Date(new Date(approved.body.decidedAt).getTime() + TIMEOUT_MS);
    await expireApprovals(db.pool, new Date(deadline.getTime() - 1));
    expect(await reservationsOf(agentId)).toEqual([{ status: "reserved", amount: "6000000" }]);
    expect((await expireApprovals(db.pool, deadline)).unresumedReleased).toBeGreaterThanOrEqual(1);
    expect(await reservationsOf(agentId)).toEqual([{ status: "released", amount: "6000000" }]);
    const resumed = await authorize(agentId, "6000000", idem);
    expect(resumed.status).toBe(403);
    expect(resumed.body.code).toBe("APPROVAL_EXPIRED");
  });
});

describe("the signed one-time link", () => {
  it("GET shows the confirm page and decides nothing; POST decides once; the used link is 404", async () => {
    const agentId = await heldAgent();
    const approval = (await authorize(agentId, "6000000", randomUUID())).body.approval;
    const link = await linkOf(approval.id);
    const before = await snapshot();
    const page = await linkGet(link);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toContain("text/html");
    expect(page.headers.get("referrer-policy")).toBe("no-referrer");
    expect(page.text).toContain("6 USDC");
    expect(page.text).toContain(agentId);
    expect(await snapshot()).toBe(before);

    const decided = await linkPost(link, "decision=deny&note=looks+odd");
    expect(decided.status).toBe(200);
    const row = (await db.pool.query("SELECT status, decided_by, note, link_used_at FROM approvals WHERE id = $1", [approval.id])).rows[0];
    expect(row).toMatchObject({ status: "denied", decided_by: "link", note: "looks odd" });
    expect(row.link_used_at).not.toBeNull();
    expect(await reservationsOf(agentId)).toEqual([{ status: "released", amount: "6000000" }]);

    const after = await snapshot();
    expect((await linkPost(link, "decision=approve")).status).toBe(404);
    expect((await linkGet(link)).status).toBe(404);
    expect(await snapshot()).toBe(after);
  });

  it("a wrong or tampered token is 404, a link of an approval decided by a key is 409; nothing changes", async () => {
    const agentId = await heldAgent();
    const approval = (await authorize(agentId, "6000000", randomUUID())).body.approval;
    const link = await linkOf(approval.id);
    const token = new URL(`https://x${link}`).searchParams.get("token")!;
    const tampered = `${link.split("?")[0]}?token=${token.slice(0, -2)}${token.endsWith("AA") ? "BB" : "AA"}`;
    const otherId = link.replace(approval.id, randomUUID());
    const before = await snapshot();
    for (const path of [tampered, otherId, `${link.split("?")[0]}?token=short`, link.split("?")[0]!]) {
      expect((await linkPost(path, "decision=approve")).status, path).toBe(404);
      expect((await linkGet(path)).status, path).toBe(404);
    }
    expect((await linkPost(link, "decision=maybe")).status).toBe(400);
    expect(await snapshot()).toBe(before);

    expect((await call("POST", `/v1/approvals/${approval.id}/approve`, {})).status).toBe(200);
    const after = await snapshot();
    expect((await linkPost(link, "decision=deny")).status).toBe(409);
    expect(await snapshot()).toBe(after);
  });
});

describe("reading and waiting", () => {
  it("GET ?wait= long-polls until the decision, and answers at once when decided", async () => {
    const agentId = await heldAgent();
    const approval = (await authorize(agentId, "6000000", randomUUID())).body.approval;
    const started = Date.now();
    const waiting = call("GET", `/v1/approvals/${approval.id}?wait=20`);
    await new Promise((done) => setTimeout(done, 300));
    await call("POST", `/v1/approvals/${approval.id}/deny`, {}, undefined, approverKey);
    const answered = await waiting;
    const elapsed = Date.now() - started;
    expect(answered.status).toBe(200);
    expect(answered.body.status).toBe("denied");
    expect(elapsed).toBeGreaterThanOrEqual(300);
    expect(elapsed).toBeLessThan(10_000);
    const at = Date.now();
    expect((await call("GET", `/v1/approvals/${approval.id}?wait=20`)).body.status).toBe("denied");
    expect(Date.now() - at).toBeLessThan(2_000);
  });

  it("GET ?wait= on an undecided approval answers it pending after the wait", async () => {
    const agentId = await heldAgent();
    const approval = (await authorize(agentId, "6000000", randomUUID())).body.approval;
    const at = Date.now();
    const answered = await call("GET", `/v1/approvals/${approval.id}?wait=1`);
    expect(answered.body.status).toBe("pending");
    expect(Date.now() - at).toBeGreaterThanOrEqual(900);
  });

  it("a draining gateway ends every long-poll at once with the approval as it stands", async () => {
    const agentId = await heldAgent();
    const approval = (await authorize(agentId, "6000000", randomUUID())).body.approval;
    const waits = new ApprovalWaits(db.pool);
    const drained = createGatewayHandler({ pool: db.pool, approvalWaits: waits, now: () => new Date() });
    const at = Date.now();
    const waiting = restCall(drained, "GET", `/v1/approvals/${approval.id}?wait=30`, { key: adminKey });
    await new Promise((done) => setTimeout(done, 300));
    await waits.close();
    const answered = await waiting;
    expect(answered.status).toBe(200);
    expect(answered.body.status).toBe("pending");
    expect(Date.now() - at).toBeLessThan(5_000);
  });

  it("lists newest first with status and agent filters and a cursor", async () => {
    const agentId = await heldAgent();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await authorize(agentId, `${6_000_000 + i}`, randomUUID())).body.approval.id);
    await call("POST", `/v1/approvals/${ids[0]}/deny`, {});
    const pending = await call("GET", `/v1/approvals?agentId=${agentId}&status=pending&limit=1`, undefined, undefined, approverKey);
    expect(pending.status).toBe(200);
    expect(pending.body.approvals.map((a: { id: string }) => a.id)).toEqual([ids[2]]);
    const next = await call("GET", `/v1/approvals?agentId=${agentId}&status=pending&limit=1&cursor=${pending.body.nextCursor}`);
    expect(next.body.approvals.map((a: { id: string }) => a.id)).toEqual([ids[1]]);
    expect(next.body.nextCursor).toBeNull();
    const all = await call("GET", `/v1/approvals?agentId=${agentId}`);
    expect(all.body.approvals.map((a: { id: string }) => a.id)).toEqual([...ids].reverse());
    const stranger = await call("GET", "/v1/approvals", undefined, undefined, strangerKey);
    expect(stranger.body.approvals).toEqual([]);
  });
});

describe("who may decide, and bad input", () => {
  it("an agent key cannot decide its own approval (403 FORBIDDEN_SCOPE, nothing changes) but reads it; another agent's is 404", async () => {
    const agentId = await heldAgent();
    const otherAgent = await heldAgent();
    const agentKey = (await issueApiKey(db.pool, accountId, { kind: "agent", agentId })).apiKey;
    const approval = (await authorize(agentId, "6000000", randomUUID(), agentKey)).body.approval;
    const foreign = (await authorize(otherAgent, "6000000", randomUUID())).body.approval;
    const before = await snapshot();
    for (const action of ["approve", "deny"]) {
      const refused = await call("POST", `/v1/approvals/${approval.id}/${action}`, {}, randomUUID(), agentKey);
      expect(refused.status).toBe(403);
      expect(refused.body).toMatchObject({ code: "FORBIDDEN_SCOPE", scope: `agent:${agentId}`, requiredScopes: ["admin", "approver"] });
    }
    expect((await call("GET", `/v1/approvals/${approval.id}`, undefined, undefined, agentKey)).body.status).toBe("pending");
    const other = await call("GET", `/v1/approvals/${foreign.id}`, undefined, undefined, agentKey);
    expect(other.status).toBe(404);
    expect(other.body.code).toBe("APPROVAL_NOT_FOUND");
    expect((await call("GET", "/v1/approvals", undefined, undefined, agentKey)).status).toBe(403);
    expect(await snapshot()).toBe(before);
  });

  it("unknown ids, another account's approval, bad notes, waits, filters and cursors are typed 4xx; nothing changes", async () => {
    const agentId = await heldAgent();
    const approval = (await authorize(agentId, "6000000", randomUUID())).body.approval;
    const before = await snapshot();
    const cases: [string, string, unknown, string | undefined, number, string, string?][] = [
      ["POST", `/v1/approvals/${randomUUID()}/approve`, {}, adminKey, 404, "APPROVAL_NOT_FOUND"],
      ["POST", "/v1/approvals/not-an-id/deny", {}, adminKey, 404, "APPROVAL_NOT_FOUND"],
      ["GET", `/v1/approvals/${randomUUID()}`, undefined, adminKey, 404, "APPROVAL_NOT_FOUND"],
      ["POST", `/v1/approvals/${approval.id}/approve`, {}, strangerKey, 404, "APPROVAL_NOT_FOUND"],
      ["GET", `/v1/approvals/${approval.id}`, undefined, strangerKey, 404, "APPROVAL_NOT_FOUND"],
      ["POST", `/v1/approvals/${approval.id}/approve`, { note: "x".repeat(501) }, adminKey, 400, "BAD_USER_INPUT", "note"],
      ["POST", `/v1/approvals/${approval.id}/approve`, { note: 7 }, adminKey, 400, "BAD_USER_INPUT", "note"],
      ["POST", `/v1/approvals/${approval.id}/deny`, { reason: "x" }, adminKey, 400, "BAD_USER_INPUT", "reason"],
      ["GET", `/v1/approvals/${approval.id}?wait=61`, undefined, adminKey, 400, "BAD_USER_INPUT", "wait"],
      ["GET", `/v1/approvals/${approval.id}?wait=-1`, undefined, adminKey, 400, "BAD_USER_INPUT", "wait"],
      ["GET", `/v1/approvals/${approval.id}?wait=soon`, undefined, adminKey, 400, "BAD_USER_INPUT", "wait"],
      ["GET", "/v1/approvals?status=maybe", undefined, adminKey, 400, "BAD_USER_INPUT", "status"],
      ["GET", "/v1/approvals?limit=0", undefined, adminKey, 400, "BAD_USER_INPUT", "limit"],
      ["GET", "/v1/approvals?cursor=bm90LWEtY3Vyc29y", undefined, adminKey, 400, "BAD_USER_INPUT", "cursor"],
    ];
    for (const [method, path, body, key, status, code, field] of cases) {
      const answer = await call(method, path, body, undefined, key);
      expect({ status: answer.status, code: answer.body.code }, `${method} ${path}: ${answer.text}`).toEqual({ status, code });
      if (field !== undefined) expect(answer.body.field, `${method} ${path}`).toBe(field);
    }
    expect(await snapshot()).toBe(before);
  });

  it("a policy approval timeout out of range (or no rule) is 400 invalid_approval and the policy is unchanged", async () => {
    const agentId = await heldAgent();
    const before = (await call("GET", `/v1/policies/${agentId}`)).body;
    expect(before.approval).toEqual({ above: { usdc: 5 }, domains: [], firstPaymentToDomain: false, timeout: "15m", onTimeout: "deny" });
    const bad: [unknown, string][] = [
      [{ above: { usdc: 5 }, timeout: "8d" }, "approval.timeout"],
      [{ above: { usdc: 5 }, timeout: "0s" }, "approval.timeout"],
      [{ above: { usdc: 5 } }, "approval.timeout"],
      [{ above: { usdc: 5 }, timeout: "1h", onTimeout: "approve" }, "approval.onTimeout"],
      [{ timeout: "1h" }, "approval"],
    ];
    for (const [approval, field] of bad) {
      const answer = await call("PUT", `/v1/policies/${agentId}`, { approval });
      expect(answer.status, JSON.stringify(approval)).toBe(400);
      expect(answer.body).toMatchObject({ code: "BAD_USER_INPUT", field });
    }
    expect((await call("GET", `/v1/policies/${agentId}`)).body).toEqual(before);
  });
});
