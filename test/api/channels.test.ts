/**
 * Channels in GraphQL and the live feed: the chain's view (channel events through the real decoder,
 * ingest and projection: test/support/channel-events.ts) joined with the gateway's rows
 * (`channel_sessions`, `channel_charges`, written here with SQL as the gateway writes them,
 * migrations/025_channel_sessions.sql).
 */
import { Keypair } from "@solana/web3.js";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServer, createApiServer } from "../../api/query/server.js";
import { createAccount, issueApiKey, registerAgent } from "../../api/shared/keys.js";
import { endpointHash } from "../../programs/payment_ledger/ts/index.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import {
  type ChannelFacts,
  channelEvents as ev,
  ingestTransactions,
  insertGatewaySession,
  ledgerTransaction,
  newChannel,
} from "../support/channel-events.js";
import { pollUntil } from "../support/poll.js";
import { createClient } from "./client.js";

const T0 = Math.floor(Date.now() / 1000) - 600;
const NOW = new Date((T0 + 600) * 1000);
const QUOTE = "api.example.com/v1/quote";
const SESSION_TIMES = {
  openedAt: new Date(T0 * 1000),
  expiresAt: new Date((T0 + 3_600) * 1000),
  endpoint: QUOTE,
  serviceOrigin: "https://api.example.com",
};

let db: FreshDatabase;
let server: ApiServer;
let client: ReturnType<typeof createClient>;
const keys = { A: "", B: "" };
const accounts = { A: "", B: "" };
const wallets = { a: Keypair.generate().publicKey, b: Keypair.generate().publicKey };
const payee = Keypair.generate().publicKey;
let x: ChannelFacts;
let y: ChannelFacts;
let settle1 = "";
let openX = "";

beforeAll(async () => {
  db = await createFreshDatabase();
  accounts.A = await createAccount(db.pool, "A");
  accounts.B = await createAccount(db.pool, "B");
  keys.A = (await issueApiKey(db.pool, accounts.A)).apiKey;
  keys.B = (await issueApiKey(db.pool, accounts.B)).apiKey;
  await registerAgent(db.pool, accounts.A, { agentId: "a-agent", walletAddress: wallets.a.toBase58() });
  await registerAgent(db.pool, accounts.B, { agentId: "b-agent", walletAddress: wallets.b.toBase58() });
  await db.pool.query("INSERT INTO endpoints (endpoint_hash, endpoint, domain) VALUES ($1, $2, 'api.example.com')", [
    Buffer.from(endpointHash(QUOTE)).toString("hex"),
    QUOTE,
  ]);

  // A's channel x: open 1.00, charges 11 and 12 settled on chain, 13 accepted, 14 signed.
  x = newChannel(wallets.a, payee);
  const open = ledgerTransaction(10n, T0, [[ev.opened(x, 1_000_000n, T0, T0 + 3_600, 10n)]]);
  const settle = ledgerTransaction(11n, T0 + 60, [
    [
      ev.settled(x, { cumulative: 30_000n, delta: 30_000n, sequence: 2n, charges: 2 }, 11n),
      ev.charge(x, 11n, 10_000n, QUOTE, T0 + 60, 11n),
      ev.charge(x, 12n, 20_000n, QUOTE, T0 + 60, 11n),
    ],
  ]);
  // B's channel y, open with nothing charged.
  y = newChannel(wallets.b, payee);
  const openY = ledgerTransaction(12n, T0 + 120, [[ev.opened(y, 500_000n, T0 + 120, T0 + 3_600, 12n)]]);
  await ingestTransactions(db.pool, [open, settle, openY]);
  [openX, settle1] = [open.signature, settle.signature];

  await insertGatewaySession(db.pool, x, "a-agent", accounts.A, {
    status: "open",
    deposit: 1_000_000n,
    openTx: openX,
    accepted: 70_000n,
    acceptedSequence: 3,
    ...SESSION_TIMES,
    charges: [
      { sequence: 1, paymentId: 11, amount: 10_000n, status: "settled", settlementTx: settle1 },
      { sequence: 2, paymentId: 12, amount: 20_000n, status: "settled", settlementTx: settle1 },
      { sequence: 3, paymentId: 13, amount: 40_000n, status: "accepted" },
      { sequence: 4, paymentId: 14, amount: 80_000n, status: "signed" },
    ],
  });

  server = createApiServer({ pool: db.pool, databaseUrl: db.url, now: () => NOW, logger: pino({ level: "error" }) });
  client = createClient(`http://127.0.0.1:${await server.listen(0)}`);
}, 60_000);

