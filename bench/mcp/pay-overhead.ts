/**
 * What paying through the payments MCP server adds over `client.pay`, on the whole system
 * (`startSystem`) and one paid API on loopback behind `x402Middleware`: same agent, API and price,
 * interleaved round by round:
 *   - client.pay:         the TypeScript client (the baseline);
 *   - MCP pay, in memory: the official SDK `Client` calling `pay` over the in-memory transport (the
 *                         server's own cost: JSON-RPC, the argument check, the result's exact money);
 *   - MCP pay, /mcp:      the same over Streamable HTTP at the gateway's `/mcp` (stateless: a server
 *                         per request, key and agent checked, the tools' gateway calls in process).
 * Goal: MCP pay p50 at most 5 ms over client.pay. Prints the table; exits 1 only for a wrong answer.
 *
 *   npx tsx bench/mcp/pay-overhead.ts [--rounds 40 --warmup 5]
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Client as McpClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { createPaymentsMcpServer } from "../../sdk/src/mcp/server.js";
import { type NodeRequest, x402Middleware } from "../../sdk/src/server/index.js";
import { interleaved, roundsFlags, runPayBench } from "../client/pay-bench.js";
import { row, stats, TABLE_HEADER } from "../gateway/latency.js";

const ROUNDS = roundsFlags({ rounds: 40, warmup: 5 });
const PRICE_UNITS = 1_000n;
const GOAL_MS = 5;

void runPayBench("MCP pay overhead", 20, async ({ system, buyer, seller, payTo, client, wrong }) => {
  const gate = x402Middleware({
    facilitatorUrl: system.apiUrl,
    apiKey: seller.apiKey,
    amount: PRICE_UNITS,
    token: "usdc",
    network: system.network,
    payTo,
  });
  const api = createServer((req: IncomingMessage, res: ServerResponse) =>
    gate(req as NodeRequest, res, () => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ quote: 42 }));
    }),
  );
  await new Promise<void>((done) => api.listen(0, "127.0.0.1", done));
  const endpoint = `http://127.0.0.1:${(api.address() as AddressInfo).port}/quote`;

  const inMemory = new McpClient({ name: "bench", version: "1.0.0" });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await createPaymentsMcpServer({ agentId: "payer", apiKey: buyer.apiKey, baseUrl: system.apiUrl }).connect(serverSide);
  await inMemory.connect(clientSide);
  const overHttp = new McpClient({ name: "bench", version: "1.0.0" });
  await overHttp.connect(
    new StreamableHTTPClientTransport(new URL(`${system.apiUrl}/mcp?agent=payer`), {
      requestInit: { headers: { authorization: `Bearer ${buyer.apiKey}` } },
    }),
  );

  const direct = async (): Promise<void> => {
    const result = await client.pay({ endpoint });
    if (!result.paid || result.status !== 200) wrong.push(`client.pay: ${result.status}`);
  };
  const viaMcp = (mcp: McpClient, label: string) => async (): Promise<void> => {
    const result = (await mcp.callTool({ name: "pay", arguments: { endpoint } })) as {
      isError?: boolean;
      structuredContent?: { paid?: boolean };
    };
    if (result.isError === true || result.structuredContent?.paid !== true) wrong.push(`${label}: ${JSON.stringify(result).slice(0, 200)}`);
  };
  const samples = await interleaved({ direct, memory: viaMcp(inMemory, "in memory"), http: viaMcp(overHttp, "/mcp") }, ROUNDS);
  await inMemory.close();
  await overHttp.close();
  api.closeAllConnections();
  api.close();

  const s = { direct: stats(samples.direct), memory: stats(samples.memory), http: stats(samples.http) };
  console.log(TABLE_HEADER);
  console.log(row("client.pay, x402 (baseline)", s.direct));
  console.log(row("MCP pay, in-memory transport", s.memory));
  console.log(row("MCP pay, Streamable HTTP at /mcp", s.http));
  for (const [label, measured] of [
    ["MCP pay (in memory) over client.pay", s.memory],
    ["MCP pay (/mcp) over client.pay", s.http],
  ] as const) {
    const over_ms = measured.p50 - s.direct.p50;
    console.log(`${label}: p50 +${over_ms.toFixed(2)} ms, goal <= ${GOAL_MS} ms: ${over_ms <= GOAL_MS ? "met" : "NOT met"}`);
  }
}).catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
