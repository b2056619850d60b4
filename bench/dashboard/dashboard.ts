/**
 * The dashboard's figures with an account at scale (bench/dashboard/seed.ts), in a real Chromium
 * against the whole system (`startSystem`):
 * - navigation → each view's first rows (or chart) drawn, a full page load each time;
 * - a payment recorded on the ledger → its row visible in the live feed (indexer, NOTIFY, SSE);
 * - the JavaScript shipped for the first load, gzip.
 * The page marks each moment itself (`performance.mark`, dashboard/src/perf.ts) once the view has
 * committed what it draws; the bench reads the marks. Goals: p95 < 1 s for the views, p99 < 1 s
 * for the feed, < 250 kB gzip of JavaScript.
 *
 *   npm run bench:dashboard [-- --payments 100000 --loads 20 --feed 100]
 *
 * Bounded: --loads page loads per view, --feed payments; stops by itself.
 */
import { get } from "node:http";
import { parseArgs } from "node:util";
import { pino } from "pino";
import { internalAgentId } from "../../api/shared/agent-ids.js";
import { createAccount, issueApiKey, registerAgent } from "../../api/shared/keys.js";
import { endpointHash } from "../../programs/payment_ledger/ts/index.js";
import { createAgentWallet, ledgerAccess, recordPayment } from "../../scripts/agent-wallets.js";
import { ensureDashboardBuilt } from "../../scripts/dashboard-build.js";
import { startSystem } from "../../scripts/system.js";
import { launchBrowser } from "../../test/dashboard/support/browser.js";
import { signIn } from "../../test/dashboard/support/page.js";
import { createFreshDatabase } from "../../test/indexer/fresh-database.js";
import { seedScale } from "./seed.js";

const { values: flags } = parseArgs({
  options: {
    payments: { type: "string", default: "100000" },
    agents: { type: "string", default: "1000" },
    loads: { type: "string", default: "20" },
    feed: { type: "string", default: "100" },
  },
});
const PAYMENTS = Number(flags.payments);
const AGENTS = Number(flags.agents);
const LOADS = Number(flags.loads);
const FEED = Number(flags.feed);
for (const [name, value] of Object.entries({ PAYMENTS, AGENTS, LOADS, FEED })) {
  if (!Number.isInteger(value) || value <= 0) throw new Error(`--${name.toLowerCase()} must be a positive integer`);
}
const MARK_TIMEOUT_MS = 10_000;

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;
}

function summary(label: string, values: number[], goal: string): Record<string, unknown> {
  const sorted = [...values].sort((a, b) => a - b);
  return {
    measure: label,
    n: sorted.length,
    ms_p50: Math.round(percentile(sorted, 50)),
    ms_p95: Math.round(percentile(sorted, 95)),
    ms_p99: Math.round(percentile(sorted, 99)),
    ms_max: Math.round(sorted.at(-1) ?? Number.NaN),
    goal,
  };
}

/** The bytes the server sends for `url` with this Accept-Encoding (no client-side decoding). */
function sentBytes(url: string, encoding: "gzip" | "identity"): Promise<number> {
  return new Promise((resolve, reject) => {
    get(url, { headers: { "accept-encoding": encoding } }, (response) => {
      let bytes = 0;
      response.on("data", (chunk: Buffer) => {
        bytes += chunk.length;
      });
      response.on("end", () => resolve(bytes));
      response.on("error", reject);
    }).on("error", reject);
  });
}

