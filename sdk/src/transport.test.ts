import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { AuthenticationError, PaymentError, PolicyViolationError, ServiceError } from "./errors.js";
import { backoffDelayMs, parseRetryAfter } from "./retry.js";
import { Transport } from "./transport.js";

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage["headers"];
  body: string;
}

type Reply = (response: ServerResponse, seen: Seen) => void;

const servers: Array<{ close: () => Promise<void> }> = [];

afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

/** A real loopback server answering request i with replies[i] (the last one repeats). */
async function loopback(replies: Reply[]): Promise<{ url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const entry = {
        method: request.method ?? "",
        url: request.url ?? "",
        headers: request.headers,
        body: Buffer.concat(chunks).toString("utf8"),
      };
      seen.push(entry);
      replies[Math.min(seen.length - 1, replies.length - 1)]!(response, entry);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  servers.push({
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

function json(status: number, body: unknown, headers: Record<string, string> = {}): Reply {
  return (response) => {
    response.writeHead(status, { "content-type": status >= 400 ? "application/problem+json" : "application/json", ...headers });
    response.end(JSON.stringify(body));
  };
}

const reset: Reply = (response) => response.socket?.destroy();
const hang: Reply = () => {};

function transport(url: string, maxRetries = 3, timeout = 30_000): Transport {
  return new Transport({ baseUrl: url, apiKey: "apg_test_key", maxRetries, timeout, retryBaseDelayMs: 1, retryMaxDelayMs: 50 });
}

describe("retries of transient failures", () => {
  it("a POST failing with 503 twice succeeds on the third attempt with the same Idempotency-Key", async () => {
    const api = await loopback([
      json(503, { code: "SERVICE_UNAVAILABLE" }),
      json(503, { code: "SERVICE_UNAVAILABLE" }),
      json(200, { ok: 1 }),
    ]);
    const answer = await transport(api.url).request<{ ok: number }>("POST", "/v1/things", { body: { usdc: 1.5 } });
    expect(answer).toEqual({ ok: 1 });
    expect(api.seen).toHaveLength(3);
    const keys = api.seen.map((request) => request.headers["idempotency-key"]);
    expect(keys[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(new Set(keys).size).toBe(1);
    expect(api.seen.every((request) => request.body === '{"usdc":1.5}')).toBe(true);
    expect(api.seen[0]!.headers.authorization).toBe("Bearer apg_test_key");
    expect(api.seen[0]!.headers["content-type"]).toBe("application/json");
  });

  it("the caller's Idempotency-Key is sent and reused", async () => {
    const api = await loopback([reset, json(201, { id: "a" })]);
    await transport(api.url).request("POST", "/v1/x", { body: {}, idempotencyKey: "my-key-1" });
    expect(api.seen.map((request) => request.headers["idempotency-key"])).toEqual(["my-key-1", "my-key-1"]);
  });

  it("two POSTs without a key get two different keys", async () => {
    const api = await loopback([json(200, {})]);
    const client = transport(api.url);
    await client.request("POST", "/v1/x", { body: {} });
    await client.request("POST", "/v1/x", { body: {} });
    expect(api.seen[0]!.headers["idempotency-key"]).not.toBe(api.seen[1]!.headers["idempotency-key"]);
  });

  it("a GET carries no Idempotency-Key and is retried after a dropped connection", async () => {
    const api = await loopback([reset, reset, json(200, { usdc: 2.000001 })]);
    const answer = await transport(api.url).request<{ usdc: number }>("GET", "/v1/agents/a/wallet/balance", {
      query: { limit: 5, since: undefined },
    });
    expect(answer).toEqual({ usdc: 2.000001 });
    expect(api.seen).toHaveLength(3);
    expect(api.seen[0]!.headers["idempotency-key"]).toBeUndefined();
    expect(api.seen[0]!.url).toBe("/v1/agents/a/wallet/balance?limit=5");
  });

  it("an attempt that exceeds the timeout is abandoned and retried", async () => {
    const api = await loopback([hang, json(200, { ok: true })]);
    const answer = await transport(api.url, 3, 300).request("GET", "/v1/slow");
    expect(answer).toEqual({ ok: true });
    expect(api.seen).toHaveLength(2);
  });

  it("409 IDEMPOTENCY_IN_PROGRESS (retryable) is retried with the same key, honouring Retry-After", async () => {
    const api = await loopback([
      json(409, { code: "IDEMPOTENCY_IN_PROGRESS", retryable: true }, { "retry-after": "0" }),
      json(200, { funded: true }),
    ]);
    expect(await transport(api.url).request("POST", "/v1/agents/a/wallet/fund", { body: { usdc: 1 } })).toEqual({ funded: true });
    expect(api.seen).toHaveLength(2);
    expect(api.seen[0]!.headers["idempotency-key"]).toBe(api.seen[1]!.headers["idempotency-key"]);
  });

  it("after maxRetries the last failure is thrown as PaymentError with it as cause", async () => {
    const api = await loopback([json(500, { code: "INTERNAL_SERVER_ERROR", detail: "boom" })]);
    const error = await transport(api.url, 2)
      .request("POST", "/v1/x", { body: {} })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(PaymentError);
    expect((error as PaymentError).message).toMatch(/after 3 attempts: boom/);
    expect((error as PaymentError).cause).toBeInstanceOf(ServiceError);
    expect(((error as PaymentError).cause as ServiceError).status).toBe(500);
    expect(api.seen).toHaveLength(3);
    expect(new Set(api.seen.map((request) => request.headers["idempotency-key"])).size).toBe(1);
  });

  it("maxRetries 0 still sends an Idempotency-Key and tries once", async () => {
    const api = await loopback([json(503, {})]);
    await expect(transport(api.url, 0).request("POST", "/v1/x", { body: {} })).rejects.toBeInstanceOf(PaymentError);
    expect(api.seen).toHaveLength(1);
    expect(api.seen[0]!.headers["idempotency-key"]).toBeDefined();
  });
});

describe("definite answers are never retried", () => {
  it("a 4xx is thrown at once as its typed error", async () => {
    const api = await loopback([
      json(403, {
        code: "POLICY_VIOLATION",
        errorClass: "PolicyViolationError",
        reason: "per_call_limit_exceeded: requested 1 usdc, limit is 0.5 usdc",
      }),
    ]);
    const error = await transport(api.url)
      .request("POST", "/v1/agents/a/payments/authorize", { body: {} })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(PolicyViolationError);
    expect((error as PolicyViolationError).reason).toBe("per_call_limit_exceeded: requested 1 usdc, limit is 0.5 usdc");
    expect(api.seen).toHaveLength(1);
  });

  it("400, 404, 409 CONFLICT and 422 are each sent once", async () => {
    for (const [status, code] of [
      [400, "BAD_USER_INPUT"],
      [404, "NOT_FOUND"],
      [409, "CONFLICT"],
      [422, "IDEMPOTENCY_KEY_REUSED"],
    ] as const) {
      const api = await loopback([json(status, { code, detail: code })]);
      const error = await transport(api.url)
        .request("POST", "/v1/x", { body: {} })
        .catch((caught: unknown) => caught);
      expect(error, code).toBeInstanceOf(ServiceError);
      expect((error as ServiceError).code).toBe(code);
      expect((error as ServiceError).status).toBe(status);
      expect(api.seen, code).toHaveLength(1);
    }
  });

  it("401 is an AuthenticationError, sent once", async () => {
    const api = await loopback([json(401, { code: "AUTHENTICATION_ERROR", detail: "unknown key" })]);
    await expect(transport(api.url).request("GET", "/v1/agents")).rejects.toBeInstanceOf(AuthenticationError);
    expect(api.seen).toHaveLength(1);
  });

  it("a 5xx marked retryable: false and 502 PAYMENT_FAILED are not retried", async () => {
    const api = await loopback([json(503, { code: "SERVICE_UNAVAILABLE", retryable: false })]);
    await expect(transport(api.url).request("POST", "/v1/x", { body: {} })).rejects.toBeInstanceOf(ServiceError);
    expect(api.seen).toHaveLength(1);
    const failed = await loopback([json(502, { code: "PAYMENT_FAILED", errorClass: "PaymentError", detail: "expired" })]);
    const error = await transport(failed.url)
      .request("POST", "/v1/x", { body: {} })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(PaymentError);
    expect((error as PaymentError).message).toBe("expired");
    expect(failed.seen).toHaveLength(1);
  });

  it("a missing API key is refused before anything is sent", () => {
    expect(() => new Transport({ baseUrl: "http://127.0.0.1:1", apiKey: "" })).toThrow(AuthenticationError);
  });

  it("the API key is not part of the transport's JSON form", () => {
    expect(JSON.stringify(new Transport({ baseUrl: "http://127.0.0.1:1", apiKey: "apg_secret" }))).not.toContain("apg_secret");
  });
});

describe("GraphQL", () => {
  it("returns data, and maps extensions.code to the typed error", async () => {
    const api = await loopback([
      json(200, { data: { agents: [{ agentId: "a" }] } }),
      json(401, { errors: [{ message: "bad key", extensions: { code: "AUTHENTICATION_ERROR" } }] }),
      json(200, { data: null, errors: [{ message: "no such agent", extensions: { code: "NOT_FOUND" } }] }),
    ]);
    const client = transport(api.url);
    expect(await client.graphql("{ agents { agentId } }")).toEqual({ agents: [{ agentId: "a" }] });
    expect(JSON.parse(api.seen[0]!.body)).toEqual({ query: "{ agents { agentId } }", variables: {} });
    await expect(client.graphql("{ x }")).rejects.toBeInstanceOf(AuthenticationError);
    const error = await client.graphql("{ y }").catch((caught: unknown) => caught);
    expect((error as ServiceError).code).toBe("NOT_FOUND");
    expect((error as ServiceError).message).toBe("no such agent");
    expect(api.seen).toHaveLength(3);
  });
});

describe("backoff", () => {
  const options = { maxRetries: 3, baseDelayMs: 500, maxDelayMs: 20_000 };
  it("is full jitter under an exponential ceiling", () => {
    expect(backoffDelayMs(0, options, undefined, () => 0.999999)).toBe(499);
    expect(backoffDelayMs(2, options, undefined, () => 0.999999)).toBe(1999);
    expect(backoffDelayMs(10, options, undefined, () => 0.999999)).toBe(19_999);
    expect(backoffDelayMs(3, options, undefined, () => 0)).toBe(0);
  });
  it("honours Retry-After up to the cap", () => {
    expect(backoffDelayMs(0, options, 3000)).toBe(3000);
    expect(backoffDelayMs(0, options, 90_000)).toBe(20_000);
    expect(parseRetryAfter("2")).toBe(2000);
    expect(parseRetryAfter(new Date(10_000).toUTCString(), 4_000)).toBe(6000);
    expect(parseRetryAfter("soon")).toBeUndefined();
    expect(parseRetryAfter(null)).toBeUndefined();
  });
});
