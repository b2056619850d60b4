/**
 * The dashboard's Channels view in a real Chromium: the API serving the built dashboard and
 * GraphQL over a fresh database holding a channel as the chain recorded it (channel events through
 * the real decoder, ingest and projection) and as the gateway knows it (its session and charge
 * rows). Checks the list, the detail (a charge accepted but not settled is never shown as
 * confirmed), the live refresh when a settlement is indexed, and axe's WCAG 2.1 A/AA rules.
 */
import { Keypair } from "@solana/web3.js";
import type { Page } from "playwright-core";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useDashboard } from "../../api/gateway/dashboard/index.js";
import { type ApiServer, createApiServer } from "../../api/query/server.js";
import { createAccount, issueApiKey, registerAgent } from "../../api/shared/keys.js";
import { endpointHash } from "../../programs/payment_ledger/ts/index.js";
import { ensureDashboardBuilt } from "../../scripts/dashboard-build.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import {
  type ChannelFacts,
  channelEvents as ev,
  ingestTransactions,
  insertGatewaySession,
  ledgerTransaction,
  newChannel,
} from "../support/channel-events.js";
import { launchBrowser, type TestBrowser } from "./support/browser.js";
import { accessibilityViolations, amountOf, consoleErrors, screenshot, signIn } from "./support/page.js";

const UI_DEADLINE_MS = 15_000;
const T0 = Math.floor(Date.now() / 1000) - 600;
const QUOTE = "127.0.0.1/llm/complete";

let db: FreshDatabase;
let server: ApiServer;
let browser: TestBrowser;
let page: Page;
let errors: string[];
let dashboardUrl = "";
let channel: ChannelFacts;
let settleTx = "";

beforeAll(async () => {
  await ensureDashboardBuilt();
  db = await createFreshDatabase();
  const account = await createAccount(db.pool, "buyer");
  const key = (await issueApiKey(db.pool, account)).apiKey;
  const wallet = Keypair.generate().publicKey;
  await registerAgent(db.pool, account, { agentId: "shopper", walletAddress: wallet.toBase58() });
  await db.pool.query("INSERT INTO endpoints (endpoint_hash, endpoint, domain) VALUES ($1, $2, '127.0.0.1')", [
    Buffer.from(endpointHash(QUOTE)).toString("hex"),
    QUOTE,
  ]);

  // A 2.00 deposit; charges 1 and 2 (0.01 + 0.02) settled on chain, 3 (0.04) accepted, 4 (0.08) signed.
  channel = newChannel(wallet, Keypair.generate().publicKey);
  const open = ledgerTransaction(10n, T0, [[ev.opened(channel, 2_000_000n, T0, T0 + 3_600, 10n)]]);
  const settle = ledgerTransaction(11n, T0 + 60, [
    [
      ev.settled(channel, { cumulative: 30_000n, delta: 30_000n, sequence: 2n, charges: 2 }, 11n),
      ev.charge(channel, 101n, 10_000n, QUOTE, T0 + 60, 11n),
      ev.charge(channel, 102n, 20_000n, QUOTE, T0 + 60, 11n),
    ],
  ]);
  await ingestTransactions(db.pool, [open, settle]);
  settleTx = settle.signature;
  await insertGatewaySession(db.pool, channel, "shopper", account, {
    status: "open",
    deposit: 2_000_000n,
    openTx: open.signature,
    accepted: 70_000n,
    acceptedSequence: 3,
    openedAt: new Date(T0 * 1000),
    expiresAt: new Date((T0 + 3_600) * 1000),
    endpoint: QUOTE,
    serviceOrigin: "http://127.0.0.1:4021",
    charges: [
      { sequence: 1, paymentId: 101, amount: 10_000n, status: "settled", settlementTx: settleTx },
      { sequence: 2, paymentId: 102, amount: 20_000n, status: "settled", settlementTx: settleTx },
      { sequence: 3, paymentId: 103, amount: 40_000n, status: "accepted" },
      { sequence: 4, paymentId: 104, amount: 80_000n, status: "signed" },
    ],
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

const row = (paymentId: number): string => `[data-testid=charge-row][data-payment-id="${paymentId}"]`;

describe("Channels view", () => {
  it("lists the agent's channel and shows accepted charges as not on chain, settled ones with their settlement", async () => {
    await page.getByRole("navigation", { name: "Views" }).getByRole("link", { name: "Channels" }).click();
    const listed = page.locator(`[data-testid=channel-row][data-channel="${channel.channel.toBase58()}"]`);
    await listed.waitFor({ timeout: UI_DEADLINE_MS });
    expect(await amountOf(page, "[data-testid=channel-row] [data-testid=channel-deposit]")).toBe("2.000000");
    expect(await amountOf(page, "[data-testid=channel-row] [data-testid=channel-accepted]")).toBe("0.070000");
    expect(await amountOf(page, "[data-testid=channel-row] [data-testid=channel-settled]")).toBe("0.030000");
    expect(await accessibilityViolations(page)).toEqual([]);
    await screenshot(page, "channels");

    await listed.getByRole("link").first().click();
    await page.getByTestId("charges-table").waitFor({ timeout: UI_DEADLINE_MS });
    expect(await amountOf(page, "[data-testid=channel-totals] [data-testid=channel-unsettled]")).toBe("0.040000");
    expect(await page.locator(row(103)).getAttribute("data-status")).toBe("accepted");
    expect(await page.locator(row(103)).getByTestId("charge-status").textContent()).toBe("accepted, not on chain");
    expect(await page.locator(row(103)).textContent()).not.toMatch(/confirmed|finalized/);
    expect(await page.locator(row(104)).getAttribute("data-status")).toBe("signed");
    expect(await page.locator(row(101)).getByTestId("charge-status").textContent()).toBe("settledconfirmed");
    expect(await page.locator(row(101)).locator(`[data-tx-hash="${settleTx}"]`).count()).toBe(1);
    expect(await page.getByTestId("settlement-row").count()).toBe(1);
    expect(await accessibilityViolations(page)).toEqual([]);
    await screenshot(page, "channel");
  });

  it("a settlement the indexer stores moves the accepted charge to settled on the open page", async () => {
    await page.locator("section[data-live=on]").waitFor({ timeout: UI_DEADLINE_MS });
    const settle = ledgerTransaction(12n, T0 + 120, [
      [
        ev.settled(channel, { cumulative: 70_000n, delta: 40_000n, sequence: 3n, charges: 1 }, 12n),
        ev.charge(channel, 103n, 40_000n, QUOTE, T0 + 120, 12n),
      ],
    ]);
    await ingestTransactions(db.pool, [settle]);
    await page.locator(`${row(103)}[data-status=settled]`).waitFor({ timeout: UI_DEADLINE_MS });
    expect(await page.locator(row(103)).locator(`[data-tx-hash="${settle.signature}"]`).count()).toBe(1);
    expect(await amountOf(page, "[data-testid=channel-totals] [data-testid=channel-settled]")).toBe("0.070000");
    expect(await amountOf(page, "[data-testid=channel-totals] [data-testid=channel-unsettled]")).toBe("0.000000");
    expect(errors.filter((text) => /Content Security Policy|Refused to|Uncaught|TypeError|ReferenceError/.test(text))).toEqual([]);
  });
});
