/**
 * Registering webhook endpoints over REST, against a real Postgres and the API server
 * on loopback: a URL must name a public host (link-local, metadata, loopback, private, unspecified
 * and numerically obfuscated addresses are refused with a typed problem), loopback is accepted only
 * by a server configured for local development, and a signing secret is shown once: a replay under
 * the same Idempotency-Key answers the endpoint without it, and the idempotency record never holds it.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAccount, issueApiKey, registerAgent } from "../../api/shared/keys.js";
import type { ApiServer } from "../../api/query/server.js";
import { createGatewayServer } from "../../api/gateway/server.js";
import { SecretBox } from "../../api/gateway/webhooks/index.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { type RestAnswer, restCall } from "../support/rest.js";

let db: FreshDatabase;
let box: SecretBox;
/** A production-like server: no loopback webhooks. */
let strict: ApiServer;
let strictUrl: string;
/** A local development server: loopback webhooks allowed (WEBHOOK_ALLOW_LOOPBACK=true). */
let local: ApiServer;
let localUrl: string;
let apiKey: string;
let accountId: string;
/** Another account's key, for the endpoints the local server stores (apiKey's account must hold no loopback URL). */
let localKey: string;

beforeAll(async () => {
  db = await createFreshDatabase();
  box = new SecretBox(randomBytes(32));
  strict = createGatewayServer({ pool: db.pool, liveFeed: false, gateway: { secretBox: box } });
  local = createGatewayServer({ pool: db.pool, liveFeed: false, gateway: { secretBox: box, allowLoopbackWebhooks: true } });
  strictUrl = `http://127.0.0.1:${await strict.listen(0, "127.0.0.1")}`;
  localUrl = `http://127.0.0.1:${await local.listen(0, "127.0.0.1")}`;
  accountId = await createAccount(db.pool, "webhook registration");
  apiKey = (await issueApiKey(db.pool, accountId)).apiKey;
  localKey = (await issueApiKey(db.pool, await createAccount(db.pool, "local development"))).apiKey;
  await registerAgent(db.pool, accountId, { agentId: "reg-agent", walletAddress: "wallet-registration" });
});

afterAll(async () => {
  await strict?.close();
  await local?.close();
  await db?.drop();
});

/** A POST to `server` (the strict or the local one), with the account's key unless another is given. */
function post(server: string, path: string, body: unknown, idem?: string, key = apiKey): Promise<RestAnswer> {
  return restCall(server, "POST", path, { key, body, idem });
}

async function endpointsWithUrl(url: string): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM webhook_endpoints WHERE account_id = $1 AND url = $2",
    [accountId, new URL(url).toString()],
  );
  return rows[0]!.n;
}

/** Hosts no customer's webhook may name, on any deployment. */
const NEVER = [
  "http://169.254.169.254/latest/meta-data/",
  "http://[::ffff:169.254.169.254]/",
  "http://[::ffff:a9fe:a9fe]/",
  "http://metadata.google.internal/computeMetadata/v1/",
  "http://metadata.google.internal./computeMetadata/v1/",
  "http://METADATA.GOOGLE.INTERNAL/",
  "http://metadata.goog/",
  "http://metadata/",
  "http://instance-data/",
  "http://[fe80::1]/",
  "http://10.0.0.1/hook",
  "http://10.255.255.254/",
  "http://172.16.0.1/",
  "http://172.31.255.255/",
  "http://192.168.1.1/",
  "http://100.64.0.1/",
  "http://[fd00::1]/",
  "http://[fc00::1]/",
  "http://[::ffff:10.0.0.1]/",
  "http://[::a9fe:a9fe]/",
  "http://[::a00:1]/",
  "http://[::169.254.169.254]/",
  "http://[64:ff9b::a00:1]/",
  "http://[64:ff9b::808:808]/",
  "http://[2002:a9fe:a9fe::1]/",
  "http://[2002:c0a8:101::]/",
  "http://0.0.0.0/",
  "http://0/",
  "http://[::]/",
  "http://intranet/hook",
  "http://printer.local/",
  "http://db.internal/",
];

/** Loopback in every spelling: refused, except by a local development server. */
const LOOPBACK = [
  "http://127.0.0.1/",
  "http://127.8.9.10:8080/",
  "http://[::1]/",
  "http://[::1]:3000/hook",
  "http://localhost/",
  "http://localhost./",
  "http://LocalHost:4000/",
  "http://hooks.localhost/",
  "http://0x7f000001/",
  "http://2130706433/",
  "http://0177.0.0.1/",
  "http://127.1/",
  "http://0x7f.1/",
  "http://[::ffff:127.0.0.1]/",
  "http://[::ffff:7f00:1]/",
  "http://[::7f00:1]/",
  "http://[::127.0.0.1]/",
  "http://[0:0:0:0:0:ffff:127.0.0.1]/",
];

const PUBLIC = [
  "https://hooks.example.com/w",
  "https://93.184.215.14/hook",
  "http://172.32.0.1/",
  "http://11.0.0.1/",
  "https://[2606:4700::1111]/w",
];

