/**
 * Webhook delivery against a real Postgres and real HTTP receivers on loopback: Standard Webhooks
 * signatures checked by an independent verifier, retries with growing delays, the dead letter,
 * transactional emission (a rolled-back event is never sent), concurrent dispatchers, 410 Gone,
 * Slack bodies, and secrets stored encrypted.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { emitEvent } from "../../api/gateway/events/index.js";
import {
  type Dispatcher,
  type DispatcherOptions,
  listDeliveries,
  listWebhookEndpoints,
  redeliver,
  retryDelayMs,
  SecretBox,
  signWebhook,
} from "../../api/gateway/webhooks/index.js";
import { createPool } from "../../indexer/db/database.js";
import { pollUntil } from "../support/poll.js";
import { SignatureError, verifyStandardWebhook } from "./support/webhook-receiver.js";
import { range, violation, webhookSuite } from "./support/webhooks.js";

const suite = webhookSuite("webhooks");
const { account, emitViolation } = suite;

function dispatcher(options: Partial<DispatcherOptions> = {}): Dispatcher {
  return suite.dispatcher({ pollMs: 20, timeoutMs: 2_000, leaseMs: 5_000, ...options });
}

async function deliveries(eventId: string): Promise<Array<{ status: string; attempts: number; last_status: number | null }>> {
  const { rows } = await suite.pool.query("SELECT status, attempts, last_status FROM event_deliveries WHERE event_id = $1 ORDER BY id", [
    eventId,
  ]);
  return rows;
}

/** Waits until the event's one delivery is recorded with `status` (the dispatcher records it after the receiver answered). */
async function deliveryStatus(eventId: string, status: "delivered" | "failed"): Promise<void> {
  await pollUntil(async () => (await deliveries(eventId))[0]?.status === status, {
    timeoutMs: 10_000,
    intervalMs: 20,
    what: `the delivery of ${eventId} recorded as ${status}`,
  });
}

async function pendingCount(): Promise<number> {
  const { rows } = await suite.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM event_deliveries WHERE status = 'pending'");
  return rows[0]!.n;
}

