/**
 * The payments MCP server's tools: each a name, a description a model reads, its input schema
 * (checked by `checkArguments` before the tool runs) and what it does through the client. Money
 * in every result is exact: a decimal string (`amount`) beside base units (`amountUnits`), never
 * a float.
 *
 * No tool changes the policy, funds, withdraws, or manages keys or agents: an agent must not be
 * able to raise its own limits or move its money anywhere but to a paid API through `pay`. The
 * list here is the whole surface (test/mcp/ checks that no other tool exists).
 */
import type { Client } from "../client.js";
import type { PaymentResult } from "../pay/result.js";
import { readPaymentOffer } from "../payment-required.js";
import { unitsToDecimal, usdcToUnits } from "../money.js";
import { withMaxPrice } from "./price-guard.js";
import { offeredPrices } from "./offer-price.js";
import type { ObjectSchema } from "./input-schema.js";
import { checkArguments } from "./input-schema.js";
import type { FetchFunction } from "../transport.js";
import type { PaidToolCaller } from "./paid-tools.js";

/** What every tool works with: the agent's client (its transport carries the API key). */
export interface ToolContext {
  readonly client: Client;
  readonly agentId: string;
  /** The fetch for paid APIs (`quote`'s unpaid call; `pay` goes through the client's own). */
  readonly fetch: FetchFunction;
  /** Pays MCP tools that ask for payment (`call_paid_tool`). */
  readonly paidTools: PaidToolCaller;
  /** Told after a payment when the daily budget is at its warning level or exhausted. */
  readonly onBudgetState?: (policy: Record<string, unknown>) => void;
}

export interface ToolDefinition {
  readonly name: string;
  readonly title: string;
  readonly description: string;
  readonly inputSchema: ObjectSchema;
  readonly run: (context: ToolContext, args: Record<string, unknown>) => Promise<Record<string, unknown>>;
}

const ENDPOINT = { type: "string", description: "The paid API's URL (http or https).", maxLength: 2048 } as const;
const METHOD = {
  type: "string",
  description: "HTTP method (default GET).",
  enum: ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"],
} as const;
const HEADERS = { type: "object", description: "Request headers.", additionalProperties: { type: "string" } } as const;
const BODY = { description: "Request body: JSON, or a string sent as it is (not with GET or HEAD)." } as const;
/** A decimal USDC amount with at most 6 decimals. */
const DECIMAL_PATTERN = "^(0|[1-9][0-9]{0,12})(\\.[0-9]{1,6})?$";

/** Six decimals, as GraphQL writes every amount (`0.050000`), so results of different tools compare as text. */
export function fixedDecimal(units: bigint): string {
  return `${units / 1_000_000n}.${(units % 1_000_000n).toString().padStart(6, "0")}`;
}

const money = (units: bigint): { amount: string; amountUnits: string } => ({
  amount: fixedDecimal(units),
  amountUnits: units.toString(),
});

function paidResult(result: PaymentResult): Record<string, unknown> {
  if (!result.paid) return { paid: false, status: result.status, data: result.data ?? null };
  const amountPaid = money(usdcToUnits(result.amountPaid.usdc));
  return {
    paid: true,
    status: result.status,
    protocol: result.protocol,
    amountPaid: amountPaid.amount,
    amountPaidUnits: amountPaid.amountUnits,
    txHash: result.txHash,
    solanaExplorer: result.solanaExplorer,
    data: result.data ?? null,
    ...(result.sessionId === undefined ? {} : { sessionId: result.sessionId }),
    ...(result.settlementTxHash === undefined ? {} : { settlementTxHash: result.settlementTxHash }),
  };
}

const POLICY_FIELDS = `agentId dailyBudget dailyBudgetUnits perCallLimit perCallLimitUnits allowedDomains blockedDomains
  rateLimit { calls window } protocolPreference usedToday usedTodayUnits budgetState windowStart windowResetsAt
  rateUsage { calls limit window } updatedAt`;

