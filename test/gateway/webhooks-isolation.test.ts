/**
 * Webhook isolation between tenants and between endpoints, against a real Postgres,
 * the running dispatcher (LISTEN/NOTIFY, its own loop) and real HTTP receivers on loopback: a
 * tenant whose receivers never answer holds only its own share of the dispatcher's slots, another
 * tenant's deliveries keep arriving within a second, and the hanging tenant's deliveries are
 * retried, not lost.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import type { Dispatcher, DispatcherOptions } from "../../api/gateway/webhooks/index.js";
import { pollUntil } from "../support/poll.js";
import type { WebhookReceiver } from "./support/webhook-receiver.js";
import { webhookSuite } from "./support/webhooks.js";

const suite = webhookSuite("isolation");
const { receiver, account } = suite;

/**
 * A running dispatcher with the default concurrency limits and short timeouts, so that a hanging
 * receiver's attempt ends (and is retried) within the test.
 */
function startDispatcher(options: Partial<DispatcherOptions> = {}): Dispatcher {
  const d = suite.dispatcher({
    pollMs: 200,
    timeoutMs: 1_500,
    leaseMs: 5_000,
    backoff: { baseMs: 300, factor: 2, maxMs: 2_000, jitter: 0.2 },
    ...options,
  });
  d.start();
  return d;
}

/** Emits one policy.violation event (to every endpoint of the account), stamped now, and returns its id. */
function emit(accountId: string, agentId: string, n: number): Promise<string> {
  return suite.emitViolation(accountId, agentId, n, new Date());
}

async function statuses(accountId: string): Promise<Array<{ status: string; attempts: number }>> {
  const { rows } = await suite.pool.query<{ status: string; attempts: number }>(
    `SELECT d.status, d.attempts FROM event_deliveries d JOIN gateway_events e ON e.id = d.event_id WHERE e.account_id = $1`,
    [accountId],
  );
  return rows;
}

/** `count` endpoints of the account, each at a receiver that holds every request open. */
async function hangingEndpoints(accountId: string, count: number): Promise<WebhookReceiver[]> {
  const hanging: WebhookReceiver[] = [];
  for (let i = 0; i < count; i++) {
    const r = await receiver();
    r.respond = () => "hold";
    hanging.push(r);
    await suite.endpoint(accountId, { url: r.url });
  }
  return hanging;
}

async function waitFor(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  await pollUntil(check, { timeoutMs, intervalMs: 50, what });
}

