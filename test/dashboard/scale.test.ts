/**
 * The dashboard of an account at scale, in a real Chromium against the whole system
 * (`startSystem`): 1,000 agents (twenty with 128-character ids), 100,000 payments with runs,
 * 2,000 rejections (some on a 2,048-character endpoint of a 253-character domain), daily budgets
 * in every state and failing webhook deliveries, seeded by bench/dashboard/seed.ts through the
 * indexer's own decode and ingest, the gateway's rejection writer and the policy store (seconds,
 * where recording them on the local ledger would take half an hour).
 *
 * Checks, on layout boxes: no view overflows horizontally at 1280 px or at 390 px (the document
 * and every table's container), long values are cut inside their cells with the whole value in
 * the element; the overview's figures are GraphQL's; the agent filter is a keyboard combobox;
 * runs sort by cost; axe's WCAG 2.1 A/AA rules on every view. Takes the docs' screenshots.
 */
import type { Page } from "playwright-core";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAccount, issueApiKey } from "../../api/shared/keys.js";
import { LONG_ENDPOINT, type Seeded, seedScale } from "../../bench/dashboard/seed.js";
import { ensureDashboardBuilt } from "../../scripts/dashboard-build.js";
import { type System, startSystem } from "../../scripts/system.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { launchBrowser, type TestBrowser } from "./support/browser.js";
import { accessibilityViolations, amountOf, consoleErrors, open, screenshot, signIn } from "./support/page.js";

const UI_DEADLINE_MS = 20_000;

let db: FreshDatabase;
let system: System;
let browser: TestBrowser;
let page: Page;
let errors: string[];
let key = "";
let dashboardUrl = "";
let seeded: Seeded;
let runRoot = "";

async function graphql(query: string, variables: Record<string, unknown> = {}): Promise<any> {
  const answer = await fetch(`${system.apiUrl}/graphql`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await answer.json()) as { data?: unknown; errors?: unknown };
  if (body.errors !== undefined) throw new Error(JSON.stringify(body.errors));
  return body.data;
}

beforeAll(async () => {
  await ensureDashboardBuilt();
  db = await createFreshDatabase();
  const account = await createAccount(db.pool, "at-scale");
  key = (await issueApiKey(db.pool, account)).apiKey;
  seeded = await seedScale(db.pool, account, { payments: 100_000, agents: 1_000, longIds: 20, rejections: 2_000, budgets: 60 });
  system = await startSystem({ databaseUrl: db.url, logger: pino({ level: "warn" }) });
  dashboardUrl = `${system.apiUrl}/dashboard/`;
  runRoot = (await graphql("{ runs(order: cost, first: 1) { nodes { rootTxHash } } }")).runs.nodes[0].rootTxHash;
  browser = await launchBrowser({ width: 1280, height: 900 });
  page = await browser.newPage();
  errors = consoleErrors(page);
  await signIn(page, dashboardUrl, key);
}, 240_000);

afterAll(async () => {
  await browser?.close();
  await system?.stop();
  await db?.drop();
});

/** Every view, with what shows it has drawn its content. */
function views(): [name: string, path: string, drawn: string][] {
  const longId = encodeURIComponent(seeded.longAgentIds[1]!);
  return [
    ["overview", "overview", "[data-testid=overview]"],
    ["live-feed", "live", "[data-testid=feed-row]"],
    ["spend", "spend", "[data-testid=spend-chart][data-chart-drawn]"],
    ["protocols", "protocols", "[data-testid=protocols-chart][data-chart-drawn]"],
    ["policies", "policies", "[data-testid=policy-table] tbody tr"],
    ["policies-agent", `policies?agent=${longId}`, "[data-testid=agent-policy]"],
    ["ledger", `ledger?agent=${longId}`, "[data-testid=ledger-row]"],
    ["runs", "runs?sort=cost", "[data-testid=run-row]"],
    ["run", `runs/${runRoot}`, "[data-testid=run-tree]"],
    ["channels", "channels", "[data-testid=empty]"],
    ["agents", "agents?q=orchestrator", "[data-testid=agents-table] tbody tr"],
    ["agent", `agents/${longId}`, "[data-testid=agent-facts]"],
  ];
}