export async function readPolicy(context: ToolContext): Promise<Record<string, unknown>> {
  const data = await context.client.transport.graphql<{ policy: Record<string, unknown> }>(
    `query ($agentId: ID!) { policy(agentId: $agentId) { ${POLICY_FIELDS} } }`,
    { agentId: context.agentId },
  );
  return data.policy;
}

const TRANSACTION_FIELDS = `txHash agentId protocol rail amountPaid amountPaidUnits endpoint domain policyCheck parentTxHash
  solanaExplorer timestamp depth status rejectionCode rejectionReason`;

export async function readTransactions(context: ToolContext, filter: Record<string, unknown>): Promise<Record<string, unknown>[]> {
  const data = await context.client.transport.graphql<{ transactions: { nodes: Record<string, unknown>[] } }>(
    `query ($agentId: ID, $limit: Int, $protocol: Protocol, $domain: String, $since: String, $status: TransactionStatus) {
      transactions(agentId: $agentId, limit: $limit, protocol: $protocol, domain: $domain, since: $since, status: $status) {
        nodes { ${TRANSACTION_FIELDS} }
      }
    }`,
    { ...filter, agentId: context.agentId },
  );
  return data.transactions.nodes;
}

/** After a payment: the budget's state, told to the host when at warning or exhausted (never awaited by `pay`). */
function watchBudget(context: ToolContext): void {
  if (context.onBudgetState === undefined) return;
  const tell = context.onBudgetState;
  readPolicy(context).then(
    (policy) => {
      if (policy.budgetState === "warning" || policy.budgetState === "exhausted") tell(policy);
    },
    () => undefined,
  );
}

const pay: ToolDefinition = {
  name: "pay",
  title: "Pay for an API call",
  description:
    "Calls a paid API and pays its 402 (x402 or MPP) from the agent's wallet within the agent's spend policy. " +
    "With maxPrice, refuses before anything is authorized when the price asked is higher. Returns the API's answer and the payment.",
  inputSchema: {
    type: "object",
    properties: {
      endpoint: ENDPOINT,
      method: METHOD,
      headers: HEADERS,
      body: BODY,
      maxPrice: { type: "string", description: "Highest price accepted, decimal USDC (e.g. 0.05).", pattern: DECIMAL_PATTERN },
      idempotencyKey: {
        type: "string",
        description: "Makes a retried call pay once; the key of a payment held for approval resumes it.",
        maxLength: 255,
      },
    },
    required: ["endpoint"],
    additionalProperties: false,
  },
  async run(context, args) {
    const options = {
      endpoint: args.endpoint as string,
      ...(args.method === undefined ? {} : { method: args.method as string }),
      ...(args.headers === undefined ? {} : { headers: args.headers as Record<string, string> }),
      ...(args.body === undefined ? {} : { body: args.body }),
      ...(args.idempotencyKey === undefined ? {} : { idempotencyKey: args.idempotencyKey as string }),
    };
    const maxPrice = args.maxPrice as string | undefined;
    const result = await (maxPrice === undefined ? context.client.pay(options) : withMaxPrice(maxPrice, () => context.client.pay(options)));
    if (result.paid) watchBudget(context);
    return paidResult(result);
  },
};

