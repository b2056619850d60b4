/**
 * The payments MCP server of one agent, on the official SDK's low-level `Server`: the tools of
 * `tools.ts`, two resources (the policy, the recent transactions), and budget warnings as MCP
 * log notifications. It reaches the gateway only through the agent's client (REST and GraphQL
 * with the API key), so a payment made here is the same payment `client.pay` makes: the same
 * policy check, reservation, signature, settlement and records.
 *
 * Any transport: `main.ts` connects it to stdio (`apg-mcp`), the gateway serves it over
 * Streamable HTTP at `/mcp` (api/gateway/mcp/).
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  CallToolRequestSchema,
  type CallToolResult,
  ErrorCode,
  McpError,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { Client } from "../client.js";
import type { FetchFunction } from "../transport.js";
import { PaidToolCaller } from "./paid-tools.js";
import { guardedFetch } from "./price-guard.js";
import { refusal } from "./refusals.js";
import { SERVER_NAME, SERVER_VERSION } from "./version.js";
import { findTool, readPolicy, readTransactions, runTool, TOOLS, type ToolContext } from "./tools.js";

export { SERVER_NAME, SERVER_VERSION };
/** How many payments the recent-transactions resource lists. */
export const RECENT_TRANSACTIONS = 20;

export interface PaymentsMcpOptions {
  /** The agent every tool acts for (a registered agent of the key's account). */
  readonly agentId: string;
  /** The gateway API key; kept in the client's transport, never in a result or a log. */
  readonly apiKey: string;
  /** The gateway (default http://127.0.0.1:4000). */
  readonly baseUrl?: string;
  /** The fetch the client uses for the gateway and the paid APIs (default the global one). */
  readonly fetch?: FetchFunction;
  readonly timeout?: number;
  readonly maxRetries?: number;
  readonly explorerRpcUrl?: string;
  /**
   * How long the `pay` tool waits for a person to decide a payment the policy held, in ms (default
   * 0: it answers at once with a tool error carrying `approvalId`, `expiresAt`, `idempotencyKey`).
   */
  readonly approvalTimeoutMs?: number;
  /** Budget warnings as MCP log notifications after payments (default true; off where no stream carries them). */
  readonly budgetNotifications?: boolean;
  /** Told of a failure that is this server's bug, not a refusal (the host gets a generic tool error). */
  readonly onUnexpectedError?: (error: unknown) => void;
}

const policyUri = (agentId: string): string => `apg://agents/${encodeURIComponent(agentId)}/policy`;
const transactionsUri = (agentId: string): string => `apg://agents/${encodeURIComponent(agentId)}/transactions/recent`;

/** A new server for one agent; connect it to a transport with `server.connect(transport)`. */
export function createPaymentsMcpServer(options: PaymentsMcpOptions): Server {
  const inner: FetchFunction = options.fetch ?? ((input, init) => fetch(input, init));
  const client = new Client({
    agentId: options.agentId,
    apiKey: options.apiKey,
    fetch: guardedFetch(inner),
    ...(options.baseUrl === undefined ? {} : { baseUrl: options.baseUrl }),
    ...(options.timeout === undefined ? {} : { timeout: options.timeout }),
    ...(options.maxRetries === undefined ? {} : { maxRetries: options.maxRetries }),
    ...(options.explorerRpcUrl === undefined ? {} : { explorerRpcUrl: options.explorerRpcUrl }),
    // An MCP host cannot block for minutes: a held payment is answered at once, resumed by its key.
    approvalTimeoutMs: options.approvalTimeoutMs ?? 0,
  });
  const server = new Server(
    { name: SERVER_NAME, version: SERVER_VERSION },
    {
      capabilities: { tools: {}, resources: {}, logging: {} },
      instructions:
        `Pays paid APIs (x402, MPP) for agent ${options.agentId} within its spend policy. ` +
        "Use quote to see a price and the policy's verdict without paying, pay (with maxPrice) to pay. " +
        "The policy is read-only here.",
    },
  );
  const context: ToolContext = {
    client,
    agentId: options.agentId,
    fetch: inner,
    paidTools: new PaidToolCaller(client.transport, options.agentId, inner),
    ...(options.budgetNotifications === false ? {} : { onBudgetState: (policy: Record<string, unknown>) => warnBudget(server, policy) }),
  };

  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: TOOLS.map((tool) => ({
      name: tool.name,
      title: tool.title,
      description: tool.description,
      inputSchema: tool.inputSchema as unknown as { type: "object"; [key: string]: unknown },
      annotations: { readOnlyHint: tool.name !== "pay", openWorldHint: tool.name === "pay" || tool.name === "quote" },
    })),
  }));

  server.setRequestHandler(CallToolRequestSchema, async (request): Promise<CallToolResult> => {
    const tool = findTool(request.params.name);
    if (tool === undefined)
      throw new McpError(ErrorCode.InvalidParams, `no tool named ${JSON.stringify(request.params.name.slice(0, 64))}`);
    try {
      const result = await runTool(tool, context, request.params.arguments);
      return { content: [{ type: "text", text: JSON.stringify(result) }], structuredContent: result };
    } catch (error) {
      const answer = refusal(error);
      if (answer.structuredContent.code === "INTERNAL_ERROR") options.onUnexpectedError?.(error);
      return answer;
    }
  });

  server.setRequestHandler(ListResourcesRequestSchema, () => ({
    resources: [
      { uri: policyUri(options.agentId), name: "policy", title: "Spend policy", mimeType: "application/json" },
      { uri: transactionsUri(options.agentId), name: "recent-transactions", title: "Recent transactions", mimeType: "application/json" },
    ],
  }));

  server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
    const { uri } = request.params;
    let value: unknown;
    if (uri === policyUri(options.agentId)) value = await readPolicy(context);
    else if (uri === transactionsUri(options.agentId))
      value = { transactions: await readTransactions(context, { limit: RECENT_TRANSACTIONS }) };
    else throw new McpError(RESOURCE_NOT_FOUND, `no resource ${JSON.stringify(uri.slice(0, 256))}`);
    return { contents: [{ uri, mimeType: "application/json", text: JSON.stringify(value) }] };
  });

  return server;
}

/** A budget at warning or exhausted, told to the host as an MCP log notification (never awaited). */
function warnBudget(server: Server, policy: Record<string, unknown>): void {
  server
    .sendLoggingMessage({
      level: "warning",
      logger: "budget",
      data: {
        event: "budget.warning",
        agentId: policy.agentId,
        budgetState: policy.budgetState,
        usedToday: policy.usedToday,
        dailyBudget: policy.dailyBudget,
      },
    })
    .catch(() => undefined);
}

/** MCP's code for a resource that does not exist (specification, "Resources: error handling"). */
const RESOURCE_NOT_FOUND = -32002;
