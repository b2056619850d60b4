/**
 * The client against the real server middleware of the same package (`<sdk>/server`:
 * `x402Middleware`, `mppMiddleware`) on a loopback node:http server, both talking to the whole
 * system (scripts/system.ts). The receipts contract end to end: `X-PAYMENT-RESPONSE`,
 * `X-MPP-Session` / `X-MPP-Receipt`, and a session charge the spend policy refuses.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Keypair, PublicKey } from "@solana/web3.js";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tokenBalanceUnits } from "../../api/gateway/chain/ledger.js";
import { startSystem, type System } from "../../scripts/system.js";
import { Client, type PaidResult, PolicyViolationError } from "../../sdk/src/index.js";
import { mppMiddleware, type NodeRequest, x402Middleware } from "../../sdk/src/server/index.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { restCall } from "../support/rest.js";

let db: FreshDatabase;
let system: System;
let buyerKey: string;
let server: Server;
let origin: string;
const payTo = Keypair.generate().publicKey.toBase58();
const handled: string[] = [];

async function agent(agentId: string, usdc: number): Promise<Client> {
  const created = await restCall(system.apiUrl, "POST", "/v1/agents", { key: buyerKey, body: { agentId } });
  expect(created.status, created.text).toBe(201);
  const sdk = new Client({ agentId, apiKey: buyerKey, baseUrl: system.apiUrl, retryBaseDelayMs: 10 });
  await sdk.wallet.fund({ usdc });
  return sdk;
}

beforeAll(async () => {
  db = await createFreshDatabase();
  system = await startSystem({ databaseUrl: db.url, port: 0, allowPrivateNetworks: true, logger: pino({ level: "silent" }) });
  buyerKey = (await system.createAccount("buyer")).apiKey;
  const sellerKey = (await system.createAccount("seller")).apiKey;
  const gateway = { facilitatorUrl: system.apiUrl, apiKey: sellerKey };
  const x402 = x402Middleware({ ...gateway, amount: 30_000n, token: system.token, network: system.network, payTo });
  const mpp = mppMiddleware({ ...gateway, amount: 10_000n, paymentMethods: ["stablecoin"], sessionSupported: true, payTo });
  server = createServer((incoming: IncomingMessage, res: ServerResponse) => {
    const req = incoming as NodeRequest;
    const middleware = (req.url ?? "").startsWith("/x402/") ? x402 : mpp;
    middleware(req, res, () => {
      const payment = req.payment as { txHash: string };
      handled.push(payment.txHash);
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ content: `paid ${req.url}`, txHash: payment.txHash }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  await system?.stop();
  await db?.drop();
});

describe("client ⇄ server middleware", () => {
  it("x402: the handler runs once with the payment the client reports", async () => {
    const sdk = await agent("mw-x402", 1);
    const result = (await sdk.pay({ endpoint: `${origin}/x402/report` })) as PaidResult<{ content: string; txHash: string }>;
    expect(result).toMatchObject({ paid: true, status: 200, protocol: "x402", amountPaid: { usdc: 0.03 } });
    expect(result.data).toEqual({ content: "paid /x402/report", txHash: result.txHash });
    expect(handled.filter((tx) => tx === result.txHash)).toHaveLength(1);
    expect(await sdk.wallet.balance()).toEqual({ usdc: 0.97 });
  });

  it("MPP: negotiated once, then paid by the session with the receipt's amount; a policy-refused charge ends in PolicyViolationError", async () => {
    const sdk = await agent("mw-mpp", 1);
    const before = await tokenBalanceUnits(system.ledger, new PublicKey(payTo));
    const first = (await sdk.pay({ endpoint: `${origin}/mpp/feed` })) as PaidResult;
    expect(first).toMatchObject({ paid: true, protocol: "mpp", amountPaid: { usdc: 0.01 } });
    expect(first.sessionId).toEqual(expect.any(String));

    const second = (await sdk.pay({ endpoint: `${origin}/mpp/feed` })) as PaidResult;
    expect(second).toMatchObject({ paid: true, protocol: "mpp", amountPaid: { usdc: 0.01 }, sessionId: first.sessionId });
    expect(second.headers["x-mpp-receipt"]).toBeDefined();
    expect(second.txHash).not.toBe(first.txHash);
    const after = await tokenBalanceUnits(system.ledger, new PublicKey(payTo));
    expect(after - before).toBe(20_000n);

    await sdk.policies.set({ perCallLimit: { usdc: 0.005 } });
    const error = await sdk.pay({ endpoint: `${origin}/mpp/feed` }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(PolicyViolationError);
    expect((error as PolicyViolationError).reason).toBe("per_call_limit_exceeded: requested 0.01 usdc, limit is 0.005 usdc");
    expect(await tokenBalanceUnits(system.ledger, new PublicKey(payTo))).toBe(after);
  });
});
