/**
 * MCP tools that charge, and agents that pay them, against the whole system on loopback:
 *
 * - an MCP server built with the official SDK (`McpServer`, Streamable HTTP) whose tool is
 *   guarded by our `paidTool`, paid by our payments MCP server's `call_paid_tool` over x402's MCP
 *   transport and over MPP's MCP binding, and by mppx's own MCP client (`McpClient.wrap` with
 *   `@solana/mpp`'s `solana` charge), all unmodified;
 * - an MCP server built with mppx's MCP server transport (`Transport.mcpSdk()`) and
 *   `@solana/mpp`'s charge, paid by our `call_paid_tool`;
 * - the policy deciding with the MCP server's host as the domain, `maxPrice`, a payment held for
 *   a person (a tool error at once, resumed by its key), and the unpaid answer's shape as x402's
 *   MCP transport specifies it.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { Client as McpClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { createKeyPairSignerFromBytes } from "@solana/kit";
import { solana } from "@solana/mpp/client";
import { Mppx as MppxServer, solana as solanaServer } from "@solana/mpp/server";
import type { Keypair, PublicKey } from "@solana/web3.js";
import { McpClient as MppxMcpClient } from "mppx/mcp-sdk/client";
import { Transport as MppxTransport } from "mppx/mcp-sdk/server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import type { TransferAuthorization } from "../../sdk/src/authorization.js";
import { parseAuthorization } from "../../sdk/src/authorization.js";
import { paymentMeta, paymentRequiredOffer } from "../../sdk/src/mcp/paid-tools.js";
import { paidTool, type X402Payment } from "../../sdk/src/server/index.js";
import { fundTokens, sellerAndBuyer, verifiedRecord } from "../interop/official-client-support.js";
import { feePayer, type InteropSetup, listen, payeeWallet, rest, startInterop, stopInterop, tokens } from "../interop/support.js";
import { fundedAgent } from "../sdk/server-support.js";

const PRICE = 30_000n; // 0.03 usdc
const MPPX_PRICE = 20_000n;
const SECRET = "mcp-paid-tool-challenge-secret-0123456789";

let setup: InteropSetup;
let sellerKey: string;
let payTo: string;
let outsider: Keypair;
let paidOrigin: string;
let mppxOrigin: string;
let mppxPayee: PublicKey;
const handled: X402Payment[] = [];
const open: McpClient[] = [];

type ToolAnswer = {
  isError?: boolean;
  content: Array<{ type: string; text?: string }>;
  structuredContent?: Record<string, any>;
  _meta?: any;
};

/** An MCP server answering each request with a fresh `McpServer` (stateless Streamable HTTP). */
function mcpHttp(build: () => McpServer) {
  return createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const server = build();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    await server.connect(transport);
    res.on("close", () => void server.close());
    await transport.handleRequest(req, res);
  });
}

function weatherServer(): McpServer {
  const server = new McpServer({ name: "weather", version: "1.0.0" });
  server.registerTool(
    "forecast",
    { description: "A paid forecast", inputSchema: { city: z.string() } },
    paidTool(
      {
        amount: PRICE,
        token: "usdc",
        payTo,
        facilitatorUrl: setup.test.system.apiUrl,
        apiKey: sellerKey,
        challengeSecret: SECRET,
        resource: `${paidOrigin}/mcp#forecast`,
      },
      ({ city }: { city: string }, _extra, payment) => {
        handled.push(payment);
        return { content: [{ type: "text", text: `sunny in ${city}` }], structuredContent: { city, forecast: "sunny" } };
      },
    ),
  );
  return server;
}

/** The builder of an MCP server whose tool charges with mppx's MCP transport and @solana/mpp's charge. */
async function mppxServer(): Promise<() => McpServer> {
  const { system } = setup.test;
  const sponsor = await feePayer(setup);
  const mppx = MppxServer.create({
    methods: [
      solanaServer.charge({
        recipient: mppxPayee.toBase58(),
        currency: system.token,
        decimals: system.localnet.info.decimals,
        network: "localnet",
        rpcUrl: system.localnet.info.rpcUrl,
        signer: await createKeyPairSignerFromBytes(sponsor.secretKey),
      }),
    ],
    secretKey: "mcp-interop-secret-key-0123456789abcdef-0123",
    realm: "127.0.0.1",
    transport: MppxTransport.mcpSdk(),
  });
  return () => {
    const server = new McpServer({ name: "mppx-tools", version: "1.0.0" });
    server.registerTool("quote", { description: "A paid quote", inputSchema: { symbol: z.string() } }, async ({ symbol }, extra) => {
      const result = await mppx.charge({ amount: MPPX_PRICE.toString() })(extra);
      if (result.status === 402) throw result.challenge;
      return result.withReceipt({ content: [{ type: "text" as const, text: `${symbol}: 42` }] });
    });
    return server;
  };
}

