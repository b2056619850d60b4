/**
 * The endpoint hash recorded on-chain: sha256 of the endpoint as the spec prints it, host and
 * path without scheme (spec 2.2). The text itself lives off-chain.
 */
import { createHash } from "node:crypto";

export const ENDPOINT_HASH_BYTES = 32;

/**
 * `api.example.com/v1/quote` for `https://api.example.com/v1/quote?x=1`; host/path kept as given.
 * A fragment is kept: it never reaches an HTTP server, so only a caller naming a part of a
 * resource writes one, as an MCP tool is named (`api.example.com/mcp#forecast`).
 */
export function endpointText(endpoint: string): string {
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(endpoint)) {
    return endpoint;
  }
  const url = new URL(endpoint);
  return `${url.host}${url.pathname}${url.hash}`;
}

export function endpointHash(endpoint: string): Uint8Array {
  return new Uint8Array(createHash("sha256").update(endpointText(endpoint), "utf8").digest());
}