describe("webhook URLs at registration", () => {
  it("refuses link-local, metadata, private, unspecified and loopback hosts (numeric obfuscations included) with 422 INVALID_WEBHOOK_URL; public hosts pass", async () => {
    for (const url of [...NEVER, ...LOOPBACK]) {
      const answer = await post(strictUrl, "/v1/webhooks", { url });
      expect(answer.status, url).toBe(422);
      expect(answer.headers.get("content-type"), url).toContain("application/problem+json");
      expect(answer.body, url).toMatchObject({ code: "INVALID_WEBHOOK_URL", errorClass: "ServiceError", field: "url", status: 422 });
      expect(["loopback", "non_public_address", "internal_name"], url).toContain(answer.body.reason);
      expect(await endpointsWithUrl(url), url).toBe(0);
    }
    for (const url of LOOPBACK) expect((await post(strictUrl, "/v1/webhooks", { url })).body.reason, url).toBe("loopback");
    for (const url of PUBLIC) {
      const answer = await post(strictUrl, "/v1/webhooks", { url });
      expect(answer.status, url).toBe(201);
      expect(await endpointsWithUrl(url), url).toBe(1);
    }
  });

  it("a refused URL under an Idempotency-Key stores nothing: the same key is free for a corrected request", async () => {
    const idem = randomUUID();
    expect((await post(strictUrl, "/v1/webhooks", { url: "http://169.254.169.254/" }, idem)).status).toBe(422);
    const { rows } = await db.pool.query("SELECT 1 FROM idempotency_keys WHERE account_id = $1 AND key = $2", [accountId, idem]);
    expect(rows).toEqual([]);
  });

  it("a server configured for local development accepts loopback, and only loopback: private and metadata hosts stay refused", async () => {
    for (const url of LOOPBACK) {
      const answer = await post(localUrl, "/v1/webhooks", { url }, undefined, localKey);
      expect(answer.status, url).toBe(201);
      // Stored as the URL parser normalized it: the obfuscations are stored as the plain address.
      expect(answer.body.url, url).toBe(new URL(url).toString());
    }
    for (const url of NEVER) {
      const answer = await post(localUrl, "/v1/webhooks", { url }, undefined, localKey);
      expect(answer.status, url).toBe(422);
      expect(answer.body.code, url).toBe("INVALID_WEBHOOK_URL");
      expect(answer.body.reason, url).not.toBe("loopback");
    }
  });
});

describe("alert webhook targets at registration", () => {
  it("an alert's webhook:<url> target follows the same rule: internal hosts refused with 422 INVALID_WEBHOOK_URL, loopback only on a local server", async () => {
    const alert = (notify: string) => ({ agentId: "reg-agent", type: "policy_violation", notify });
    for (const url of [
      "http://169.254.169.254/",
      "http://metadata.google.internal/",
      "http://[fd00::1]/",
      "http://10.0.0.1/",
      "http://0x7f000001/",
      "http://[::1]/",
    ]) {
      const answer = await post(strictUrl, "/v1/alerts", alert(`webhook:${url}`));
      expect(answer.status, url).toBe(422);
      expect(answer.body, url).toMatchObject({ code: "INVALID_WEBHOOK_URL", errorClass: "ServiceError" });
    }
    expect((await post(localUrl, "/v1/alerts", alert("webhook:http://127.0.0.1:9/hook"))).status).toBe(201);
    expect((await post(localUrl, "/v1/alerts", alert("webhook:http://192.168.1.1/hook"))).status).toBe(422);
    expect((await post(strictUrl, "/v1/alerts", alert("webhook:https://hooks.example.com/alert"))).status).toBe(201);
    const { rows } = await db.pool.query<{ notify: string }>("SELECT notify FROM alerts WHERE account_id = $1 ORDER BY created_at", [
      accountId,
    ]);
    expect(rows.map((row) => row.notify)).toEqual(["webhook:http://127.0.0.1:9/hook", "webhook:https://hooks.example.com/alert"]);
  });
});

describe("signing secrets are shown once", () => {
  it("a replayed create answers the same endpoint without its secret, and the idempotency record never holds the secret", async () => {
    const idem = randomUUID();
    const request = { url: "https://hooks.example.com/once", eventTypes: ["policy.violation"], description: "once" };
    const first = await post(strictUrl, "/v1/webhooks", request, idem);
    expect(first.status).toBe(201);
    const secret: string = first.body.secret;
    expect(secret).toMatch(/^whsec_/);

    const replay = await post(strictUrl, "/v1/webhooks", request, idem);
    expect(replay.status).toBe(201);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body).toEqual({ ...first.body, secret: null });
    expect(replay.text).not.toContain(secret.slice("whsec_".length));
    expect(await endpointsWithUrl(request.url)).toBe(1);

    // Neither in clear nor sealed: the stored answer is the secretless one.
    const { rows } = await db.pool.query<{ response_body: string | null; response_sealed: Buffer | null }>(
      "SELECT response_body, response_sealed FROM idempotency_keys WHERE account_id = $1 AND key = $2",
      [accountId, idem],
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]!.response_sealed).toBeNull();
    expect(rows[0]!.response_body).not.toContain(secret.slice("whsec_".length));
    expect(JSON.parse(rows[0]!.response_body!)).toMatchObject({ id: first.body.id, secret: null });
  });

  it("a replayed rotate-secret answers without the new secret, and its record does not hold it", async () => {
    const created = await post(strictUrl, "/v1/webhooks", { url: "https://hooks.example.com/rotate-once" });
    const idem = randomUUID();
    const rotated = await post(strictUrl, `/v1/webhooks/${created.body.id}/rotate-secret`, {}, idem);
    expect(rotated.status).toBe(200);
    const secret: string = rotated.body.secret;
    expect(secret).toMatch(/^whsec_/);
    const replay = await post(strictUrl, `/v1/webhooks/${created.body.id}/rotate-secret`, {}, idem);
    expect(replay.status).toBe(200);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body).toEqual({ id: created.body.id, secret: null });
    const { rows } = await db.pool.query<{ response_body: string | null; response_sealed: Buffer | null }>(
      "SELECT response_body, response_sealed FROM idempotency_keys WHERE account_id = $1 AND key = $2",
      [accountId, idem],
    );
    expect(rows[0]!.response_sealed).toBeNull();
    expect(rows[0]!.response_body).not.toContain(secret.slice("whsec_".length));
  });
});
