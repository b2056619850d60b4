/**
 * The HTTP edges of the API server (api/query/server.ts: REST /v1 and /graphql in one node:http server on
 * loopback, a fresh Postgres): how credentials are read and refused (RFC 9110 / RFC 6750), how
 * large and how exact a GraphQL request may be, and that a count in a policy is a plain integer.
 */
import { randomBytes } from "node:crypto";
import { request as httpRequest } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_GRAPHQL_BODY_BYTES, MAX_GRAPHQL_URL_BYTES } from "../../api/query/graphql-request.js";
import { createAccount, issueApiKey, registerAgent, revokeApiKey } from "../../api/shared/keys.js";
import type { ApiServer } from "../../api/query/server.js";
import { createGatewayServer } from "../../api/gateway/server.js";
import { generateWalletEncryptionKey, keystoreFromEnv } from "../../api/gateway/wallets/index.js";
import { SecretBox } from "../../api/gateway/webhooks/index.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { type RestAnswer, restCall } from "../support/rest.js";

let db: FreshDatabase;
let server: ApiServer;
let base: string;
let apiKey: string;
let revokedKey: string;

beforeAll(async () => {
  db = await createFreshDatabase();
  server = createGatewayServer({
    pool: db.pool,
    liveFeed: false,
    gateway: {
      keystore: keystoreFromEnv({ WALLET_ENCRYPTION_KEY: generateWalletEncryptionKey() }),
      secretBox: new SecretBox(randomBytes(32)),
    },
  });
  base = `http://127.0.0.1:${await server.listen(0)}`;
  const accountId = await createAccount(db.pool, "edges");
  apiKey = (await issueApiKey(db.pool, accountId)).apiKey;
  revokedKey = (await issueApiKey(db.pool, accountId)).apiKey;
  await revokeApiKey(db.pool, revokedKey);
  await registerAgent(db.pool, accountId, { agentId: "edge-agent", walletAddress: "WalletE111111111111111111111111111111111111" });
});

afterAll(async () => {
  await server?.close();
  await db?.drop();
});

/**
 * A call with `Bearer <apiKey>` unless `authorization` gives the header (null: none); `body` is
 * sent as written. Some answers here are not JSON (a refused oversized request): `body` is null then.
 */
function send(
  method: string,
  path: string,
  options: { authorization?: string | null; body?: string; contentType?: string } = {},
): Promise<RestAnswer> {
  const authorization = options.authorization === undefined ? `Bearer ${apiKey}` : options.authorization;
  return restCall(base, method, path, { authorization, raw: options.body, contentType: options.contentType, lenientJson: true });
}

const graphql = (body: string, authorization?: string | null) => send("POST", "/graphql", { body, authorization });
const codes = (answer: RestAnswer) => (answer.body?.errors ?? []).map((e: { extensions?: { code?: string } }) => e.extensions?.code);

describe("the Authorization scheme (RFC 9110 11.1: case-insensitive)", () => {
  it.each(["Bearer", "bearer", "BEARER", "bEaReR"])("%s <key> authenticates on REST and GraphQL", async (scheme) => {
    const rest = await send("GET", "/v1/policies/edge-agent", { authorization: `${scheme} ${apiKey}` });
    expect(rest.status).toBe(200);
    expect(rest.body.agentId).toBe("edge-agent");
    const metrics = await send("GET", "/v1/agents/edge-agent/metrics", { authorization: `${scheme} ${apiKey}` });
    expect(metrics.status).toBe(200);
    const gql = await graphql(JSON.stringify({ query: "{ agents { agentId } }" }), `${scheme} ${apiKey}`);
    expect(gql.status).toBe(200);
    expect(gql.body.data.agents).toEqual([{ agentId: "edge-agent" }]);
  });
});

