/**
 * The dashboard (spec 4.9) in a real Chromium against the whole system, with real
 * payments made through the SDK (support/scenario.ts). Each view's numbers are checked against
 * what was paid and against the API's own answers; sign-in, sign-out, a revoked key and another
 * account's data are checked from the browser; every view passes axe's WCAG 2.1 A/AA rules and is
 * photographed (support/page.ts says where the pictures go).
 */
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureDashboardBuilt } from "../../scripts/dashboard-build.js";
import { pollUntil } from "../support/poll.js";
import { launchBrowser, type TestBrowser } from "./support/browser.js";
import { accessibilityViolations, amountOf, consoleErrors, open, screenshot, signIn } from "./support/page.js";
import { type Paid, restOf, type Scenario, startScenario } from "./support/scenario.js";

const UI_DEADLINE_MS = 15_000;

let scenario: Scenario;
let browser: TestBrowser;
let page: Page;
let errors: string[];

beforeAll(async () => {
  await ensureDashboardBuilt();
  scenario = await startScenario();
  browser = await launchBrowser();
  page = await browser.newPage();
  errors = consoleErrors(page);
  await signIn(page, scenario.dashboardUrl, scenario.buyerKey);
}, 300_000);

afterAll(async () => {
  await browser?.close();
  await scenario?.stop();
});

/** Exact 6-decimal text of base units (the API's format). */
function decimal(units: bigint): string {
  return `${units / 1_000_000n}.${(units % 1_000_000n).toString().padStart(6, "0")}`;
}

const sum = (payments: readonly Paid[]): bigint => payments.reduce((total, p) => total + p.amountUnits, 0n);

/** CSP refusals and uncaught page errors (a 401 the browser logs is expected in some tests). */
function pageFaults(): string[] {
  return errors.filter((text) => /Content Security Policy|Refused to|Uncaught|TypeError|ReferenceError/.test(text));
}

