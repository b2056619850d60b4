/**
 * API key scopes: what a key may do. A key holds one scope, stored with it (api_keys.scope):
 *
 * - `admin`: everything of its account (every key issued before scopes existed is one);
 * - `approver`: reads everything of its account and decides approvals; changes nothing else;
 * - `agent:<agentId>`: acts as that one agent (by its public id): pays and authorizes as it and
 *   reads its own wallet, policy, transactions and trees; never changes a policy, withdraws,
 *   manages keys, webhooks or alerts, and never sees another agent.
 *
 * What each REST route and GraphQL field needs is declared next to it (`Requirement`) and checked
 * by `scopeRefusal`; a refusal is 403 FORBIDDEN_SCOPE naming the scopes that would be allowed.
 */
import { ServiceError } from "./errors.js";

export type Scope = { readonly kind: "admin" } | { readonly kind: "approver" } | { readonly kind: "agent"; readonly agentId: string };

/**
 * What a route or field needs:
 * - `admin`: admin keys only (changes to the account: policies, keys, webhooks, alerts, withdrawals);
 * - `account`: reads of account-wide things (alerts, webhooks, keys): admin and approver;
 * - `read`: reads of agents' things: admin, approver, and an agent key for its own agent only;
 * - `agent`: acting as an agent (pay, authorize, channels): admin, and an agent key for its own agent;
 * - `approve`: deciding approvals: admin and approver;
 * - `any`: any live key (who am I, static facts).
 */
export type Requirement = "admin" | "account" | "read" | "agent" | "approve" | "any";

export const ADMIN_SCOPE: Scope = { kind: "admin" };

const AGENT_PREFIX = "agent:";
const AGENT_ID = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;

/** The stored / wire form: `admin`, `approver`, `agent:<agentId>`. */
export function formatScope(scope: Scope): string {
  return scope.kind === "agent" ? `${AGENT_PREFIX}${scope.agentId}` : scope.kind;
}

/** A scope from its text, or null when the text is no scope. */
export function parseScope(text: string): Scope | null {
  if (text === "admin") return ADMIN_SCOPE;
  if (text === "approver") return { kind: "approver" };
  if (text.startsWith(AGENT_PREFIX)) {
    const agentId = text.slice(AGENT_PREFIX.length);
    if (AGENT_ID.test(agentId)) return { kind: "agent", agentId };
  }
  return null;
}

/** A stored scope (the column's CHECK makes it one); an unreadable value is read as the narrowest. */
export function storedScope(text: string): Scope {
  return parseScope(text) ?? { kind: "approver" };
}

/** The scopes that may do what `requirement` needs, as a refusal names them. */
export function allowedScopes(requirement: Requirement, agentId: string | null = null): string[] {
  const agent = agentId === null ? "agent:<agentId>" : `agent:${agentId}`;
  switch (requirement) {
    case "admin":
      return ["admin"];
    case "account":
    case "approve":
      return ["admin", "approver"];
    case "read":
      return ["admin", "approver", agent];
    case "agent":
      return ["admin", agent];
    case "any":
      return ["admin", "approver", "agent:<agentId>"];
  }
}

/** Whether the scope's kind may do what `requirement` needs at all (agent keys then also need their own agent). */
export function kindAllows(scope: Scope, requirement: Requirement): boolean {
  switch (requirement) {
    case "admin":
      return scope.kind === "admin";
    case "account":
    case "approve":
      return scope.kind !== "agent";
    case "read":
    case "any":
      return true;
    case "agent":
      return scope.kind !== "approver";
  }
}

/** The agent an agent key is bound to; null for admin and approver keys (they see every agent). */
export function boundAgent(scope: Scope | undefined): string | null {
  return scope?.kind === "agent" ? scope.agentId : null;
}

/** 403 FORBIDDEN_SCOPE: the key's scope does not allow this; `required` lists what would. */
export function forbiddenScope(scope: Scope, requirement: Requirement, what: string, agentId: string | null = null): ServiceError {
  const required = allowedScopes(requirement, agentId);
  return new ServiceError("FORBIDDEN_SCOPE", `a key of scope ${formatScope(scope)} cannot ${what}: it needs ${required.join(" or ")}`, {
    extra: { scope: formatScope(scope), requiredScopes: required },
  });
}
