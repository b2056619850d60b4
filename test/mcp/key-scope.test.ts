/**
 * `apg-mcp`'s reading of the API key's scope. Key scopes are not in this gateway yet, so the
 * answers of a gateway that names them are played by a stand-in HTTP server on loopback (named
 * as such); today's gateway (no `scope` field) is covered by payments-server.test.ts, where the
 * key counts as admin and is refused without --allow-admin-key.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { keyScope, parseScope } from "../../sdk/src/mcp/key-scope.js";
import { parseMcpArgs, refusalOfKey } from "../../sdk/src/mcp/main.js";
import { Transport } from "../../sdk/src/transport.js";

const KEY = "apg_live_0123456789abcdef";
let standIn: Server | undefined;

/** A stand-in gateway answering GET /v1/api-keys with `status` and `body`. */
async function gatewayAnswering(status: number, body: unknown): Promise<string> {
  standIn = createServer((_req, res) => {
    res.writeHead(status, { "content-type": status >= 400 ? "application/problem+json" : "application/json" });
    res.end(JSON.stringify(body));
  });
  await new Promise<void>((done) => standIn!.listen(0, "127.0.0.1", done));
  return `http://127.0.0.1:${(standIn.address() as AddressInfo).port}`;
}

afterEach(async () => {
  await new Promise<void>((done) => (standIn === undefined ? done() : standIn.close(() => done())));
  standIn = undefined;
});

describe("key scope", () => {
  it("parses the scopes the human-in-the-loop issue names", () => {
    expect(parseScope("admin")).toEqual({ kind: "admin" });
    expect(parseScope("approver")).toEqual({ kind: "approver" });
    expect(parseScope("agent:researcher")).toEqual({ kind: "agent", agentId: "researcher" });
    expect(parseScope("agent:")).toEqual({ kind: "restricted" });
  });

  it("reads the key's own entry by prefix; without a scope field the key is an admin key", async () => {
    const listing = {
      apiKeys: [
        { id: "1", prefix: "apg_live_9" },
        { id: "2", prefix: "apg_live_0" },
      ],
    };
    const baseUrl = await gatewayAnswering(200, listing);
    expect(await keyScope(new Transport({ baseUrl, apiKey: KEY, maxRetries: 0 }), KEY)).toEqual({ kind: "admin" });
  });

  it("an agent-scoped key for this agent is served, for another agent refused", async () => {
    const baseUrl = await gatewayAnswering(200, { apiKeys: [{ id: "2", prefix: "apg_live_0", scope: "agent:researcher" }] });
    const line = parseMcpArgs(["--agent", "researcher"]);
    expect(await refusalOfKey(line, KEY, baseUrl)).toBeNull();
    expect(await refusalOfKey(parseMcpArgs(["--agent", "other"]), KEY, baseUrl)).toMatch(/another agent/);
  });

  it("a 403 on the listing means the key is not an admin key", async () => {
    const baseUrl = await gatewayAnswering(403, { code: "FORBIDDEN", status: 403, detail: "admin keys only" });
    expect(await keyScope(new Transport({ baseUrl, apiKey: KEY, maxRetries: 0 }), KEY)).toEqual({ kind: "restricted" });
  });

  it("the command line takes no key, needs --agent, and knows --allow-admin-key", () => {
    expect(() => parseMcpArgs(["--agent", "a", "--api-key", KEY])).toThrow(/APG_API_KEY/);
    expect(() => parseMcpArgs([])).toThrow(/--agent is required/);
    expect(parseMcpArgs(["--agent=a", "--allow-admin-key"])).toEqual({ agentId: "a", baseUrl: undefined, allowAdminKey: true });
  });
});
