/**
 * The gateway's word on a host a client refused by its own domain check
 * (`POST /v1/agents/{agentId}/payments/domain-check`). The clients check the agent's domain rules
 * before the first request leaves them, from a policy read a moment ago; the gateway decides. It
 * applies the same rules as an authorization (api/shared/policy/engine.ts `evaluateDomain`) to the
 * policy as it stands now:
 *
 * - refused: the attempt is recorded exactly as an authorization's domain refusal (status
 *   `rejected`, `policy.violation`, alerts), with amount 0 (none is known: the request never left
 *   the client, so no 402 named a price) and `requested` null in the answer;
 * - allowed (the policy changed since the client read it): nothing is recorded and the client
 *   goes on with the payment, which the authorization checks again.
 */
import type pg from "pg";
import { refuseArchived } from "../../shared/http/input.js";
import { evaluateDomainOnly, type PolicyRejected } from "../../shared/policy/engine.js";
import { getVersionedPolicy, readUsage } from "../../shared/policy/store.js";
import type { AgentRow } from "../../shared/rows.js";
import { lockAgentArchivedAt } from "./agent-archive.js";
import { recordRefusedPayment } from "./rejections.js";

export type DomainCheckResult =
  | { readonly outcome: "allowed" }
  | {
      readonly outcome: "policy_violation";
      readonly decision: PolicyRejected;
      readonly rejectionId: string;
      readonly policyVersion: number;
    };

/** Inside the caller's transaction (the Idempotency-Key's): decide, and record a refusal. */
export async function checkDomainInTransaction(
  client: pg.PoolClient,
  agent: AgentRow,
  endpoint: string,
  now: Date,
): Promise<DomainCheckResult> {
  // As for an authorization: an archive committed since the caller found the agent wins.
  refuseArchived({ public_id: agent.public_id, archived_at: await lockAgentArchivedAt(client, agent.agent_id) });
  const { policy, version: policyVersion } = await getVersionedPolicy(client, agent.agent_id);
  const decision = evaluateDomainOnly(policy, await readUsage(client, agent.agent_id, policy, now), endpoint, now);
  if (decision === null) return { outcome: "allowed" };
  const rejectionId = await recordRefusedPayment(client, {
    agentId: agent.agent_id,
    amountUnits: 0n,
    endpoint,
    protocol: null,
    rejected: decision,
    at: now,
    policyVersion,
  });
  return { outcome: "policy_violation", decision, rejectionId, policyVersion };
}
