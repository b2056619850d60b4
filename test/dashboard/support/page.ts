/**
 * What the dashboard tests do in a page: sign in as a person would (the form), wait for views,
 * read the exact amounts the page shows, take the screenshots the docs show, and run the
 * automated accessibility check (axe-core, WCAG 2.1 A/AA rules) on what is on screen.
 */
import { readFileSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Page } from "playwright-core";

/**
 * Where screenshots go: docs/dashboard/ when DASHBOARD_SCREENSHOTS=docs (`npm run
 * screenshots:dashboard`, then commit them), else a temporary folder, so an ordinary test run
 * leaves the committed pictures alone.
 */
export const SCREENSHOT_DIR =
  process.env.DASHBOARD_SCREENSHOTS === "docs"
    ? join(import.meta.dirname, "..", "..", "..", "docs", "dashboard")
    : join(tmpdir(), "apg-dashboard-screenshots");

export async function signIn(page: Page, dashboardUrl: string, apiKey: string): Promise<void> {
  await page.goto(dashboardUrl);
  await page.getByLabel("API key").fill(apiKey);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("navigation", { name: "Views" }).waitFor();
}

/** Goes to a dashboard path (`ledger?agent=x`) with a full page load. */
export async function open(page: Page, dashboardUrl: string, path: string): Promise<void> {
  await page.goto(new URL(path, dashboardUrl).toString());
}

/** The whole page, or (`fullPage: false`) the first screen of a long list. */
export async function screenshot(page: Page, name: string, options: { fullPage?: boolean } = {}): Promise<string> {
  await mkdir(SCREENSHOT_DIR, { recursive: true });
  const path = join(SCREENSHOT_DIR, `${name}.png`);
  // The pointer away from the charts, so no hover legend is captured.
  await page.mouse.move(0, 0);
  await page.screenshot({ path, fullPage: options.fullPage ?? true, animations: "disabled" });
  return path;
}

/** The `data-amount` (exact decimal string) of the element matched. */
export async function amountOf(page: Page, selector: string): Promise<string> {
  const value = await page.locator(selector).locator("[data-amount]").first().getAttribute("data-amount");
  if (value === null) throw new Error(`no amount in ${selector}`);
  return value;
}

export interface AxeViolation {
  readonly id: string;
  readonly impact: string | null;
  readonly help: string;
  readonly nodes: { target: string[] }[];
}

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

/**
 * axe-core's WCAG 2.1 A/AA violations on the page as it is now. axe is evaluated through the
 * DevTools protocol, which the page's Content-Security-Policy does not apply to (a script tag
 * would be refused, as it should be).
 */
export async function accessibilityViolations(page: Page): Promise<AxeViolation[]> {
  await page.evaluate(AXE_SOURCE);
  return page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run: (context: unknown, options: unknown) => Promise<{ violations: AxeViolation[] }> } })
      .axe;
    const result = await axe.run(document, { runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"] } });
    return result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => ({ target: n.target })) }));
  });
}

/** Console errors of a page (a CSP refusal, an uncaught error), collected from now on. */
export function consoleErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on("console", (message) => {
    if (message.type() === "error") errors.push(message.text());
  });
  page.on("pageerror", (error) => errors.push(String(error)));
  return errors;
}
