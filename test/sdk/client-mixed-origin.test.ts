/**
 * One origin serving an x402 route and an MPP route (the SDK's own middlewares), paid by the
 * client against the whole system (scripts/system.ts). An x402 call on that origin must not cost
 * the origin's MPP session: the next MPP call is one request carrying the same session, not a new
 * negotiation and settlement. Nothing of ours is replaced: the client's `fetch` is only wrapped to
 * record the requests that reached the resource server.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSystem, type System } from "../../scripts/system.js";
import { Client, type FetchFunction } from "../../sdk/src/index.js";
import { mppMiddleware, type NodeMiddleware, type NodeRequest, x402Middleware } from "../../sdk/src/server/index.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { restCall } from "../support/rest.js";

const PRICE_UNITS = 1_000n;

let db: FreshDatabase;
let system: System;
let server: Server;
let origin: string;
let payer: Client;
const seen: string[] = [];

beforeAll(async () => {
  db = await createFreshDatabase();
  system = await startSystem({ databaseUrl: db.url, allowPrivateNetworks: true, logger: pino({ level: "warn" }) });
  const buyer = await system.createAccount("mixed-origin buyer");
  const seller = await system.createAccount("mixed-origin seller");
  const register = async (apiKey: string, agentId: string): Promise<string> => {
    const created = await restCall(system.apiUrl, "POST", "/v1/agents", { key: apiKey, body: { agentId } });
    expect(created.status).toBe(201);
    return (await restCall(system.apiUrl, "GET", `/v1/agents/${agentId}/wallet`, { key: apiKey })).body.address as string;
  };
  await register(buyer.apiKey, "mixed-payer");
  const payTo = await register(seller.apiKey, "mixed-api");
  const gateway = { facilitatorUrl: system.apiUrl, apiKey: seller.apiKey };
  const gates: Record<string, NodeMiddleware> = {
    "/x402": x402Middleware({ ...gateway, amount: PRICE_UNITS, token: "usdc", network: system.network, payTo }),
    "/mpp": mppMiddleware({ ...gateway, amount: PRICE_UNITS, paymentMethods: ["stablecoin"], sessionSupported: true, payTo }),
  };
  server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const gate = Object.entries(gates).find(([prefix]) => req.url?.startsWith(prefix))?.[1];
    const answer = (): void => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ ok: true }));
    };
    if (gate === undefined) return answer();
    gate(req as NodeRequest, res, answer);
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const recording: FetchFunction = (input, init) => {
    const url = String(input);
    if (url.startsWith(origin)) seen.push(`${init?.method ?? "GET"} ${new URL(url).pathname}`);
    return fetch(input, init);
  };
  payer = new Client({ agentId: "mixed-payer", apiKey: buyer.apiKey, baseUrl: system.apiUrl, fetch: recording });
  await payer.wallet.fund({ usdc: 1 });
}, 120_000);

afterAll(async () => {
  server?.closeAllConnections();
  server?.close();
  await system?.stop();
  await db?.drop();
});

describe("an x402 call on an origin whose MPP session the client holds", () => {
  it("keeps the session: the next MPP call is one request on the same session, charged on the ledger", async () => {
    const first = await payer.pay({ endpoint: `${origin}/mpp/a` });
    expect(first).toMatchObject({ paid: true, protocol: "mpp", status: 200 });
    expect(first.paid && first.sessionId).toEqual(expect.any(String));

    seen.length = 0;
    const x402 = await payer.pay({ endpoint: `${origin}/x402/b` });
    expect(x402).toMatchObject({ paid: true, protocol: "x402", status: 200 });
    // The session token went to the x402 route (402: it takes no MPP), then the paid retry.
    expect(seen).toEqual(["GET /x402/b", "GET /x402/b"]);

    seen.length = 0;
    const again = await payer.pay({ endpoint: `${origin}/mpp/c` });
    expect(again).toMatchObject({ paid: true, protocol: "mpp", status: 200 });
    expect(again.paid && again.sessionId).toBe(first.paid && first.sessionId);
    // No 402, no submission to the payment endpoint: the session paid it.
    expect(seen).toEqual(["GET /mpp/c"]);
    // A new charge, not the prepaid call of the first: its own ledger transaction.
    expect(again.paid && again.txHash).not.toBe(first.paid && first.txHash);
  });
});
