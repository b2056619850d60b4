/**
 * `apg-mcp`'s reading of the API key's scope and what it does with each, against the real
 * gateway's key routes (REST /v1 on loopback, a fresh PostgreSQL; no ledger needed for keys).
 * An older gateway without `GET /v1/keys/current` is that same gateway with the route answered
 * 404 in front of it (a stand-in for the older version, named as such), so the fallback reads the
 * real listing. The parsing of scopes and arguments is tested on its own.
 */
import { randomBytes } from "node:crypto";
import bs58 from "bs58";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useGatewayRoutes } from "../../api/gateway/http/index.js";
import { generateWalletEncryptionKey, keystoreFromEnv } from "../../api/gateway/wallets/index.js";
import { SecretBox } from "../../api/gateway/webhooks/index.js";
import { type ApiServer, createApiServer } from "../../api/query/server.js";
import { createAccount, issueApiKey, registerAgent } from "../../api/shared/keys.js";
import { keyScope, parseScope } from "../../sdk/src/mcp/key-scope.js";
import { parseMcpArgs, refusalOfKey, refusalOfScope } from "../../sdk/src/mcp/main.js";
import { type FetchFunction, Transport } from "../../sdk/src/transport.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";

let db: FreshDatabase;
let api: ApiServer;
let baseUrl: string;
const keys: Record<"admin" | "approver" | "researcher" | "writer", string> = { admin: "", approver: "", researcher: "", writer: "" };

beforeAll(async () => {
  db = await createFreshDatabase();
  const routes = useGatewayRoutes({
    pool: db.pool,
    keystore: keystoreFromEnv({ WALLET_ENCRYPTION_KEY: generateWalletEncryptionKey() }),
    secretBox: new SecretBox(randomBytes(32)),
  });
  api = createApiServer({ pool: db.pool, liveFeed: false, plugins: [routes] });
  baseUrl = `http://127.0.0.1:${await api.listen(0)}`;
  const accountId = await createAccount(db.pool, "key scopes");
  for (const agentId of ["researcher", "writer"]) {
    await registerAgent(db.pool, accountId, { agentId: `${accountId}/${agentId}`, walletAddress: bs58.encode(randomBytes(32)) });
  }
  keys.admin = (await issueApiKey(db.pool, accountId)).apiKey;
  keys.approver = (await issueApiKey(db.pool, accountId, { kind: "approver" })).apiKey;
  keys.researcher = (await issueApiKey(db.pool, accountId, { kind: "agent", agentId: "researcher" })).apiKey;
  keys.writer = (await issueApiKey(db.pool, accountId, { kind: "agent", agentId: "writer" })).apiKey;
});

afterAll(async () => {
  await api?.close();
  await db?.drop();
});

/** The gateway as one without `GET /v1/keys/current` answers: that route 404, every other one real. */
const olderGateway: FetchFunction = async (input, init) => {
  if (new URL(String(input)).pathname === "/v1/keys/current") {
    return new Response(JSON.stringify({ type: "about:blank", title: "NOT_FOUND", status: 404, code: "NOT_FOUND", detail: "no route" }), {
      status: 404,
      headers: { "content-type": "application/problem+json" },
    });
  }
  return fetch(input, init);
};

const transport = (apiKey: string, fetchFn?: FetchFunction): Transport =>
  new Transport({ baseUrl, apiKey, maxRetries: 0, ...(fetchFn === undefined ? {} : { fetch: fetchFn }) });

describe("parsing", () => {
  it("parses the gateway's scopes", () => {
    expect(parseScope("admin")).toEqual({ kind: "admin" });
    expect(parseScope("approver")).toEqual({ kind: "approver" });
    expect(parseScope("agent:researcher")).toEqual({ kind: "agent", agentId: "researcher" });
    expect(parseScope("agent:")).toEqual({ kind: "restricted" });
  });

  it("the command line takes no key, needs --agent, and knows --allow-admin-key", () => {
    expect(() => parseMcpArgs(["--agent", "a", "--api-key", "apg_live_x"])).toThrow(/APG_API_KEY/);
    expect(() => parseMcpArgs([])).toThrow(/--agent is required/);
    expect(parseMcpArgs(["--agent=a", "--allow-admin-key"])).toEqual({ agentId: "a", baseUrl: undefined, allowAdminKey: true });
  });

  it("decides per scope: own agent served, admin only when allowed, approver and another agent never", () => {
    const strict = parseMcpArgs(["--agent", "researcher"]);
    const lenient = parseMcpArgs(["--agent", "researcher", "--allow-admin-key"]);
    expect(refusalOfScope(strict, { kind: "agent", agentId: "researcher" })).toBeNull();
    expect(refusalOfScope(strict, { kind: "admin" })).toMatch(/admin key .*--scope agent:researcher.*--allow-admin-key/);
    expect(refusalOfScope(lenient, { kind: "admin" })).toBeNull();
    for (const line of [strict, lenient]) {
      expect(refusalOfScope(line, { kind: "agent", agentId: "writer" })).toBe(
        "the API key is scoped to agent:writer, not to agent:researcher: use a key scoped to agent:researcher (or --agent writer)",
      );
      expect(refusalOfScope(line, { kind: "approver" })).toMatch(/approver key: it cannot pay/);
    }
  });
});

describe("the key's scope, from the real gateway", () => {
  it("GET /v1/keys/current names each key's scope", async () => {
    expect(await keyScope(transport(keys.admin), keys.admin)).toEqual({ kind: "admin" });
    expect(await keyScope(transport(keys.approver), keys.approver)).toEqual({ kind: "approver" });
    expect(await keyScope(transport(keys.researcher), keys.researcher)).toEqual({ kind: "agent", agentId: "researcher" });
  });

  it("apg-mcp --agent researcher: its own key served, the writer's, the approver's and (without the flag) the admin's refused", async () => {
    const line = parseMcpArgs(["--agent", "researcher"]);
    expect(await refusalOfKey(line, keys.researcher, baseUrl)).toBeNull();
    expect(await refusalOfKey(line, keys.writer, baseUrl)).toMatch(/scoped to agent:writer, not to agent:researcher/);
    expect(await refusalOfKey(line, keys.approver, baseUrl)).toMatch(/approver key/);
    expect(await refusalOfKey(line, keys.admin, baseUrl)).toMatch(/admin key/);
    expect(await refusalOfKey(parseMcpArgs(["--agent", "researcher", "--allow-admin-key"]), keys.admin, baseUrl)).toBeNull();
  });

  it("a revoked or unknown key is no scope at all: the gateway's 401 is thrown, nothing is served", async () => {
    await expect(refusalOfKey(parseMcpArgs(["--agent", "researcher"]), "apg_live_unknownunknownunknown", baseUrl)).rejects.toThrow(
      /API key/,
    );
  });

  it("an older gateway (404 on /v1/keys/current): the key's entry in the listing, and a 403 there says no admin key", async () => {
    expect(await keyScope(transport(keys.admin, olderGateway), keys.admin)).toEqual({ kind: "admin" });
    // The listing is readable by approver keys and names their scope.
    expect(await keyScope(transport(keys.approver, olderGateway), keys.approver)).toEqual({ kind: "approver" });
    // Agent keys may not list keys: 403, so not an admin key.
    expect(await keyScope(transport(keys.researcher, olderGateway), keys.researcher)).toEqual({ kind: "restricted" });
  });
});
