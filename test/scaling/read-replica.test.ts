/**
 * The query service on a streaming replica (`DATABASE_READ_URL`): the whole system on a
 * primary, its read models read from a real hot standby of that primary (test/support/
 * streaming-replica.ts: a base backup streaming over a replication slot), real payments settled on
 * the local ledger and indexed into the primary.
 *
 * - Once the replica has replayed what the primary wrote, GraphQL answers through it exactly what
 *   a query service on the primary answers.
 * - With the replica's replay paused, GraphQL still answers the replica's older state (so reads
 *   really are served there), while what must be current comes from the primary: an API key
 *   issued during the pause works at once, and the live feed delivers the new payment with its
 *   fields (NOTIFY and the row it announces are the primary's). Resumed, the replica catches up and
 *   the answers agree again.
 */
import { isDeepStrictEqual } from "node:util";
import { Keypair } from "@solana/web3.js";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueApiKey } from "../../api/shared/keys.js";
import { type ApiServer, createApiServer } from "../../api/query/server.js";
import { createPool } from "../../indexer/db/database.js";
import { type System, startSystem } from "../../scripts/system.js";
import { createClient } from "../api/client.js";
import { type FacilitatedApi, startFacilitatedApi } from "../gateway/support/facilitated-api.js";
import { type GatewayClient, payThroughGateway } from "../gateway/support/gateway-payer.js";
import { pollUntil } from "../support/poll.js";
import { restCall } from "../support/rest.js";
import { type StreamingReplica, startStreamingReplica } from "../support/streaming-replica.js";

const DATABASE = "apg_read_replica";
const AGENT = "replica-reader";
const DEADLINE_MS = 60_000;

let replication: StreamingReplica;
let system: System;
/** A query service on the primary alone: what the replica's answers are compared with. */
let onPrimary: ApiServer;
let primaryUrl: string;
let accountId: string;
let apiKey: string;
let api: FacilitatedApi;
let feed: { events: any[]; close(): void } | undefined;

const ANSWER = `query ($agentId: ID!) {
  transactions(agentId: $agentId, limit: 200) { nodes { id txHash amountPaidUnits endpoint status depth } }
  spendSummary(agentId: $agentId, window: "24h") { totalUnits txCount }
  agents { agentId }
}`;

beforeAll(async () => {
  replication = await startStreamingReplica();
  await runSql(replication.primary.url, `CREATE DATABASE ${DATABASE}`);
  await replication.caughtUp();
  system = await startSystem({
    databaseUrl: replication.urlOf(replication.primary, DATABASE),
    databaseReadUrl: replication.urlOf(replication.replica, DATABASE),
    port: 0,
    allowPrivateNetworks: true,
    logger: pino({ level: "warn" }),
  });
  onPrimary = createApiServer({ pool: system.pool, liveFeed: false });
  primaryUrl = `http://127.0.0.1:${await onPrimary.listen(0)}`;

  ({ accountId, apiKey } = await system.createAccount("replica reader"));
  const serverKey = (await system.createAccount("paid API")).apiKey;
  const gateway: GatewayClient = { gatewayUrl: system.apiUrl, apiKey };
  expect((await restCall(system.apiUrl, "POST", "/v1/agents", { key: apiKey, body: { agentId: AGENT } })).status).toBe(201);
  expect((await restCall(system.apiUrl, "POST", `/v1/agents/${AGENT}/wallet/fund`, { key: apiKey, body: { usdc: 1 } })).status).toBe(200);
  api = await startFacilitatedApi({
    gatewayUrl: gateway.gatewayUrl,
    apiKey: serverKey,
    terms: { scheme: "exact", network: system.network, token: system.token, payTo: Keypair.generate().publicKey.toBase58() },
  });
}, 240_000);

afterAll(async () => {
  feed?.close();
  await api?.close();
  await onPrimary?.close();
  await system?.stop();
  await replication?.stop();
});

async function runSql(url: string, sql: string): Promise<void> {
  const pool = createPool(url);
  try {
    await pool.query(sql);
  } finally {
    await pool.end();
  }
}

let paymentIndex = 0;
async function pay(units: bigint): Promise<string> {
  paymentIndex += 1;
  const outcome = await payThroughGateway(
    { gatewayUrl: system.apiUrl, apiKey },
    AGENT,
    `${api.origin}/x402/price/${units}/replica-${paymentIndex}`,
  );
  if (outcome.kind !== "paid")
    throw new Error(
      `payment ${paymentIndex} not paid: ${JSON.stringify(outcome, (_, v: unknown) => (typeof v === "bigint" ? String(v) : v))}`,
    );
  return outcome.txHash;
}

