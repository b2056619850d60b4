/**
 * Agents (spec 2.5, `agents.list`) and their custodial wallets (spec 2.4, `wallet.*`).
 *
 * - `GET /v1/agents?limit&after` lists the account's agents by id, a keyset page at a time
 *   (`nextCursor`), each with its chain balance: one batched read per 100 wallets, 0 for a wallet
 *   never funded; a chain that does not answer is 503, never a made-up balance.
 *   Archived agents are left out unless `includeArchived=true`.
 * - `DELETE /v1/agents/{agentId}[?force=true]` archives the agent (api/gateway/payments/agent-archive.ts): refused
 *   with 409 AGENT_NOT_EMPTY while it holds funds or has open payments, unless forced; afterwards
 *   it cannot authorize or be funded (409 AGENT_ARCHIVED) and its history stays readable.
 * - `POST /v1/agents` registers an agent with a new sealed wallet. An external effect under the
 *   Idempotency-Key (the agent and its key are written by api/gateway/wallets in their own transaction):
 *   a retry after a crash resolves through the agent id, the operation's own reference.
 * - `POST .../wallet/fund` and `.../wallet/withdraw` move money on the chain: the key's reference
 *   becomes the wallet operation's `clientReference`, so a retry never moves money twice; an
 *   outcome that is still pending answers 202 with the operation id and keeps the key open until
 *   it is known (a failure is answered only once the transaction can no longer land).
 */
import { PublicKey } from "@solana/web3.js";
import { AgentNotEmptyError, archiveAgent } from "../../payments/agent-archive.js";
import { internalAgentId } from "../../../shared/agent-ids.js";
import { agentOfAccount, listAgentsPage } from "../../../shared/agents.js";
import { boundAgent } from "../../../shared/scopes.js";
import { type BalanceReader, rpcBalanceReader } from "../../../shared/balances.js";
import type { AgentRow } from "../../../shared/rows.js";
import { parseAgentId } from "../../../shared/validation.js";
import { createAgentWallet, type WalletOperationResult } from "../../wallets/index.js";
import { WalletExistsError } from "../../chain/index.js";
import { type ExternalOutcome, runExternalEffect, type RouteResponse } from "../../../shared/http/idempotency.js";
import {
  booleanParam,
  limitParam,
  objectBody,
  optionalString,
  requireActiveAgent,
  requireAgent,
  stringField,
} from "../../../shared/http/input.js";
import { parseUsdcNumber } from "../../../shared/http/money.js";
import { usdcJson } from "../../../shared/money.js";
import { badRequest, httpError, problemResponse } from "../../../shared/http/problem.js";
import { json } from "../../../shared/http/router.js";
import type { Route, RouteContext } from "../deps.js";

const DEFAULT_NETWORK = "solana-localnet";

function network(context: RouteContext): string {
  return context.deps.wallets?.ledger.network ?? context.deps.network ?? DEFAULT_NETWORK;
}

/** The configured reader, else one over the custodial wallets' ledger; none without a chain. */
function balanceReader(context: RouteContext): BalanceReader | undefined {
  if (context.deps.balances !== undefined) return context.deps.balances;
  const wallets = context.deps.wallets;
  return wallets === undefined ? undefined : rpcBalanceReader(wallets.ledger.connection, wallets.ledger.mint);
}

/** Balances of these agents in one batched read; null only when the server reads no chain. */
async function balancesOf(context: RouteContext, rows: readonly AgentRow[]): Promise<(bigint | null)[]> {
  const reader = balanceReader(context);
  return reader === undefined
    ? rows.map(() => null)
    : readBalances(
        context,
        reader,
        rows.map((row) => row.wallet_address),
      );
}

async function readBalances(context: RouteContext, reader: BalanceReader, walletAddresses: readonly string[]): Promise<bigint[]> {
  try {
    return await reader(walletAddresses);
  } catch (error) {
    context.deps.logger?.warn({ err: error }, "agent balances: the ledger did not answer");
    throw httpError("SERVICE_UNAVAILABLE", "the ledger did not answer the balance read; retry", { retryable: true });
  }
}

function agentJson(row: AgentRow, balance: bigint | null, networkName: string): Record<string, unknown> {
  return {
    agentId: row.public_id,
    name: row.name,
    address: row.wallet_address,
    network: networkName,
    balance: balance === null ? null : usdcJson(balance),
    createdAt: row.created_at,
    archivedAt: row.archived_at,
  };
}