describe("signing in", () => {
  it("exchanges the key once for an HttpOnly, SameSite=Strict cookie and keeps the key nowhere", async () => {
    const own = await launchBrowser();
    try {
      const fresh = await own.newPage();
      await signIn(fresh, scenario.dashboardUrl, scenario.buyerKey);
      const cookies = await own.context.cookies();
      expect(cookies.map((c) => c.name)).toEqual(["apg_session"]);
      const [session] = cookies;
      expect(session).toMatchObject({ httpOnly: true, sameSite: "Strict", path: "/" });
      expect(session!.value).not.toContain(scenario.buyerKey);
      const traces = await fresh.evaluate(() => ({
        local: JSON.stringify({ ...localStorage }),
        session: JSON.stringify({ ...sessionStorage }),
        cookie: document.cookie,
        url: location.href,
        html: document.documentElement.outerHTML,
      }));
      for (const trace of Object.values(traces)) expect(trace).not.toContain(scenario.buyerKey);
      expect(traces.cookie).toBe("");
      expect(await fresh.getByTestId("account").textContent()).toContain("buyer");
    } finally {
      await own.close();
    }
  });

  it("signs out: the stored session ends, so the same cookie is refused afterwards", async () => {
    const own = await launchBrowser();
    try {
      const fresh = await own.newPage();
      await signIn(fresh, scenario.dashboardUrl, scenario.buyerKey);
      const token = (await own.context.cookies()).find((c) => c.name === "apg_session")!.value;
      const asCookie = (headers: Record<string, string> = {}) =>
        fetch(`${scenario.apiUrl}/graphql`, {
          method: "POST",
          headers: { cookie: `apg_session=${token}`, "x-apg-csrf": "1", "content-type": "application/json", ...headers },
          body: JSON.stringify({ query: "{ agents { agentId } }" }),
        });
      expect((await asCookie()).status).toBe(200);
      await fresh.getByRole("button", { name: "Sign out" }).click();
      await fresh.getByLabel("API key").waitFor();
      expect(await own.context.cookies()).toEqual([]);
      expect((await asCookie()).status).toBe(401);
    } finally {
      await own.close();
    }
  });

  it("refuses a wrong key plainly, and shows the sign-in form first", async () => {
    const own = await launchBrowser();
    try {
      const fresh = await own.newPage();
      await fresh.goto(scenario.dashboardUrl);
      await fresh.getByLabel("API key").fill(`apg_${"A".repeat(43)}`);
      await fresh.getByRole("button", { name: "Sign in" }).click();
      await expect(fresh.getByTestId("sign-in-error").textContent()).resolves.toContain("not valid");
      expect(await own.context.cookies()).toEqual([]);
      expect(await accessibilityViolations(fresh)).toEqual([]);
      await fresh.getByLabel("API key").fill("");
      await screenshot(fresh, "sign-in");
    } finally {
      await own.close();
    }
  });

  it("takes the session cookie on GraphQL only with the CSRF header, and never from another site", async () => {
    const signedIn = await fetch(`${scenario.apiUrl}/dashboard/api/session`, {
      method: "POST",
      headers: { authorization: `Bearer ${scenario.buyerKey}` },
    });
    expect(signedIn.status).toBe(201);
    const token = /apg_session=([^;]+)/.exec(signedIn.headers.get("set-cookie") ?? "")![1]!;
    const ask = (headers: Record<string, string>) =>
      fetch(`${scenario.apiUrl}/graphql`, {
        method: "POST",
        headers: { cookie: `apg_session=${token}`, "content-type": "application/json", ...headers },
        body: JSON.stringify({ query: "{ agents { agentId } }" }),
      });
    expect((await ask({})).status).toBe(401);
    expect((await ask({ "x-apg-csrf": "1", "sec-fetch-site": "cross-site" })).status).toBe(401);
    expect((await ask({ "x-apg-csrf": "1", "sec-fetch-site": "same-site" })).status).toBe(401);
    expect((await ask({ "x-apg-csrf": "1", "sec-fetch-site": "same-origin" })).status).toBe(200);
    // No origin may make credentialed cross-origin requests (the preflight and the answer).
    const preflight = await fetch(`${scenario.apiUrl}/graphql`, {
      method: "OPTIONS",
      headers: { origin: "http://evil.example", "access-control-request-method": "POST", "access-control-request-headers": "x-apg-csrf" },
    });
    expect(preflight.headers.get("access-control-allow-credentials")).toBeNull();
    // The API key keeps working exactly as before, with or without a cookie.
    const keyed = await fetch(`${scenario.apiUrl}/graphql`, {
      method: "POST",
      headers: { authorization: `Bearer ${scenario.buyerKey}`, "content-type": "application/json" },
      body: JSON.stringify({ query: "{ agents { agentId } }" }),
    });
    expect(keyed.status).toBe(200);
  });

  it("signs the dashboard out within seconds when its API key is revoked, without a click", async () => {
    const issued = await restOf(scenario, scenario.buyerKey, "POST", "/v1/api-keys");
    expect(issued.status).toBe(201);
    const own = await launchBrowser();
    try {
      const fresh = await own.newPage();
      await signIn(fresh, scenario.dashboardUrl, issued.body.apiKey as string);
      await open(fresh, scenario.dashboardUrl, "live");
      await fresh.getByTestId("feed-connection").getByText("Live").waitFor();
      const revoked = await restOf(scenario, scenario.buyerKey, "DELETE", `/v1/api-keys/${issued.body.id}`);
      expect(revoked.status).toBe(204);
      await fresh.getByTestId("signed-out-message").waitFor({ timeout: UI_DEADLINE_MS });
      expect(await fresh.getByTestId("signed-out-message").textContent()).toContain("revoked");
      await expect(fresh.getByLabel("API key").isVisible()).resolves.toBe(true);
    } finally {
      await own.close();
    }
  });
});

