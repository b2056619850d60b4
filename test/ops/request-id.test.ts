/**
 * The request id (api/shared/ops/request-id.ts) on the whole system (`startSystem`: the real
 * program on the local ledger, a real Postgres, REST /v1 over real HTTP): a well-formed incoming
 * `x-request-id` is kept and echoed, a missing or malformed one is replaced by a new one, and one
 * payment's id appears in the gateway's log line of its settlement and in the line of the webhook
 * delivery the payment caused (sent later by the dispatcher, outside the request).
 */
import { randomUUID } from "node:crypto";
import { Writable } from "node:stream";
import { Keypair } from "@solana/web3.js";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { requestIdMixin } from "../../api/shared/ops/index.js";
import { type System, startSystem } from "../../scripts/system.js";
import { WebhookReceiver } from "../gateway/support/webhook-receiver.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { pollUntil } from "../support/poll.js";

const ORIGIN = "https://paid.example.com";
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

let db: FreshDatabase;
let system: System;
let hooks: WebhookReceiver;
let agentsKey: string;
let serverKey: string;
const lines: Array<Record<string, unknown>> = [];

beforeAll(async () => {
  db = await createFreshDatabase();
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString("utf8").split("\n")) if (line.trim() !== "") lines.push(JSON.parse(line));
      done();
    },
  });
  const logger = pino({ level: "info", mixin: requestIdMixin }, sink);
  system = await startSystem({ databaseUrl: db.url, port: 0, allowPrivateNetworks: true, allowLoopbackWebhooks: true, logger });
  hooks = await WebhookReceiver.start();
  agentsKey = (await system.createAccount("request id agents")).apiKey;
  serverKey = (await system.createAccount("request id paid API")).apiKey;
}, 120_000);

afterAll(async () => {
  await hooks?.close();
  await system?.stop();
  await db?.drop();
});

async function call(
  method: string,
  path: string,
  body: unknown,
  key = agentsKey,
  requestId?: string,
): Promise<{ status: number; requestId: string | null; body: any; text: string }> {
  const headers: Record<string, string> = { authorization: `Bearer ${key}`, "content-type": "application/json" };
  if (method === "POST") headers["idempotency-key"] = randomUUID();
  if (requestId !== undefined) headers["x-request-id"] = requestId;
  const response = await fetch(`${system.apiUrl}${path}`, {
    method,
    headers,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, requestId: response.headers.get("x-request-id"), body: text === "" ? null : JSON.parse(text), text };
}

describe("a request id carried from the HTTP request into settlement and webhook logs", () => {
  it("keeps and echoes a well-formed x-request-id; replaces a missing or malformed one with a new id", async () => {
    const kept = await call("GET", "/v1/agents", undefined, agentsKey, "trace-7f3a.b:c_d-9");
    expect(kept.requestId).toBe("trace-7f3a.b:c_d-9");
    const missing = await call("GET", "/v1/agents", undefined);
    expect(missing.requestId).toMatch(UUID);
    for (const malformed of ["has space", "a\u00e9b", "x".repeat(129), "-leading-dash", 'q"uote']) {
      const replaced = await call("GET", "/v1/agents", undefined, agentsKey, malformed);
      expect(replaced.requestId, malformed).toMatch(UUID);
    }
    // Also on an answer the router refuses.
    expect((await call("GET", "/v1/agents", undefined, "bad-key", "refused-1")).requestId).toBe("refused-1");
  });

  it("one payment's request id is on its settlement's log line and on its webhook delivery's line", async () => {
    expect((await call("POST", "/v1/agents", { agentId: "traced" })).status).toBe(201);
    expect((await call("POST", "/v1/agents/traced/wallet/fund", { usdc: 2 })).status).toBe(200);
    expect((await call("PUT", "/v1/policies/traced", { dailyBudget: { usdc: 1 } })).status).toBe(200);
    const hook = await call("POST", "/v1/webhooks", { url: hooks.url, eventTypes: ["budget.warning"] });
    expect(hook.status, hook.text).toBe(201);

    // The agent's request id; the paid API forwards it when it settles (as a tracing proxy does).
    const requestId = `pay-${randomUUID()}`;
    const x402 = {
      scheme: "exact",
      network: system.network,
      token: system.token,
      amount: "900000",
      payTo: Keypair.generate().publicKey.toBase58(),
      resource: `${ORIGIN}/data`,
    };
    // 0.9 of a 1 usdc budget: crosses 80 %, so the reservation emits budget.warning.
    const authorized = await call("POST", "/v1/agents/traced/payments/authorize", { endpoint: x402.resource, x402 }, agentsKey, requestId);
    expect(authorized.status, authorized.text).toBe(200);
    expect(authorized.requestId).toBe(requestId);
    const settled = await call("POST", "/v1/x402/settle", { payment: authorized.body.payment, requirement: x402 }, serverKey, requestId);
    expect(settled.body, settled.text).toMatchObject({ success: true });
    expect(settled.requestId).toBe(requestId);
    const txHash = settled.body.txHash as string;

    await hooks.until((received) => received.some((r) => r.body.includes('"budget.warning"')));
    const eventId = String(hooks.received.find((r) => r.body.includes('"budget.warning"'))!.headers["webhook-id"]);
    const delivered = await pollUntil(() => lines.find((line) => line.msg === "delivered" && line.eventId === eventId) ?? null, {
      timeoutMs: 10_000,
      intervalMs: 50,
      what: "the delivery's log line",
    });
    expect(delivered.requestId).toBe(requestId);
    const settlementLine = lines.find((line) => line.msg === "payment settled" && line.signature === txHash);
    expect(settlementLine, JSON.stringify(lines.filter((line) => line.msg === "payment settled"))).toBeDefined();
    expect(settlementLine!.requestId).toBe(requestId);
    const { rows } = await system.pool.query<{ request_id: string | null }>("SELECT request_id FROM gateway_events WHERE id = $1", [
      eventId,
    ]);
    expect(rows).toEqual([{ request_id: requestId }]);
  });
});