/** Page size of `GET /v1/agents`: default and maximum (at most 5 balance RPC calls a page). */
const LIST_PAGE_DEFAULT = 100;
const LIST_PAGE_MAX = 500;

async function listRoute(context: RouteContext): Promise<RouteResponse> {
  const limit = limitParam(context.query.get("limit"), LIST_PAGE_DEFAULT, LIST_PAGE_MAX);
  const afterText = context.query.get("after");
  const after = afterText === null ? null : parseAgentId("after", afterText);
  const includeArchived = booleanParam(context.query.get("includeArchived"), "includeArchived");
  const own = boundAgent(context.caller.scope);
  const page =
    own === null
      ? await listAgentsPage(context.deps.pool, context.caller.accountId, { limit, after, includeArchived })
      : await ownAgentPage(context, own, after, includeArchived);
  const balances = await balancesOf(context, page.rows);
  return json(200, {
    agents: page.rows.map((row, i) => agentJson(row, balances[i] ?? null, network(context))),
    nextCursor: page.nextCursor,
  });
}

/** An agent key's listing: its own agent alone, under the same filters, on one page. */
async function ownAgentPage(
  context: RouteContext,
  own: string,
  after: string | null,
  includeArchived: boolean,
): Promise<{ rows: AgentRow[]; nextCursor: string | null }> {
  const agent = await agentOfAccount(context.deps.pool, context.caller.accountId, own);
  const listed = agent !== null && (includeArchived || agent.archived_at === null) && (after === null || own > after);
  return { rows: listed ? [agent] : [], nextCursor: null };
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
  if (keystore === undefined)
    throw httpError("SERVICE_UNAVAILABLE", "agent registration needs the wallet keystore (WALLET_ENCRYPTION_KEY)");
  return runExternalEffect(context.store, context.idempotency, async ({ resumed }) => {
    try {
      // The key is scoped to the account, so another account's `agentId` never collides (no
      // existence oracle); the same id twice in this account is refused by (account_id, public_id).
      const key = internalAgentId(context.caller.accountId, agentId);
      await createAgentWallet(context.deps.pool, keystore, { accountId: context.caller.accountId, agentId: key, name });
    } catch (error) {
      // A retried registration whose first answer was lost: the agent it created is the answer.
      if (!(resumed && error instanceof WalletExistsError)) throw error;
    }
    await openTokenAccount(context, internalAgentId(context.caller.accountId, agentId));
    const agent = await requireAgent(context, agentId).catch(() => {
      throw httpError("AGENT_EXISTS", `agent ${agentId} already exists`);
    });
    return { response: json(201, agentJson(agent, 0n, network(context))), final: true };
  });
}

/**
 * The new agent's token account, so it can be paid at once (api/gateway/settlement/payee-account.ts).
 * Best effort: the agent exists either way, and its first funding or settlement opens the account
 * when this could not (quota used up, ledger unreachable).
 */
async function openTokenAccount(context: RouteContext, agentId: string): Promise<void> {
  const accounts = context.deps.tokenAccounts;
  if (accounts === undefined) return;
  try {
    const opening = await accounts.open(agentId);
    if (opening.status !== "open") context.deps.logger?.warn({ agentId, opening }, "new agent's token account not opened");
  } catch (error) {
    context.deps.logger?.warn({ err: error, agentId }, "opening a new agent's token account failed");
  }
}

function wallets(context: RouteContext) {
  const wallets = context.deps.wallets;
  if (wallets === undefined) throw httpError("SERVICE_UNAVAILABLE", "wallets are not configured on this server");
  return wallets;
}

async function walletRoute(context: RouteContext): Promise<RouteResponse> {
  const agent = await requireAgent(context, context.params.agentId!);
  const wallet = await wallets(context).wallet(agent.agent_id);
  return json(200, { agentId: agent.public_id, address: wallet.address, balance: usdcJson(wallet.balanceUnits), network: wallet.network });
}

async function balanceRoute(context: RouteContext): Promise<RouteResponse> {
  const agent = await requireAgent(context, context.params.agentId!);
  return json(200, usdcJson(await wallets(context).balance(agent.agent_id)));
}

