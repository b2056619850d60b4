/**
 * The payments MCP server against the whole system (scripts/system.ts: our program on the local
 * ledger, Postgres, the indexer, the gateway) and a paid x402 API on loopback settling through
 * the system's facilitator, driven by the official SDK's `Client`:
 *
 * - over stdio, spawned exactly as the README's MCP host configuration says (read from the README),
 *   with a key scoped to the agent as the README issues it;
 * - over Streamable HTTP at the gateway's `/mcp`, each opened with a key scoped to its agent.
 *
 * Every tool, every refusal (per-call limit, domain, daily budget, insufficient funds, max price),
 * bad arguments, isolation between accounts and between agents (an agent key reaches its own agent
 * only, and cannot raise its limits or withdraw), and a payment made through MCP being on the
 * chain and in GraphQL.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Client as McpClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { Keypair, type PublicKey } from "@solana/web3.js";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tokenBalanceUnits } from "../../api/gateway/chain/ledger.js";
import { startSystem, type System } from "../../scripts/system.js";
import { createPaymentsMcpServer } from "../../sdk/src/mcp/server.js";
import { type PaidApi, startPaidApi } from "../gateway/support/paid-api.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { agentKey } from "../support/agent-keys.js";
import { pollUntil } from "../support/poll.js";
import { type RestAnswer, restCall } from "../support/rest.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const PRICE_UNITS = 50_000n; // 0.05 usdc
const INDEX_DEADLINE_MS = 20_000;

let db: FreshDatabase;
let system: System;
let apiKey: string;
let otherKey: string;
let paid: PaidApi;
let payee: PublicKey;
const open: McpClient[] = [];

type ToolAnswer = { isError?: boolean; content: Array<{ type: string; text?: string }>; structuredContent?: Record<string, any> };

function rest(method: string, path: string, body?: unknown, key = apiKey): Promise<RestAnswer> {
  return restCall(system.apiUrl, method, path, { key, body, lenientJson: true });
}

async function agent(agentId: string, fundUsdc: number, policy?: Record<string, unknown>, key = apiKey): Promise<void> {
  expect((await rest("POST", "/v1/agents", { agentId }, key)).status).toBe(201);
  if (fundUsdc > 0) expect((await rest("POST", `/v1/agents/${agentId}/wallet/fund`, { usdc: fundUsdc }, key)).status).toBe(200);
  if (policy !== undefined) expect((await rest("PUT", `/v1/policies/${agentId}`, policy, key)).status).toBe(200);
}

/** A new key of `scope` in the account of `key` (POST /v1/api-keys, as an admin issues one). */
async function scopedKey(scope: string, key = apiKey): Promise<string> {
  const issued = await rest("POST", "/v1/api-keys", { scope }, key);
  expect(issued.status, issued.text).toBe(201);
  expect(issued.body.scope).toBe(scope);
  return issued.body.apiKey as string;
}