describe("live feed", () => {
  it("shows a new payment without a reload, once, in time order", async () => {
    await open(page, scenario.dashboardUrl, "live");
    await page.getByTestId("feed-connection").getByText("Live").waitFor();
    await page.locator(`[data-testid=feed-row][data-tx-hash="${scenario.paid[0]!.txHash}"]`).waitFor();
    const fresh = await scenario.payAgain();
    const row = page.locator(`[data-testid=feed-row][data-tx-hash="${fresh.txHash}"]`);
    await row.waitFor({ timeout: UI_DEADLINE_MS });
    await expect(row.locator("[data-amount]").getAttribute("data-amount")).resolves.toBe(decimal(fresh.amountUnits));
    await expect(row.textContent()).resolves.toContain("shopper");
    const hashes = await page.locator("[data-testid=feed-row]").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-tx-hash")));
    expect(new Set(hashes).size).toBe(hashes.length);
    const times = await page
      .locator("[data-testid=feed-row] time")
      .evaluateAll((ts) => ts.map((t) => Date.parse(t.getAttribute("datetime")!)));
    expect(times).toEqual([...times].sort((a, b) => b - a));
    // Every payment of the account is there (none of the rejections: they never reached the ledger).
    for (const paid of scenario.paid) expect(hashes).toContain(paid.txHash);
    expect(hashes).not.toContain(scenario.rivalTxHash);
    expect(await accessibilityViolations(page)).toEqual([]);
  });

  it("resumes after a dropped connection and re-reads the payments it missed", async () => {
    await open(page, scenario.dashboardUrl, "live");
    await page.getByTestId("feed-connection").getByText("Live").waitFor();
    // Cut the stream: new SSE connections fail and the open one is closed by the server.
    await page.route("**/graphql", (route) =>
      (route.request().headers().accept ?? "").includes("text/event-stream") ? route.abort("connectionreset") : route.continue(),
    );
    scenario.test.system.api.http.closeAllConnections();
    await page.getByTestId("feed-connection").getByText("Reconnecting").waitFor({ timeout: UI_DEADLINE_MS });
    const missed = [await scenario.payAgain(), await scenario.payAgain()];
    await scenario.indexed(missed.map((p) => p.txHash));
    for (const paid of missed) expect(await page.locator(`[data-tx-hash="${paid.txHash}"]`).count()).toBe(0);
    await page.unroute("**/graphql");
    await page.getByTestId("feed-connection").getByText("Live").waitFor({ timeout: UI_DEADLINE_MS });
    for (const paid of missed)
      await page.locator(`[data-testid=feed-row][data-tx-hash="${paid.txHash}"]`).waitFor({ timeout: UI_DEADLINE_MS });
    const hashes = await page.locator("[data-testid=feed-row]").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-tx-hash")));
    expect(new Set(hashes).size).toBe(hashes.length);
    // The stream works again after the resume.
    const after = await scenario.payAgain();
    await page.locator(`[data-testid=feed-row][data-tx-hash="${after.txHash}"]`).waitFor({ timeout: UI_DEADLINE_MS });
    expect(pageFaults()).toEqual([]);
  });
});

describe("spend", () => {
  it("gives, for each window, the totals spendSummary gives and what was paid, by agent, protocol and domain", async () => {
    for (const window of ["1h", "24h", "7d", "30d"]) {
      await open(page, scenario.dashboardUrl, `spend?window=${window}`);
      await page.getByTestId("spend-total").waitFor();
      await page.locator("[data-testid=spend-chart][data-chart-drawn]").waitFor();
      const api = (
        await scenario.graphql(
          `query($w: String) { spendSummary(window: $w) { total txCount byDomain { domain amount } byAgent { agentId amount } byProtocol { protocol amount } } }`,
          { w: window },
        )
      ).spendSummary;
      // Everything was paid in the last minutes: every window holds all of it.
      const paid = scenario.paid;
      expect(api.total).toBe(decimal(sum(paid)));
      expect(await amountOf(page, "[data-testid=spend-total]")).toBe(api.total);
      expect(await page.getByTestId("spend-count").textContent()).toBe(String(paid.length));
      for (const domain of new Set(paid.map((p) => p.domain))) {
        const cell = `[data-testid=spend-by-domain] tr[data-key="${domain}"]`;
        expect(await amountOf(page, cell)).toBe(decimal(sum(paid.filter((p) => p.domain === domain))));
      }
      for (const agentId of new Set(paid.map((p) => p.agentId))) {
        expect(await amountOf(page, `[data-testid=spend-by-agent] tr[data-key="${agentId}"]`)).toBe(
          decimal(sum(paid.filter((p) => p.agentId === agentId))),
        );
      }
      for (const entry of api.byProtocol as { protocol: string; amount: string }[]) {
        expect(await amountOf(page, `[data-testid=spend-by-protocol] tr[data-key="${entry.protocol}"]`)).toBe(entry.amount);
      }
    }
    expect(await accessibilityViolations(page)).toEqual([]);
    await open(page, scenario.dashboardUrl, "spend?window=1h");
    await page.locator("[data-testid=spend-chart][data-chart-drawn]").waitFor();
  });

  it("shows nothing spent in a custom range before any payment, and one agent's spend alone", async () => {
    const from = new Date(Date.now() - 3 * 86_400_000).toISOString();
    const to = new Date(Date.now() - 2 * 86_400_000).toISOString();
    await open(page, scenario.dashboardUrl, `spend?window=custom&from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`);
    await page.getByTestId("spend-total").waitFor();
    expect(await amountOf(page, "[data-testid=spend-total]")).toBe("0.000000");
    await expect(page.getByTestId("empty").first().textContent()).resolves.toContain("No payments in this window");

    await open(page, scenario.dashboardUrl, "spend?window=24h&agent=limited");
    await page.getByTestId("spend-total").waitFor();
    expect(await amountOf(page, "[data-testid=spend-total]")).toBe(decimal(sum(scenario.paid.filter((p) => p.agentId === "limited"))));
  });
});