describe("every 401 carries the RFC 6750 challenge and the spec 7 error class", () => {
  const REALM = 'Bearer realm="agent-payment-gateway"';
  const cases: Array<[string, string | null, string]> = [
    ["no Authorization header", null, REALM],
    ["another scheme", "Basic dXNlcjpwYXNz", REALM],
    ["a key of the wrong shape", "Bearer not-a-key", `${REALM}, error="invalid_token"`],
    ["an unknown key", `Bearer apg_${"x".repeat(43)}`, `${REALM}, error="invalid_token"`],
  ];

  it.each(cases)("REST /v1 route, %s", async (_name, authorization, challenge) => {
    const answer = await send("GET", "/v1/policies/edge-agent", { authorization });
    expect(answer.status).toBe(401);
    expect(answer.headers.get("content-type")).toBe("application/problem+json");
    expect(answer.headers.get("www-authenticate")).toBe(challenge);
    expect(answer.body).toMatchObject({ status: 401, code: "AUTHENTICATION_ERROR", errorClass: "AuthenticationError" });
  });

  it.each(cases)("REST metrics route, %s", async (_name, authorization, challenge) => {
    const answer = await send("GET", "/v1/agents/edge-agent/metrics", { authorization });
    expect(answer.status).toBe(401);
    expect(answer.headers.get("www-authenticate")).toBe(challenge);
    expect(answer.body).toMatchObject({ code: "AUTHENTICATION_ERROR", errorClass: "AuthenticationError" });
  });

  it.each(cases)("GraphQL, %s", async (_name, authorization, challenge) => {
    const answer = await graphql(JSON.stringify({ query: "{ agents { agentId } }" }), authorization);
    expect(answer.status).toBe(401);
    expect(answer.headers.get("www-authenticate")).toBe(challenge);
    expect(answer.body.errors[0].extensions).toMatchObject({ code: "AUTHENTICATION_ERROR", errorClass: "AuthenticationError" });
    expect(answer.body.data ?? null).toBeNull();
  });

  it("a revoked key is an invalid_token on both surfaces", async () => {
    const rest = await send("GET", "/v1/policies/edge-agent", { authorization: `Bearer ${revokedKey}` });
    expect(rest.status).toBe(401);
    expect(rest.headers.get("www-authenticate")).toBe(`${REALM}, error="invalid_token"`);
    const gql = await graphql(JSON.stringify({ query: "{ agents { agentId } }" }), `bearer ${revokedKey}`);
    expect(gql.status).toBe(401);
    expect(gql.headers.get("www-authenticate")).toBe(`${REALM}, error="invalid_token"`);
  });
});

/** A POST whose body streams in chunks without Content-Length; resolves with the status (or the error). */
function chunkedPost(path: string, bytes: number): Promise<{ status: number | null; body: string }> {
  return new Promise((resolve) => {
    const url = new URL(`${base}${path}`);
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
      },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (body += chunk));
        res.on("end", () => resolve({ status: res.statusCode ?? null, body }));
      },
    );
    req.on("error", () => resolve({ status: null, body: "" }));
    const chunk = Buffer.alloc(64 * 1024, " ");
    req.write('{"query":"{ agents { agentId } }"');
    let sent = 0;
    const pump = () => {
      while (sent < bytes) {
        sent += chunk.length;
        if (!req.write(chunk)) {
          req.once("drain", pump);
          return;
        }
      }
      req.end("}");
    };
    pump();
  });
}