describe("Standard Webhooks signatures", () => {
  it("matches the published Standard Webhooks / Svix test vector", () => {
    expect(signWebhook("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, '{"test": 2432232314}')).toBe(
      "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
    );
  });

  it("every delivery carries webhook-id, webhook-timestamp and a v1 signature that an independent verifier accepts", async () => {
    const { accountId, agentId, receiver: r, secret } = await suite.subscriber();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const eventId = await emitViolation(accountId, agentId);

    await dispatcher().runOnce();
    expect(r.received).toHaveLength(1);
    const [request] = r.received;
    expect(request!.headers["webhook-id"]).toBe(eventId);
    expect(request!.headers["content-type"]).toBe("application/json");
    const sentAt = Number(request!.headers["webhook-timestamp"]);
    expect(Math.abs(sentAt - Date.now() / 1000)).toBeLessThan(5);
    expect(() => verifyStandardWebhook(secret, request!.headers, request!.body)).not.toThrow();

    // The body is spec 6's policy.violation payload, exactly those six fields.
    const body = JSON.parse(request!.body) as Record<string, unknown>;
    expect(body).toEqual(violation(agentId));
    expect(Object.keys(body)).toEqual(["event", "agentId", "reason", "detail", "endpoint", "timestamp"]);

    // Tampering, a wrong secret, or a timestamp outside the 5-minute tolerance all fail.
    expect(() => verifyStandardWebhook(secret, request!.headers, request!.body.replace("1.5", "9.5"))).toThrow(SignatureError);
    const other = (await suite.endpoint((await account()).accountId, { url: r.url })).secret;
    expect(() => verifyStandardWebhook(other, request!.headers, request!.body)).toThrow(SignatureError);
    expect(() => verifyStandardWebhook(secret, request!.headers, request!.body, sentAt + 301)).toThrow(/tolerance/);
    expect(() => verifyStandardWebhook(secret, request!.headers, request!.body, sentAt - 301)).toThrow(/tolerance/);
    expect(() => verifyStandardWebhook(secret, request!.headers, request!.body, sentAt + 299)).not.toThrow();
    expect(await deliveries(eventId)).toEqual([{ status: "delivered", attempts: 1, last_status: 200 }]);
  });

  it("signing secrets are stored encrypted and never listed", async () => {
    const { accountId } = await account();
    const { endpoint, secret } = await suite.endpoint(accountId, { url: "https://hooks.example.com/in" });
    const { rows } = await suite.pool.query<{ secret_ciphertext: Buffer; row: string }>(
      "SELECT secret_ciphertext, row_to_json(w)::text AS row FROM webhook_endpoints w WHERE id = $1",
      [endpoint.id],
    );
    const key = secret.slice("whsec_".length);
    expect(rows[0]!.row).not.toContain(key);
    expect(rows[0]!.secret_ciphertext.includes(Buffer.from(key, "base64"))).toBe(false);
    expect(suite.box.decrypt(rows[0]!.secret_ciphertext)).toBe(secret);
    expect(() => new SecretBox(randomBytes(32)).decrypt(rows[0]!.secret_ciphertext)).toThrow(/does not open/);
    const listed = await listWebhookEndpoints(suite.pool, accountId);
    expect(JSON.stringify(listed)).not.toContain(key);
    expect(listed.map((e) => e.eventTypes)).toEqual([["budget.warning", "policy.violation"]]);
    expect(String(suite.box)).toBe("[SecretBox]");
  });
});

describe("retries", () => {
  it("a receiver that fails three times gets retries with growing delays, then the event is acknowledged once", async () => {
    const { accountId, agentId, receiver: r } = await suite.subscriber();
    r.respond = (_request, index) => (index < 3 ? 500 : 200);
    const eventId = await emitViolation(accountId, agentId);
    dispatcher({ backoff: { baseMs: 200, factor: 2, maxMs: 10_000, jitter: 0.2 }, maxAttempts: 6 }).start();

    await r.until((received) => received.some((x) => x.answered === 200));
    await deliveryStatus(eventId, "delivered");
    await sleep(400); // a window in which no fifth request may come: acknowledged once
    expect(r.received.map((x) => x.answered)).toEqual([500, 500, 500, 200]);
    expect(new Set(r.received.map((x) => x.headers["webhook-id"]))).toEqual(new Set([eventId]));
    const gaps = r.received.slice(1).map((x, i) => x.atMs - r.received[i]!.atMs);
    // Lower bounds: 200 * 2^(n-1) less 20 % jitter; each wait longer than the one before.
    expect(gaps[0]).toBeGreaterThanOrEqual(160);
    expect(gaps[1]).toBeGreaterThanOrEqual(320);
    expect(gaps[2]).toBeGreaterThanOrEqual(640);
    expect(gaps[1]!).toBeGreaterThan(gaps[0]!);
    expect(gaps[2]!).toBeGreaterThan(gaps[1]!);
    expect(await deliveries(eventId)).toEqual([{ status: "delivered", attempts: 4, last_status: 200 }]);
  });

  it("after maxAttempts failures the delivery is dead-lettered as failed and not retried", async () => {
    const { accountId, agentId, receiver: r } = await suite.subscriber();
    r.respond = () => 503;
    const eventId = await emitViolation(accountId, agentId);
    dispatcher({ backoff: { baseMs: 30, factor: 2, maxMs: 1_000, jitter: 0 }, maxAttempts: 3 }).start();

    await r.until((received) => received.length >= 3);
    await deliveryStatus(eventId, "failed");
    await sleep(400); // a window (several retry delays) in which no fourth attempt may come
    expect(r.received).toHaveLength(3);
    expect(await deliveries(eventId)).toEqual([{ status: "failed", attempts: 3, last_status: 503 }]);

    // The dead letter is listed for the account and can be replayed by hand, same webhook-id.
    const [dead] = await listDeliveries(suite.pool, accountId, { status: "failed" });
    expect(dead).toMatchObject({ eventId, eventType: "policy.violation", destination: new URL(r.url).origin, lastError: "HTTP 503" });
    expect(await redeliver(suite.pool, (await account()).accountId, dead!.id)).toBe(false);
    r.respond = () => 200;
    expect(await redeliver(suite.pool, accountId, dead!.id)).toBe(true);
    await r.until((received) => received.length === 4);
    expect(r.received[3]!.headers["webhook-id"]).toBe(eventId);
  });

  it("a delivery whose attempts all died with their dispatcher is dead-lettered, not claimed forever", async () => {
    const { accountId, agentId, receiver: r } = await suite.subscriber();
    const eventId = await emitViolation(accountId, agentId);
    // As a crash loop leaves it: every attempt counted at claim, the last lease run out.
    await suite.pool.query("UPDATE event_deliveries SET attempts = 3, next_attempt_at = now() - interval '1 second' WHERE event_id = $1", [
      eventId,
    ]);
    expect(await dispatcher({ maxAttempts: 3 }).runOnce()).toEqual([]);
    expect(r.received).toEqual([]);
    expect(await deliveries(eventId)).toEqual([{ status: "failed", attempts: 3, last_status: null }]);
  });

  it("the backoff grows exponentially with bounded jitter", () => {
    const policy = { baseMs: 5_000, factor: 4, maxMs: 36_000_000, jitter: 0.2 };
    expect([1, 2, 3, 4].map((n) => retryDelayMs(n, policy, () => 0))).toEqual([5_000, 20_000, 80_000, 320_000]);
    expect(retryDelayMs(2, policy, () => 1)).toBe(16_000);
    expect(retryDelayMs(40, policy, () => 0)).toBe(36_000_000);
  });

  it("410 Gone fails the delivery and disables the endpoint", async () => {
    const { accountId, agentId, receiver: r } = await suite.subscriber();
    r.respond = () => 410;
    const eventId = await emitViolation(accountId, agentId);
    await dispatcher().runOnce();
    expect(await deliveries(eventId)).toEqual([{ status: "failed", attempts: 1, last_status: 410 }]);
    expect(await listWebhookEndpoints(suite.pool, accountId)).toEqual([]);
  });
});

describe("the outbox", () => {
  it("an event emitted in a transaction that rolls back is never delivered", async () => {
    const { accountId, agentId, receiver: r } = await suite.subscriber();
    let rolledBack = "";
    await expect(
      suite.transaction(async (client) => {
        rolledBack = (await emitEvent(client, accountId, "policy.violation", violation(agentId, 1))).id;
        throw new Error("the payment failed");
      }),
    ).rejects.toThrow("the payment failed");
    const committed = await emitViolation(accountId, agentId, 2);

    const d = dispatcher();
    d.start();
    await r.until((received) => received.length >= 1);
    await sleep(200); // a window in which the rolled-back event could have arrived too
    expect(r.received.map((x) => x.headers["webhook-id"])).toEqual([committed]);
    const { rows } = await suite.pool.query("SELECT 1 FROM gateway_events WHERE id = $1", [rolledBack]);
    expect(rows).toEqual([]);
  });

  it("a running dispatcher is woken by the event's commit (LISTEN/NOTIFY), not by its poll", async () => {
    const { accountId, agentId, receiver: r } = await suite.subscriber();
    // A pool of its own, named, so that its sessions can be told apart in pg_stat_activity.
    const url = new URL(suite.db.url);
    url.searchParams.set("application_name", "webhooks-wake");
    const pool = createPool(url.toString());
    const d = dispatcher({ pollMs: 60_000, pool });
    try {
      d.start();
      // Its first cycle claims in a transaction and finds nothing; once that has committed, the
      // loop sleeps for its 60 s poll, so only a notification can wake it in time.
      await pollUntil(
        async () =>
          (
            await suite.pool.query("SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND state = 'idle' AND query = 'COMMIT'", [
              "webhooks-wake",
            ])
          ).rows.length > 0,
        { timeoutMs: 10_000, intervalMs: 10, what: "the dispatcher's first claim to commit" },
      );
      const emittedAt = Date.now();
      const eventId = await emitViolation(accountId, agentId);
      await r.until((received) => received.length === 1, 5_000);
      expect(r.received[0]!.headers["webhook-id"]).toBe(eventId);
      expect(r.received[0]!.atMs - emittedAt).toBeLessThan(3_000);
    } finally {
      await d.stop();
      await pool.end();
    }
  });

  it("emitEvent refuses to run outside a transaction", async () => {
    const { accountId, agentId } = await account();
    const client = await suite.pool.connect();
    try {
      await expect(emitEvent(client, accountId, "policy.violation", violation(agentId))).rejects.toThrow(/transaction/);
    } finally {
      client.release();
    }
  });

  it("two dispatchers running side by side deliver each of 30 events exactly once (SKIP LOCKED)", async () => {
    const { accountId, agentId, receiver: r } = await suite.subscriber();
    const ids = await suite.emitViolations(accountId, agentId, range(0, 30));
    const [a, b] = [dispatcher({ batchSize: 4 }), dispatcher({ batchSize: 4 })];
    const drain = async (d: Dispatcher) => {
      while ((await d.runOnce()).length > 0);
    };
    await Promise.all([drain(a), drain(b)]);
    expect(await pendingCount()).toBe(0);
    const seen = r.received.map((x) => String(x.headers["webhook-id"]));
    expect(seen).toHaveLength(30);
    expect(new Set(seen)).toEqual(new Set(ids));
  });

  it("a Slack webhook URL gets Slack's { text } body, still signed", async () => {
    const { accountId, agentId, receiver: r, secret } = await suite.subscriber();
    await emitViolation(accountId, agentId);
    // hooks.slack.com cannot be reached from a test: treat the loopback host as Slack's.
    await dispatcher({ slackHosts: ["127.0.0.1"] }).runOnce();
    const body = JSON.parse(r.received[0]!.body) as Record<string, unknown>;
    expect(Object.keys(body)).toEqual(["text"]);
    expect(body.text).toContain(`policy.violation: agent ${agentId} rejected (per_call_limit_exceeded)`);
    expect(body.text).toContain("requested 1.5 usdc, limit is 1 usdc");
    expect(() => verifyStandardWebhook(secret, r.received[0]!.headers, r.received[0]!.body)).not.toThrow();
  });
});