afterAll(async () => {
  await server?.close();
  await db?.drop();
});

const CHANNEL_FIELDS = `address agentId status onChain expired deposit depositUnits signedUnits acceptedUnits acceptedSequence
  settled settledUnits settledSequence acceptedUnsettledUnits refundedUnits openTx closeTx serviceOrigin protocol settlementCount`;

describe("channels in GraphQL", () => {
  it("an account lists its agents' channels with the chain's deposit and settled and the gateway's accepted", async () => {
    const data = await client.ok(keys.A, `{ channels { nodes { ${CHANNEL_FIELDS} } pageInfo { hasNextPage } } }`);
    expect(data.channels.nodes).toEqual([
      {
        address: x.channel.toBase58(),
        agentId: "a-agent",
        status: "open",
        onChain: true,
        expired: false,
        deposit: "1.000000",
        depositUnits: "1000000",
        signedUnits: "150000",
        acceptedUnits: "70000",
        acceptedSequence: "3",
        settled: "0.030000",
        settledUnits: "30000",
        settledSequence: "2",
        acceptedUnsettledUnits: "40000",
        refundedUnits: null,
        openTx: openX,
        closeTx: null,
        serviceOrigin: "https://api.example.com",
        protocol: "mpp",
        settlementCount: 1,
      },
    ]);
    expect(data.channels.pageInfo.hasNextPage).toBe(false);
  });

  it("an accepted charge shows as accepted with no chain status; a settled one with its settlement transaction", async () => {
    const data = await client.ok(
      keys.A,
      `query($a: String!) { channel(address: $a) {
         charges { nodes { paymentId sequence amountUnits cumulativeUnits endpoint status settlementTx chainStatus } }
         settlements { txHash cumulativeUnits deltaUnits sequence chargeCount status } } }`,
      { a: x.channel.toBase58() },
    );
    expect(data.channel.charges.nodes).toEqual([
      {
        paymentId: "14",
        sequence: "4",
        amountUnits: "80000",
        cumulativeUnits: "150000",
        endpoint: QUOTE,
        status: "signed",
        settlementTx: null,
        chainStatus: null,
      },
      {
        paymentId: "13",
        sequence: "3",
        amountUnits: "40000",
        cumulativeUnits: "70000",
        endpoint: QUOTE,
        status: "accepted",
        settlementTx: null,
        chainStatus: null,
      },
      {
        paymentId: "12",
        sequence: "2",
        amountUnits: "20000",
        cumulativeUnits: "30000",
        endpoint: QUOTE,
        status: "settled",
        settlementTx: settle1,
        chainStatus: "confirmed",
      },
      {
        paymentId: "11",
        sequence: "1",
        amountUnits: "10000",
        cumulativeUnits: "10000",
        endpoint: QUOTE,
        status: "settled",
        settlementTx: settle1,
        chainStatus: "confirmed",
      },
    ]);
    expect(data.channel.settlements).toEqual([
      { txHash: settle1, cumulativeUnits: "30000", deltaUnits: "30000", sequence: "2", chargeCount: 2, status: "confirmed" },
    ]);
  });

  it("charges page by payment id, newest first", async () => {
    const query = `query($a: String!, $after: String) { channel(address: $a) {
      charges(first: 3, after: $after) { nodes { paymentId } pageInfo { hasNextPage endCursor } } } }`;
    const first = await client.ok(keys.A, query, { a: x.channel.toBase58() });
    expect(first.channel.charges.nodes.map((n: { paymentId: string }) => n.paymentId)).toEqual(["14", "13", "12"]);
    expect(first.channel.charges.pageInfo.hasNextPage).toBe(true);
    const second = await client.ok(keys.A, query, { a: x.channel.toBase58(), after: first.channel.charges.pageInfo.endCursor });
    expect(second.channel.charges.nodes.map((n: { paymentId: string }) => n.paymentId)).toEqual(["11"]);
    expect(second.channel.charges.pageInfo.hasNextPage).toBe(false);
  });

  it("another account's channel is invisible: null by address, absent from the listing", async () => {
    const byAddress = await client.ok(keys.A, `query($a: String!) { channel(address: $a) { address } }`, { a: y.channel.toBase58() });
    expect(byAddress.channel).toBeNull();
    const list = await client.ok(keys.B, "{ channels { nodes { address agentId depositUnits acceptedUnits } } }");
    expect(list.channels.nodes).toEqual([
      { address: y.channel.toBase58(), agentId: "b-agent", depositUnits: "500000", acceptedUnits: "0" },
    ]);
    const theirs = await client.ok(keys.B, `query($a: String!) { channel(address: $a) { address } }`, { a: x.channel.toBase58() });
    expect(theirs.channel).toBeNull();
  });

  it("a settled charge's transaction names its channel, and the channel its paying agent", async () => {
    const data = await client.ok(
      keys.A,
      `query($t: String!) { transaction(txHash: $t) { amountPaidUnits channel { address settledUnits agent { agentId walletAddress } } } }`,
      { t: settle1 },
    );
    expect(data.transaction).toEqual({
      amountPaidUnits: "10000",
      channel: { address: x.channel.toBase58(), settledUnits: "30000", agent: { agentId: "a-agent", walletAddress: wallets.a.toBase58() } },
    });
    // A payment recorded on its own (not carried by a settlement) has none.
    const plain = ledgerTransaction(15n, T0 + 200, [[ev.charge(x, 999n, 1_000n, QUOTE, T0 + 200, 15n)]]);
    await ingestTransactions(db.pool, [plain]);
    const single = await client.ok(keys.A, `query($t: String!) { transaction(txHash: $t) { amountPaidUnits channel { address } } }`, {
      t: plain.signature,
    });
    expect(single.transaction).toEqual({ amountPaidUnits: "1000", channel: null });
  });

  it("a session the chain does not have yet shows as opening, off chain, with the gateway's deposit", async () => {
    const pending = newChannel(wallets.a, payee);
    await insertGatewaySession(db.pool, pending, "a-agent", accounts.A, {
      status: "opening",
      deposit: 250_000n,
      openTx: null,
      accepted: 0n,
      acceptedSequence: 0,
      ...SESSION_TIMES,
      // Opened after x: the newest channel of the account.
      openedAt: new Date((T0 + 200) * 1000),
      charges: [],
    });
    const data = await client.ok(keys.A, `{ channels(status: opening) { nodes { address status onChain depositUnits settledUnits } } }`);
    expect(data.channels.nodes).toEqual([
      { address: pending.channel.toBase58(), status: "opening", onChain: false, depositUnits: "250000", settledUnits: "0" },
    ]);
  });

  it("channels page newest first, and a bad address, cursor or page size is refused", async () => {
    const first = await client.ok(keys.A, "{ channels(first: 1) { nodes { status } pageInfo { hasNextPage endCursor } } }");
    expect(first.channels.nodes).toEqual([{ status: "opening" }]);
    expect(first.channels.pageInfo.hasNextPage).toBe(true);
    const second = await client.ok(
      keys.A,
      `query($c: String) { channels(first: 1, after: $c) { nodes { address } pageInfo { hasNextPage } } }`,
      {
        c: first.channels.pageInfo.endCursor,
      },
    );
    expect(second.channels).toEqual({ nodes: [{ address: x.channel.toBase58() }], pageInfo: { hasNextPage: false } });

    expect(await client.codes(keys.A, `{ channel(address: "not-an-address") { address } }`)).toEqual(["BAD_USER_INPUT"]);
    expect(await client.codes(keys.A, `{ channels(after: "bm9wZQ") { nodes { address } } }`)).toEqual(["BAD_USER_INPUT"]);
    expect(await client.codes(keys.A, `{ channels(first: 101) { nodes { address } } }`)).toEqual(["BAD_USER_INPUT"]);
  });

  it("the query cost counts channels times charges", async () => {
    const heavy = `{ a: channels(first: 100) { nodes { charges(first: 200) { nodes { paymentId amountUnits status settlementTx endpoint } } } }
                     b: channels(first: 100) { nodes { charges(first: 200) { nodes { paymentId amountUnits status settlementTx endpoint } } } } }`;
    expect(await client.codes(keys.A, heavy)).toEqual(["QUERY_TOO_COSTLY"]);
  });
});