describe("protocols", () => {
  it("splits the volume between x402 and MPP as paid, and charts it over time", async () => {
    await open(page, scenario.dashboardUrl, "protocols?window=24h&resolution=15m");
    await page.locator("[data-testid=protocols-chart][data-chart-drawn]").waitFor();
    const paid = scenario.paid;
    expect(await amountOf(page, "[data-testid=protocol-split] tr[data-key=x402]")).toBe(
      decimal(sum(paid.filter((p) => p.protocol === "x402"))),
    );
    expect(await amountOf(page, "[data-testid=protocol-split] tr[data-key=mpp]")).toBe(
      decimal(sum(paid.filter((p) => p.protocol === "mpp"))),
    );
    expect(sum(paid.filter((p) => p.protocol === "mpp"))).toBeGreaterThan(0n);
    // The resolution is selectable: 1m buckets over the last hour.
    await page.getByLabel("Resolution").selectOption("5m");
    await page.waitForURL(/resolution=5m/);
    await page.locator("[data-testid=protocols-chart][data-chart-drawn]").waitFor();
    expect(await accessibilityViolations(page)).toEqual([]);
    await open(page, scenario.dashboardUrl, "protocols?window=1h&resolution=1m");
    await page.locator("[data-testid=protocols-chart][data-chart-drawn]").waitFor();
  });
});

describe("policies", () => {
  it("lists each rejection with its reason, endpoint, requested amount against the limit, agent and time", async () => {
    await open(page, scenario.dashboardUrl, "policies");
    await page.locator("[data-testid=rejection-row]").first().waitFor();
    for (const rejection of scenario.rejected) {
      const row = page.locator(`[data-testid=rejection-row][data-reason="${rejection.reasonCode}"]`);
      expect(await row.count()).toBe(1);
      const text = (await row.textContent())!;
      expect(text).toContain(rejection.agentId);
      const shown = (value: string | null): string => (rejection.unit === "usdc" ? formatShort(value!) : value!);
      if (rejection.limit === null) {
        // A domain rule has no limit: the row shows the server's refusal text.
        expect(await row.getByTestId("limit").count()).toBe(0);
        expect(text).toContain("is not on the policy's allowedDomains");
      } else {
        expect(await row.getByTestId("requested").textContent()).toBe(shown(rejection.requested));
        expect(await row.getByTestId("limit").textContent()).toBe(shown(rejection.limit));
      }
      expect(await row.locator("time").getAttribute("datetime")).toMatch(/^\d{4}-\d\d-\d\dT/);
      expect(text).toMatch(/127\.0\.0\.1|localhost/);
    }
    const labels = await page.locator("[data-testid=rejection-row] .badge-rejected").allTextContents();
    expect(labels.sort()).toEqual(["Daily budget exceeded", "Domain not allowed", "Per-call limit exceeded", "Rate limit exceeded"]);
  });

  it("shows each agent's policy and usedToday against its budget, with the 80 % warning", async () => {
    await open(page, scenario.dashboardUrl, "policies");
    const careful = page.locator("[data-testid=policy-table] tr[data-agent=careful]");
    await careful.waitFor();
    expect(await careful.getAttribute("data-budget-state")).toBe("warning");
    await expect(careful.getByTestId("budget-warning").isVisible()).resolves.toBe(true);
    expect(await careful.textContent()).toContain("0.20 of 0.25 USDC used today (80.00 %)");
    // limited asked for more than its budget had left: exhausted until the window resets (spec 3).
    const limited = page.locator("[data-testid=policy-table] tr[data-agent=limited]");
    expect(await limited.getAttribute("data-budget-state")).toBe("exhausted");
    await expect(limited.getByTestId("budget-exhausted").isVisible()).resolves.toBe(true);
    expect(await limited.textContent()).toContain("0.20 of 0.25 USDC used today (80.00 %)");
    // The whole policy of one agent, with the agent chosen.
    await open(page, scenario.dashboardUrl, "policies?agent=limited");
    await page.getByTestId("agent-policy").waitFor();
    expect(await page.getByTestId("agent-policy").textContent()).toContain("only 127.0.0.1");
    // The version every payment of the ledger names, and no rule per endpoint.
    expect(await page.getByTestId("policy-version").textContent()).toMatch(/^v[1-9][0-9]* since /);
    expect(await page.getByTestId("policy-endpoint-budgets").textContent()).toBe("none");
    await open(page, scenario.dashboardUrl, "policies?agent=chatty");
    await page.getByTestId("agent-policy").waitFor();
    expect(await page.getByTestId("agent-policy").textContent()).toContain("2 of 2 calls per 1h");
    expect(await accessibilityViolations(page)).toEqual([]);
  });
});

