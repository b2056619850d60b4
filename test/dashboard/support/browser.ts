/**
 * A real Chromium for the dashboard's tests and bench: Debian's `chromium` package
 * (/usr/bin/chromium, installed by .ci/run with apt; CHROMIUM_PATH overrides), driven by
 * playwright-core (which downloads no browser). Headless, as root (no sandbox), with a fresh
 * profile directory per launch and the browser's own network chatter turned off.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BrowserContext, chromium, type Page } from "playwright-core";

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

const FLAGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

export interface TestBrowser {
  readonly context: BrowserContext;
  newPage(): Promise<Page>;
  close(): Promise<void>;
}

/** A browser with a fresh profile (its own cookie jar); `timezone` pins the viewer's zone. */
export async function launchBrowser(options: { timezone?: string; width?: number; height?: number } = {}): Promise<TestBrowser> {
  const profile = await mkdtemp(join(tmpdir(), "apg-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: FLAGS,
    viewport: { width: options.width ?? 1360, height: options.height ?? 900 },
    timezoneId: options.timezone ?? "Europe/Paris",
    locale: "en-GB",
  });
  return {
    context,
    newPage: () => context.newPage(),
    async close() {
      await context.close();
      await rm(profile, { recursive: true, force: true });
    },
  };
}