describe("webhook isolation between tenants", () => {
  it("tenant B's 16 hanging receivers do not delay tenant A: each of A's deliveries arrives within 1 s, and B's are retried, not lost", async () => {
    const b = await account();
    const hanging = await hangingEndpoints(b.accountId, 16);
    const a = await suite.subscriber();
    const fast = a.receiver;

    // B's backlog first: 3 events × 16 endpoints = 48 deliveries, all older than any of A's.
    const bEvents: string[] = [];
    for (let n = 0; n < 3; n++) bEvents.push(await emit(b.accountId, b.agentId, n));
    startDispatcher();
    await Promise.all(hanging.map((r) => r.until((received) => received.length >= 1)));

    // A's events over about 4 s, while B's receivers keep every request open (attempts time out
    // after 1.5 s and are retried, so B's deliveries hold slots during the whole window).
    const latencies: number[] = [];
    const windowStart = Date.now();
    for (let n = 0; Date.now() - windowStart < 4_000; n++) {
      const createdAt = Date.now();
      const eventId = await emit(a.accountId, a.agentId, n);
      await fast.until((received) => received.some((r) => r.headers["webhook-id"] === eventId), 10_000);
      const arrival = fast.received.find((r) => r.headers["webhook-id"] === eventId)!;
      latencies.push(arrival.atMs - createdAt);
      await sleep(100); // pacing between A's events, not synchronization
    }
    for (const latency of latencies) expect(latency).toBeLessThan(1_000);
    expect(latencies.length).toBeGreaterThanOrEqual(10);
    // B was hanging throughout: none of its deliveries got through, and its receivers still hold requests.
    expect((await statuses(b.accountId)).every((row) => row.status === "pending")).toBe(true);
    expect(hanging.reduce((sum, r) => sum + r.holding, 0)).toBeGreaterThan(0);

    // B's deliveries were retried (more than one attempt each for the first ones), then, once
    // B's receivers answer, every one of them is delivered: nothing was lost or dead-lettered.
    await waitFor(async () => (await statuses(b.accountId)).some((row) => row.attempts >= 2), 10_000, "a retry of B's deliveries");
    for (const r of hanging) r.respond = () => 200;
    await waitFor(
      async () => (await statuses(b.accountId)).every((row) => row.status === "delivered"),
      30_000,
      "all of B's deliveries delivered",
    );
    const bRows = await statuses(b.accountId);
    expect(bRows).toHaveLength(48);
    for (const r of hanging) for (const id of bEvents) expect(r.acknowledgedIds().has(id)).toBe(true);
  }, 90_000);

  it("one tenant holds at most its account's share of the slots, over all dispatchers, however many endpoints it has", async () => {
    const b = await account();
    const hanging = await hangingEndpoints(b.accountId, 8);
    for (let n = 0; n < 4; n++) await emit(b.accountId, b.agentId, n); // 32 deliveries, 4 per endpoint
    const limits = { concurrency: 12, perEndpointConcurrency: 3, perAccountConcurrency: 6, timeoutMs: 5_000, leaseMs: 10_000 };
    startDispatcher(limits);
    await waitFor(async () => hanging.reduce((sum, r) => sum + r.holding, 0) >= 6, 10_000, "B's first attempts");
    // A second dispatcher with every slot free claims nothing: the account's share is taken.
    const second = suite.dispatcher(limits);
    expect(await second.runOnce()).toEqual([]);
    // 26 of B's deliveries are due, yet only 6 are in flight, at most 3 to any one endpoint.
    const { rows } = await suite.pool.query<{ leased: number; due: number }>(
      `SELECT count(*) FILTER (WHERE d.locked_until > now())::int AS leased,
              count(*) FILTER (WHERE d.next_attempt_at <= now())::int AS due
       FROM event_deliveries d JOIN gateway_events e ON e.id = d.event_id
       WHERE e.account_id = $1 AND d.status = 'pending'`,
      [b.accountId],
    );
    expect(rows[0]).toEqual({ leased: 6, due: 26 });
    expect(hanging.reduce((sum, r) => sum + r.holding, 0)).toBe(6);
    for (const r of hanging) expect(r.maxHolding).toBeLessThanOrEqual(3);
  }, 30_000);

  it("a hanging endpoint delays only itself: the same account's other endpoint keeps delivering within 1 s", async () => {
    const a = await account();
    const slow = await receiver();
    slow.respond = () => "hold";
    const fast = await receiver();
    await suite.endpoint(a.accountId, { url: slow.url });
    await suite.endpoint(a.accountId, { url: fast.url });
    // 20 events queued before the dispatcher starts: the slow endpoint's backlog is 20 deep, and
    // interleaved with the fast one's.
    for (let n = 0; n < 20; n++) await emit(a.accountId, a.agentId, n);
    startDispatcher({ concurrency: 8, perEndpointConcurrency: 2, perAccountConcurrency: 8, timeoutMs: 10_000, leaseMs: 20_000 });
    await fast.until((received) => received.length >= 20, 5_000);
    await slow.until((received) => received.length >= 2, 5_000);
    const latencies: number[] = [];
    for (let n = 20; n < 26; n++) {
      const createdAt = Date.now();
      const eventId = await emit(a.accountId, a.agentId, n);
      await fast.until((received) => received.some((r) => r.headers["webhook-id"] === eventId), 5_000);
      latencies.push(fast.received.find((r) => r.headers["webhook-id"] === eventId)!.atMs - createdAt);
    }
    for (const latency of latencies) expect(latency).toBeLessThan(1_000);
    // The slow endpoint never had more than its two slots.
    expect(slow.maxHolding).toBe(2);
    expect(slow.received).toHaveLength(2);
  }, 30_000);
});
