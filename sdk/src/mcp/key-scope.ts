/**
 * Which scope the API key has, as far as the gateway tells it. The payments server is meant to run
 * with a key scoped to its agent (`agent:<id>`); an admin key can change policies and withdraw, so
 * `apg-mcp` refuses it unless told otherwise (`--allow-admin-key`).
 *
 * Key scopes are introduced by the gateway's "human in the loop" work (`admin`, `approver`,
 * `agent:<id>`). Until a gateway names them, every key is an admin key, and so is any key whose
 * scope cannot be read. How it is read: the key's own entry in `GET /v1/api-keys` (found by its
 * prefix) and its `scope` field; a gateway that refuses the listing with 403 has said the key is
 * not an admin key (only admin keys manage keys).
 */
import { ServiceError } from "../errors.js";
import type { Transport } from "../transport.js";

export type KeyScope = { kind: "admin" } | { kind: "approver" } | { kind: "agent"; agentId: string } | { kind: "restricted" };

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** `admin`, `approver`, `agent:<id>`; anything else is not an admin scope either. */
export function parseScope(scope: string): KeyScope {
  if (scope === "admin") return { kind: "admin" };
  if (scope === "approver") return { kind: "approver" };
  if (scope.startsWith("agent:") && scope.length > "agent:".length) return { kind: "agent", agentId: scope.slice("agent:".length) };
  return { kind: "restricted" };
}

export async function keyScope(transport: Transport, apiKey: string): Promise<KeyScope> {
  let listing: unknown;
  try {
    listing = await transport.request("GET", "/v1/api-keys");
  } catch (error) {
    if (error instanceof ServiceError && error.status === 403) return { kind: "restricted" };
    throw error;
  }
  const keys = isRecord(listing) && Array.isArray(listing.apiKeys) ? listing.apiKeys.filter(isRecord) : [];
  const own = keys.find((key) => typeof key.prefix === "string" && key.prefix.length > 0 && apiKey.startsWith(key.prefix));
  if (own === undefined || typeof own.scope !== "string") return { kind: "admin" };
  return parseScope(own.scope);
}