/** The server of `agentId` at `/mcp`, opened with a key scoped to that agent unless `key` is given. */
async function overHttp(agentId: string, key?: string): Promise<McpClient> {
  key ??= await scopedKey(`agent:${agentId}`);
  const client = new McpClient({ name: "test-host", version: "1.0.0" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${system.apiUrl}/mcp?agent=${encodeURIComponent(agentId)}`), {
      requestInit: { headers: { authorization: `Bearer ${key}` } },
    }),
  );
  open.push(client);
  return client;
}

/** The README's MCP host configuration, with its placeholders filled in for this system. */
function readmeConfiguration(agentId: string, key: string): { command: string; args: string[]; env: Record<string, string> } {
  const readme = readFileSync(resolve(ROOT, "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("### Pay from an MCP host"));
  const block = /```json\n([\s\S]*?)\n```/.exec(section)![1]!;
  const server = JSON.parse(block).mcpServers.payments as { command: string; args: string[]; env: Record<string, string> };
  return {
    command: server.command,
    args: server.args.map((arg) => arg.replace("/path/to/agent-payment-gateway", ROOT).replace(/^researcher$/, agentId)),
    env: { ...server.env, APG_API_KEY: server.env.APG_API_KEY!.replace("<API key>", key), APG_BASE_URL: system.apiUrl },
  };
}

async function call(client: McpClient, name: string, args: Record<string, unknown> = {}): Promise<ToolAnswer> {
  return (await client.callTool({ name, arguments: args })) as ToolAnswer;
}

/** Runs a command that is expected to exit by itself: its exit code and stderr. */
async function exitOf(command: string, args: string[], env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ["pipe", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => {
    stderr += chunk.toString("utf8");
  });
  const code = await new Promise<number | null>((done) => child.on("exit", done));
  return { code, stderr };
}

async function reservationCount(agentId: string): Promise<number> {
  const { rows } = await system.pool.query<{ n: string }>("SELECT count(*) AS n FROM spend_reservations WHERE agent_id = $1", [
    await agentKey(system.pool, agentId),
  ]);
  return Number(rows[0]!.n);
}

const endpoint = (path = "/x402/report"): string => `${paid.origin}${path}`;

beforeAll(async () => {
  db = await createFreshDatabase();
  system = await startSystem({ databaseUrl: db.url, port: 0, allowPrivateNetworks: true, logger: pino({ level: "silent" }) });
  apiKey = (await system.createAccount("mcp tests")).apiKey;
  otherKey = (await system.createAccount("another account")).apiKey;
  payee = Keypair.generate().publicKey;
  paid = await startPaidApi(() => ({
    x402: {
      facilitator: system.facilitator,
      terms: { scheme: "exact", network: system.network, token: system.token, amountUnits: PRICE_UNITS, payTo: payee.toBase58() },
    },
  }));
});

afterAll(async () => {
  await Promise.all(open.map((client) => client.close().catch(() => undefined)));
  await paid?.close();
  await system?.stop();
  await db?.drop();
});

describe("stdio, started as the README configures it", () => {
  it("the README issues the key with one command, scoped to the agent, and passes no --allow-admin-key", () => {
    const readme = readFileSync(resolve(ROOT, "README.md"), "utf8");
    const section = readme.slice(readme.indexOf("### Pay from an MCP host"), readme.indexOf("### Works with"));
    expect(section).toContain("npm run admin -- issue-key <accountId> --scope agent:researcher");
    expect(readmeConfiguration("researcher", "k").args).not.toContain("--allow-admin-key");
  });

  it("refuses to start with an admin key (exit 2) unless --allow-admin-key, and never prints the key", async () => {
    await agent("stdio-strict", 0);
    const config = readmeConfiguration("stdio-strict", apiKey);
    const refused = await exitOf(config.command, config.args, config.env);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("admin key");
    expect(refused.stderr).toContain("--scope agent:stdio-strict");
    expect(refused.stderr).not.toContain(apiKey);

    // With --allow-admin-key it serves: it answers tools/list on stdio.
    const transport = new StdioClientTransport({ ...config, args: [...config.args, "--allow-admin-key"], stderr: "pipe" });
    const client = new McpClient({ name: "test-host", version: "1.0.0" });
    await client.connect(transport);
    open.push(client);
    expect((await client.listTools()).tools.length).toBeGreaterThan(0);
  });

  it("refuses a key scoped to another agent and an approver key (exit 2, a message naming the scope)", async () => {
    await agent("stdio-other", 0);
    const config = readmeConfiguration("stdio-strict", apiKey);
    const otherAgentsKey = await scopedKey("agent:stdio-other");
    const wrongAgent = await exitOf(config.command, config.args, { ...config.env, APG_API_KEY: otherAgentsKey });
    expect(wrongAgent.code).toBe(2);
    expect(wrongAgent.stderr).toContain("scoped to agent:stdio-other, not to agent:stdio-strict");
    expect(wrongAgent.stderr).not.toContain(otherAgentsKey);
    // --allow-admin-key allows an admin key, never another agent's.
    expect((await exitOf(config.command, [...config.args, "--allow-admin-key"], { ...config.env, APG_API_KEY: otherAgentsKey })).code).toBe(
      2,
    );

    const approverKey = await scopedKey("approver");
    const approver = await exitOf(config.command, config.args, { ...config.env, APG_API_KEY: approverKey });
    expect(approver.code).toBe(2);
    expect(approver.stderr).toContain("approver key: it cannot pay");
  });

  it("refuses a key given on the command line (exit 2)", async () => {
    const config = readmeConfiguration("stdio-strict", apiKey);
    const { code, stderr } = await exitOf(config.command, [...config.args, "--api-key", apiKey], config.env);
    expect(code).toBe(2);
    expect(stderr).toContain("APG_API_KEY");
    expect(stderr).not.toContain(apiKey);
  });

  it("pays a paid API with a key scoped to the agent: the payment is on the chain and in GraphQL, and the resources show it", async () => {
    await agent("researcher", 1);
    const researcherKey = await scopedKey("agent:researcher");
    const config = readmeConfiguration("researcher", researcherKey);
    const transport = new StdioClientTransport({ ...config, stderr: "pipe" });
    let stderr = "";
    transport.stderr?.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8");
    });
    const client = new McpClient({ name: "test-host", version: "1.0.0" });
    await client.connect(transport);
    open.push(client);
    const before = await tokenBalanceUnits(system.ledger, payee);

    const answer = await call(client, "pay", { endpoint: endpoint(), maxPrice: "0.05" });
    expect(answer.isError, JSON.stringify(answer)).toBeFalsy();
    const result = answer.structuredContent!;
    expect(result).toMatchObject({ paid: true, status: 200, protocol: "x402", amountPaid: "0.050000", amountPaidUnits: "50000" });
    expect(result.data).toEqual({ data: "paid content of /x402/report" });
    expect(JSON.parse(answer.content[0]!.text!)).toEqual(result);
    expect(await tokenBalanceUnits(system.ledger, payee)).toBe(before + PRICE_UNITS);

    const indexed = await pollUntil(
      async () => {
        const found = await restCall(system.apiUrl, "POST", "/graphql", {
          key: apiKey,
          body: { query: `{ transaction(txHash: "${result.txHash}") { txHash agentId amountPaid endpoint protocol } }` },
        });
        return found.body.data.transaction;
      },
      { timeoutMs: INDEX_DEADLINE_MS, intervalMs: 100, what: "the MCP payment indexed" },
    );
    expect(indexed).toEqual({
      txHash: result.txHash,
      agentId: "researcher",
      amountPaid: result.amountPaid,
      endpoint: `${paid.origin.replace(/^http:\/\//, "")}/x402/report`,
      protocol: "x402",
    });

    const { resources } = await client.listResources();
    expect(resources.map((resource) => resource.uri)).toEqual([
      "apg://agents/researcher/policy",
      "apg://agents/researcher/transactions/recent",
    ]);
    const recent = await client.readResource({ uri: "apg://agents/researcher/transactions/recent" });
    expect(JSON.parse((recent.contents[0] as { text: string }).text).transactions[0].txHash).toBe(result.txHash);
    const policy = await client.readResource({ uri: "apg://agents/researcher/policy" });
    expect(JSON.parse((policy.contents[0] as { text: string }).text)).toMatchObject({ agentId: "researcher", usedToday: "0.050000" });
    expect(stderr).not.toContain(researcherKey);
  });
});

