#!/usr/bin/env node
/**
 * `apg-mcp`: the payments MCP server of one agent over stdio, for an MCP host (docs/mcp.md).
 *
 *   apg-mcp --agent <agentId> [--base-url <url>] [--allow-admin-key]
 *
 * The API key comes from the environment only (`APG_API_KEY`); a key on the command line is
 * refused, because arguments are visible to every process of the machine. `APG_BASE_URL` is
 * the gateway (default http://127.0.0.1:4000). Before serving, the key's scope is read from the
 * gateway (`key-scope.ts`) and `refusalOfScope` decides: a key scoped to this agent is served, an
 * admin key only with `--allow-admin-key`, an approver key or one scoped to another agent never
 * (exit 2). stdout carries the protocol only; messages go to stderr and never contain the key.
 */
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { isMainModule } from "../is-main.js";
import { Transport } from "../transport.js";
import { type KeyScope, keyScope } from "./key-scope.js";
import { createPaymentsMcpServer } from "./server.js";

export const DEFAULT_BASE_URL = "http://127.0.0.1:4000";
/** Bad arguments, no key, or a key of the wrong scope for the agent: fix the configuration. */
export const EXIT_USAGE = 2;
/** The gateway could not be asked about the key. */
export const EXIT_UNREACHABLE = 1;

export const USAGE = `usage: apg-mcp --agent <agentId> [--base-url <url>] [--allow-admin-key]
  The API key is read from APG_API_KEY (never from the command line); APG_BASE_URL sets the gateway.`;

export interface McpCommandLine {
  readonly agentId: string;
  readonly baseUrl: string | undefined;
  readonly allowAdminKey: boolean;
}

export class McpUsageError extends Error {}

export function parseMcpArgs(argv: readonly string[]): McpCommandLine {
  let agentId: string | undefined;
  let baseUrl: string | undefined;
  let allowAdminKey = false;
  for (let at = 0; at < argv.length; at += 1) {
    const arg = argv[at]!;
    const [name, inline] =
      arg.startsWith("--") && arg.includes("=") ? [arg.slice(0, arg.indexOf("=")), arg.slice(arg.indexOf("=") + 1)] : [arg, undefined];
    const value = (): string => {
      const next = inline ?? argv[(at += 1)];
      if (next === undefined || next.length === 0) throw new McpUsageError(`${name} needs a value`);
      return next;
    };
    if (name === "--agent") agentId = value();
    else if (name === "--base-url") baseUrl = value();
    else if (name === "--allow-admin-key") allowAdminKey = true;
    else if (name === "--api-key") throw new McpUsageError("the API key is read from APG_API_KEY only, never from the command line");
    else throw new McpUsageError(`unknown argument ${JSON.stringify(name.slice(0, 40))}`);
  }
  if (agentId === undefined) throw new McpUsageError("--agent is required");
  return { agentId, baseUrl, allowAdminKey };
}

export interface McpIo {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly stderr: (line: string) => void;
}

/**
 * What `apg-mcp --agent X` does with each scope: `agent:X` is served; `agent:Y` (another agent) is
 * refused, since every tool would be refused by the gateway; `approver` is refused, since it cannot
 * pay; `admin` is refused unless `--allow-admin-key` (it could change policies and withdraw, which
 * the agent must not reach, even though no tool does either). A key the gateway names no known
 * scope for is served: the gateway checks every call it makes.
 */
export function refusalOfScope(line: McpCommandLine, scope: KeyScope): string | null {
  const scoped = `agent:${line.agentId}`;
  switch (scope.kind) {
    case "admin":
      if (line.allowAdminKey) return null;
      return (
        `the API key is an admin key (it can change policies and withdraw): use a key scoped to ${scoped} ` +
        `(POST /v1/api-keys {"scope":"${scoped}"} or npm run admin -- issue-key <accountId> --scope ${scoped}), ` +
        "or pass --allow-admin-key"
      );
    case "approver":
      return `the API key is an approver key: it cannot pay; use a key scoped to ${scoped}`;
    case "agent":
      if (scope.agentId === line.agentId) return null;
      return `the API key is scoped to agent:${scope.agentId}, not to ${scoped}: use a key scoped to ${scoped} (or --agent ${scope.agentId})`;
    case "restricted":
      return null;
  }
}

/** The reason to refuse this key for this agent, or null to serve; throws when the gateway cannot be asked. */
export async function refusalOfKey(line: McpCommandLine, apiKey: string, baseUrl: string): Promise<string | null> {
  return refusalOfScope(line, await keyScope(new Transport({ baseUrl, apiKey, maxRetries: 1 }), apiKey));
}

/** Starts serving on stdio; resolves with an exit status only when it refuses to start. */
export async function runMcp(argv: readonly string[], io: McpIo): Promise<number | null> {
  let line: McpCommandLine;
  try {
    line = parseMcpArgs(argv);
  } catch (error) {
    io.stderr(`apg-mcp: ${(error as Error).message}\n${USAGE}`);
    return EXIT_USAGE;
  }
  const apiKey = io.env.APG_API_KEY;
  if (apiKey === undefined || apiKey.length === 0) {
    io.stderr("apg-mcp: set APG_API_KEY to the gateway API key");
    return EXIT_USAGE;
  }
  const baseUrl = line.baseUrl ?? (io.env.APG_BASE_URL || DEFAULT_BASE_URL);
  try {
    const refused = await refusalOfKey(line, apiKey, baseUrl);
    if (refused !== null) {
      io.stderr(`apg-mcp: ${refused}`);
      return EXIT_USAGE;
    }
  } catch (error) {
    io.stderr(`apg-mcp: the gateway at ${baseUrl} could not be asked about the key: ${redact((error as Error).message, apiKey)}`);
    return EXIT_UNREACHABLE;
  }
  const server = createPaymentsMcpServer({
    agentId: line.agentId,
    apiKey,
    baseUrl,
    onUnexpectedError: (error) => io.stderr(`apg-mcp: ${redact(error instanceof Error ? error.message : String(error), apiKey)}`),
  });
  await server.connect(new StdioServerTransport());
  return null;
}

function redact(text: string, secret: string): string {
  return text.split(secret).join("[redacted]");
}

if (isMainModule(import.meta.url)) {
  runMcp(process.argv.slice(2), { env: process.env, stderr: (line) => process.stderr.write(`${line}\n`) }).then(
    (status) => {
      if (status !== null) process.exit(status);
    },
    (error: unknown) => {
      process.stderr.write(
        `apg-mcp: ${error instanceof Error ? error.message.split(process.env.APG_API_KEY || "\u0000").join("[redacted]") : "failed"}\n`,
      );
      process.exit(1);
    },
  );
}