/** The payments server of `agentId` at `/mcp`, opened with a key scoped to that agent (as an agent runs it). */
async function paymentsServer(agentId: string): Promise<McpClient> {
  const issued = await rest(setup.test.system, setup.apiKey, "POST", "/v1/api-keys", { scope: `agent:${agentId}` });
  expect(issued.status).toBe(201);
  const client = new McpClient({ name: "agent-host", version: "1.0.0" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${setup.test.system.apiUrl}/mcp?agent=${agentId}`), {
      requestInit: { headers: { authorization: `Bearer ${issued.body.apiKey}` } },
    }),
  );
  open.push(client);
  return client;
}

async function agent(agentId: string, usdc: number, policy?: Record<string, unknown>): Promise<string> {
  const address = await fundedAgent(setup.test.system, setup.apiKey, agentId, usdc);
  if (policy !== undefined)
    expect((await rest(setup.test.system, setup.apiKey, "PUT", `/v1/policies/${agentId}`, policy)).status).toBe(200);
  return address;
}

async function callPaid(client: McpClient, args: Record<string, unknown>): Promise<ToolAnswer> {
  return (await client.callTool({ name: "call_paid_tool", arguments: args })) as ToolAnswer;
}

beforeAll(async () => {
  setup = await startInterop();
  ({ sellerKey, payTo, payer: outsider } = await sellerAndBuyer(setup.test));
  paidOrigin = await listen(
    setup,
    mcpHttp(() => weatherServer()),
  );
  mppxPayee = (await payeeWallet(setup)).publicKey;
  await fundTokens(setup.test, mppxPayee, 0n);
  mppxOrigin = await listen(setup, mcpHttp(await mppxServer()));
}, 180_000);

afterAll(async () => {
  await Promise.all(open.map((client) => client.close().catch(() => undefined)));
  await stopInterop(setup);
});

describe("paidTool on an official-SDK MCP server", () => {
  it("answers an unpaid call as x402's MCP transport and MPP's binding specify, and does not run the tool", async () => {
    const client = new McpClient({ name: "probe", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${paidOrigin}/mcp`)));
    open.push(client);
    const before = handled.length;
    const answer = (await client.callTool({ name: "forecast", arguments: { city: "Porto" } })) as ToolAnswer;
    expect(answer.isError).toBe(true);
    expect(answer.structuredContent).toMatchObject({
      x402Version: 2,
      resource: { url: `${paidOrigin}/mcp#forecast` },
      accepts: [{ scheme: "exact", amount: PRICE.toString(), payTo, asset: setup.test.system.token }],
    });
    const wrapped = JSON.parse(answer.content[0]!.text!);
    expect(wrapped["x402/error"]).toMatchObject({ code: 402, data: answer.structuredContent });
    const challenges = answer._meta["org.paymentauth/payment-required"].challenges;
    expect(challenges).toHaveLength(1);
    expect(challenges[0]).toMatchObject({ method: "solana", intent: "charge", realm: new URL(paidOrigin).host });
    expect(challenges[0].request).toMatchObject({ amount: PRICE.toString(), recipient: payTo });
    expect(handled.length).toBe(before);
  });

  it("call_paid_tool pays it over x402's MCP transport: the tool runs once, the payee is paid, the record names server and tool", async () => {
    const address = await agent("mcp-x402-buyer", 1);
    const client = await paymentsServer("mcp-x402-buyer");
    const before = { payee: await tokens(setup, payTo), payer: await tokens(setup, address), handled: handled.length };
    const answer = await callPaid(client, { server: `${paidOrigin}/mcp`, tool: "forecast", arguments: { city: "Lisbon" } });
    expect(answer.isError, JSON.stringify(answer)).toBeFalsy();
    const { result, payment } = answer.structuredContent!;
    expect(result).toMatchObject({ isError: false, structuredContent: { city: "Lisbon", forecast: "sunny" } });
    expect(payment).toMatchObject({ protocol: "x402", endpoint: `${paidOrigin}/mcp#forecast`, amount: "0.030000", amountUnits: "30000" });
    expect(handled.length).toBe(before.handled + 1);
    expect(handled.at(-1)).toMatchObject({ standard: "x402-v2", amountUnits: PRICE });
    expect(await tokens(setup, payTo)).toBe(before.payee + PRICE);
    expect(await tokens(setup, address)).toBe(before.payer - PRICE);
    const record = await verifiedRecord(setup.test, payment.settlementTxHash);
    expect(record).toMatchObject({ amountUnits: PRICE, protocol: "x402" });
    expect(record.txHash).toBe(payment.txHash);
    const listed = await rest(setup.test.system, setup.apiKey, "GET", `/v1/transactions/${payment.txHash}`);
    expect(listed.body.endpoint).toBe(`${new URL(paidOrigin).host}/mcp#forecast`);
  });

  it("call_paid_tool pays it over MPP's MCP binding when the agent's policy prefers MPP", async () => {
    await agent("mcp-mpp-buyer", 1, { protocolPreference: "mpp" });
    const client = await paymentsServer("mcp-mpp-buyer");
    const before = await tokens(setup, payTo);
    const answer = await callPaid(client, { server: `${paidOrigin}/mcp`, tool: "forecast", arguments: { city: "Faro" } });
    expect(answer.isError, JSON.stringify(answer)).toBeFalsy();
    expect(answer.structuredContent!.payment).toMatchObject({ protocol: "mpp", amountUnits: "30000" });
    expect(handled.at(-1)).toMatchObject({ protocol: "mpp", standard: "mpp-solana-charge" });
    expect(await tokens(setup, payTo)).toBe(before + PRICE);
    await verifiedRecord(setup.test, answer.structuredContent!.payment.settlementTxHash);
  });

  it("the policy sees the MCP server's host as the domain, and maxPrice refuses before signing", async () => {
    await agent("mcp-fenced", 1, { allowedDomains: ["tools.example.com"] });
    const before = handled.length;
    const fenced = await callPaid(await paymentsServer("mcp-fenced"), {
      server: `${paidOrigin}/mcp`,
      tool: "forecast",
      arguments: { city: "x" },
    });
    expect(fenced.isError).toBe(true);
    expect(fenced.structuredContent).toMatchObject({ errorClass: "DomainNotAllowedError", domain: "127.0.0.1" });

    const address = await agent("mcp-thrifty", 1);
    const thrifty = await callPaid(await paymentsServer("mcp-thrifty"), {
      server: `${paidOrigin}/mcp`,
      tool: "forecast",
      arguments: { city: "x" },
      maxPrice: "0.02",
    });
    expect(thrifty.isError).toBe(true);
    expect(thrifty.content[0]!.text).toBe("max_price_exceeded: requested 0.03 usdc, limit is 0.02 usdc");
    expect(await tokens(setup, address)).toBe(1_000_000n);
    expect(handled.length).toBe(before);

    // An MCP server that is not there (a refusal), and a tool the server does not have (its own tool error).
    const unreachable = await callPaid(await paymentsServer("mcp-thrifty"), { server: "http://127.0.0.1:9/mcp", tool: "forecast" });
    expect(unreachable.isError).toBe(true);
    expect(unreachable.structuredContent).toMatchObject({ errorClass: "PaymentError" });
    expect(unreachable.content[0]!.text).toContain("could not be reached");
    const unknown = await callPaid(await paymentsServer("mcp-thrifty"), { server: `${paidOrigin}/mcp`, tool: "no_such_tool" });
    // The official McpServer answers an unknown tool with a tool error: passed through as the result, nothing paid.
    expect(unknown.isError).toBeFalsy();
    expect(unknown.structuredContent!.result.isError).toBe(true);
    expect(unknown.structuredContent!.payment).toBeUndefined();
    expect(await tokens(setup, address)).toBe(1_000_000n);
  });

  it("a payment the policy holds is a tool error at once with approvalId, expiresAt and the key; that key resumes it once approved", async () => {
    const address = await agent("mcp-held", 1, { approval: { above: { usdc: "0.01" }, timeout: "10m", onTimeout: "deny" } });
    const client = await paymentsServer("mcp-held");
    const before = { payee: await tokens(setup, payTo), handled: handled.length };
    const call = { server: `${paidOrigin}/mcp`, tool: "forecast", arguments: { city: "Porto" } };
    const held = await callPaid(client, call);
    expect(held.isError).toBe(true);
    expect(held.structuredContent).toMatchObject({ errorClass: "ApprovalRequiredError", code: "APPROVAL_PENDING", status: 202 });
    const { approvalId, expiresAt, idempotencyKey } = held.structuredContent!;
    expect(idempotencyKey).toMatch(/^[0-9a-f-]{36}$/);
    expect(held.content[0]!.text).toContain(idempotencyKey);
    const approval = await rest(setup.test.system, setup.apiKey, "GET", `/v1/approvals/${approvalId}`);
    expect(approval.body).toMatchObject({ status: "pending", expiresAt, endpoint: `${paidOrigin}/mcp#forecast` });
    expect(handled.length).toBe(before.handled);

    // A person decides (the account's admin key); the same call with the key resumes it.
    const approved = await rest(setup.test.system, setup.apiKey, "POST", `/v1/approvals/${approvalId}/approve`, {});
    expect(approved.status).toBe(200);
    const paid = await callPaid(client, { ...call, idempotencyKey });
    expect(paid.isError, JSON.stringify(paid)).toBeFalsy();
    expect(paid.structuredContent!.payment).toMatchObject({ protocol: "x402", amountUnits: "30000" });
    expect(handled.length).toBe(before.handled + 1);
    expect(await tokens(setup, payTo)).toBe(before.payee + PRICE);
    expect(await tokens(setup, address)).toBe(1_000_000n - PRICE);
  });

  it("one payment replayed, even concurrently, runs the tool once and moves the money once", async () => {
    await agent("mcp-replayer", 1);
    const probe = new McpClient({ name: "replayer", version: "1.0.0" });
    await probe.connect(new StreamableHTTPClientTransport(new URL(`${paidOrigin}/mcp`)));
    open.push(probe);
    const unpaid = (await probe.callTool({ name: "forecast", arguments: { city: "Evora" } })) as ToolAnswer;
    const offer = paymentRequiredOffer(unpaid)!;
    const endpoint = `${paidOrigin}/mcp#forecast`;
    const authorized = await rest(setup.test.system, setup.apiKey, "POST", "/v1/agents/mcp-replayer/payments/authorize", {
      endpoint,
      x402v2: offer.x402v2,
    });
    expect(authorized.status, authorized.text).toBe(200);
    const meta = paymentMeta(parseAuthorization(authorized.body, endpoint) as TransferAuthorization);
    const before = { payee: await tokens(setup, payTo), handled: handled.length };
    const answers = (await Promise.all(
      [1, 2, 3].map(() => probe.callTool({ name: "forecast", arguments: { city: "Evora" }, _meta: meta })),
    )) as ToolAnswer[];
    expect(answers.filter((answer) => answer.isError !== true)).toHaveLength(1);
    expect(handled.length).toBe(before.handled + 1);
    expect(await tokens(setup, payTo)).toBe(before.payee + PRICE);
    const again = (await probe.callTool({ name: "forecast", arguments: { city: "Evora" }, _meta: meta })) as ToolAnswer;
    expect(again.isError).toBe(true);
    expect(again.structuredContent).toMatchObject({ x402Version: 2 });
    expect(handled.length).toBe(before.handled + 1);
  });

  it("mppx's MCP client (McpClient.wrap, @solana/mpp's solana charge) pays it, unmodified", async () => {
    const client = new McpClient({ name: "mppx-agent", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${paidOrigin}/mcp`)));
    open.push(client);
    const signer = await createKeyPairSignerFromBytes(outsider.secretKey);
    MppxMcpClient.wrap(client, { methods: [solana.charge({ signer, rpcUrl: setup.test.system.localnet.info.rpcUrl })] });
    const before = { payee: await tokens(setup, payTo), payer: await tokens(setup, outsider.publicKey) };
    const answer = (await client.callTool({ name: "forecast", arguments: { city: "Braga" } })) as ToolAnswer & { receipt?: any };
    expect(answer.isError).toBeFalsy();
    expect(answer.structuredContent).toEqual({ city: "Braga", forecast: "sunny" });
    expect(answer.receipt).toMatchObject({ method: "solana", status: "success" });
    expect(await tokens(setup, payTo)).toBe(before.payee + PRICE);
    expect(await tokens(setup, outsider.publicKey)).toBe(before.payer - PRICE);
    expect(await verifiedRecord(setup.test, answer.receipt.reference)).toMatchObject({ amountUnits: PRICE, protocol: "mpp" });
  });
});

describe("call_paid_tool against an MCP server built with mppx's MCP transport and @solana/mpp", () => {
  it("pays its -32042 payment-required error with the agent's wallet within the policy", async () => {
    const address = await agent("mcp-mppx-buyer", 1);
    const client = await paymentsServer("mcp-mppx-buyer");
    const before = { payee: await tokens(setup, mppxPayee), payer: await tokens(setup, address) };
    const answer = await callPaid(client, { server: `${mppxOrigin}/mcp`, tool: "quote", arguments: { symbol: "SOL" } });
    expect(answer.isError, JSON.stringify(answer)).toBeFalsy();
    const { result, payment } = answer.structuredContent!;
    expect(result.content).toEqual([{ type: "text", text: "SOL: 42" }]);
    expect(payment).toMatchObject({ protocol: "mpp", endpoint: `${mppxOrigin}/mcp#quote`, amountUnits: MPPX_PRICE.toString() });
    expect(await tokens(setup, mppxPayee)).toBe(before.payee + MPPX_PRICE);
    expect(await tokens(setup, address)).toBe(before.payer - MPPX_PRICE);
    expect(await verifiedRecord(setup.test, payment.settlementTxHash)).toMatchObject({ amountUnits: MPPX_PRICE, protocol: "mpp" });
  });
});