describe("/graphql reads bounded, exact JSON", () => {
  it(`a body over ${MAX_GRAPHQL_BODY_BYTES} bytes is 413 PAYLOAD_TOO_LARGE, not executed`, async () => {
    // Valid JSON padded with whitespace: before the limit, yoga read all of it and ran the query.
    const padded = `{"query":"{ agents { agentId } }"${" ".repeat(MAX_GRAPHQL_BODY_BYTES)}}`;
    const answer = await graphql(padded);
    expect(answer.status).toBe(413);
    expect(codes(answer)).toEqual(["PAYLOAD_TOO_LARGE"]);
    expect(answer.body.data ?? null).toBeNull();
  });

  it("a body without Content-Length is cut off once it passes the limit (10 MB streamed)", async () => {
    const answer = await chunkedPost("/graphql", 10 * 1024 * 1024);
    // The server answers 413 as soon as the limit is passed; it may close the socket before the
    // client finished writing, which the client sees as a reset: never a 200.
    expect(answer.status === 413 || answer.status === null).toBe(true);
    if (answer.status === 413) expect(JSON.parse(answer.body).errors[0].extensions.code).toBe("PAYLOAD_TOO_LARGE");
  });

  it("a body just under the limit is executed", async () => {
    const query = '{"query":"{ agents { agentId } }"}';
    const answer = await graphql(`${query.slice(0, -1)}${" ".repeat(MAX_GRAPHQL_BODY_BYTES - query.length - 8)}}`);
    expect(answer.status).toBe(200);
    expect(answer.body.data.agents).toEqual([{ agentId: "edge-agent" }]);
  });

  it("duplicate keys are 400 INVALID_JSON (the REST parser), at the top level and in variables", async () => {
    for (const body of [
      '{"query":"{ agents { agentId } }","query":"{ agents { agentId } }"}',
      '{"query":"query Q($l: Int) { transactions(limit: $l) { nodes { id } } }","variables":{"l":5,"l":500}}',
      '{"query":"{ agents { agentId } }"} trailing',
    ]) {
      const answer = await graphql(body);
      expect(answer.status, body).toBe(400);
      expect(codes(answer), body).toEqual(["INVALID_JSON"]);
    }
  });

  it("numbers in variables are plain integers: 1e2 and 1.0 are 400 BAD_USER_INPUT, 100 is a limit", async () => {
    const query = "query Q($l: Int) { transactions(limit: $l) { nodes { id } } }";
    for (const value of ["1e2", "1.0", "1.000000000000000000000", "100.0", "1E1"]) {
      const answer = await graphql(`{"query":${JSON.stringify(query)},"variables":{"l":${value}}}`);
      expect(answer.status, value).toBe(400);
      expect(codes(answer), value).toEqual(["BAD_USER_INPUT"]);
    }
    const plain = await graphql(`{"query":${JSON.stringify(query)},"variables":{"l":100}}`);
    expect(plain.status).toBe(200);
    expect(plain.body.data.transactions.nodes).toEqual([]);
  });

  it("only application/json is read: another media type is 415 UNSUPPORTED_MEDIA_TYPE", async () => {
    const answer = await send("POST", "/graphql", { body: "{ agents { agentId } }", contentType: "application/graphql" });
    expect(answer.status).toBe(415);
    expect(codes(answer)).toEqual(["UNSUPPORTED_MEDIA_TYPE"]);
  });

  it(`a GET longer than ${MAX_GRAPHQL_URL_BYTES} bytes is 414 URI_TOO_LONG; GET variables are read strictly too`, async () => {
    // A GraphQL comment pads the query without URL-encoding growth (node itself refuses 16 KiB).
    const long = `{ agents { agentId } } #${"a".repeat(MAX_GRAPHQL_URL_BYTES)}`;
    const tooLong = await send("GET", `/graphql?query=${encodeURIComponent(long)}`);
    expect(tooLong.status).toBe(414);
    expect(codes(tooLong)).toEqual(["URI_TOO_LONG"]);

    const query = encodeURIComponent("query Q($l: Int) { transactions(limit: $l) { nodes { id } } }");
    const exponent = await send("GET", `/graphql?query=${query}&variables=${encodeURIComponent('{"l":1e2}')}`);
    expect(exponent.status).toBe(400);
    expect(codes(exponent)).toEqual(["BAD_USER_INPUT"]);
    const duplicate = await send("GET", `/graphql?query=${query}&variables=${encodeURIComponent('{"l":1,"l":2}')}`);
    expect(duplicate.status).toBe(400);
    expect(codes(duplicate)).toEqual(["INVALID_JSON"]);
    const fine = await send("GET", `/graphql?query=${query}&variables=${encodeURIComponent('{"l":5}')}`);
    expect(fine.status).toBe(200);
    expect(fine.body.data.transactions.nodes).toEqual([]);
  });
});

describe("rateLimit.calls is a plain JSON integer (PUT /v1/policies)", () => {
  it.each(["1e2", "1.000000000000000000000", "100.0", "1E2", "2.5"])("%s is refused with 400 and stores nothing", async (calls) => {
    // What is stored before (the test that sets 100 may have run first) must be what is stored after.
    const stored = async () => (await db.pool.query("SELECT rate_limit_calls FROM policies WHERE agent_id = 'edge-agent'")).rows;
    const before = await stored();
    const answer = await send("PUT", "/v1/policies/edge-agent", { body: `{"rateLimit":{"calls":${calls},"window":"1h"}}` });
    expect(answer.status).toBe(400);
    expect(answer.body).toMatchObject({ code: "BAD_USER_INPUT", reason: "invalid_rate_limit", field: "rateLimit.calls" });
    expect(await stored()).toEqual(before);
  });

  it("100 is a rate limit of 100 calls; 0 and 1000001 are out of range", async () => {
    const answer = await send("PUT", "/v1/policies/edge-agent", { body: '{"rateLimit":{"calls":100,"window":"1h"}}' });
    expect(answer.status).toBe(200);
    expect(answer.body.rateLimit).toEqual({ calls: 100, window: "1h" });
    for (const calls of ["0", "1000001", "-1"]) {
      const refused = await send("PUT", "/v1/policies/edge-agent", { body: `{"rateLimit":{"calls":${calls},"window":"1h"}}` });
      expect(refused.status, calls).toBe(400);
    }
  });
});
