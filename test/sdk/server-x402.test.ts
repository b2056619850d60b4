/**
 * `x402Middleware` / `x402Handler` (spec 4.5) on real node:http servers on loopback, settling
 * through the whole system (gateway facilitator, the program on the local ledger). The paying
 * side is driven by hand: the gateway authorizes and signs for the agent from the 402 body, and
 * the request is retried with the returned headers.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type NodeRequest, type X402Payment, x402Handler, x402Middleware, type X402Options } from "../../sdk/src/server/index.js";
import {
  authorizePayment,
  decodeBase64Json,
  fundedAgent,
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
let node: Served;
let fetchStyle: Served;
const runs = { node: 0, fetch: 0 };
const servers: Served[] = [];

function options(overrides: Partial<X402Options> = {}): X402Options {
  return { amount: PRICE_UNITS.toString(), token: "usdc", payTo, facilitatorUrl: test.system.apiUrl, apiKey: sellerKey, ...overrides };
}

/** Express-style mounting on plain node:http: the middleware, then the route handler as next(). */
function mount(middleware: ReturnType<typeof x402Middleware>, onPaid: (payment: X402Payment) => void) {
  return (req: IncomingMessage, res: ServerResponse) => {
    middleware(req as NodeRequest, res, (error?: unknown) => {
      if (error !== undefined) {
        res.writeHead(500);
        res.end();
        return;
      }
      const payment = (req as NodeRequest).payment as X402Payment;
      onPaid(payment);
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
  payTo = await fundedAgent(test.system, sellerKey, "till", 0);
  node = await serve(mount(x402Middleware(options()), () => (runs.node += 1)));
  fetchStyle = await serveFetch(
    x402Handler(options(), (_request, payment) => {
      runs.fetch += 1;
      return Response.json({ data: "fetch content", txHash: payment.txHash, usdc: payment.amount.usdc });
    }),
  );
  servers.push(node, fetchStyle);
}, 120_000);

afterAll(async () => {
  for (const server of servers) await server.close();
  await test?.stop();
});

async function challenge(url: string) {
  const response = await fetch(url);
  expect(response.status).toBe(402);
  expect(response.headers.get("cache-control")).toBe("no-store");
  return (await response.json()) as Record<string, string>;
}

async function payAndRetry(url: string, requirement: unknown) {
  const authorized = await authorizePayment(test.system, buyerKey, "buyer", url, { x402: requirement });
  const headers = authorized.headers!;
  return { headers, response: await fetch(url, { headers }) };
}

describe("x402Middleware (node http, Express-style)", () => {
  it("answers 402 with the exact spec 2.7 body, the usdc mint resolved through the facilitator", async () => {
    const ranBefore = runs.node;
    const body = await challenge(`${node.origin}/report?q=1`);
    expect(body).toEqual({
      scheme: "exact",
      network: test.system.network,
      token: test.system.token,
      amount: "50000",
      payTo,
      resource: `${node.origin}/report?q=1`,
    });
    expect(runs.node).toBe(ranBefore);
  });

  it("runs the handler once per valid payment, after funds moved on-chain to payTo; a replay is refused", async () => {
    const url = `${node.origin}/report`;
    const requirement = await challenge(url);
    const before = await tokenBalanceUnits(test, payTo);
    const ranBefore = runs.node;
    const { headers, response } = await payAndRetry(url, requirement);
    expect(response.status).toBe(200);
    const body = (await response.json()) as { payment: Record<string, unknown> };
    expect(runs.node).toBe(ranBefore + 1);
    expect(await tokenBalanceUnits(test, payTo)).toBe(before + PRICE_UNITS);

    const receipt = decodeBase64Json(response.headers.get("x-payment-response")) as Record<string, unknown>;
    expect(receipt).toMatchObject({ success: true, network: test.system.network });
    expect(body.payment).toEqual({
      protocol: "x402",
      txHash: receipt.transaction,
      payer: receipt.payer,
      amount: { usdc: 0.05 },
      amountUnits: "50000",
      network: test.system.network,
    });
    const recorded = await test.connection.getTransaction(receipt.transaction as string, {
      commitment: "confirmed",
      maxSupportedTransactionVersion: 0,
    });
    expect(recorded?.meta?.err).toBeNull();

    const replay = await fetch(url, { headers });
    expect(replay.status).toBe(402);
    expect(replay.headers.get("x-payment-error")).toBe("nonce_reused");
    expect(await replay.json()).toEqual(requirement);
    expect(runs.node).toBe(ranBefore + 1);
    expect(await tokenBalanceUnits(test, payTo)).toBe(before + PRICE_UNITS);
  });

  it("refuses an underpaid payment (the requirement tampered before signing): handler not run, nothing moves", async () => {
    const url = `${node.origin}/cheap`;
    const requirement = await challenge(url);
    const before = await tokenBalanceUnits(test, payTo);
    const ranBefore = runs.node;
    const { response } = await payAndRetry(url, { ...requirement, amount: "1" });
    expect(response.status).toBe(402);
    expect(response.headers.get("x-payment-error")).toBe("amount_mismatch");
    expect(runs.node).toBe(ranBefore);
    expect(await tokenBalanceUnits(test, payTo)).toBe(before);
  });

  it("refuses a payment to another payee or for another resource's terms", async () => {
    const url = `${node.origin}/elsewhere`;
    const requirement = await challenge(url);
    const other = await fundedAgent(test.system, sellerKey, "other-till", 0);
    const ranBefore = runs.node;
    const { response } = await payAndRetry(url, { ...requirement, payTo: other });
    expect(response.status).toBe(402);
    expect(response.headers.get("x-payment-error")).toBe("pay_to_mismatch");
    expect(runs.node).toBe(ranBefore);
  });

  it("never crashes on garbage headers: 402 malformed_headers, handler not run", async () => {
    const url = `${node.origin}/report`;
    const valid = await authorizePayment(test.system, buyerKey, "buyer", url, { x402: await challenge(url) });
    const garbage: Record<string, string>[] = [
      { "X-PAYMENT": "!!!not base64!!!", "X-PAYMENT-SIGNATURE": "x" },
      { "X-PAYMENT": Buffer.from("null").toString("base64"), "X-PAYMENT-SIGNATURE": "x" },
      { "X-PAYMENT": Buffer.from('{"payload":{}}').toString("base64"), "X-PAYMENT-SIGNATURE": "x" },
      { "X-PAYMENT": valid.headers!["X-PAYMENT"]! },
      { "X-PAYMENT-SIGNATURE": valid.headers!["X-PAYMENT-SIGNATURE"]! },
      { "X-PAYMENT": valid.headers!["X-PAYMENT"]!, "X-PAYMENT-SIGNATURE": "1111" },
      { "X-PAYMENT": Buffer.from("\u00ff\u00fe").toString("base64"), "X-PAYMENT-SIGNATURE": "x" },
      { "X-PAYMENT": "A".repeat(9_000), "X-PAYMENT-SIGNATURE": "x" },
    ];
    const ranBefore = runs.node;
    for (const headers of garbage) {
      const response = await fetch(url, { headers });
      expect(response.status, JSON.stringify(headers).slice(0, 80)).toBe(402);
      expect(response.headers.get("x-payment-error")).toBe("malformed_headers");
    }
    // A syntactically fine payload the facilitator's strict parser refuses is a 402 too.
    const bad = { scheme: "exact", network: "x", payload: { from: "x" }, signature: "sig" };
    const response = await fetch(url, {
      headers: { "X-PAYMENT": Buffer.from(JSON.stringify(bad)).toString("base64"), "X-PAYMENT-SIGNATURE": "sig" },
    });
    expect(response.status).toBe(402);
    expect(response.headers.get("x-payment-error")).toBe("malformed_payload");
    expect(runs.node).toBe(ranBefore);
  });

  it("facilitator unreachable → 503 and a refused API key → 502, the handler never runs", async () => {
    let ran = 0;
    const down = await serve(
      mount(
        x402Middleware(options({ facilitatorUrl: "http://127.0.0.1:9", token: test.system.token, network: test.system.network })),
        () => (ran += 1),
      ),
    );
    const badKey = await serve(
      mount(x402Middleware(options({ apiKey: "apg_wrong", token: test.system.token, network: test.system.network })), () => (ran += 1)),
    );
    servers.push(down, badKey);
    const paid = await authorizePayment(test.system, buyerKey, "buyer", `${down.origin}/r`, { x402: await challenge(`${down.origin}/r`) });
    expect((await fetch(`${down.origin}/r`, { headers: paid.headers! })).status).toBe(503);
    const paid2 = await authorizePayment(test.system, buyerKey, "buyer", `${badKey.origin}/r`, {
      x402: await challenge(`${badKey.origin}/r`),
    });
    expect((await fetch(`${badKey.origin}/r`, { headers: paid2.headers! })).status).toBe(502);
    expect(ran).toBe(0);
  });

  it("refuses options that cannot be right at construction", () => {
    expect(() => x402Middleware(options({ amount: "0.05" }))).toThrow(TypeError);
    expect(() => x402Middleware(options({ amount: "0" }))).toThrow(TypeError);
    expect(() => x402Middleware(options({ payTo: "nope" }))).toThrow(TypeError);
    expect(() => x402Middleware(options({ facilitatorUrl: "not a url" }))).toThrow(TypeError);
    expect(() => x402Middleware(options({ apiKey: "" }))).toThrow(TypeError);
  });
});

describe("x402Handler (fetch-style)", () => {
  it("402, then the handler once with the payment as its second argument; a replay is refused", async () => {
    const url = `${fetchStyle.origin}/item`;
    const requirement = await challenge(url);
    expect(requirement.resource).toBe(url);
    const before = await tokenBalanceUnits(test, payTo);
    const { headers, response } = await payAndRetry(url, requirement);
    expect(response.status).toBe(200);
    const body = (await response.json()) as { txHash: string; usdc: number };
    expect(body.usdc).toBe(0.05);
    expect((decodeBase64Json(response.headers.get("x-payment-response")) as { transaction: string }).transaction).toBe(body.txHash);
    expect(runs.fetch).toBe(1);
    expect(await tokenBalanceUnits(test, payTo)).toBe(before + PRICE_UNITS);
    const replay = await fetch(url, { headers });
    expect(replay.status).toBe(402);
    expect(replay.headers.get("x-payment-error")).toBe("nonce_reused");
    expect(runs.fetch).toBe(1);
  });
});