describe("ledger", () => {
  it("pages by cursor through every transaction to the last row, each with its status and explorer link", async () => {
    await open(page, scenario.dashboardUrl, "ledger?size=10");
    await page.locator("[data-testid=ledger-row]").first().waitFor();
    const seen: string[] = [];
    for (let pageIndex = 0; pageIndex < 50; pageIndex += 1) {
      const rows = page.locator("[data-testid=ledger-row]");
      const count = await rows.count();
      expect(count).toBeGreaterThan(0);
      expect(count).toBeLessThanOrEqual(10);
      for (let i = 0; i < count; i += 1) {
        const row = rows.nth(i);
        const status = await row.getAttribute("data-status");
        const hash = await row.getAttribute("data-tx-hash");
        seen.push(hash === "" ? `rejected:${pageIndex}:${i}` : hash!);
        if (status === "rejected") continue;
        expect(["confirmed", "finalized"]).toContain(status);
        expect(await row.getByRole("link", { name: /in the explorer/ }).getAttribute("href")).toMatch(
          /^https:\/\/explorer\.solana\.com\/tx\//,
        );
      }
      const older = page.getByRole("button", { name: "Older →" });
      if (await older.isDisabled()) break;
      const first = await rows.first().getAttribute("data-tx-hash");
      await older.click();
      await pollUntil(async () => (await rows.first().getAttribute("data-tx-hash")) !== first, {
        timeoutMs: UI_DEADLINE_MS,
        intervalMs: 50,
        what: "the next ledger page",
      });
    }
    const chain = seen.filter((hash) => !hash.startsWith("rejected:"));
    expect(chain.length).toBe(scenario.paid.length);
    expect(new Set(chain)).toEqual(new Set(scenario.paid.map((p) => p.txHash)));
    expect(seen.length - chain.length).toBe(scenario.rejected.length);
    // The last row is the oldest payment.
    expect(chain.at(-1)).toBe(scenario.paid[0]!.txHash);
    expect(seen.length).toBeGreaterThan(10);
  });

  it("filters like transactions.list: by agent, protocol and status", async () => {
    await open(page, scenario.dashboardUrl, "ledger?protocol=mpp");
    await page.locator("[data-testid=ledger-row]").first().waitFor();
    const mpp = await page.locator("[data-testid=ledger-row]").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-tx-hash")));
    expect(new Set(mpp)).toEqual(new Set(scenario.paid.filter((p) => p.protocol === "mpp").map((p) => p.txHash)));

    await open(page, scenario.dashboardUrl, "ledger?status=rejected&agent=limited");
    await page.locator("[data-testid=ledger-row]").first().waitFor();
    expect(await page.locator("[data-testid=ledger-row]").count()).toBe(scenario.rejected.filter((r) => r.agentId === "limited").length);
    // Each refusal names the policy version it was decided under, as transactions.get does.
    const versions = await page
      .locator("[data-testid=ledger-row]")
      .evaluateAll((rows) => rows.map((r) => r.getAttribute("data-policy-version")));
    expect(
      versions.every((version) => version !== null && /^[1-9][0-9]*$/.test(version)),
      JSON.stringify(versions),
    ).toBe(true);
    await expect.poll(() => page.locator("[data-testid=ledger-row]").first().textContent()).toContain(`policy v${versions[0]}`);
    expect(await accessibilityViolations(page)).toEqual([]);
    await open(page, scenario.dashboardUrl, "ledger?size=25");
    await page.locator("[data-testid=ledger-row]").first().waitFor();
  });
});

