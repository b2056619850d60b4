/**
 * `pay` on a payment the policy holds for a person, against the WHOLE system (local ledger,
 * gateway with its approvals' timeout loop, a paid x402 API built with the SDK's middleware):
 * waiting by long-poll and paying once approved, the typed errors once denied or expired,
 * `ApprovalRequiredError` when the client stops waiting, resuming with the same idempotency key
 * (one approval, paid once), and concurrent held payments decided each their own way. Money is
 * checked on the ledger: the seller's token balance moves by exactly what was approved.
 */
import { randomUUID } from "node:crypto";
import type { ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueApiKey } from "../../api/shared/keys.js";
import { refusal } from "../../sdk/src/mcp/refusals.js";
import { ApprovalRequiredError, Client, PolicyViolationError } from "../../sdk/src/index.js";
import { type NodeRequest, x402Middleware } from "../../sdk/src/server/index.js";
import { fundedAgent, rest, type Served, serve, startTestSystem, type TestSystem, tokenBalanceUnits } from "./server-support.js";

const PRICE_UNITS = 600_000n;

let test: TestSystem;
let api: Served;
let endpoint = "";
let sellerWallet = "";
let buyerKey = "";
let accountId = "";
let admin: Client;
let serial = 0;

beforeAll(async () => {
  test = await startTestSystem();
  const { system } = test;
  const buyer = await system.createAccount("buyer");
  buyerKey = buyer.apiKey;
  accountId = buyer.accountId;
  const seller = await system.createAccount("seller");
  sellerWallet = await fundedAgent(system, seller.apiKey, "report-api", 0);
  const gate = x402Middleware({
    facilitatorUrl: system.apiUrl,
    apiKey: seller.apiKey,
    amount: PRICE_UNITS.toString(),
    token: "usdc",
    network: system.network,
    payTo: sellerWallet,
  });
  api = await serve((req, res: ServerResponse) =>
    gate(req as NodeRequest, res, (error?: unknown) => {
      res.writeHead(error === undefined ? 200 : 500, { "content-type": "application/json" });
      res.end(JSON.stringify(error === undefined ? { report: "paid" } : { error: String(error) }));
    }),
  );
  endpoint = `${api.origin}/report`;
  admin = new Client({ agentId: "report-api", apiKey: buyerKey, baseUrl: system.apiUrl });
}, 300_000);

afterAll(async () => {
  await api?.close();
  await test?.stop();
});

/** A funded agent whose policy holds every payment above 0.5 USDC for `timeout`, paying with its own agent key. */
async function heldAgent(timeout = "10m", options: { timeout?: number } = {}): Promise<Client> {
  const agentId = `held-${++serial}`;
  await fundedAgent(test.system, buyerKey, agentId, 5);
  const policy = await rest(test.system, buyerKey, "PUT", `/v1/policies/${agentId}`, {
    approval: { above: { usdc: "0.5" }, timeout, onTimeout: "deny" },
  });
  if (policy.status !== 200) throw new Error(`policy: ${policy.status} ${policy.text}`);
  const agentKey = (await issueApiKey(test.db.pool, accountId, { kind: "agent", agentId })).apiKey;
  return new Client({ agentId, apiKey: agentKey, baseUrl: test.system.apiUrl, maxRetries: 1, retryBaseDelayMs: 50, ...options });
}

/** The agent's approvals as the gateway lists them. */
async function approvalsOf(agent: Client) {
  return (await admin.approvals.list({ agentId: agent.agentId })).approvals;
}

/** Resolves once the agent has `count` pending approvals; answers them. */
async function pendingOf(agent: Client, count: number) {
  for (let tries = 0; tries < 200; tries += 1) {
    const pending = (await approvalsOf(agent)).filter((approval) => approval.status === "pending");
    if (pending.length >= count) return pending;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`${agent.agentId}: fewer than ${count} pending approvals`);
}

function failureOf(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => null,
    (error: unknown) => error,
  );
}

