/**
 * `mppMiddleware` / `mppHandler` on real node:http servers on loopback, with the gateway as the
 * MPP service (whole system: the program on the local ledger, Postgres). The paying side is driven
 * by hand: the gateway signs the agent's submission for the 402 body, the test posts it to the
 * payment endpoint and then calls the resource with the session.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type MppOptions, type MppPayment, mppHandler, mppMiddleware, type NodeRequest } from "../../sdk/src/server/index.js";
import {
  authorizePayment,
  decodeBase64Json,
  fundedAgent,
  rest,
  serve,
  type Served,
  serveFetch,
  startTestSystem,
  type TestSystem,
  tokenBalanceUnits,
} from "./server-support.js";

const PRICE_UNITS = 50_000n;

let test: TestSystem;
let buyerKey: string;
let sellerKey: string;
let payTo: string;
let express: Served;
let fetchStyle: Served;
const runs = { node: 0, fetch: 0 };
const servers: Served[] = [];

function options(overrides: Partial<MppOptions> = {}): MppOptions {
  return {
    amount: { value: "0.05", currency: "USDC" },
    paymentMethods: ["stablecoin"],
    sessionSupported: true,
    payTo,
    facilitatorUrl: test.system.apiUrl,
    apiKey: sellerKey,
    ...overrides,
  };
}

/** POST a JSON text to the payment endpoint, as a paying client does. */
function postJson(url: string, body: string): Promise<Response> {
  return fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body });
}

/** An Express-like app: the middleware mounted at /api (req.url stripped, baseUrl and originalUrl set). */
function mountedAtApi(middleware: ReturnType<typeof mppMiddleware>) {
  return (incoming: IncomingMessage, res: ServerResponse) => {
    const req = incoming as NodeRequest;
    const url = req.url ?? "/";
    if (!url.startsWith("/api/")) {
      res.writeHead(404);
      res.end();
      return;
    }
    req.originalUrl = url;
    req.baseUrl = "/api";
    req.url = url.slice("/api".length);
    middleware(req, res, () => {
      runs.node += 1;
      const payment = req.payment as MppPayment;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ data: "paid content", payment: { ...payment, amountUnits: payment.amountUnits.toString() } }));
    });
  };
}

beforeAll(async () => {
  test = await startTestSystem();
  buyerKey = (await test.system.createAccount("buyer")).apiKey;
  sellerKey = (await test.system.createAccount("seller")).apiKey;
  await fundedAgent(test.system, buyerKey, "buyer", 2);
  await fundedAgent(test.system, buyerKey, "capped", 2);
  payTo = await fundedAgent(test.system, sellerKey, "till", 0);
  express = await serve(mountedAtApi(mppMiddleware(options())));
  fetchStyle = await serveFetch(
    mppHandler(options({ amount: 50_000n }), (_request, payment) => {
      runs.fetch += 1;
      return Response.json({ txHash: payment.txHash, charged: payment.charged, sessionId: payment.sessionId });
    }),
  );
  servers.push(express, fetchStyle);
}, 120_000);

afterAll(async () => {
  for (const server of servers) await server.close();
  await test?.stop();
});

async function challenge(url: string) {
  const response = await fetch(url);
  expect(response.status).toBe(402);
  expect(response.headers.get("cache-control")).toBe("no-store");
  return (await response.json()) as { paymentEndpoint: string } & Record<string, unknown>;
}

/** The whole negotiation by hand: 402 → gateway signs → POST paymentEndpoint → session token. */
async function negotiate(url: string, agentId = "buyer") {
  const request = await challenge(url);
  const authorized = await authorizePayment(test.system, buyerKey, agentId, url, { mpp: request, protocolPreference: "mpp" });
  const posted = await postJson(request.paymentEndpoint, JSON.stringify(authorized.submission));
  return { request, authorized, posted, token: posted.headers.get("x-mpp-session") };
}

