/**
 * The backtest panel of the Policies view in a real Chromium: the API serving the built dashboard
 * and GraphQL over a fresh database holding an agent's payments as the gateway recorded them (two
 * reserved through the policy's own reservation path, one refusal). A candidate policy typed into
 * the panel is replayed over them: totals, refusals by rule, each payment's outcome; axe's WCAG
 * 2.1 A/AA rules hold.
 */
import type { Page } from "playwright-core";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useDashboard } from "../../api/gateway/dashboard/index.js";
import { recordRejection } from "../../api/gateway/payments/rejections.js";
import { reserveWithinPolicy } from "../../api/gateway/reservations/store.js";
import { type ApiServer, createApiServer } from "../../api/query/server.js";
import { createAccount, issueApiKey, registerAgent } from "../../api/shared/keys.js";
import { ensureDashboardBuilt } from "../../scripts/dashboard-build.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { launchBrowser, type TestBrowser } from "./support/browser.js";
import { accessibilityViolations, amountOf, consoleErrors, open, screenshot, signIn } from "./support/page.js";

const UI_DEADLINE_MS = 15_000;

let db: FreshDatabase;
let server: ApiServer;
let browser: TestBrowser;
let page: Page;
let errors: string[];
let dashboardUrl = "";

beforeAll(async () => {
  await ensureDashboardBuilt();
  db = await createFreshDatabase();
  const account = await createAccount(db.pool, "buyer");
  const key = (await issueApiKey(db.pool, account)).apiKey;
  await registerAgent(db.pool, account, { agentId: "shopper", walletAddress: "WalletShopper1111111111111111111111111111111" });
  const hourAgo = Date.now() - 3_600_000;
  const at = (minutes: number) => new Date(hourAgo + minutes * 60_000);
  const pay = (endpoint: string, amountUnits: bigint) => ({
    endpoint,
    amountUnits,
    protocol: "x402" as const,
    offeredProtocols: ["x402" as const],
  });
  expect(
    (await reserveWithinPolicy(db.pool, "shopper", pay("https://api.example.com/v1/search", 250_000n), at(0))).reservationId,
  ).not.toBeNull();
  expect(
    (await reserveWithinPolicy(db.pool, "shopper", pay("https://other.example.org/v1/data", 500_000n), at(5))).reservationId,
  ).not.toBeNull();
  await recordRejection(db.pool, {
    agentId: "shopper",
    amountUnits: 2_000_000n,
    endpoint: "api.example.com/v1/search",
    domain: "api.example.com",
    protocol: "x402",
    reasonCode: "per_call_limit_exceeded",
    reason: "per_call_limit_exceeded: requested 2 usdc, limit is 1 usdc",
    at: at(10),
  });

  server = createApiServer({
    pool: db.pool,
    databaseUrl: db.url,
    logger: pino({ level: "error" }),
    plugins: [useDashboard({ pool: db.pool })],
  });
  dashboardUrl = `http://127.0.0.1:${await server.listen(0)}/dashboard/`;
  browser = await launchBrowser();
  page = await browser.newPage();
  errors = consoleErrors(page);
  await signIn(page, dashboardUrl, key);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
  await db?.drop();
});

describe("Policies view: backtest panel", () => {
  it("replays the agent's recorded payments under the candidate typed in, with totals, refusals by rule and each outcome", async () => {
    await open(page, dashboardUrl, "policies?agent=shopper");
    await page.getByTestId("backtest").waitFor({ timeout: UI_DEADLINE_MS });
    await page.getByTestId("backtest-policy").fill('{ "perCallLimit": { "usdc": 0.3 }, "blockedDomains": ["other.example.org"] }');
    await page.getByTestId("backtest-window").selectOption("24h");
    await page.getByTestId("backtest-run").click();
    await page.getByTestId("backtest-result").waitFor({ timeout: UI_DEADLINE_MS });

    expect(await page.getByTestId("backtest-attempts").textContent()).toMatch(/^3 /);
    expect(await amountOf(page, "[data-testid=backtest-refused]")).toBe("2.500000");
    const outcomes = await page
      .getByTestId("backtest-row")
      .evaluateAll((rows) => rows.map((row) => `${row.dataset.outcome}:${row.dataset.rule}`));
    expect(outcomes).toEqual(["pass:", "refuse:domain_blocked", "refuse:per_call_limit_exceeded"]);
    expect(await page.locator("[data-testid=backtest-by-rule] tr[data-rule]").count()).toBe(2);
    expect(await accessibilityViolations(page)).toEqual([]);
    await screenshot(page, "policy-backtest");

    // Not JSON: said at once, nothing asked of the API.
    await page.getByTestId("backtest-policy").fill("{ nope");
    await page.getByTestId("backtest-run").click();
    await page.getByRole("alert").waitFor({ timeout: UI_DEADLINE_MS });
    expect(await page.getByRole("alert").textContent()).toContain("not JSON");
    // The 401 of the session check before signing in is the browser's log, not the page's error.
    expect(errors.filter((text) => /Content Security Policy|Refused to|Uncaught|TypeError|ReferenceError/.test(text))).toEqual([]);
  });
});