describe("runs", () => {
  it("is reached from a payment in the ledger and draws the tree of depth 2 with each agent's cost and the total", async () => {
    await open(page, scenario.dashboardUrl, "ledger?agent=summarizer");
    const row = page.locator(`[data-testid=ledger-row][data-tx-hash="${scenario.run.summarizerPaymentTxHash}"]`);
    await row.getByRole("link", { name: /run/ }).click();
    await page.getByTestId("run-tree").waitFor();
    const runPayments = scenario.paid.filter(
      (p) =>
        p.txHash === scenario.run.rootTxHash ||
        p.parentTxHash === scenario.run.rootTxHash ||
        p.txHash === scenario.run.summarizerPaymentTxHash,
    );
    expect(runPayments).toHaveLength(4);
    const nodes = await page
      .locator("[data-testid=tree-node]")
      .evaluateAll((els) => els.map((el) => ({ hash: el.getAttribute("data-tx-hash"), depth: Number(el.getAttribute("data-depth")) })));
    expect(new Set(nodes.map((n) => n.hash))).toEqual(new Set(runPayments.map((p) => p.txHash)));
    expect(Math.max(...nodes.map((n) => n.depth))).toBe(2);
    expect(nodes.find((n) => n.depth === 0)!.hash).toBe(scenario.run.rootTxHash);
    // The summarizer's node is drawn inside the researcher's, inside the orchestrator's.
    const nested = page.locator(
      `[data-testid=run-tree] > li > ul > li > ul > li > [data-tx-hash="${scenario.run.summarizerPaymentTxHash}"]`,
    );
    expect(await nested.count()).toBe(1);
    expect(await page.locator('[aria-current="true"]').getAttribute("data-tx-hash")).toBe(scenario.run.summarizerPaymentTxHash);
    expect(await amountOf(page, "[data-testid=run-total]")).toBe(decimal(sum(runPayments)));
    expect(await page.getByTestId("run-count").textContent()).toBe("4");
    expect(await page.getByTestId("run-agents").textContent()).toBe("3");
    for (const agentId of ["orchestrator", "researcher", "summarizer"]) {
      expect(await amountOf(page, `[data-testid=run-by-agent] tr[data-agent=${agentId}]`)).toBe(
        decimal(sum(runPayments.filter((p) => p.agentId === agentId))),
      );
    }
    const budget = (agentId: string) =>
      page.locator(`[data-testid=run-budgets] tr[data-sub-agent=${agentId}] [data-amount]`).allTextContents();
    // researcher: budget 0.45, spent 0.10 + 0.20; summarizer: budget 0.15, spent 0.10.
    expect(await budget("researcher")).toEqual(["0.45", "0.30", "0.15"]);
    expect(await budget("summarizer")).toEqual(["0.15", "0.10", "0.05"]);
    expect(await accessibilityViolations(page)).toEqual([]);
  });

  it("lists runs with their cost, payments and agents, and the runs one agent started, each opening its run", async () => {
    await open(page, scenario.dashboardUrl, "runs");
    await page.getByTestId("runs-table").waitFor();
    const roots = await page
      .getByTestId("runs-table")
      .getByRole("link")
      .evaluateAll((as) => as.map((a) => a.getAttribute("href")));
    expect(roots.filter((link) => link?.startsWith("/dashboard/runs/"))).toEqual([`/dashboard/runs/${scenario.run.rootTxHash}`]);
    const tree = (
      await scenario.graphql(`{ paymentTree(rootTxHash: "${scenario.run.rootTxHash}") { totals { amount transactionCount agentCount } } }`)
    ).paymentTree as { totals: { amount: string; transactionCount: number; agentCount: number } };
    const row = page.locator(`[data-testid=run-row][data-root="${scenario.run.rootTxHash}"]`);
    expect(await amountOf(page, `[data-testid=run-row][data-root="${scenario.run.rootTxHash}"] [data-testid=run-cost]`)).toBe(
      tree.totals.amount,
    );
    const cells = await row.locator("td").allTextContents();
    expect(cells).toContain(String(tree.totals.transactionCount));
    expect(cells).toContain(String(tree.totals.agentCount));
    await open(page, scenario.dashboardUrl, "runs?agent=summarizer");
    await page.getByTestId("empty").waitFor();
    await open(page, scenario.dashboardUrl, "runs?agent=orchestrator&sort=cost");
    await page.getByTestId("runs-table").getByRole("link", { name: /…/ }).first().click();
    await page.getByTestId("run-tree").waitFor();
    expect(await page.locator('[aria-current="true"]').getAttribute("data-tx-hash")).toBe(scenario.run.rootTxHash);
  });
});

