/**
 * Which scope the API key has, as the gateway tells it (docs/rest.md "Scopes"): `admin`,
 * `approver` or `agent:<agentId>`. `apg-mcp` serves one agent and is meant to run with a key
 * scoped to it; what it does with each scope is `refusalOfScope` in main.ts.
 *
 * How it is read: `GET /v1/keys/current` (any key; `{ id, scope, accountId }`). A gateway older
 * than that route answers 404; then the key's own entry in `GET /v1/api-keys` (found by its
 * prefix) is read, where a key without a `scope` field is an admin key (every key was one before
 * scopes existed), and a 403 on the listing says the key is not an admin key.
 */
import { ServiceError } from "../errors.js";
import type { Transport } from "../transport.js";

/** `restricted`: a key the gateway says is no admin key but names no scope this client knows. */
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
  let current: unknown;
  try {
    current = await transport.request("GET", "/v1/keys/current");
  } catch (error) {
    if (error instanceof ServiceError && error.status === 404) return scopeFromListing(transport, apiKey);
    throw error;
  }
  return isRecord(current) && typeof current.scope === "string" ? parseScope(current.scope) : { kind: "restricted" };
}

/** A gateway without `/v1/keys/current`: the key's entry in the listing. */
async function scopeFromListing(transport: Transport, apiKey: string): Promise<KeyScope> {
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
