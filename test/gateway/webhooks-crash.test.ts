/**
 * The real dispatcher process (`node --import tsx api/gateway/webhooks/dispatcher-main.ts`) killed with
 * SIGKILL while a receiver holds its requests open, then restarted: every event is delivered (at
 * least once; every webhook-id acknowledged, none missing), including events emitted while no
 * dispatcher was running.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { pollUntil } from "../support/poll.js";
import { verifyStandardWebhook } from "./support/webhook-receiver.js";
import { range, webhookSuite } from "./support/webhooks.js";

const ROOT = resolve(import.meta.dirname, "../..");
const LEASE_MS = 3_000;

const suite = webhookSuite("crash");

function startDispatcher(): ChildProcess {
  // node with tsx's loader in one process, so SIGKILL hits the dispatcher itself.
  return spawn(process.execPath, ["--import", "tsx", "api/gateway/webhooks/dispatcher-main.ts"], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATABASE_URL: suite.db.url,
      WEBHOOK_SECRETS_KEY: suite.secretsKey,
      DISPATCHER_LEASE_MS: String(LEASE_MS),
      DISPATCHER_TIMEOUT_MS: "2500",
      DISPATCHER_POLL_MS: "50",
      DISPATCHER_BATCH_SIZE: "4",
      DISPATCHER_BACKOFF_BASE_MS: "200",
      LOG_LEVEL: "silent",
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: "1", // the receiver is on loopback
    },
    stdio: "ignore",
  });
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((done) => child.once("exit", () => done()));
}

/** `count` policy.violation events numbered from `from`, emitted in one transaction. */
function emitMany(accountId: string, agentId: string, from: number, count: number): Promise<string[]> {
  return suite.emitViolations(accountId, agentId, range(from, count), new Date());
}

async function deliveredCount(eventIds: readonly string[]): Promise<number> {
  const { rows } = await suite.pool.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM event_deliveries WHERE status = 'delivered' AND event_id = ANY ($1)",
    [eventIds],
  );
  return rows[0]!.n;
}

describe("dispatcher crash recovery", () => {
  it("a dispatcher killed mid-delivery, then restarted, delivers every event", async () => {
    const { accountId, agentId } = await suite.account();
    const receiver = await suite.receiver();
    const { secret } = await suite.endpoint(accountId, { url: receiver.url });
    const first = await emitMany(accountId, agentId, 0, 10);

    // The first two requests are held open (never answered); the rest are acknowledged.
    receiver.respond = (_request, index) => (index < 2 ? "hold" : 200);
    const doomed = startDispatcher();
    await receiver.until((received) => received.length >= 2, 60_000);
    doomed.kill("SIGKILL");
    await exited(doomed);
    const heldIds = receiver.received.slice(0, 2).map((r) => String(r.headers["webhook-id"]));
    const { rows: inFlight } = await suite.pool.query<{ event_id: string; status: string; attempts: number }>(
      "SELECT event_id, status, attempts FROM event_deliveries WHERE event_id = ANY ($1)",
      [heldIds],
    );
    // Killed mid-delivery: the held deliveries are still pending, their attempt counted.
    expect(inFlight.map((r) => [r.status, r.attempts])).toEqual([
      ["pending", 1],
      ["pending", 1],
    ]);

    // Events keep arriving while no dispatcher runs.
    const second = await emitMany(accountId, agentId, 10, 5);
    receiver.respond = () => 200;
    const survivor = startDispatcher();
    try {
      const all = [...first, ...second];
      await receiver.until(() => all.every((id) => receiver.acknowledgedIds().has(id)), 60_000);
      // The receiver answers before the dispatcher records the outcome: wait for the records too.
      await pollUntil(async () => (await deliveredCount(all)) >= all.length, {
        timeoutMs: 10_000,
        intervalMs: 50,
        what: "every delivery recorded as delivered",
      });
      expect(await deliveredCount(all)).toBe(all.length);
      // At least once: every id acknowledged; the held ones were sent again after their lease.
      expect([...receiver.acknowledgedIds()].sort()).toEqual([...all].sort());
      for (const id of heldIds) expect(receiver.received.filter((r) => r.headers["webhook-id"] === id).length).toBeGreaterThanOrEqual(2);
      for (const request of receiver.received) verifyStandardWebhook(secret, request.headers, request.body);
    } finally {
      survivor.kill("SIGTERM");
      await exited(survivor);
    }
    expect(survivor.exitCode).toBe(0);
  }, 120_000);
});