describe("agents", () => {
  it("lists the account's agents with the balances the API reads from the chain, and links one agent's views", async () => {
    await open(page, scenario.dashboardUrl, "agents");
    await page.getByTestId("agents-table").waitFor();
    const api = (await scenario.graphql("{ agents { agentId balance } }")).agents as { agentId: string; balance: string }[];
    expect(api.length).toBe(7);
    for (const agent of api) {
      expect(await amountOf(page, `[data-testid=agents-table] tr[data-agent="${agent.agentId}"]`)).toBe(agent.balance);
    }
    expect(await accessibilityViolations(page)).toEqual([]);
    await page.getByRole("link", { name: "limited", exact: true }).first().click();
    await page.getByTestId("agent-facts").waitFor();
    const links = await page
      .getByRole("navigation", { name: "Views of limited" })
      .getByRole("link")
      .evaluateAll((as) => as.map((a) => a.getAttribute("href")));
    expect(links).toEqual(
      ["live", "spend", "protocols", "policies", "ledger", "runs", "channels"].map((view) => `/dashboard/${view}?agent=limited`),
    );
  });
});

describe("isolation", () => {
  it("never shows another account's payments, agents or runs, even by URL", async () => {
    const loaded: [string, string][] = [
      ["live", "[data-testid=feed-row]"],
      ["ledger?size=200", "[data-testid=ledger-row]"],
      ["spend?window=24h", "[data-testid=spend-chart][data-chart-drawn]"],
      ["policies", "[data-testid=rejection-row]"],
      ["agents", "[data-testid=agents-table]"],
      ["runs", "[data-testid=runs-table]"],
    ];
    for (const [path, drawn] of loaded) {
      await open(page, scenario.dashboardUrl, path);
      await page.locator(drawn).first().waitFor();
      const html = await page.locator("main").innerHTML();
      expect(html, path).not.toContain("rival-bot");
      expect(html, path).not.toContain(scenario.rivalTxHash);
    }
    await open(page, scenario.dashboardUrl, `runs/${scenario.rivalTxHash}`);
    await expect(page.getByTestId("empty").textContent()).resolves.toContain("No payment of this account");
    await open(page, scenario.dashboardUrl, "agents/rival-bot");
    await page.getByRole("alert").waitFor();
    expect(await page.getByRole("alert").textContent()).toContain("no agent rival-bot");
  });

  it("shows the other account only its own data after signing in with its key in the same browser", async () => {
    const own = await launchBrowser();
    try {
      const fresh = await own.newPage();
      await signIn(fresh, scenario.dashboardUrl, scenario.buyerKey);
      await open(fresh, scenario.dashboardUrl, "ledger");
      await fresh.locator("[data-testid=ledger-row]").first().waitFor();
      await fresh.getByRole("button", { name: "Sign out" }).click();
      await signIn(fresh, scenario.dashboardUrl, scenario.rivalKey);
      await open(fresh, scenario.dashboardUrl, "ledger");
      await fresh.locator("[data-testid=ledger-row]").first().waitFor();
      const hashes = await fresh.locator("[data-testid=ledger-row]").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-tx-hash")));
      expect(hashes).toEqual([scenario.rivalTxHash]);
      await open(fresh, scenario.dashboardUrl, "agents");
      await fresh.getByTestId("agents-table").waitFor();
      expect(
        await fresh.locator("[data-testid=agents-table] tbody tr").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-agent"))),
      ).toEqual(["rival-bot"]);
    } finally {
      await own.close();
    }
  });
});