/** Horizontal overflow of the document and of each table's container, from layout boxes. */
async function overflow(target: Page): Promise<string[]> {
  return target.evaluate(() => {
    const found: string[] = [];
    const root = document.documentElement;
    if (root.scrollWidth > root.clientWidth) found.push(`document ${root.scrollWidth} > ${root.clientWidth}`);
    for (const table of document.querySelectorAll("table")) {
      const box = table.parentElement!;
      if (box.scrollWidth > box.clientWidth + 1) found.push(`${table.dataset.testid ?? "table"}: ${box.scrollWidth} > ${box.clientWidth}`);
      if (table.getBoundingClientRect().right > root.clientWidth + 1)
        found.push(`${table.dataset.testid ?? "table"} ends past the viewport`);
    }
    return found;
  });
}

describe("at 1,000 agents and 100,000 payments", () => {
  it("at 1280 px: overflows no view horizontally, passes axe's WCAG 2.1 A/AA rules on each, and photographs them", async () => {
    for (const [name, path, drawn] of views()) {
      await open(page, dashboardUrl, path);
      await page.locator(drawn).first().waitFor({ timeout: UI_DEADLINE_MS });
      expect(await overflow(page), `${name} at 1280 px`).toEqual([]);
      expect(await accessibilityViolations(page), name).toEqual([]);
      // Long lists (200 feed rows, 50 ledger rows) are shown by their first screen.
      if (["live-feed", "ledger"].includes(name)) await screenshot(page, name, { fullPage: false });
      else if (["spend", "protocols", "policies", "runs", "run", "agents"].includes(name)) await screenshot(page, name);
    }
    expect(errors.filter((text) => /Content Security Policy|Uncaught|TypeError|ReferenceError/.test(text))).toEqual([]);
  });

  it("at 390 px: overflows no view horizontally, cutting long ids and endpoints inside their cells", async () => {
    await page.setViewportSize({ width: 390, height: 900 });
    for (const [name, path, drawn] of views()) {
      await open(page, dashboardUrl, path);
      await page.locator(drawn).first().waitFor({ timeout: UI_DEADLINE_MS });
      expect(await overflow(page), `${name} at 390 px`).toEqual([]);
    }
    await page.setViewportSize({ width: 1280, height: 900 });
    // A 2,048-character endpoint in the rejections: cut (its box narrower than its text), whole in the element and its title.
    await open(page, dashboardUrl, "policies");
    const endpoint = page.locator(`[data-testid=rejections-table] .trunc[title="${LONG_ENDPOINT}"]`).first();
    await endpoint.waitFor({ timeout: UI_DEADLINE_MS });
    expect(await endpoint.textContent()).toBe(LONG_ENDPOINT);
    const cut = await endpoint.evaluate((e) => ({ scroll: e.scrollWidth, client: e.clientWidth }));
    expect(cut.scroll).toBeGreaterThan(cut.client);
    // A 128-character id in the budget table keeps the other columns on screen.
    const longRow = page.locator(`[data-testid=policy-table] tr[data-agent="${seeded.longAgentIds[1]}"]`);
    await longRow.waitFor();
    const id = longRow.locator("a.trunc");
    expect(await id.getAttribute("title")).toBe(seeded.longAgentIds[1]);
    const cells = await longRow.locator("th, td").evaluateAll((es) => es.map((e) => e.getBoundingClientRect().right));
    expect(Math.max(...cells)).toBeLessThanOrEqual(1280);
  });

  it("shows on the overview the figures GraphQL gives, each card linking to its view", async () => {
    await open(page, dashboardUrl, "");
    const overview = page.getByTestId("overview");
    await overview.waitFor({ timeout: UI_DEADLINE_MS });
    const today = JSON.parse((await overview.getAttribute("data-today"))!);
    const yesterday = JSON.parse((await overview.getAttribute("data-yesterday"))!);
    const api = await graphql(
      `query($t: TimeRangeInput!, $y: TimeRangeInput!) {
        today: spendSummary(range: $t) { total txCount }
        yesterday: spendSummary(range: $y) { total txCount }
        budgetUse { warningCount exhaustedCount }
        rejectionCounts(since: "1h") { reasonCode count }
        webhookHealth(since: "24h") { failed retrying }
      }`,
      { t: today, y: yesterday },
    );
    expect(api.today.txCount).toBeGreaterThan(0);
    expect(await amountOf(page, "[data-testid=today-spend]")).toBe(api.today.total);
    expect(await page.getByTestId("today-count").textContent()).toBe(api.today.txCount.toLocaleString("en-GB"));
    expect(await page.getByTestId("yesterday-count").getAttribute("data-count")).toBe(String(api.yesterday.txCount));
    expect(await page.getByTestId("budget-exhausted-count").textContent()).toBe(String(api.budgetUse.exhaustedCount));
    expect(await page.getByTestId("budget-warning-count").textContent()).toBe(String(api.budgetUse.warningCount));
    expect(api.budgetUse.exhaustedCount).toBe(20);
    const shown = await page
      .locator("[data-testid=rejections-by-reason] li")
      .evaluateAll((lis) => lis.map((li) => [li.getAttribute("data-reason"), Number(li.getAttribute("data-count"))]));
    expect(shown).toEqual(api.rejectionCounts.map((r: { reasonCode: string; count: number }) => [r.reasonCode, r.count]));
    expect(await page.getByTestId("rejections-hour").textContent()).toBe(
      String(api.rejectionCounts.reduce((sum: number, r: { count: number }) => sum + r.count, 0)),
    );
    expect(await page.getByTestId("webhooks-failed").textContent()).toBe(String(api.webhookHealth.failed));
    expect(await page.getByTestId("webhooks-retrying").textContent()).toBe(String(api.webhookHealth.retrying));
    expect(await page.getByTestId("card-budgets").getAttribute("data-tone")).toBe("attention");
    const links = await page.locator(".card-link a").evaluateAll((as) => as.map((a) => a.getAttribute("href")));
    expect(links).toEqual([
      "/dashboard/spend?window=24h",
      "/dashboard/ledger",
      "/dashboard/policies?state=exhausted",
      "/dashboard/policies",
      "/dashboard/live",
      "/dashboard/live",
    ]);
    await screenshot(page, "overview");
  });

  it("finds an agent among a thousand with the keyboard in the agent combobox", async () => {
    await open(page, dashboardUrl, "ledger");
    const input = page.getByRole("combobox", { name: "Agent" });
    await input.focus();
    await page.keyboard.type("-0003");
    const option = page.getByRole("option", { name: seeded.longAgentIds[3]! });
    await option.waitFor({ timeout: UI_DEADLINE_MS });
    expect(await input.getAttribute("aria-expanded")).toBe("true");
    await page.keyboard.press("ArrowDown");
    expect(await input.getAttribute("aria-activedescendant")).toBe(await option.getAttribute("id"));
    await page.keyboard.press("Enter");
    await page.waitForURL((url) => url.searchParams.get("agent") === seeded.longAgentIds[3]);
    await page.locator("[data-testid=ledger-row]").first().waitFor({ timeout: UI_DEADLINE_MS });
    const agents = await page.locator("[data-testid=ledger-row] a.trunc").evaluateAll((as) => [...new Set(as.map((a) => a.textContent))]);
    expect(agents).toEqual([seeded.longAgentIds[3]]);
    // With nothing typed the list offers "All agents" and the first twenty, and says how many more there are.
    await input.focus();
    await page.keyboard.press("ArrowDown");
    await page.locator(".combobox-more").filter({ hasText: "980 more" }).waitFor({ timeout: UI_DEADLINE_MS });
    expect(await page.getByRole("listbox", { name: "Agents" }).getByRole("option").count()).toBe(21);
    await page.keyboard.press("Escape");
    expect(await input.getAttribute("aria-expanded")).toBe("false");
  });

  it("lists runs with cost, payments, agents and budget use, sorted by cost on request", async () => {
    await open(page, dashboardUrl, "runs");
    await page.locator("[data-testid=run-row]").first().waitFor({ timeout: UI_DEADLINE_MS });
    await page.getByTestId("sort-by-cost").click();
    await page.waitForURL(/sort=cost/);
    await page.locator(`[data-testid=run-row][data-root="${runRoot}"]`).first().waitFor({ timeout: UI_DEADLINE_MS });
    const totals = await page.locator("[data-testid=run-row]").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-total")!));
    const units = totals.map((t) => BigInt(t.replace(".", "")));
    expect(units).toEqual([...units].sort((a, b) => (a === b ? 0 : a > b ? -1 : 1)));
    const api = await graphql("{ runs(order: cost, first: 25) { nodes { total } totalCount } }");
    expect(totals).toEqual(api.runs.nodes.map((n: { total: string }) => n.total));
    expect(await page.getByTestId("pager-range").textContent()).toBe(`1–25 of ${api.runs.totalCount.toLocaleString("en-GB")}`);
    expect(api.runs.totalCount).toBe(seeded.runRoots);
    expect(await page.locator("[data-testid=run-row]").first().textContent()).toContain("% of");
  });
});