describe("pay waits for a person", () => {
  it("is paid once approved while it waits (one long-poll, one approval, paid once)", async () => {
    const agent = await heldAgent();
    const before = await tokenBalanceUnits(test, sellerWallet);
    const paying = agent.pay({ endpoint, approvalTimeoutMs: 60_000 });
    const [held] = await pendingOf(agent, 1);
    expect(held!.endpoint).toBe(endpoint);
    expect(held!.amount).toEqual({ usdc: 0.6 });
    const decided = await admin.approvals.approve(held!.id, { note: "fine" });
    expect(decided).toMatchObject({ id: held!.id, status: "approved", note: "fine", outcome: "authorized" });
    const result = await paying;
    expect(result).toMatchObject({ paid: true, status: 200, data: { report: "paid" }, amountPaid: { usdc: 0.6 } });
    // The receipt names the version the payment was decided under: the policy's current one.
    const owner = new Client({ agentId: agent.agentId, apiKey: buyerKey, baseUrl: test.system.apiUrl });
    const [current] = (await owner.policies.history()).versions;
    expect(current!.version).toBeGreaterThanOrEqual(1);
    expect(result.paid && result.policyVersion).toBe(current!.version);
    expect(await tokenBalanceUnits(test, sellerWallet)).toBe(before + PRICE_UNITS);
    const all = await approvalsOf(agent);
    expect(all.map((approval) => approval.status)).toEqual(["approved"]);
  });

  it("a denial while it waits is PolicyViolationError APPROVAL_DENIED; nothing is paid", async () => {
    const agent = await heldAgent();
    const before = await tokenBalanceUnits(test, sellerWallet);
    const paying = failureOf(agent.pay({ endpoint, approvalTimeoutMs: 60_000 }));
    const [held] = await pendingOf(agent, 1);
    await admin.approvals.deny(held!.id, { note: "no" });
    const error = await paying;
    expect(error).toBeInstanceOf(PolicyViolationError);
    expect(error).toMatchObject({ code: "APPROVAL_DENIED", status: 403 });
    expect(await tokenBalanceUnits(test, sellerWallet)).toBe(before);
  });

  it("expiry by the gateway's clock while it waits is APPROVAL_EXPIRED, well before the client's wait ends", async () => {
    const agent = await heldAgent("2s");
    const started = Date.now();
    const error = await failureOf(agent.pay({ endpoint, approvalTimeoutMs: 30_000 }));
    expect(error).toBeInstanceOf(PolicyViolationError);
    expect(error).toMatchObject({ code: "APPROVAL_EXPIRED", status: 403 });
    expect(Date.now() - started).toBeLessThan(15_000);
    expect((await approvalsOf(agent))[0]).toMatchObject({ status: "expired", decidedBy: "timeout" });
  });

  it("undecided at the client's wait: ApprovalRequiredError; the same key resumes it (no second approval) and pays once", async () => {
    const agent = await heldAgent();
    const before = await tokenBalanceUnits(test, sellerWallet);
    const key = randomUUID();
    const started = Date.now();
    const error = await failureOf(agent.pay({ endpoint, idempotencyKey: key, approvalTimeoutMs: 2_000 }));
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_000);
    expect(error).toBeInstanceOf(ApprovalRequiredError);
    const held = error as ApprovalRequiredError;
    expect(held).toMatchObject({ code: "APPROVAL_PENDING", status: 202, idempotencyKey: key });
    const [pending] = await pendingOf(agent, 1);
    expect(held.approvalId).toBe(pending!.id);
    expect(held.expiresAt).toBe(pending!.expiresAt);

    // Asked again, still undecided (no wait): the same approval, not a second one.
    const again = await failureOf(agent.pay({ endpoint, idempotencyKey: key, approvalTimeoutMs: 0 }));
    expect(again).toBeInstanceOf(ApprovalRequiredError);
    expect((again as ApprovalRequiredError).approvalId).toBe(held.approvalId);
    expect(await approvalsOf(agent)).toHaveLength(1);

    await admin.approvals.approve(held.approvalId);
    const result = await agent.pay({ endpoint, idempotencyKey: key, approvalTimeoutMs: 0 });
    expect(result).toMatchObject({ paid: true, status: 200, data: { report: "paid" } });
    expect(await tokenBalanceUnits(test, sellerWallet)).toBe(before + PRICE_UNITS);
    expect((await approvalsOf(agent)).map((approval) => approval.status)).toEqual(["approved"]);
  });

  it("without a key of the caller's, the error carries the generated one, which resumes it", async () => {
    const agent = await heldAgent();
    const error = (await failureOf(agent.pay({ endpoint, approvalTimeoutMs: 0 }))) as ApprovalRequiredError;
    expect(error).toBeInstanceOf(ApprovalRequiredError);
    expect(error.idempotencyKey).toMatch(/^[0-9a-f-]{36}$/);
    await admin.approvals.approve(error.approvalId);
    const result = await agent.pay({ endpoint, idempotencyKey: error.idempotencyKey!, approvalTimeoutMs: 0 });
    expect(result.paid).toBe(true);
    expect(await approvalsOf(agent)).toHaveLength(1);
  });

  it("the client option sets the default wait; a bad one is refused before anything is sent", async () => {
    const agent = await heldAgent("10m", {});
    const waiting = new Client({ agentId: agent.agentId, apiKey: buyerKey, baseUrl: test.system.apiUrl, approvalTimeoutMs: 0 });
    const started = Date.now();
    expect(await failureOf(waiting.pay({ endpoint }))).toBeInstanceOf(ApprovalRequiredError);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(() => new Client({ agentId: "a", apiKey: buyerKey, approvalTimeoutMs: -1 })).toThrow(TypeError);
    await expect(agent.pay({ endpoint, approvalTimeoutMs: 1.5 })).rejects.toThrow(TypeError);
    expect(await approvalsOf(agent)).toHaveLength(1);
  });

  it("concurrent held payments of one agent are decided each their own way", async () => {
    const agent = await heldAgent();
    const before = await tokenBalanceUnits(test, sellerWallet);
    const pays = [0, 1, 2, 3].map(() => failureOf(agent.pay({ endpoint, approvalTimeoutMs: 60_000 }).then((result) => ({ result }))));
    const pending = await pendingOf(agent, 4);
    const [a, b, c, d] = pending;
    await Promise.all([
      admin.approvals.approve(a!.id),
      admin.approvals.approve(b!.id),
      admin.approvals.deny(c!.id),
      admin.approvals.deny(d!.id),
    ]);
    // failureOf answers null for a success: read the outcomes back from the settled promises.
    const outcomes = await Promise.all(
      [0, 1, 2, 3].map(async (index) => {
        const failure = await pays[index]!;
        return failure === null ? "paid" : (failure as PolicyViolationError).code;
      }),
    );
    expect([...outcomes].sort()).toEqual(["APPROVAL_DENIED", "APPROVAL_DENIED", "paid", "paid"]);
    expect(await tokenBalanceUnits(test, sellerWallet)).toBe(before + 2n * PRICE_UNITS);
    expect(await approvalsOf(agent)).toHaveLength(4);
  });

  it("the MCP tool error of a held payment carries approvalId, expiresAt and the key to resume with", () => {
    const error = new ApprovalRequiredError("payment held", "6f1c2a3b-0000-4000-8000-00000000a001", "2026-03-01T12:15:00.000Z", {
      status: 202,
      idempotencyKey: "key-1",
    });
    const answer = refusal(error);
    expect(answer.isError).toBe(true);
    expect(answer.structuredContent).toEqual({
      errorClass: "ApprovalRequiredError",
      code: "APPROVAL_PENDING",
      status: 202,
      approvalId: "6f1c2a3b-0000-4000-8000-00000000a001",
      expiresAt: "2026-03-01T12:15:00.000Z",
      idempotencyKey: "key-1",
    });
    expect(answer.content[0]!.text).toContain("key-1");
  });
});