describe("the GraphQL fields the views read", () => {
  it("place each payment of the run in it, count children, and give the budgets of the run in one query", async () => {
    const runHashes = scenario.paid.filter((p) => p.txHash === scenario.run.rootTxHash || p.parentTxHash !== null).map((p) => p.txHash);
    const query = `query($h: String!) { transaction(txHash: $h) { runRootTxHash childCount } }`;
    for (const hash of runHashes) {
      expect((await scenario.graphql(query, { h: hash })).transaction.runRootTxHash).toBe(scenario.run.rootTxHash);
    }
    expect((await scenario.graphql(query, { h: scenario.run.rootTxHash })).transaction.childCount).toBe(2);
    const summary = scenario.paid.find((p) => p.agentId === "researcher" && p.amountUnits === 200_000n)!;
    expect((await scenario.graphql(query, { h: summary.txHash })).transaction.childCount).toBe(1);
    const loose = scenario.paid.find((p) => p.agentId === "shopper")!;
    expect((await scenario.graphql(query, { h: loose.txHash })).transaction).toEqual({ runRootTxHash: loose.txHash, childCount: 0 });
    // In a list, every row's run is found in one batched walk.
    const listed = (await scenario.graphql("{ transactions(limit: 200, status: finalized) { nodes { txHash runRootTxHash } } }"))
      .transactions.nodes;
    for (const row of listed as { txHash: string; runRootTxHash: string }[]) {
      expect(row.runRootTxHash).toBe(runHashes.includes(row.txHash) ? scenario.run.rootTxHash : row.txHash);
    }
    const budgets = (
      await scenario.graphql("query($h: [String!]!) { invocations(txHashes: $h) { parentTxHash spent } }", {
        h: [summary.txHash, scenario.run.rootTxHash, loose.txHash],
      })
    ).invocations;
    expect(budgets).toEqual([
      { parentTxHash: summary.txHash, spent: "0.100000" },
      { parentTxHash: scenario.run.rootTxHash, spent: "0.300000" },
    ]);
  });

  it("give a rejection's requested amount and limit as fields, and the account's metrics without an agent", async () => {
    const rows = (
      await scenario.graphql(
        "{ transactions(status: rejected) { nodes { agentId rejectionCode rejectionRequested rejectionLimit rejectionUnit } } }",
      )
    ).transactions.nodes;
    expect(rows).toHaveLength(scenario.rejected.length);
    for (const rejection of scenario.rejected) {
      expect(rows).toContainEqual({
        agentId: rejection.agentId,
        rejectionCode: rejection.reasonCode,
        rejectionRequested: rejection.requested,
        rejectionLimit: rejection.limit,
        rejectionUnit: rejection.unit,
      });
    }
    const metrics = (
      await scenario.graphql(
        '{ metrics(window: "24h", metrics: ["protocol_split"]) { agentId metrics { protocol_split { x402Units mppUnits } } } }',
      )
    ).metrics;
    expect(metrics.agentId).toBeNull();
    const units = (protocol: string) =>
      scenario.paid
        .filter((p) => p.protocol === protocol)
        .reduce((t, p) => t + p.amountUnits, 0n)
        .toString();
    expect(metrics.metrics.protocol_split).toEqual({ x402Units: units("x402"), mppUnits: units("mpp") });
    const policies = (await scenario.graphql("{ policies { agentId budgetState } }")).policies;
    expect(policies.map((p: { agentId: string }) => p.agentId)).toEqual([
      "careful",
      "chatty",
      "limited",
      "orchestrator",
      "researcher",
      "shopper",
      "summarizer",
    ]);
    expect(policies.find((p: { agentId: string }) => p.agentId === "careful").budgetState).toBe("warning");
  });
});

describe("errors and keyboard", () => {
  it("says plainly when the API cannot be reached", async () => {
    const own = await launchBrowser();
    try {
      const fresh = await own.newPage();
      await signIn(fresh, scenario.dashboardUrl, scenario.buyerKey);
      await fresh.route("**/graphql", (route) => route.abort("connectionrefused"));
      await open(fresh, scenario.dashboardUrl, "ledger");
      await fresh.getByRole("alert").filter({ hasText: "cannot be reached" }).first().waitFor({ timeout: UI_DEADLINE_MS });
    } finally {
      await own.close();
    }
  });

  it("is reachable from the keyboard: skip link, then every view in the navigation", async () => {
    await open(page, scenario.dashboardUrl, "live");
    await page.getByRole("navigation", { name: "Views" }).waitFor();
    await page.keyboard.press("Tab");
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe("Skip to content");
    const reached: string[] = [];
    for (let i = 0; i < 10; i += 1) {
      await page.keyboard.press("Tab");
      reached.push((await page.evaluate(() => document.activeElement?.textContent)) ?? "");
    }
    expect(reached).toEqual([
      "Overview",
      "Live feed",
      "Spend",
      "Protocols",
      "Policies",
      "Approvals",
      "Ledger",
      "Runs",
      "Channels",
      "Agents",
    ]);
    await page.keyboard.press("Enter");
    await page.waitForURL(/\/dashboard\/agents$/);
    await page.getByTestId("agents-table").waitFor();
    expect(pageFaults()).toEqual([]);
  });
});

/** The dashboard's display of an exact decimal ("0.6" → "0.60", "0.15" → "0.15", "0" → "0.00"). */
function formatShort(value: string): string {
  const [whole, fraction = ""] = value.split(".");
  const digits = fraction.replace(/0+$/, "").padEnd(2, "0");
  return `${whole}.${digits}`;
}
