/**
 * Reading a parsed JSON body into typed values: exact key sets, strings, integers. Every failure
 * is BAD_USER_INPUT (400) naming the field; nothing has been stored or moved when it is thrown.
 */
import { agentOfAccount } from "../agents.js";
import type { AgentRow } from "../rows.js";
import { parseAgentId } from "../validation.js";
import { isRecord, JsonNumber, type JsonValue } from "./json.js";
import { badRequest, httpError } from "./problem.js";
import type { RouteContext } from "./router.js";

export type JsonObject = Record<string, JsonValue>;

/** The body as an object with no keys outside `required ∪ optional`; an absent body is `{}`. */
export function objectBody(body: JsonValue | undefined, required: readonly string[], optional: readonly string[]): JsonObject {
  const value = body ?? {};
  if (!isRecord(value)) throw badRequest("body", "must be a JSON object");
  for (const key of Object.keys(value)) {
    if (!required.includes(key) && !optional.includes(key)) throw badRequest(key, "unknown field");
  }
  for (const key of required) if (!(key in value)) throw badRequest(key, "is required");
  return value;
}

export function stringField(value: JsonValue | undefined, field: string, maxChars = 2_048): string {
  if (typeof value !== "string" || value.length === 0) throw badRequest(field, "must be a non-empty string");
  if (value.length > maxChars) throw badRequest(field, `is longer than ${maxChars} characters`);
  return value;
}

export function optionalString(value: JsonValue | undefined, field: string, maxChars = 2_048): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "string") throw badRequest(field, "must be a string");
  if (value.length > maxChars) throw badRequest(field, `is longer than ${maxChars} characters`);
  return value;
}

export function stringList(value: JsonValue | undefined, field: string, maxItems = 100): string[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value) || !value.every((item) => typeof item === "string")) throw badRequest(field, "must be a list of strings");
  if (value.length > maxItems) throw badRequest(field, `has more than ${maxItems} entries`);
  return value as string[];
}

/** A JSON number that is a safe integer. */
export function integerField(value: JsonValue | undefined, field: string): number {
  if (!(value instanceof JsonNumber) || !/^-?\d{1,15}$/.test(value.text)) throw badRequest(field, "must be an integer");
  return Number(value.text);
}

/** Replaces number tokens with JS numbers (for modules that take counts as numbers). */
export function plainJson(value: JsonValue | undefined): unknown {
  if (value instanceof JsonNumber) return Number(value.text);
  if (Array.isArray(value)) return value.map(plainJson);
  if (isRecord(value)) return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, plainJson(item)]));
  return value;
}

/**
 * The caller's agent, or NOT_FOUND: another account's agent gets the same answer as none. An
 * archived agent is found (its history stays readable); routes that move money use
 * `requireActiveAgent`.
 */
export async function requireAgent(context: RouteContext, agentId: string): Promise<AgentRow> {
  const id = parseAgentId("agentId", agentId);
  // Within the caller's account only: ids are scoped per account (api/shared/agent-ids.ts).
  const agent = await agentOfAccount(context.deps.pool, context.caller.accountId, id);
  if (agent === null) throw httpError("NOT_FOUND", `no agent ${id} in this account`, { field: "agentId" });
  return agent;
}

/** 409 AGENT_ARCHIVED for an archived agent: it can no longer pay, authorize or be funded. */
export function refuseArchived(agent: Pick<AgentRow, "public_id" | "archived_at">): void {
  if (agent.archived_at !== null) {
    throw httpError(
      "AGENT_ARCHIVED",
      `agent ${agent.public_id} is archived (${agent.archived_at.toISOString()}); its history stays readable`,
      {
        agentId: agent.public_id,
        archivedAt: agent.archived_at.toISOString(),
      },
    );
  }
}

/** The caller's agent, refusing an archived one (see `refuseArchived`). */
export async function requireActiveAgent(context: RouteContext, agentId: string): Promise<AgentRow> {
  const agent = await requireAgent(context, agentId);
  refuseArchived(agent);
  return agent;
}

/** A `true` / `false` query parameter; absent is false. */
export function booleanParam(text: string | null, field: string): boolean {
  if (text === null) return false;
  if (text !== "true" && text !== "false") throw badRequest(field, "must be true or false");
  return text === "true";
}

/** A positive `limit` query parameter up to `max`. */
export function limitParam(text: string | null, fallback: number, max: number): number {
  if (text === null) return fallback;
  if (!/^\d{1,6}$/.test(text) || Number(text) < 1 || Number(text) > max) throw badRequest("limit", `must be an integer from 1 to ${max}`);
  return Number(text);
}
