/**
 * Agent ids are scoped per account (migration 018, docs/api.md "Agent ids"). Two ids exist:
 *
 * - the public id (`researcher`): what a caller registers, sends in paths, arguments and bodies,
 *   and reads back in every answer, event and webhook payload; unique within its account only;
 * - the internal key (`agents.agent_id`): what every gateway table references and a sealed wallet
 *   key is bound to. An agent registered before migration 018 keeps its public id as its key; a
 *   new one gets `<account uuid>/<public id>`. It never leaves the gateway.
 *
 * Inbound, a public id is resolved within the caller's account only (a lookup on
 * `(account_id, public_id)`), so another account's agent is indistinguishable from none.
 * Outbound, `publicAgentId` maps a key to its public id with no lookup: a public id cannot
 * contain `/`, so everything after the first `/` is the public id (the same expression as the
 * generated column `agents.public_id`).
 */

/** The key a new agent of `accountId` registered as `publicId` is stored under. */
export function internalAgentId(accountId: string, publicId: string): string {
  return `${accountId}/${publicId}`;
}

/** The id callers see for the agent stored under `agentId` (an internal key). */
export function publicAgentId(agentId: string): string {
  return agentId.slice(agentId.indexOf("/") + 1);
}

/** `publicAgentId` of a nullable key. */
export function publicAgentIdOrNull(agentId: string | null): string | null {
  return agentId === null ? null : publicAgentId(agentId);
}