describe("budget warnings", () => {
  it("a payment that brings the daily budget to its warning level sends a log notification (a transport with a stream)", async () => {
    await agent("warned", 1, { dailyBudget: { usdc: 0.06 } });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    const warnedKey = await scopedKey("agent:warned");
    await createPaymentsMcpServer({ agentId: "warned", apiKey: warnedKey, baseUrl: system.apiUrl }).connect(serverSide);
    const client = new McpClient({ name: "test-host", version: "1.0.0" });
    const warnings: unknown[] = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => {
      warnings.push(notification.params);
    });
    await client.connect(clientSide);
    open.push(client);
    expect((await call(client, "pay", { endpoint: endpoint("/x402/warned") })).isError).toBeFalsy();
    const warning = await pollUntil(() => warnings[0], { timeoutMs: 10_000, intervalMs: 50, what: "the budget warning" });
    expect(warning).toMatchObject({
      level: "warning",
      logger: "budget",
      data: { event: "budget.warning", agentId: "warned", budgetState: "warning", usedToday: "0.050000", dailyBudget: "0.060000" },
    });
  });
});

describe("Streamable HTTP at /mcp", () => {
  it("lists exactly the read and pay tools: none changes the policy, funds, withdraws or manages keys", async () => {
    await agent("lister", 0);
    const client = await overHttp("lister");
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name)).toEqual([
      "pay",
      "quote",
      "balance",
      "wallet",
      "spend",
      "transactions",
      "payment_tree",
      "policy",
      "call_paid_tool",
    ]);
    for (const tool of tools) expect(tool.inputSchema.type).toBe("object");
    const answer = await client.callTool({ name: "set_policy", arguments: { dailyBudget: "1000" } }).catch((error: unknown) => error);
    expect(String(answer)).toContain("no tool named");
  });

  it("every read tool answers exact money for the agent", async () => {
    await agent("reader", 1.25, { dailyBudget: { usdc: 1 }, perCallLimit: { usdc: 0.1 } });
    const client = await overHttp("reader");
    const wallet = (await call(client, "wallet")).structuredContent!;
    expect(wallet).toMatchObject({ agentId: "reader", network: system.network, balance: "1.250000", balanceUnits: "1250000" });
    expect(wallet.address).toMatch(/^[1-9A-HJ-NP-Za-km-z]{32,44}$/);
    expect((await call(client, "balance")).structuredContent).toEqual({ agentId: "reader", balance: "1.250000", balanceUnits: "1250000" });

    const paidAnswer = (await call(client, "pay", { endpoint: endpoint("/x402/read") })).structuredContent!;
    expect(paidAnswer.amountPaidUnits).toBe("50000");
    const policy = (await call(client, "policy")).structuredContent!;
    expect(policy).toMatchObject({ agentId: "reader", dailyBudget: "1.000000", perCallLimit: "0.100000", budgetState: "open" });
    expect(policy.usedTodayUnits).toBe("50000");
    const listed = await pollUntil(
      async () => {
        const answer = (await call(client, "transactions", { limit: 5 })).structuredContent!;
        return answer.transactions.length > 0 ? answer.transactions : undefined;
      },
      { timeoutMs: INDEX_DEADLINE_MS, intervalMs: 100, what: "the payment listed" },
    );
    expect(listed[0]).toMatchObject({ txHash: paidAnswer.txHash, agentId: "reader", amountPaid: "0.050000", amountPaidUnits: "50000" });
    const spend = (await call(client, "spend", { window: "24h" })).structuredContent!;
    expect(spend).toMatchObject({ agentId: "reader", window: "24h", totalUnits: "50000", txCount: 1 });
    const tree = (await call(client, "payment_tree", { rootTxHash: paidAnswer.txHash })).structuredContent!;
    expect(tree.found).toBe(true);
    expect(tree.tree.totals).toMatchObject({ amountUnits: "50000", transactionCount: 1 });
  });

  it("quote prices the 402 and runs the policy as a dry run: nothing is reserved, nothing moves", async () => {
    await agent("quoter", 1, { perCallLimit: { usdc: 0.01 } });
    const client = await overHttp("quoter");
    const answer = (await call(client, "quote", { endpoint: endpoint("/x402/quote") })).structuredContent!;
    expect(answer.paymentRequired).toBe(true);
    expect(answer.wouldPay).toBe(false);
    expect(answer.offers).toHaveLength(1);
    expect(answer.offers[0]).toMatchObject({
      protocol: "x402",
      format: "spec",
      amount: "0.050000",
      amountUnits: "50000",
      payTo: payee.toBase58(),
    });
    expect(answer.offers[0].policy).toMatchObject({
      allowed: false,
      decision: "reject",
      reasonCode: "per_call_limit_exceeded",
      errorClass: "PolicyViolationError",
    });
    expect(await reservationCount("quoter")).toBe(0);
    expect((await call(client, "balance")).structuredContent!.balanceUnits).toBe("1000000");
    // A free answer is no 402.
    expect((await call(client, "quote", { endpoint: `${system.apiUrl}/graphql` })).structuredContent!.paymentRequired).toBe(false);
  });

  it("refusals are tool errors with the spec-7 reason, the error class and the code", async () => {
    await agent("limited", 1, { perCallLimit: { usdc: 0.01 } });
    await agent("fenced", 1, { allowedDomains: ["api.example.com"] });
    await agent("budgeted", 1, { dailyBudget: { usdc: 0.08 } });
    await agent("broke", 0.01);

    const perCall = await call(await overHttp("limited"), "pay", { endpoint: endpoint() });
    expect(perCall.isError).toBe(true);
    expect(perCall.content[0]!.text).toBe("per_call_limit_exceeded: requested 0.05 usdc, limit is 0.01 usdc");
    expect(perCall.structuredContent).toMatchObject({
      errorClass: "PolicyViolationError",
      code: "POLICY_VIOLATION",
      reasonCode: "per_call_limit_exceeded",
    });

    const domain = await call(await overHttp("fenced"), "pay", { endpoint: endpoint() });
    expect(domain.isError).toBe(true);
    expect(domain.structuredContent).toMatchObject({ errorClass: "DomainNotAllowedError", code: "POLICY_VIOLATION", domain: "127.0.0.1" });
    expect(domain.content[0]!.text).toMatch(/^domain_not_allowed/);

    const budgeted = await overHttp("budgeted");
    expect((await call(budgeted, "pay", { endpoint: endpoint() })).isError).toBeFalsy();
    const budget = await call(budgeted, "pay", { endpoint: endpoint() });
    expect(budget.isError).toBe(true);
    expect(budget.structuredContent).toMatchObject({ errorClass: "DailyBudgetExceededError", code: "POLICY_VIOLATION" });
    expect(budget.content[0]!.text).toMatch(
      /^daily_budget_exceeded: requested 0.05 usdc, limit is 0.08 usdc \(used 0.05 usdc, left 0.03 usdc\)$/,
    );

    const funds = await call(await overHttp("broke"), "pay", { endpoint: endpoint() });
    expect(funds.isError).toBe(true);
    expect(funds.structuredContent).toMatchObject({ errorClass: "InsufficientFundsError", code: "INSUFFICIENT_FUNDS" });
  });

  it("two concurrent MCP payments against a budget that holds one: exactly one is paid, once", async () => {
    await agent("racer", 1, { dailyBudget: { usdc: 0.05 } });
    const [first, second] = [await overHttp("racer"), await overHttp("racer")];
    const before = await tokenBalanceUnits(system.ledger, payee);
    const answers = await Promise.all([
      call(first!, "pay", { endpoint: endpoint("/x402/race") }),
      call(second!, "pay", { endpoint: endpoint("/x402/race") }),
    ]);
    const paidOnes = answers.filter((answer) => answer.isError !== true);
    expect(paidOnes).toHaveLength(1);
    const refused = answers.find((answer) => answer.isError === true)!;
    expect(refused.structuredContent).toMatchObject({ errorClass: "DailyBudgetExceededError", code: "POLICY_VIOLATION" });
    expect(await tokenBalanceUnits(system.ledger, payee)).toBe(before + PRICE_UNITS);
    const { rows } = await system.pool.query<{ status: string }>("SELECT status FROM spend_reservations WHERE agent_id = $1", [
      await agentKey(system.pool, "racer"),
    ]);
    expect(rows.map((row) => row.status)).toEqual(["settled"]);
    expect((await call(first!, "policy")).structuredContent).toMatchObject({ usedTodayUnits: "50000", budgetState: "exhausted" });
  });

  it("maxPrice below the price refuses before anything is authorized", async () => {
    await agent("thrifty", 1);
    const client = await overHttp("thrifty");
    const before = await tokenBalanceUnits(system.ledger, payee);
    const answer = await call(client, "pay", { endpoint: endpoint(), maxPrice: "0.049999" });
    expect(answer.isError).toBe(true);
    expect(answer.content[0]!.text).toBe("max_price_exceeded: requested 0.05 usdc, limit is 0.049999 usdc");
    expect(answer.structuredContent).toMatchObject({ errorClass: "PolicyViolationError", reasonCode: "max_price_exceeded" });
    expect(await reservationCount("thrifty")).toBe(0);
    expect(await tokenBalanceUnits(system.ledger, payee)).toBe(before);
    expect((await call(client, "balance")).structuredContent!.balanceUnits).toBe("1000000");
  });

  it("bad arguments are schema errors, not crashes, and the server keeps serving", async () => {
    await agent("careless", 1);
    const client = await overHttp("careless");
    const cases: Array<[string, Record<string, unknown>, string]> = [
      ["pay", {}, "endpoint: is required"],
      ["pay", { endpoint: 42 }, "endpoint: must be a string"],
      ["pay", { endpoint: endpoint(), maxPrice: "-1" }, "maxPrice: must match"],
      ["pay", { endpoint: endpoint(), maxPrice: "0.0000001" }, "maxPrice: must match"],
      ["pay", { endpoint: "not a url" }, "endpoint is not a URL"],
      ["pay", { endpoint: endpoint(), method: "BREW" }, "method: must be one of"],
      ["pay", { endpoint: endpoint(), withdrawTo: "x" }, "withdrawTo: is not an argument"],
      ["transactions", { limit: 0 }, "limit: must be at least 1"],
      ["payment_tree", { rootTxHash: "0OIl" }, "rootTxHash: must match"],
      ["spend", { window: "1y" }, "window: must be one of"],
    ];
    for (const [name, args, message] of cases) {
      const answer = await call(client, name, args);
      expect(answer.isError, `${name} ${JSON.stringify(args)}`).toBe(true);
      expect(answer.content[0]!.text).toContain(message);
      expect(answer.structuredContent).toMatchObject({ code: "BAD_USER_INPUT" });
    }
    // REST's body limit holds for MCP messages too.
    const oversized = await fetch(`${system.apiUrl}/mcp?agent=careless`, {
      method: "POST",
      headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "tools/call",
        params: { name: "pay", arguments: { endpoint: "x".repeat(70_000) } },
      }),
    });
    expect(oversized.status).toBe(413);
    expect(await reservationCount("careless")).toBe(0);
    expect((await call(client, "balance")).isError).toBeFalsy();
  });

  it("isolation: another account's key reaches none of this account's agents or payments", async () => {
    await agent("private-agent", 1);
    const mine = await overHttp("private-agent");
    const payment = (await call(mine, "pay", { endpoint: endpoint("/x402/private") })).structuredContent!;

    const stranger = await fetch(`${system.apiUrl}/mcp?agent=private-agent`, {
      method: "POST",
      headers: { authorization: `Bearer ${otherKey}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    expect(stranger.status).toBe(404);
    expect((await stranger.json()).code).toBe("NOT_FOUND");

    const anonymous = await fetch(`${system.apiUrl}/mcp?agent=private-agent`, { method: "POST", body: "{}" });
    expect(anonymous.status).toBe(401);
    const forged = await fetch(`${system.apiUrl}/mcp?agent=private-agent`, {
      method: "POST",
      headers: { authorization: "Bearer apg_forged" },
    });
    expect(forged.status).toBe(401);

    await agent("their-agent", 0, undefined, otherKey);
    const theirs = await overHttp("their-agent", otherKey);
    const tree = (await call(theirs, "payment_tree", { rootTxHash: payment.txHash })).structuredContent!;
    expect(tree).toEqual({ rootTxHash: payment.txHash, found: false, tree: null });
    expect((await call(theirs, "transactions")).structuredContent!.transactions).toEqual([]);
    expect((await call(theirs, "spend")).structuredContent!.totalUnits).toBe("0");
  });
});

describe("an agent key over MCP: its own agent only, read-only limits", () => {
  const mcpPost = (agentId: string, key: string): Promise<Response> =>
    fetch(`${system.apiUrl}/mcp?agent=${agentId}`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });

  it("/mcp opens the key's own agent only: another agent, or an approver key, is 403 FORBIDDEN_SCOPE", async () => {
    await agent("scoped-self", 1);
    await agent("scoped-neighbour", 1);
    const key = await scopedKey("agent:scoped-self");
    const other = await mcpPost("scoped-neighbour", key);
    expect(other.status).toBe(403);
    expect(other.headers.get("content-type")).toContain("application/problem+json");
    expect(await other.json()).toMatchObject({ status: 403, code: "FORBIDDEN_SCOPE", scope: "agent:scoped-self" });
    expect((await mcpPost("scoped-self", key)).status).toBe(200);

    const approver = await mcpPost("scoped-self", await scopedKey("approver"));
    expect(approver.status).toBe(403);
    expect((await approver.json()).code).toBe("FORBIDDEN_SCOPE");
  });

  it("cannot raise its limits or withdraw: no such tool, and the REST calls under them are 403 for its key", async () => {
    await agent("scoped-limits", 1, { dailyBudget: { usdc: 0.1 }, perCallLimit: { usdc: 0.06 } });
    const key = await scopedKey("agent:scoped-limits");
    const client = await overHttp("scoped-limits", key);
    const names = (await client.listTools()).tools.map((tool) => tool.name);
    for (const name of names) expect(name).not.toMatch(/policy_(set|update)|set_|update|withdraw|fund|key|limit/);
    for (const name of ["set_policy", "withdraw"]) {
      expect(String(await client.callTool({ name, arguments: {} }).catch((error: unknown) => error))).toContain("no tool named");
    }
    const raise = await rest("PUT", "/v1/policies/scoped-limits", { dailyBudget: { usdc: 1000 } }, key);
    expect(raise.status).toBe(403);
    expect(raise.body.code).toBe("FORBIDDEN_SCOPE");
    const withdraw = await rest("POST", "/v1/agents/scoped-limits/wallet/withdraw", { usdc: 0.5, to: payee.toBase58() }, key);
    expect(withdraw.status).toBe(403);
    expect(withdraw.body.code).toBe("FORBIDDEN_SCOPE");
    // Nothing changed: the policy and the balance are as the admin set them.
    expect((await call(client, "policy")).structuredContent).toMatchObject({ dailyBudget: "0.100000", perCallLimit: "0.060000" });
    expect((await call(client, "balance")).structuredContent!.balanceUnits).toBe("1000000");
  });

  it("sees no other agent: the tools of a server for another agent are refused by the gateway, and no tool takes an agent", async () => {
    await agent("scoped-me", 1);
    await agent("scoped-them", 1, { dailyBudget: { usdc: 3 } });
    const theirs = await overHttp("scoped-them");
    expect((await call(theirs, "pay", { endpoint: endpoint("/x402/theirs") })).isError).toBeFalsy();
    const myKey = await scopedKey("agent:scoped-me");
    const mine = await overHttp("scoped-me", myKey);
    const sneaky = await call(mine, "transactions", { agentId: "scoped-them" });
    expect(sneaky.isError).toBe(true);
    expect(sneaky.content[0]!.text).toContain("agentId: is not an argument");

    // A server for the other agent, run with this key (as a host could): every read is 403 at the gateway.
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await createPaymentsMcpServer({ agentId: "scoped-them", apiKey: myKey, baseUrl: system.apiUrl }).connect(serverSide);
    const wrong = new McpClient({ name: "test-host", version: "1.0.0" });
    await wrong.connect(clientSide);
    open.push(wrong);
    for (const [name, args] of [
      ["transactions", {}],
      ["policy", {}],
      ["balance", {}],
      ["spend", {}],
      ["pay", { endpoint: endpoint("/x402/not-mine") }],
    ] as const) {
      const answer = await call(wrong, name, args);
      expect(answer.isError, `${name}: ${JSON.stringify(answer)}`).toBe(true);
      expect(answer.structuredContent!.code, name).toBe("FORBIDDEN_SCOPE");
      expect(JSON.stringify(answer)).not.toContain("3.000000");
    }
    expect(await reservationCount("scoped-them")).toBe(1);
  });
});