describe("mppMiddleware (Express-style, mounted at /api)", () => {
  it("answers 402 with the spec 2.9 body; the payment endpoint is under the mount point", async () => {
    const ranBefore = runs.node;
    const body = await challenge(`${express.origin}/api/data`);
    expect(body).toEqual({
      protocol: "mpp/1.0",
      amount: { value: "0.05", currency: "USDC" },
      paymentMethods: ["stablecoin"],
      sessionSupported: true,
      paymentEndpoint: `${express.origin}/api/mpp/pay`,
    });
    expect(runs.node).toBe(ranBefore);
  });

  it("pays at the endpoint, then the session is used without another 402; the second call is charged on-chain", async () => {
    const url = `${express.origin}/api/data`;
    const before = await tokenBalanceUnits(test, payTo);
    const { posted, token } = await negotiate(url);
    expect(posted.status).toBe(200);
    const confirmation = (await posted.json()) as { txHash: string; sessionId: string; expiresAt: string };
    expect(token).toMatch(/^mpps_/);
    expect(await tokenBalanceUnits(test, payTo)).toBe(before + PRICE_UNITS);
    const ranBefore = runs.node;

    const first = await fetch(url, { headers: { "X-MPP-Session": token! } });
    expect(first.status).toBe(200);
    expect(first.headers.get("x-mpp-session")).toBe(token);
    const firstReceipt = decodeBase64Json(first.headers.get("x-mpp-receipt"));
    expect(firstReceipt).toEqual({
      txHash: confirmation.txHash,
      sessionId: confirmation.sessionId,
      amount: { value: "0.05", currency: "USDC" },
      method: "stablecoin",
      charged: false,
    });
    const firstBody = (await first.json()) as { payment: Record<string, unknown> };
    expect(firstBody.payment).toMatchObject({
      protocol: "mpp",
      txHash: confirmation.txHash,
      amount: { usdc: 0.05 },
      amountUnits: "50000",
      charged: false,
    });
    expect(await tokenBalanceUnits(test, payTo)).toBe(before + PRICE_UNITS);

    const second = await fetch(`${url}?page=2`, { headers: { "X-MPP-Session": token! } });
    expect(second.status).toBe(200);
    const receipt = decodeBase64Json(second.headers.get("x-mpp-receipt")) as { txHash: string; charged: boolean };
    expect(receipt.charged).toBe(true);
    expect(receipt.txHash).not.toBe(confirmation.txHash);
    expect(await tokenBalanceUnits(test, payTo)).toBe(before + 2n * PRICE_UNITS);
    expect(runs.node).toBe(ranBefore + 2);
  });

  it("a replayed submission is refused and hands out no session", async () => {
    const url = `${express.origin}/api/replay`;
    const { request, authorized, posted } = await negotiate(url);
    expect(posted.status).toBe(200);
    const before = await tokenBalanceUnits(test, payTo);
    const replay = await postJson(request.paymentEndpoint, JSON.stringify(authorized.submission));
    expect(replay.status).toBe(402);
    expect(replay.headers.get("x-mpp-error")).toBe("nonce_reused");
    expect(replay.headers.get("x-mpp-session")).toBeNull();
    expect(await tokenBalanceUnits(test, payTo)).toBe(before);
  });

  it("an underpaid submission (request tampered before signing) is refused with X-MPP-Error; garbage at the endpoint is a 400", async () => {
    const url = `${express.origin}/api/tamper`;
    const request = await challenge(url);
    const authorized = await authorizePayment(test.system, buyerKey, "buyer", url, {
      mpp: { ...request, amount: { value: "0.01", currency: "USDC" } },
    });
    const posted = await postJson(request.paymentEndpoint, JSON.stringify(authorized.submission));
    expect(posted.status).toBe(402);
    // Signed (validly) for 0.01 against this server's 0.05 request: underpaid.
    expect(posted.headers.get("x-mpp-error")).toBe("amount_mismatch");
    for (const body of ["{not json", "[]", JSON.stringify({ method: "stablecoin" })]) {
      const answer = await postJson(request.paymentEndpoint, body);
      expect(answer.status).toBe(400);
    }
  });

  it("an unknown session or garbage header is a 402 with a fresh body and X-MPP-Error; the handler never runs", async () => {
    const url = `${express.origin}/api/data`;
    const ranBefore = runs.node;
    for (const [token, reason] of [
      [`mpps_${"A".repeat(43)}`, "session_unknown"],
      ["garbage", "session_unknown"],
      ["x".repeat(200), "malformed_headers"],
    ] as const) {
      const response = await fetch(url, { headers: { "X-MPP-Session": token } });
      expect(response.status).toBe(402);
      expect(response.headers.get("x-mpp-error")).toBe(reason);
      expect(((await response.json()) as { protocol: string }).protocol).toBe("mpp/1.0");
    }
    expect(runs.node).toBe(ranBefore);
  });

  it("a session charge the spend policy refuses is a 402 policy_violation: nothing moves, the handler does not run", async () => {
    const url = `${express.origin}/api/capped`;
    const { token } = await negotiate(url, "capped");
    expect((await fetch(url, { headers: { "X-MPP-Session": token! } })).status).toBe(200);
    expect((await rest(test.system, buyerKey, "PUT", "/v1/policies/capped", { perCallLimit: { usdc: 0.01 } })).status).toBe(200);
    const before = await tokenBalanceUnits(test, payTo);
    const ranBefore = runs.node;
    const refused = await fetch(url, { headers: { "X-MPP-Session": token! } });
    expect(refused.status).toBe(402);
    expect(refused.headers.get("x-mpp-error")).toBe("policy_violation");
    expect(runs.node).toBe(ranBefore);
    expect(await tokenBalanceUnits(test, payTo)).toBe(before);
    // The paying side negotiating again meets the typed policy error at its authorize step.
    const again = await rest(test.system, buyerKey, "POST", "/v1/agents/capped/payments/authorize", {
      endpoint: url,
      mpp: await challenge(url),
    });
    expect(again.status).toBe(403);
    expect(again.body).toMatchObject({ code: "POLICY_VIOLATION", errorClass: "PolicyViolationError" });
  });

  it("gateway unreachable → 503, the handler never runs", async () => {
    let ran = 0;
    const down = await serve((req, res) =>
      mppMiddleware(options({ facilitatorUrl: "http://127.0.0.1:9" }))(req as NodeRequest, res, () => (ran += 1)),
    );
    servers.push(down);
    const answer = await fetch(`${down.origin}/x`, { headers: { "X-MPP-Session": `mpps_${"A".repeat(43)}` } });
    expect(answer.status).toBe(503);
    expect(ran).toBe(0);
  });
});

describe("mppHandler (fetch-style)", () => {
  it("402, payment at /mpp/pay, then the handler with the payment; a single session serves two calls", async () => {
    const url = `${fetchStyle.origin}/thing`;
    const { request, posted, token } = await negotiate(url);
    expect(request.paymentEndpoint).toBe(`${fetchStyle.origin}/mpp/pay`);
    expect(posted.status).toBe(200);
    const one = await fetch(url, { headers: { "X-MPP-Session": token! } });
    const two = await fetch(url, { headers: { "X-MPP-Session": token! } });
    expect([one.status, two.status]).toEqual([200, 200]);
    expect(((await one.json()) as { charged: boolean }).charged).toBe(false);
    expect(((await two.json()) as { charged: boolean }).charged).toBe(true);
    expect(runs.fetch).toBe(2);
  });
});
