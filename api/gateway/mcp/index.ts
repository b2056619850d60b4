/**
 * `/mcp`: the payments MCP server (sdk/src/mcp/) over Streamable HTTP, served by the gateway.
 *
 *   POST /mcp?agent=<agentId>    Authorization: Bearer <API key>
 *
 * Stateless: each request gets its own server and transport (JSON answers, no session id), so
 * any gateway process answers any request. The server's tools reach the gateway through its own
 * REST /v1 and GraphQL handlers, in process (`dispatch`), with the caller's bearer key: the same
 * authentication, account isolation, validation, body limits and payment path as a REST client,
 * and no second way to pay, and every key scope check of those routes and fields applies to every
 * tool; a message above REST's body limit is answered 413. Before a server is made, the key is
 * authenticated as REST does it, its scope must be one that pays as the agent (admin, or
 * `agent:<that agent>`; 403 problem JSON otherwise),
 * and the agent looked up in the key's account (401 / 404 problem JSON).
 *
 * The paid APIs `pay` and `quote` call are reached from the gateway's network: a name resolving
 * to a loopback, private or link-local address is refused unless `allowPrivateNetworks` (local
 * systems, tests), so `/mcp` is no way into the gateway's own network. Budget warnings are not
 * pushed here (no standalone stream in stateless mode); `policy` shows the budget state.
 */
import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import type { Plugin } from "graphql-yoga";
import type pg from "pg";
import type { Logger } from "pino";
import { PaymentError } from "../../../sdk/src/errors.js";
import { createPaymentsMcpServer } from "../../../sdk/src/mcp/server.js";
import type { FetchFunction } from "../../../sdk/src/transport.js";
import { agentOfAccount } from "../../shared/agents.js";
import { MAX_BODY_BYTES } from "../../shared/http/json.js";
import { authenticate, BEARER_CHALLENGE, type Caller, INVALID_TOKEN_CHALLENGE } from "../../shared/auth.js";
import type { ApiKeyCache } from "../../shared/key-cache.js";
import { ADMIN_SCOPE, boundAgent, forbiddenScope, kindAllows } from "../../shared/scopes.js";
import { isNonPublicAddress } from "../webhooks/addresses.js";

export const MCP_PATH = "/mcp";
/** The origin the in-process client addresses; never resolved, only matched. */
const INTERNAL_ORIGIN = "http://gateway.internal";
const AGENT_ID = /^[\x21-\x7e]{1,128}$/;

export interface McpMountOptions {
  /** Where API keys and agents are read (the primary). */
  readonly pool: pg.Pool;
  /** The server's live keys (api/shared/key-cache.ts); without it each request reads its key. */
  readonly keys?: ApiKeyCache | undefined;
  /** The gateway's whole HTTP handler (REST /v1, GraphQL), called in process. */
  readonly dispatch: (request: Request) => Promise<Response>;
  /** Let `pay` / `quote` reach loopback and private addresses (local systems, tests); false in production. */
  readonly allowPrivateNetworks?: boolean;
  readonly logger?: Logger | undefined;
}

function problem(status: number, code: string, detail: string, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify({ type: "about:blank", title: code, status, code, detail }), {
    status,
    headers: { "content-type": "application/problem+json", ...headers },
  });
}

/** The gateway's own routes for the internal origin, the guarded network for everything else. */
function routingFetch(options: McpMountOptions): FetchFunction {
  return async (input, init) => {
    const url = new URL(String(input));
    if (url.origin === INTERNAL_ORIGIN) return options.dispatch(new Request(`http://localhost${url.pathname}${url.search}`, init));
    if (options.allowPrivateNetworks !== true) await refusePrivate(url);
    return fetch(url, init);
  };
}

async function refusePrivate(url: URL): Promise<void> {
  const host = url.hostname.replace(/^\[|\]$/g, "");
  const addresses = isIP(host) !== 0 ? [host] : (await lookup(host, { all: true })).map((entry) => entry.address);
  const refused = addresses.find(isNonPublicAddress);
  if (refused !== undefined) {
    throw new PaymentError(`${url.host} resolves to ${refused}, not a public address: /mcp pays public APIs only`, {
      code: "BAD_USER_INPUT",
    });
  }
}