function operationOutcome(kind: "fund" | "withdraw", agentId: string, units: bigint, result: WalletOperationResult): ExternalOutcome {
  const body = { operationId: result.operationId, kind, agentId, amount: usdcJson(units), status: result.status, txHash: result.txHash };
  // Sent, outcome not known yet (it may still land): 202 with the operation, and the key stays
  // open; a retry with it reads the operation by its reference and asks the chain again.
  if (result.status === "pending") return { response: json(202, body), final: false };
  if (result.status === "failed") {
    const failure = httpError("PAYMENT_FAILED", `the ${kind} operation ${result.operationId} failed`, {
      errorClass: "PaymentError",
      ...body,
    });
    return { response: problemResponse(failure), final: true };
  }
  return { response: json(200, body), final: true };
}

async function fundRoute(context: RouteContext): Promise<RouteResponse> {
  const agent = await requireActiveAgent(context, context.params.agentId!);
  const body = objectBody(context.body, ["usdc"], []);
  const units = parseUsdcNumber(body.usdc, "usdc");
  const service = wallets(context);
  return runExternalEffect(context.store, context.idempotency, async ({ reference }) => {
    const options = reference === null ? {} : { clientReference: reference };
    return operationOutcome("fund", agent.public_id, units, await service.fund(agent.agent_id, units, options));
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
    return operationOutcome("withdraw", agent.public_id, units, await service.withdraw(agent.agent_id, to, units, options));
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
  if (operation === null)
    throw httpError("NOT_FOUND", `agent ${agent.public_id} has no wallet operation ${operationId}`, { field: "operationId" });
  return json(200, {
    operationId: operation.operationId,
    kind: operation.kind,
    agentId: agent.public_id,
    amount: usdcJson(operation.amountUnits),
    status: operation.status,
    txHash: operation.txHash,
    ...(operation.kind === "withdraw" ? { to: operation.toAddress } : {}),
    error: operation.error,
  });
}

async function archiveRoute(context: RouteContext): Promise<RouteResponse> {
  const agentId = parseAgentId("agentId", context.params.agentId!);
  const force = booleanParam(context.query.get("force"), "force");
  const reader = balanceReader(context);
  let result;
  try {
    result = await archiveAgent(context.deps.pool, {
      accountId: context.caller.accountId,
      agentId,
      force,
      balanceOf: async (walletAddress) => {
        if (reader === undefined) {
          throw httpError(
            "SERVICE_UNAVAILABLE",
            "this server reads no ledger, so it cannot check the wallet is empty; archive with force=true",
          );
        }
        const [balance] = await readBalances(context, reader, [walletAddress]);
        return balance!;
      },
    });
  } catch (error) {
    if (!(error instanceof AgentNotEmptyError)) throw error;
    throw httpError("AGENT_NOT_EMPTY", error.message, {
      agentId,
      openReservations: error.blockers.openReservations,
      pendingOperations: error.blockers.pendingOperations,
      currentBalance: usdcJson(error.blockers.balanceUnits),
    });
  }
  if (result === null) throw httpError("NOT_FOUND", `no agent ${agentId} in this account`, { field: "agentId" });
  // The archive is committed: a balance the chain does not answer now is shown as null, not an error.
  const [balance] = await balancesOf(context, [result.agent]).catch(() => [null]);
  return json(200, agentJson(result.agent, balance ?? null, network(context)));
}

export const agentRoutes: readonly Route[] = [
  { method: "GET", path: "/v1/agents", scope: "read", filtersByAgent: true, handler: listRoute },
  { method: "POST", path: "/v1/agents", scope: "admin", handler: registerRoute },
  { method: "GET", path: "/v1/agents/:agentId", scope: "read", handler: getRoute },
  { method: "DELETE", path: "/v1/agents/:agentId", scope: "admin", handler: archiveRoute },
  { method: "GET", path: "/v1/agents/:agentId/wallet", scope: "read", handler: walletRoute },
  { method: "GET", path: "/v1/agents/:agentId/wallet/balance", scope: "read", handler: balanceRoute },
  { method: "POST", path: "/v1/agents/:agentId/wallet/fund", scope: "admin", handler: fundRoute },
  { method: "POST", path: "/v1/agents/:agentId/wallet/withdraw", scope: "admin", handler: withdrawRoute },
  { method: "GET", path: "/v1/agents/:agentId/wallet/operations/:operationId", scope: "read", handler: operationRoute },
];
