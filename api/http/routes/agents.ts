/**
 * Agents (spec 2.5, `agents.list`) and their custodial wallets (spec 2.4, `wallet.*`).
 *
 * - `POST /v1/agents` registers an agent with a new sealed wallet. An external effect under the
 *   Idempotency-Key (the agent and its key are written by api/wallets in their own transaction):
 *   a retry after a crash resolves through the agent id, the operation's own reference.
 * - `POST .../wallet/fund` and `.../wallet/withdraw` move money on the chain: the key's reference
 *   becomes the wallet operation's `clientReference`, so a retry never moves money twice; an
 *   outcome that is still pending answers 202 with the operation id and keeps the key open until
 *   it is known (a failure is answered only once the transaction can no longer land).
 */
import { PublicKey } from "@solana/web3.js";
import { listAgents } from "../../read/agents.js";
import type { AgentRow } from "../../read/rows.js";
import { parseAgentId } from "../../validation.js";
import { createAgentWallet, WalletExistsError, type WalletOperationResult } from "../../wallets/index.js";
import { type ExternalOutcome, runExternalEffect, type RouteResponse } from "../idempotency.js";
import { objectBody, optionalString, requireAgent, stringField } from "../input.js";
import { parseUsdcNumber, usdcJson } from "../money.js";
import { badRequest, httpError, problemResponse } from "../problem.js";
import { json, type Route, type RouteContext } from "../router.js";

const DEFAULT_NETWORK = "solana-localnet";

function network(context: RouteContext): string {
  return context.deps.wallets?.ledger.network ?? context.deps.network ?? DEFAULT_NETWORK;
}

async function balancesOf(context: RouteContext, rows: readonly AgentRow[]): Promise<(bigint | null)[]> {
  if (context.deps.balances !== undefined) return context.deps.balances(rows.map((row) => row.wallet_address));
  const wallets = context.deps.wallets;
  if (wallets === undefined) return rows.map(() => null);
  return Promise.all(rows.map((row) => wallets.balance(row.agent_id).catch(() => null)));
}

function agentJson(row: AgentRow, balance: bigint | null, networkName: string): Record<string, unknown> {
  return {
    agentId: row.agent_id,
    name: row.name,
    address: row.wallet_address,
    network: networkName,
    balance: balance === null ? null : usdcJson(balance),
    createdAt: row.created_at,
  };
}

/** Wallets listing at most this many agents read their balances; larger accounts page by agent. */
const LIST_BALANCES_MAX = 200;

async function listRoute(context: RouteContext): Promise<RouteResponse> {
  const rows = await listAgents(context.deps.pool, context.caller.accountId);
  const balances = rows.length <= LIST_BALANCES_MAX ? await balancesOf(context, rows) : rows.map(() => null);
  return json(200, { agents: rows.map((row, i) => agentJson(row, balances[i] ?? null, network(context))) });
}

async function getRoute(context: RouteContext): Promise<RouteResponse> {
  const agent = await requireAgent(context, context.params.agentId!);
  const [balance] = await balancesOf(context, [agent]);
  return json(200, agentJson(agent, balance ?? null, network(context)));
}

async function registerRoute(context: RouteContext): Promise<RouteResponse> {
  const body = objectBody(context.body, ["agentId"], ["name"]);
  const agentId = parseAgentId("agentId", stringField(body.agentId, "agentId", 128));
  const name = optionalString(body.name, "name", 200) ?? "";
  const keystore = context.deps.keystore;
  if (keystore === undefined) throw httpError("SERVICE_UNAVAILABLE", "agent registration needs the wallet keystore (WALLET_ENCRYPTION_KEY)");
  return runExternalEffect(context.store, context.idempotency, async ({ resumed }) => {
    try {
      await createAgentWallet(context.deps.pool, keystore, { accountId: context.caller.accountId, agentId, name });
    } catch (error) {
      // A retried registration whose first answer was lost: the agent it created is the answer.
      if (!(resumed && error instanceof WalletExistsError)) throw error;
    }
    const agent = await requireAgent(context, agentId).catch(() => {
      throw httpError("AGENT_EXISTS", `agent ${agentId} already exists`);
    });
    return { response: json(201, agentJson(agent, 0n, network(context))), final: true };
  });
}

function wallets(context: RouteContext) {
  const wallets = context.deps.wallets;
  if (wallets === undefined) throw httpError("SERVICE_UNAVAILABLE", "wallets are not configured on this server");
  return wallets;
}

