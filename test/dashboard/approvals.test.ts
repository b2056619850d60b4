/**
 * The approvals queue in a real Chromium, end to end on the WHOLE system (local ledger, gateway,
 * indexer, the API serving the dashboard): an agent over its approval threshold calls `pay` (the
 * TS SDK, with an agent-scoped key) on a paid x402 API built with the SDK's middleware; the
 * payment is held; a person signed in with an approver key sees it in the queue and clicks
 * Approve; `pay` then returns the API's paid answer. A second payment left alone gets the typed
 * `ApprovalRequiredError` after the client's (short) wait; denied in the queue with a note, `pay`
 * again with the same idempotency key answers APPROVAL_DENIED, and nothing was paid for it.
 */
import type { ServerResponse } from "node:http";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueApiKey } from "../../api/shared/keys.js";
import { ensureDashboardBuilt } from "../../scripts/dashboard-build.js";
import { ApprovalRequiredError, Client, PolicyViolationError } from "../../sdk/src/index.js";
import { type NodeMiddleware, type NodeRequest, x402Middleware } from "../../sdk/src/server/index.js";
import { fundedAgent, rest, type Served, serve, startTestSystem, type TestSystem, tokenBalanceUnits } from "../sdk/server-support.js";
import { launchBrowser, type TestBrowser } from "./support/browser.js";
import { accessibilityViolations, consoleErrors, open, screenshot, signIn } from "./support/page.js";

const UI_DEADLINE_MS = 20_000;
const PRICE_UNITS = "600000";
const SHORT_WAIT_MS = 3_000;

let test: TestSystem;
let api: Served;
let browser: TestBrowser;
let page: Page;
let errors: string[];
let dashboardUrl = "";
let endpoint = "";
let sellerWallet = "";
let agent: Client;
let apiUrl = "";
let approverKey = "";
let approverKeyId = "";

async function paidServer(gate: NodeMiddleware): Promise<Served> {
  return serve((req, res: ServerResponse) => {
    gate(req as NodeRequest, res, (error?: unknown) => {
      res.writeHead(error === undefined ? 200 : 500, { "content-type": "application/json" });
      res.end(JSON.stringify(error === undefined ? { report: "the paid answer" } : { error: String(error) }));
    });
  });
}

beforeAll(async () => {
  await ensureDashboardBuilt();
  test = await startTestSystem();
  const { system } = test;
  const buyer = await system.createAccount("buyer");
  const seller = await system.createAccount("seller");
  sellerWallet = await fundedAgent(system, seller.apiKey, "report-api", 0);
  await fundedAgent(system, buyer.apiKey, "researcher", 5);
  const policy = await rest(system, buyer.apiKey, "PUT", "/v1/policies/researcher", {
    approval: { above: { usdc: "0.5" }, timeout: "10m", onTimeout: "deny" },
  });
  expect(policy.status).toBe(200);
  api = await paidServer(
    x402Middleware({
      facilitatorUrl: system.apiUrl,
      apiKey: seller.apiKey,
      amount: PRICE_UNITS,
      token: "usdc",
      network: system.network,
      payTo: sellerWallet,
    }),
  );
  endpoint = `${api.origin}/report`;
  // The agent pays with its own key: it may pay and wait, never decide.
  const agentKey = (await issueApiKey(test.db.pool, buyer.accountId, { kind: "agent", agentId: "researcher" })).apiKey;
  agent = new Client({ agentId: "researcher", apiKey: agentKey, baseUrl: system.apiUrl, maxRetries: 1, retryBaseDelayMs: 50 });
  // The person signs in with an approver key (deciding is all it may do besides reading).
  const approver = await issueApiKey(test.db.pool, buyer.accountId, { kind: "approver" });
  approverKey = approver.apiKey;
  approverKeyId = (await test.db.pool.query<{ id: string }>("SELECT id::text AS id FROM api_keys WHERE prefix = $1", [approver.prefix]))
    .rows[0]!.id;
  apiUrl = system.apiUrl;
  dashboardUrl = `${system.apiUrl}/dashboard/`;
  browser = await launchBrowser();
  page = await browser.newPage();
  await signIn(page, dashboardUrl, approverKey);
  // From here on every console error counts (the signed-out page's own session check answers 401).
  errors = consoleErrors(page);
}, 300_000);

afterAll(async () => {
  await browser?.close();
  await api?.close();
  await test?.stop();
});

/** The queue's row of the held payment, once the queue shows it. */
async function pendingRow(approvalId?: string) {
  const rows = page.getByTestId("pending-approval");
  const row = approvalId === undefined ? rows.first() : page.locator(`[data-testid="pending-approval"][data-approval-id="${approvalId}"]`);
  await row.waitFor({ timeout: UI_DEADLINE_MS });
  return row;
}