function isAuthenticationError(error: unknown): boolean {
  return (error as { extensions?: { code?: unknown } } | null)?.extensions?.code === "AUTHENTICATION_ERROR";
}

/**
 * The key (as REST authenticates it), its scope and the agent (of the key's account): null when
 * all are good, else the problem answer. The server acts as the agent, so its scope needs what
 * paying needs (`agent`): an admin key, or an `agent:` key for this very agent; an approver key
 * (cannot pay) or another agent's key is 403 FORBIDDEN_SCOPE. The gateway's own scope checks still
 * hold for every tool call, which runs with this key.
 */
async function checkCaller(options: McpMountOptions, authorization: string, agentId: string): Promise<Response | null> {
  let caller: Caller;
  try {
    caller = await authenticate(options.pool, authorization, options.keys);
  } catch (error) {
    if (!isAuthenticationError(error)) throw error;
    return problem(401, "AUTHENTICATION_ERROR", "invalid API key", { "www-authenticate": INVALID_TOKEN_CHALLENGE });
  }
  const accountId = caller.accountId;
  const scope = caller.scope ?? ADMIN_SCOPE;
  const own = boundAgent(scope);
  if (!kindAllows(scope, "agent") || (own !== null && own !== agentId)) {
    const refused = forbiddenScope(scope, "agent", `open the MCP server of agent ${agentId}`, agentId);
    return new Response(JSON.stringify(refused.toProblem()), {
      status: refused.status,
      headers: { "content-type": "application/problem+json" },
    });
  }
  if ((await agentOfAccount(options.pool, accountId, agentId)) === null) {
    return problem(404, "NOT_FOUND", `no agent ${agentId} in this account`);
  }
  return null;
}

export async function handleMcp(options: McpMountOptions, request: Request): Promise<Response> {
  const authorization = request.headers.get("authorization");
  const apiKey = authorization === null ? undefined : /^Bearer\s+(\S+)$/i.exec(authorization)?.[1];
  if (authorization === null || apiKey === undefined) {
    return problem(401, "AUTHENTICATION_ERROR", "send the API key as Authorization: Bearer <key>", {
      "www-authenticate": BEARER_CHALLENGE,
    });
  }
  const agentId = new URL(request.url).searchParams.get("agent");
  if (agentId === null || !AGENT_ID.test(agentId)) {
    return problem(400, "BAD_USER_INPUT", "name the agent: /mcp?agent=<agentId>");
  }
  const refused = await checkCaller(options, authorization, agentId);
  if (refused !== null) return refused;

  const server = createPaymentsMcpServer({
    agentId,
    apiKey,
    baseUrl: INTERNAL_ORIGIN,
    fetch: routingFetch(options),
    onUnexpectedError: (error) => options.logger?.error({ err: error, agentId }, "mcp tool failed"),
    // No stream to send them on in stateless mode: `policy` shows the budget state.
    budgetNotifications: false,
  });
  const transport = new WebStandardStreamableHTTPServerTransport({
    sessionIdGenerator: undefined,
    enableJsonResponse: true,
    // REST's body limit: a larger JSON-RPC message is answered 413 before it is parsed.
    maxRequestBodySize: MAX_BODY_BYTES,
  });
  await server.connect(transport);
  try {
    return await transport.handleRequest(request);
  } finally {
    // A JSON answer is complete when handleRequest resolves; closing frees the per-request server.
    void server.close();
  }
}

/** Serves `/mcp` before GraphQL; `dispatch` is read on each request (the server exists only after the plugin list). */
export function useMcp(options: () => McpMountOptions): Plugin {
  return {
    async onRequest({ request, url, endResponse }) {
      if (url.pathname !== MCP_PATH) return;
      endResponse(await handleMcp(options(), request));
    },
  };
}
