/**
 * Transactions (spec 2.2, 4.7 `transactions.list/get/getChain`): the GraphQL resolvers' reads, the
 * same filters and limits, with money as `{ usdc: number }`:
 * `GET /v1/transactions?agentId&limit&protocol&domain&since&status&after`,
 * `GET /v1/transactions/{txHash}`, `GET /v1/transactions/{txHash}/chain` (with `depth`).
 */
import { createContext } from "../context.js";
import type { TransactionObject } from "../resolvers/common.js";
import { transaction, transactions } from "../resolvers/transactions.js";
import { nodeEndpoint, paymentTree } from "../resolvers/tree.js";
import type { RouteResponse } from "../../shared/http/idempotency.js";
import { badRequest, httpError } from "../../shared/http/problem.js";
import { json } from "../../shared/http/router.js";
import { usdcJson } from "../../shared/money.js";
import { publicAgentId } from "../../shared/agent-ids.js";
import { boundAgent, forbiddenScope } from "../../shared/scopes.js";
import type { QueryRoute, QueryRouteContext as RouteContext } from "./deps.js";

const PROTOCOLS = ["x402", "mpp"] as const;
const STATUSES = ["confirmed", "finalized", "rejected"] as const;

function apiContext(context: RouteContext) {
  const { pool, primary, balances, network } = context.deps;
  return createContext({ pool, primary: primary ?? pool, balances, network, now: () => context.now }, context.caller);
}

function transactionJson(tx: TransactionObject): Record<string, unknown> {
  // The store's event id is internal: not part of the answer.
  const { eventId: _eventId, ...fields } = tx;
  return { ...fields, amountPaid: usdcJson(BigInt(tx.amountPaidUnits)) };
}

function oneOf<T extends string>(value: string | null, field: string, allowed: readonly T[]): T | null {
  if (value === null) return null;
  if (!(allowed as readonly string[]).includes(value)) throw badRequest(field, `must be one of ${allowed.join(", ")}`);
  return value as T;
}

/** The public id of the agent that made the addressed payment, or null when the account has none. */
async function transactionAgent(context: RouteContext): Promise<string | null> {
  const tx = await transaction(null, { txHash: context.params.txHash! }, apiContext(context));
  return tx === null ? null : publicAgentId(tx.agentId);
}

/** The `agentId` filter: an agent key lists its own agent only (another agent is 403 FORBIDDEN_SCOPE). */
function agentFilter(context: RouteContext): string | null {
  const asked = context.query.get("agentId");
  const scope = context.caller.scope;
  const own = boundAgent(scope);
  if (own === null || scope === undefined) return asked;
  if (asked !== null && asked !== own) throw forbiddenScope(scope, "read", `list transactions of agent ${asked}`, asked);
  return own;
}

async function listRoute(context: RouteContext): Promise<RouteResponse> {
  const q = context.query;
  const limitText = q.get("limit");
  if (limitText !== null && !/^\d{1,6}$/.test(limitText)) throw badRequest("limit", "must be an integer");
  const page = await transactions(
    null,
    {
      agentId: agentFilter(context),
      limit: limitText === null ? null : Number(limitText),
      protocol: oneOf(q.get("protocol"), "protocol", PROTOCOLS),
      domain: q.get("domain"),
      since: q.get("since"),
      status: oneOf(q.get("status"), "status", STATUSES),
      after: q.get("after"),
    },
    apiContext(context),
  );
  return json(200, { transactions: page.nodes.map(transactionJson), pageInfo: page.pageInfo });
}

async function getRoute(context: RouteContext): Promise<RouteResponse> {
  const tx = await transaction(null, { txHash: context.params.txHash! }, apiContext(context));
  if (tx === null) throw httpError("NOT_FOUND", `no transaction ${context.params.txHash} in this account`);
  return json(200, transactionJson(tx));
}

async function chainRoute(context: RouteContext): Promise<RouteResponse> {
  const ctx = apiContext(context);
  const depthText = context.query.get("maxDepth");
  if (depthText !== null && !/^\d{1,3}$/.test(depthText)) throw badRequest("maxDepth", "must be an integer");
  const tree = (await paymentTree(
    null,
    { rootTxHash: context.params.txHash!, maxDepth: depthText === null ? null : Number(depthText) },
    ctx,
  )) as {
    rootTxHash: string;
    nodes: Record<string, unknown>[];
    totals: { amountUnits: string; transactionCount: number; agentCount: number };
    truncated: boolean;
  } | null;
  if (tree === null) throw httpError("NOT_FOUND", `no transaction ${context.params.txHash} in this account`);
  const nodes = await Promise.all(
    tree.nodes.map(async (node) => {
      const { amount: _amount, amountUnits, ...rest } = node as { amount: string; amountUnits: string; endpointHash: string };
      return {
        ...rest,
        amountPaid: usdcJson(BigInt(amountUnits)),
        endpoint: await nodeEndpoint(node as { endpointHash: string }, null, ctx),
      };
    }),
  );
  return json(200, {
    rootTxHash: tree.rootTxHash,
    transactions: nodes,
    totals: {
      amount: usdcJson(BigInt(tree.totals.amountUnits)),
      transactionCount: tree.totals.transactionCount,
      agentCount: tree.totals.agentCount,
    },
    truncated: tree.truncated,
  });
}

export const transactionRoutes: readonly QueryRoute[] = [
  { method: "GET", path: "/v1/transactions", scope: "read", filtersByAgent: true, handler: listRoute },
  { method: "GET", path: "/v1/transactions/:txHash", scope: "read", agentOf: transactionAgent, handler: getRoute },
  { method: "GET", path: "/v1/transactions/:txHash/chain", scope: "read", agentOf: transactionAgent, handler: chainRoute },
];