const quote: ToolDefinition = {
  name: "quote",
  title: "Price an API call (dry run)",
  description:
    "Calls the API once without paying: when it answers 402, decodes each offered price and protocol and runs the agent's spend " +
    "policy on it as a dry run (allow or reject, and why). Nothing is reserved, signed or paid.",
  inputSchema: {
    type: "object",
    properties: { endpoint: ENDPOINT, method: METHOD, headers: HEADERS, body: BODY },
    required: ["endpoint"],
    additionalProperties: false,
  },
  async run(context, args) {
    const endpoint = new URL(args.endpoint as string).toString();
    const method = (args.method as string | undefined) ?? "GET";
    const body = args.body === undefined ? undefined : typeof args.body === "string" ? args.body : JSON.stringify(args.body);
    const response = await context.fetch(endpoint, {
      method,
      headers: { accept: "application/json", ...(args.headers as Record<string, string> | undefined) },
      ...(body === undefined ? {} : { body }),
      redirect: "manual",
      signal: AbortSignal.timeout(context.client.transport.timeout),
    });
    const text = await response.text();
    if (response.status !== 402) return { paymentRequired: false, status: response.status };
    let data: unknown = text;
    try {
      data = JSON.parse(text);
    } catch {
      // Not JSON: the offers are in the headers, if anywhere.
    }
    const offers = offeredPrices(readPaymentOffer(data, endpoint, response.headers));
    const checked = await Promise.all(
      offers.map(async (offer) => {
        const check = await context.client.transport.graphql<{ checkPolicy: Record<string, unknown> }>(
          `query ($agentId: ID!, $endpoint: String!, $amount: String!, $protocol: ProtocolPreference) {
            checkPolicy(agentId: $agentId, endpoint: $endpoint, amount: $amount, protocol: $protocol) {
              allowed decision reasonCode reason errorClass domain budgetState budgetUsed budgetLimit warnings
            }
          }`,
          { agentId: context.agentId, endpoint, amount: unitsToDecimal(offer.amountUnits), protocol: offer.protocol },
        );
        return {
          protocol: offer.protocol,
          format: offer.format,
          ...money(offer.amountUnits),
          ...(offer.payTo === undefined ? {} : { payTo: offer.payTo }),
          policy: check.checkPolicy,
        };
      }),
    );
    return { paymentRequired: true, status: 402, offers: checked, wouldPay: checked.some((offer) => offer.policy.allowed === true) };
  },
};

const balance: ToolDefinition = {
  name: "balance",
  title: "Wallet balance",
  description: "The agent's wallet balance in USDC.",
  inputSchema: { type: "object", properties: {}, additionalProperties: false },
  async run(context) {
    const data = await context.client.transport.graphql<{ wallet: { balance: string | null; balanceUnits: string | null } }>(
      "query ($agentId: ID!) { wallet(agentId: $agentId) { balance balanceUnits } }",
      { agentId: context.agentId },
    );
    return { agentId: context.agentId, balance: data.wallet.balance, balanceUnits: data.wallet.balanceUnits };
  },
};

const wallet: ToolDefinition = {
  name: "wallet",
  title: "Wallet",
  description: "The agent's wallet: address, network and balance.",
  inputSchema: { type: "object", properties: {}, additionalProperties: false },
  async run(context) {
    const data = await context.client.transport.graphql<{ wallet: Record<string, unknown> }>(
      "query ($agentId: ID!) { wallet(agentId: $agentId) { agentId address network balance balanceUnits } }",
      { agentId: context.agentId },
    );
    return data.wallet;
  },
};

const spend: ToolDefinition = {
  name: "spend",
  title: "Spend summary",
  description: "What the agent spent in a window: total, by protocol and by domain.",
  inputSchema: {
    type: "object",
    properties: { window: { type: "string", description: "1h, 24h (default), 7d or 30d.", enum: ["1h", "24h", "7d", "30d"] } },
    additionalProperties: false,
  },
  async run(context, args) {
    const data = await context.client.transport.graphql<{ spendSummary: Record<string, unknown> }>(
      `query ($agentId: ID, $window: String) {
        spendSummary(agentId: $agentId, window: $window) {
          agentId window from to total totalUnits txCount
          byProtocol { protocol amount amountUnits percent txCount }
          byDomain { domain amount amountUnits txCount }
        }
      }`,
      { agentId: context.agentId, window: (args.window as string | undefined) ?? "24h" },
    );
    return data.spendSummary;
  },
};

const transactions: ToolDefinition = {
  name: "transactions",
  title: "Transactions",
  description: "The agent's payments, newest first (spec 4.7 filters), rejected ones included.",
  inputSchema: {
    type: "object",
    properties: {
      limit: { type: "integer", description: "1..200 (default 50).", minimum: 1, maximum: 200 },
      protocol: { type: "string", enum: ["x402", "mpp"] },
      domain: { type: "string", maxLength: 253 },
      since: { type: "string", description: "A window such as 24h.", pattern: "^[1-9][0-9]{0,3}[mhd]$" },
      status: { type: "string", enum: ["confirmed", "finalized", "rejected"] },
    },
    additionalProperties: false,
  },
  async run(context, args) {
    return { transactions: await readTransactions(context, args) };
  },
};