describe("channels in the live feed", () => {
  it("a settlement and a close of an account's channel reach its subscribers only", async () => {
    const query = "subscription { channelUpdated { event txHash channel { address status settledUnits refundedUnits } } }";
    const a = await client.subscribe(keys.A, query);
    const b = await client.subscribe(keys.B, query);
    try {
      // The server gives no sign a subscription is in place: notify (as the indexer does) until each has an event.
      let sentAt = 0;
      await pollUntil(
        async () => {
          if (a.events.length > 0 && b.events.length > 0) return true;
          if (Date.now() - sentAt >= 1_000) {
            sentAt = Date.now();
            for (const [c, wallet] of [
              [x, wallets.a],
              [y, wallets.b],
            ] as const) {
              await db.pool.query("SELECT pg_notify('ledger_channels', $1)", [
                JSON.stringify({ channel: c.channel.toBase58(), event: "ChannelOpened", txHash: "t", agent: wallet.toBase58(), slot: "1" }),
              ]);
            }
          }
          return false;
        },
        { timeoutMs: 10_000, intervalMs: 50, what: "both subscriptions in place" },
      );
      a.events.length = 0;
      b.events.length = 0;

      const settle = ledgerTransaction(20n, T0 + 300, [
        [
          ev.settled(x, { cumulative: 70_000n, delta: 40_000n, sequence: 3n, charges: 1 }, 20n),
          ev.charge(x, 13n, 40_000n, QUOTE, T0 + 300, 20n),
        ],
      ]);
      const close = ledgerTransaction(21n, T0 + 310, [
        [ev.closeRequested(x, x.payee, T0 + 310, 21n)],
        [ev.closed(x, { deposit: 1_000_000n, settled: 70_000n, sequence: 3n }, 21n)],
      ]);
      await ingestTransactions(db.pool, [settle]);
      await ingestTransactions(db.pool, [close]);
      await pollUntil(() => a.events.length >= 3, { timeoutMs: 10_000, intervalMs: 50, what: "three channel events" });
      const updates = a.events.map((e) => e.data.channelUpdated);
      expect(updates.map((u) => [u.event, u.txHash])).toEqual([
        ["settled", settle.signature],
        ["closeRequested", close.signature],
        ["closed", close.signature],
      ]);
      // Each carries the channel as it stands when read: after the close, closed and refunded.
      expect(updates.at(-1).channel).toEqual({
        address: x.channel.toBase58(),
        status: "closed",
        settledUnits: "70000",
        refundedUnits: "930000",
      });
      expect(b.events).toEqual([]);
    } finally {
      a.close();
      b.close();
    }
  });
});