async function walletRoute(context: RouteContext): Promise<RouteResponse> {
  const agent = await requireAgent(context, context.params.agentId!);
  const wallet = await wallets(context).wallet(agent.agent_id);
  return json(200, { agentId: wallet.agentId, address: wallet.address, balance: usdcJson(wallet.balanceUnits), network: wallet.network });
}

async function balanceRoute(context: RouteContext): Promise<RouteResponse> {
  const agent = await requireAgent(context, context.params.agentId!);
  return json(200, usdcJson(await wallets(context).balance(agent.agent_id)));
}

function operationOutcome(
  kind: "fund" | "withdraw",
  agentId: string,
  units: bigint,
  result: WalletOperationResult,
): ExternalOutcome {
  const body = { operationId: result.operationId, kind, agentId, amount: usdcJson(units), status: result.status, txHash: result.txHash };
  // Sent, outcome not known yet (it may still land): 202 with the operation, and the key stays
  // open; a retry with it reads the operation by its reference and asks the chain again.
  if (result.status === "pending") return { response: json(202, body), final: false };
  if (result.status === "failed") {
    const failure = httpError("PAYMENT_FAILED", `the ${kind} operation ${result.operationId} failed`, { errorClass: "PaymentError", ...body });
    return { response: problemResponse(failure), final: true };
  }
  return { response: json(200, body), final: true };
}

async function fundRoute(context: RouteContext): Promise<RouteResponse> {
  const agent = await requireAgent(context, context.params.agentId!);
  const body = objectBody(context.body, ["usdc"], []);
  const units = parseUsdcNumber(body.usdc, "usdc");
  const service = wallets(context);
  return runExternalEffect(context.store, context.idempotency, async ({ reference }) => {
    const options = reference === null ? {} : { clientReference: reference };
    return operationOutcome("fund", agent.agent_id, units, await service.fund(agent.agent_id, units, options));
  });
}

async function withdrawRoute(context: RouteContext): Promise<RouteResponse> {
  const agent = await requireAgent(context, context.params.agentId!);
  const body = objectBody(context.body, ["to", "usdc"], []);
  const to = stringField(body.to, "to", 64);
  try {
    if (new PublicKey(to).toBase58() !== to) throw new Error("not canonical");
  } catch {
    throw badRequest("to", "must be a base58 ledger address (32 bytes)");
  }
  if (to === agent.wallet_address) throw badRequest("to", "is the agent's own wallet");
  const units = parseUsdcNumber(body.usdc, "usdc");
  const service = wallets(context);
  return runExternalEffect(context.store, context.idempotency, async ({ reference }) => {
    const options = reference === null ? {} : { clientReference: reference };
    return operationOutcome("withdraw", agent.agent_id, units, await service.withdraw(agent.agent_id, to, units, options));
  });
}

/**
 * One wallet operation, as it stands now: how a caller answered 202 without an Idempotency-Key
 * learns the outcome (a pending one is looked up on the chain first). 200 in every state, a
 * failed one included: this reads the operation, it does not perform it.
 */
async function operationRoute(context: RouteContext): Promise<RouteResponse> {
  const agent = await requireAgent(context, context.params.agentId!);
  const operationId = context.params.operationId!;
  if (!/^[1-9][0-9]{0,18}$/.test(operationId)) throw badRequest("operationId", "must be a wallet operation id (a positive integer)");
  const operation = await wallets(context).operation(agent.agent_id, operationId);
  if (operation === null) throw httpError("NOT_FOUND", `agent ${agent.agent_id} has no wallet operation ${operationId}`, { field: "operationId" });
  return json(200, {
    operationId: operation.operationId,
    kind: operation.kind,
    agentId: agent.agent_id,
    amount: usdcJson(operation.amountUnits),
    status: operation.status,
    txHash: operation.txHash,
    ...(operation.kind === "withdraw" ? { to: operation.toAddress } : {}),
    error: operation.error,
  });
}

export const agentRoutes: readonly Route[] = [
  { method: "GET", path: "/v1/agents", handler: listRoute },
  { method: "POST", path: "/v1/agents", handler: registerRoute },
  { method: "GET", path: "/v1/agents/:agentId", handler: getRoute },
  { method: "GET", path: "/v1/agents/:agentId/wallet", handler: walletRoute },
  { method: "GET", path: "/v1/agents/:agentId/wallet/balance", handler: balanceRoute },
  { method: "POST", path: "/v1/agents/:agentId/wallet/fund", handler: fundRoute },
  { method: "POST", path: "/v1/agents/:agentId/wallet/withdraw", handler: withdrawRoute },
  { method: "GET", path: "/v1/agents/:agentId/wallet/operations/:operationId", handler: operationRoute },
];