const paymentTree: ToolDefinition = {
  name: "payment_tree",
  title: "Payment tree",
  description: "The payments made under a root transaction (sub-agent invocations), flat by depth, with totals.",
  inputSchema: {
    type: "object",
    properties: { rootTxHash: { type: "string", description: "The root transaction hash.", pattern: "^[1-9A-HJ-NP-Za-km-z]{32,128}$" } },
    required: ["rootTxHash"],
    additionalProperties: false,
  },
  async run(context, args) {
    const data = await context.client.transport.graphql<{ paymentTree: Record<string, unknown> | null }>(
      `query ($root: String!) {
        paymentTree(rootTxHash: $root) {
          rootTxHash truncated totals { amount amountUnits transactionCount agentCount }
          nodes { txHash parentTxHash depth agentId amount amountUnits protocol endpoint timestamp solanaExplorer status }
        }
      }`,
      { root: args.rootTxHash },
    );
    return { rootTxHash: args.rootTxHash, found: data.paymentTree !== null, tree: data.paymentTree };
  },
};

const policy: ToolDefinition = {
  name: "policy",
  title: "Spend policy",
  description: "The agent's spend policy (read only) with usedToday, the daily budget's state and the rate-limit usage.",
  inputSchema: { type: "object", properties: {}, additionalProperties: false },
  async run(context) {
    return readPolicy(context);
  },
};

const callPaidTool: ToolDefinition = {
  name: "call_paid_tool",
  title: "Call a paid MCP tool",
  description:
    "Calls a tool of another MCP server (Streamable HTTP) and, when it asks for payment (x402 or MPP over MCP), pays it within " +
    "the agent's spend policy (the domain is that server's host) and calls it again with the payment. maxPrice as in pay.",
  inputSchema: {
    type: "object",
    properties: {
      server: { type: "string", description: "The MCP server's URL (Streamable HTTP).", maxLength: 2048 },
      tool: { type: "string", description: "The tool's name.", maxLength: 128, pattern: "^[A-Za-z0-9_.-]{1,128}$" },
      arguments: { type: "object", description: "The tool's arguments." },
      maxPrice: { type: "string", description: "Highest price accepted, decimal USDC.", pattern: DECIMAL_PATTERN },
      idempotencyKey: {
        type: "string",
        description: "Makes a retried call pay once; the key of a payment held for approval resumes it.",
        maxLength: 255,
      },
    },
    required: ["server", "tool"],
    additionalProperties: false,
  },
  async run(context, args) {
    const call = {
      server: args.server as string,
      tool: args.tool as string,
      arguments: (args.arguments as Record<string, unknown> | undefined) ?? {},
      ...(args.idempotencyKey === undefined ? {} : { idempotencyKey: args.idempotencyKey as string }),
    };
    const maxPrice = args.maxPrice as string | undefined;
    const answer = await (maxPrice === undefined
      ? context.paidTools.call(call)
      : withMaxPrice(maxPrice, () => context.paidTools.call(call)));
    if (answer.payment !== undefined) watchBudget(context);
    return { ...answer };
  },
};

/** Every tool of the server, in the order `tools/list` answers them. */
export const TOOLS: readonly ToolDefinition[] = [pay, quote, balance, wallet, spend, transactions, paymentTree, policy, callPaidTool];

export function findTool(name: string): ToolDefinition | undefined {
  return TOOLS.find((tool) => tool.name === name);
}

/** Runs one call: arguments checked against the tool's schema first, so a bad one is refused before anything happens. */
export async function runTool(tool: ToolDefinition, context: ToolContext, args: unknown): Promise<Record<string, unknown>> {
  return tool.run(context, checkArguments(tool.inputSchema, args));
}
