/**
 * Finding an invocation from an agent's side: as the sub-agent that pays under it (the budget
 * check of `POST .../payments/authorize` and of MPP session charges) or as either party
 * (`GET /v1/agents/{agentId}/invocations/{parentTxHash}`). The chain answers for the invocation's
 * terms and spend; the settlement store for which payment opened it and which paid under it; the
 * agents of the caller's account are named by public id, any other party by wallet only.
 */
import { PublicKey } from "@solana/web3.js";
import type pg from "pg";
import { agentsByWallets } from "../../shared/agents.js";
import { httpError, type ServiceError } from "../../shared/errors.js";
import type { AgentRow } from "../../shared/rows.js";
import { confirmedPaymentPayee, confirmedSignaturesUnder } from "../settlement/store.js";
import { invocationAddress } from "./address.js";
import type { InvocationAccount, Invocations } from "./ledger.js";

/** An invocation's payments are bounded by its budget; this bounds the answer all the same. */
export const MAX_INVOCATION_PAYMENTS = 1_000;

/** Reads invocation accounts from the chain (api/gateway/settlement's `Settlement` is one). */
export type InvocationReader = Pick<Invocations, "invocationState" | "programId">;

/** 404 INVOCATION_NOT_FOUND: no such invocation, or not one of this agent. */
export function invocationNotFound(detail: string): ServiceError {
  return httpError("INVOCATION_NOT_FOUND", detail);
}

/** The configured invocation service; 503 on a server without one. */
export function requireInvocations(invocations: Invocations | undefined): Invocations {
  if (invocations === undefined) throw httpError("SERVICE_UNAVAILABLE", "agent invocations are not configured on this server");
  return invocations;
}

/** The invocation `subAgent` pays under with parent `parentTxHash`, as the chain holds it now; null when there is none of it. */
export async function subAgentInvocationState(
  reader: InvocationReader,
  parentTxHash: string,
  subAgent: string,
): Promise<InvocationAccount | null> {
  const state = await reader.invocationState(new PublicKey(invocationAddress(parentTxHash, subAgent, reader.programId)));
  return state !== null && state.subAgent === subAgent ? state : null;
}

/** The same, 404 when there is none: a sub-agent's payment names an invocation that must exist. */
export async function requireSubAgentInvocation(
  reader: InvocationReader,
  parentTxHash: string,
  subAgent: string,
): Promise<{ readonly invocation: string; readonly state: InvocationAccount }> {
  const state = await subAgentInvocationState(reader, parentTxHash, subAgent);
  if (state === null) throw invocationNotFound(`no invocation of this agent under parent transaction ${parentTxHash}`);
  return { invocation: invocationAddress(parentTxHash, subAgent, reader.programId), state };
}

/** An invocation as one of its parties sees it. */
export interface InvocationView {
  readonly parentTxHash: string;
  readonly invocation: string;
  readonly state: InvocationAccount;
  /** Public ids of the parties when they are agents of the caller's account, else null. */
  readonly invokerId: string | null;
  readonly subAgentId: string | null;
  /** Budget not spent yet on-chain (0 once spent, never negative). */
  readonly remainingUnits: bigint;
  /** The sub-agent's confirmed settlements under it, oldest first (at most `MAX_INVOCATION_PAYMENTS`). */
  readonly payments: readonly string[];
}

export interface InvocationLookupDeps {
  readonly pool: pg.Pool;
  readonly invocations: Invocations | undefined;
}

/**
 * The invocation `parentTxHash` opened, seen by `agent` (of account `accountId`) as its sub-agent
 * or as its invoker (the parent is then the agent's own confirmed payment to the sub-agent); 404
 * when it is neither's.
 */
export async function agentInvocation(
  deps: InvocationLookupDeps,
  request: { readonly accountId: string; readonly agent: AgentRow; readonly parentTxHash: string },
): Promise<InvocationView> {
  const { agent, parentTxHash } = request;
  const service = requireInvocations(deps.invocations);

  // As the sub-agent: the invocation is derived from the parent and this agent's wallet.
  let invocation = invocationAddress(parentTxHash, agent.wallet_address, service.programId);
  let state = await service.invocationState(new PublicKey(invocation));
  if (state === null || state.subAgent !== agent.wallet_address) {
    // As the invoker: the parent is this agent's own confirmed payment to the sub-agent.
    const payee = await confirmedPaymentPayee(deps.pool, parentTxHash, agent.agent_id);
    invocation = payee === null ? invocation : invocationAddress(parentTxHash, payee, service.programId);
    state = payee === null ? null : await service.invocationState(new PublicKey(invocation));
    if (state === null || state.invoker !== agent.wallet_address) {
      throw invocationNotFound(`agent ${agent.public_id} has no invocation under transaction ${parentTxHash}`);
    }
  }

  // Public ids: only this account's agents are named (the other side stays an address).
  const [invoker, subAgent] = await agentsByWallets(deps.pool, request.accountId, [state.invoker, state.subAgent]);
  const payments = await confirmedSignaturesUnder(deps.pool, invocation, MAX_INVOCATION_PAYMENTS);
  return {
    parentTxHash,
    invocation,
    state,
    invokerId: invoker?.public_id ?? null,
    subAgentId: subAgent?.public_id ?? null,
    remainingUnits: state.budgetUnits > state.spentUnits ? state.budgetUnits - state.spentUnits : 0n,
    payments,
  };
}