async function run(): Promise<void> {
  await ensureDashboardBuilt((line) => console.log(line));
  const db = await createFreshDatabase();
  const accountId = await createAccount(db.pool, "bench");
  const { apiKey } = await issueApiKey(db.pool, accountId);
  console.log(`seeding ${PAYMENTS.toLocaleString("en-US")} payments by ${AGENTS} agents through decode + ingestBatch…`);
  const seeded = await seedScale(db.pool, accountId, { payments: PAYMENTS, agents: AGENTS, longIds: 20, rejections: 2_000, budgets: 60 });
  console.log(`seeded in ${(seeded.ms / 1000).toFixed(1)} s`);

  // As npm start runs it (the indexer's default poll interval).
  const system = await startSystem({ databaseUrl: db.url, logger: pino({ level: "warn" }) });
  const browser = await launchBrowser();
  try {
    const page = await browser.newPage();
    const dashboard = `${system.apiUrl}/dashboard/`;
    await signIn(page, dashboard, apiKey);

    /** Loads `path` afresh and answers the time from navigation start to the page's mark `name`. */
    const timeTo = async (path: string, name: string): Promise<number> => {
      await page.goto(new URL(path, dashboard).toString());
      await page.waitForFunction((mark) => performance.getEntriesByName(mark).length > 0, name, { timeout: MARK_TIMEOUT_MS, polling: 10 });
      return page.evaluate((mark) => performance.getEntriesByName(mark)[0]!.startTime, name);
    };

    // First-load JavaScript: the page's module scripts as the server sends them (gzip).
    const scripts = await page.evaluate(() =>
      [...document.querySelectorAll("script[src], link[rel=modulepreload]")].map(
        (e) => (e as HTMLScriptElement).src || (e as HTMLLinkElement).href,
      ),
    );
    let jsGzipBytes = 0;
    let jsBytes = 0;
    for (const src of scripts) {
      jsGzipBytes += await sentBytes(src, "gzip");
      jsBytes += await sentBytes(src, "identity");
    }

    // Each view and the mark it sets when its first rows (or its chart) are drawn.
    const VIEWS: [label: string, path: string, mark: string][] = [
      ["overview", "overview", "apg:overview-cards"],
      ["live feed", "live", "apg:feed-rows"],
      ["spend (chart)", "spend", "apg:spend-chart"],
      ["protocols (chart)", "protocols", "apg:protocols-chart"],
      ["policies", "policies", "apg:loaded:rejected payments"],
      ["ledger", "ledger", "apg:ledger-rows"],
      ["runs", "runs", "apg:loaded:runs"],
      ["channels", "channels", "apg:loaded:channels"],
      ["agents", "agents", "apg:loaded:agents"],
    ];
    // Warm-up load of each view (the browser's cache of the built files is warm afterwards, as for a returning person).
    for (const [, path, mark] of VIEWS) await timeTo(path, mark);
    const times = new Map<string, number[]>(VIEWS.map(([label]) => [label, []]));
    for (let i = 0; i < LOADS; i += 1) {
      for (const [label, path, mark] of VIEWS) times.get(label)!.push(await timeTo(path, mark));
    }

    // The live feed: real payments recorded on the ledger by a registered agent's wallet.
    const ledgerAccessor = ledgerAccess(system.localnet);
    const payer = await createAgentWallet(ledgerAccessor, { usdcUnits: 1_000_000_000n });
    const payee = await createAgentWallet(ledgerAccessor);
    await registerAgent(system.pool, accountId, {
      agentId: internalAgentId(accountId, "live-payer"),
      walletAddress: payer.publicKey.toBase58(),
    });
    await page.goto(new URL("live", dashboard).toString());
    await page.waitForFunction(() => performance.getEntriesByName("apg:feed-live").length > 0, undefined, { timeout: MARK_TIMEOUT_MS });
    const feed: number[] = [];
    for (let i = 0; i < FEED; i += 1) {
      const signature = await recordPayment(ledgerAccessor, payer, payee, {
        paymentId: BigInt(10_000_000 + i),
        amountUnits: 10_000n + BigInt(i),
        protocol: i % 2 === 0 ? "x402" : "mpp",
        rail: "stablecoin",
        endpointHash: endpointHash("search.example.com/v1/query"),
      });
      const confirmedAt = Date.now();
      const mark = `apg:feed-row:${signature}`;
      await page.waitForFunction((name) => performance.getEntriesByName(name).length > 0, mark, { timeout: MARK_TIMEOUT_MS, polling: 5 });
      const shownAt = await page.evaluate((name) => performance.timeOrigin + performance.getEntriesByName(name)[0]!.startTime, mark);
      feed.push(shownAt - confirmedAt);
    }

    console.log(
      `\ndashboard with ${PAYMENTS.toLocaleString("en-US")} payments in the index (${AGENTS} agents), Chromium headless, this machine`,
    );
    console.table([
      ...VIEWS.map(([label]) => summary(`navigation → ${label} first rows drawn`, times.get(label)!, "p95 < 1000 ms")),
      summary("recorded on the ledger → row in the live feed", feed, "p99 < 1000 ms"),
    ]);
    console.log(
      `first-load JavaScript: ${(jsGzipBytes / 1000).toFixed(1)} kB gzip (${(jsBytes / 1000).toFixed(1)} kB raw, ${scripts.length} file${scripts.length === 1 ? "" : "s"}); goal < 250 kB gzip`,
    );
  } finally {
    await browser.close();
    await system.stop();
    await db.drop();
  }
}

run().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