async function answer(baseUrl: string, key = apiKey): Promise<any> {
  return createClient(baseUrl).ok(key, ANSWER, { agentId: AGENT });
}

const txHashes = (data: any): string[] => data.transactions.nodes.map((n: any) => n.txHash);

/** Polls the query service on the primary until it lists `count` payments of the agent. */
async function indexedOnPrimary(count: number): Promise<any> {
  return pollUntil(
    async () => {
      const data = await answer(primaryUrl);
      return txHashes(data).length >= count ? data : undefined;
    },
    { timeoutMs: DEADLINE_MS, intervalMs: 100, what: `${count} payments indexed on the primary` },
  );
}

/**
 * The replica's answer once it is exactly the primary's. The primary's rows still change after a
 * payment is listed (the indexer marks it finalized a few slots later), so each try reads the
 * primary, waits until the replica has replayed past that read, then reads the replica: the two
 * are equal unless a change landed in between, and then the next try compares again.
 */
async function answerAgreedWithPrimary(): Promise<any> {
  return pollUntil(
    async () => {
      const primary = await answer(primaryUrl);
      await replication.caughtUp();
      const replica = await answer(system.apiUrl);
      return isDeepStrictEqual(replica, primary) ? replica : undefined;
    },
    { timeoutMs: DEADLINE_MS, intervalMs: 100, what: "the replica's answer to equal the primary's" },
  );
}

describe("the query service reading from a streaming replica", () => {
  it("answers, once the replica has caught up, exactly what the primary answers; the live feed sees every payment", async () => {
    feed = await createClient(system.apiUrl).subscribe(apiKey, "subscription { transactionRecorded { txHash amountPaidUnits endpoint } }");
    const paid = [await pay(10_000n), await pay(20_000n), await pay(30_000n)];
    const fromPrimary = await indexedOnPrimary(3);
    expect(new Set(txHashes(fromPrimary))).toEqual(new Set(paid));

    expect(new Set(txHashes(await answerAgreedWithPrimary()))).toEqual(new Set(paid));
    // The read pool's connections are the replica's: it has sessions on the database.
    const standby = createPool(replication.urlOf(replication.replica, DATABASE));
    try {
      const sessions = await standby.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
        [DATABASE],
      );
      expect(sessions.rows[0]!.n).toBeGreaterThan(0);
    } finally {
      await standby.end();
    }

    await pollUntil(() => new Set(feed!.events.map((e) => e.data.transactionRecorded.txHash)).size === 3, {
      timeoutMs: DEADLINE_MS,
      intervalMs: 50,
      what: "the live feed's three payments",
    });
    expect(new Set(feed!.events.map((e) => e.data.transactionRecorded.txHash))).toEqual(new Set(paid));
  }, 180_000);

  it("with replay paused, serves the replica's older state; credentials and the live feed come from the primary", async () => {
    const before = await answer(system.apiUrl);
    expect(txHashes(before)).toHaveLength(3);
    await replication.pauseReplay();
    try {
      const fresh = (await issueApiKey(system.pool, accountId)).apiKey;
      const txHash = await pay(40_000n);
      const fromPrimary = await indexedOnPrimary(4);
      expect(txHashes(fromPrimary)).toContain(txHash);

      // The key issued during the pause authenticates (the primary), and the answer is the
      // replica's: the new payment is not there yet.
      const stale = await answer(system.apiUrl, fresh);
      expect(stale).toEqual(before);

      // The feed announced it with its row as the primary has it.
      const event = await pollUntil(() => feed!.events.map((e) => e.data.transactionRecorded).find((t: any) => t.txHash === txHash), {
        timeoutMs: DEADLINE_MS,
        intervalMs: 50,
        what: "the live feed's event for the new payment",
      });
      const node = fromPrimary.transactions.nodes.find((n: any) => n.txHash === txHash);
      expect(event).toEqual({ txHash, amountPaidUnits: node.amountPaidUnits, endpoint: node.endpoint });
      expect(event.amountPaidUnits).toBe("40000");
    } finally {
      await replication.resumeReplay();
    }
    expect(txHashes(await answerAgreedWithPrimary())).toHaveLength(4);
  }, 180_000);
});