describe("the approvals queue", () => {
  it("a held payment is paid once a person clicks Approve in the dashboard", async () => {
    const sellerBefore = await tokenBalanceUnits(test, sellerWallet);
    // The agent's policy says what it holds.
    await open(page, dashboardUrl, "policies?agent=researcher");
    const rule = page.getByTestId("policy-approval");
    await rule.waitFor({ timeout: UI_DEADLINE_MS });
    expect(await rule.textContent()).toBe("held for a person above 0.50 USDC; waits 10m, then deny (approvals)");

    await open(page, dashboardUrl, "approvals");
    await page.getByRole("heading", { name: "Approvals", level: 1 }).waitFor();
    const paying = agent.pay({ endpoint, approvalTimeoutMs: 120_000 });
    const failed = paying.then(
      () => null,
      (error: unknown) => error,
    );

    const row = await pendingRow();
    await expect.poll(() => row.textContent()).toContain("researcher");
    const text = (await row.textContent()) ?? "";
    expect(text).toContain("0.60 USDC");
    expect(text).toContain(endpoint);
    expect(text).toContain("Above the approval threshold");
    expect(text).toMatch(/\d+m \d{2}s left/);
    expect(await accessibilityViolations(page)).toEqual([]);
    await screenshot(page, "approvals-queue");

    await row.getByLabel(/Note for the decision/).fill("ok for the report");
    await row.getByRole("button", { name: "Approve" }).click();

    const result = await paying;
    expect(await failed).toBeNull();
    expect(result.paid).toBe(true);
    expect(result.status).toBe(200);
    expect(result.data).toEqual({ report: "the paid answer" });
    if (!result.paid) throw new Error("not paid");
    expect(result.amountPaid.usdc).toBe(0.6);
    expect(await tokenBalanceUnits(test, sellerWallet)).toBe(sellerBefore + BigInt(PRICE_UNITS));
    // Recorded as decided by the key the person signed in with, with the note typed.
    const [approved] = (await new Client({ agentId: "researcher", apiKey: approverKey, baseUrl: apiUrl }).approvals.list()).approvals;
    expect(approved).toMatchObject({ status: "approved", decidedBy: approverKeyId, note: "ok for the report", outcome: "authorized" });

    // The queue empties and the decision is listed below, with the note.
    await page.getByTestId("pending-approvals").waitFor({ state: "detached", timeout: UI_DEADLINE_MS });
    const decided = page.locator('[data-testid="decided-approval"][data-status="approved"]');
    await decided.first().waitFor({ timeout: UI_DEADLINE_MS });
    expect(await decided.first().textContent()).toContain("ok for the report");
  });

  it("a payment left alone is ApprovalRequiredError after the client's wait; denied, the same key answers APPROVAL_DENIED", async () => {
    const sellerBefore = await tokenBalanceUnits(test, sellerWallet);
    const started = Date.now();
    const error = await agent.pay({ endpoint, approvalTimeoutMs: SHORT_WAIT_MS }).then(
      () => null,
      (failure: unknown) => failure,
    );
    const waited = Date.now() - started;
    expect(error).toBeInstanceOf(ApprovalRequiredError);
    const held = error as ApprovalRequiredError;
    expect(held.code).toBe("APPROVAL_PENDING");
    expect(held.approvalId).toMatch(/^[0-9a-f-]{36}$/);
    expect(Date.parse(held.expiresAt)).toBeGreaterThan(Date.now() + 9 * 60_000);
    expect(held.idempotencyKey).toBeTruthy();
    expect(waited).toBeGreaterThanOrEqual(SHORT_WAIT_MS - 1_000);

    // Still pending at the gateway, and in the queue.
    expect((await agent.approvals.get(held.approvalId)).status).toBe("pending");
    const row = await pendingRow(held.approvalId);
    await row.getByLabel(/Note for the decision/).fill("not this one");
    await row.getByRole("button", { name: "Deny" }).click();
    const denied = page.locator(`[data-testid="decided-approval"][data-approval-id="${held.approvalId}"][data-status="denied"]`);
    await denied.waitFor({ timeout: UI_DEADLINE_MS });
    expect(await denied.textContent()).toContain("not this one");

    const resumed = await agent.pay({ endpoint, idempotencyKey: held.idempotencyKey!, approvalTimeoutMs: SHORT_WAIT_MS }).then(
      () => null,
      (failure: unknown) => failure,
    );
    expect(resumed).toBeInstanceOf(PolicyViolationError);
    expect((resumed as PolicyViolationError).code).toBe("APPROVAL_DENIED");
    expect(await tokenBalanceUnits(test, sellerWallet)).toBe(sellerBefore);
    expect(errors).toEqual([]);
  });

  it("REST takes the session only on the decision routes and only under the CSRF rule; nothing changes otherwise", async () => {
    const signedIn = await fetch(`${apiUrl}/dashboard/api/session`, {
      method: "POST",
      headers: { authorization: `Bearer ${approverKey}`, "x-apg-csrf": "1" },
    });
    expect(signedIn.status).toBe(201);
    const cookie = signedIn.headers.get("set-cookie")!.split(";")[0]!;
    const held = (await agent.pay({ endpoint, approvalTimeoutMs: 0 }).then(
      () => null,
      (failure: unknown) => failure,
    )) as ApprovalRequiredError;
    expect(held).toBeInstanceOf(ApprovalRequiredError);
    const post = (action: string, headers: Record<string, string>) =>
      fetch(`${apiUrl}/v1/approvals/${held.approvalId}/${action}`, {
        method: "POST",
        headers: { cookie, "content-type": "application/json", ...headers },
        body: "{}",
      });

    expect((await post("approve", {})).status).toBe(401);
    expect((await post("approve", { "x-apg-csrf": "1", "sec-fetch-site": "cross-site" })).status).toBe(401);
    // Any other /v1 route takes keys only.
    expect((await fetch(`${apiUrl}/v1/approvals/${held.approvalId}`, { headers: { cookie, "x-apg-csrf": "1" } })).status).toBe(401);
    expect((await agent.approvals.get(held.approvalId)).status).toBe("pending");

    const denied = await post("deny", { "x-apg-csrf": "1", "sec-fetch-site": "same-origin" });
    expect(denied.status).toBe(200);
    expect(await denied.json()).toMatchObject({ id: held.approvalId, status: "denied", decidedBy: approverKeyId });
    expect((await post("approve", { "x-apg-csrf": "1" })).status).toBe(409);
  });
});
