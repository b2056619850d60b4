/**
 * The MPP routes for resource servers (`POST /v1/mpp/payments`, `POST /v1/mpp/sessions/redeem`)
 * and `GET /v1/x402/supported`, against the whole system: the real program on the local ledger,
 * a fresh Postgres, REST over loopback. The seller's side is driven by hand here (the middleware
 * has its own tests in test/sdk/server-mpp.test.ts).
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { linkedReservation, mppPaymentRef } from "../../api/gateway/reservations/store.js";
import { fundedAgent, rest, startTestSystem, type TestSystem, tokenBalanceUnits } from "../sdk/server-support.js";
import { agentKey } from "../support/agent-keys.js";

const ORIGIN = "https://shop.example";
const PRICE = "0.05";
const PRICE_UNITS = 50_000n;

let test: TestSystem;
let buyerKey: string;
let sellerKey: string;
let otherKey: string;
let payTo: string;

const request = (sessionSupported = true) => ({
  protocol: "mpp/1.0",
  amount: { value: PRICE, currency: "USDC" },
  paymentMethods: ["stablecoin"],
  sessionSupported,
  paymentEndpoint: `${ORIGIN}/mpp/pay`,
});

beforeAll(async () => {
  test = await startTestSystem();
  const { system } = test;
  buyerKey = (await system.createAccount("buyer")).apiKey;
  sellerKey = (await system.createAccount("seller")).apiKey;
  otherKey = (await system.createAccount("other seller")).apiKey;
  await fundedAgent(system, buyerKey, "buyer", 2);
  await fundedAgent(system, buyerKey, "capped", 2);
  payTo = await fundedAgent(system, sellerKey, "till", 0);
}, 120_000);

afterAll(async () => {
  await test?.stop();
});

/** The gateway signs the agent's submission for the seller's 402 (the paying side, by hand). */
async function authorize(agentId: string, path: string, sessionSupported = true) {
  const answer = await rest(test.system, buyerKey, "POST", `/v1/agents/${agentId}/payments/authorize`, {
    endpoint: `${ORIGIN}${path}`,
    mpp: request(sessionSupported),
  });
  expect(answer.status).toBe(200);
  return answer.body as { submission: { authorization: { payer: string; nonce: string } }; reservationId: string };
}

async function pay(submission: unknown, key = sellerKey, idempotencyKey?: string) {
  return rest(
    test.system,
    key,
    "POST",
    "/v1/mpp/payments",
    { request: request(), submission, payTo, serviceOrigin: ORIGIN },
    idempotencyKey,
  );
}

const redeem = (token: string, path: string, overrides: Record<string, unknown> = {}, key = sellerKey) =>
  rest(test.system, key, "POST", "/v1/mpp/sessions/redeem", {
    token,
    endpoint: `${ORIGIN}${path}`,
    amount: { value: PRICE, currency: "USDC" },
    payTo,
    serviceOrigin: ORIGIN,
    ...overrides,
  });

describe("GET /v1/x402/supported", () => {
  it("names the scheme, the network and the usdc mint", async () => {
    const answer = await rest(test.system, sellerKey, "GET", "/v1/x402/supported");
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ scheme: "exact", network: test.system.network, tokens: { usdc: test.system.token } });
    expect((await rest(test.system, null, "GET", "/v1/x402/supported")).status).toBe(401);
  });
});

describe("POST /v1/mpp/payments", () => {
  it("settles the submission on-chain to payTo, opens a session and settles the linked reservation", async () => {
    const before = await tokenBalanceUnits(test, payTo);
    const authorized = await authorize("buyer", "/data");
    const a = authorized.submission.authorization;
    const paid = await pay(authorized.submission, sellerKey, randomUUID());
    expect(paid.status).toBe(200);
    expect(paid.body).toMatchObject({ success: true, method: "stablecoin", payer: a.payer, reusable: true });
    // The seller is another account: the payer's agent id is not its business.
    expect(paid.body).not.toHaveProperty("agentId");
    expect(paid.body.sessionToken).toMatch(/^mpps_/);
    expect(await tokenBalanceUnits(test, payTo)).toBe(before + PRICE_UNITS);

    const reservation = await linkedReservation(test.system.pool, mppPaymentRef(a.payer, a.nonce));
    expect(reservation).toMatchObject({ id: authorized.reservationId, status: "settled", txHash: paid.body.txHash });

    // The same signed submission again (another key): refused, no money moves.
    const replay = await pay(authorized.submission);
    expect(replay.body).toMatchObject({ success: false, reason: "nonce_reused" });
    expect(await tokenBalanceUnits(test, payTo)).toBe(before + PRICE_UNITS);

    // Nothing stores the clear session token: the idempotency row is sealed.
    const stored = await test.system.pool.query("SELECT response_body FROM idempotency_keys WHERE response_body LIKE $1", [
      `%${paid.body.sessionToken}%`,
    ]);
    expect(stored.rowCount).toBe(0);
  });

  it("answers the payer's agent id only to the payer's own account", async () => {
    const authorized = await authorize("buyer", "/own");
    // The buyer's account sells to itself here: it owns the payer, so it is told which agent paid.
    const own = await pay(authorized.submission, buyerKey, randomUUID());
    expect(own.body).toMatchObject({ success: true, agentId: "buyer" });
  });

  it("an Idempotency-Key retry answers the first result without paying twice", async () => {
    const authorized = await authorize("buyer", "/retry");
    const key = randomUUID();
    const before = await tokenBalanceUnits(test, payTo);
    const first = await pay(authorized.submission, sellerKey, key);
    const second = await pay(authorized.submission, sellerKey, key);
    expect(first.body.success).toBe(true);
    expect(second.text).toBe(first.text);
    expect(second.headers.get("idempotent-replayed")).toBe("true");
    expect(await tokenBalanceUnits(test, payTo)).toBe(before + PRICE_UNITS);
  });

  it("a refused submission releases the linked reservation", async () => {
    const authorized = await authorize("buyer", "/tampered");
    const a = authorized.submission.authorization;
    const tampered = structuredClone(authorized.submission) as unknown as { amount: { value: string } };
    tampered.amount.value = "0.04";
    const refused = await pay(tampered);
    // Signed for 0.05: the changed amount breaks the signature first.
    expect(refused.body).toMatchObject({ success: false, reason: "invalid_signature" });
    expect(await linkedReservation(test.system.pool, mppPaymentRef(a.payer, a.nonce))).toMatchObject({ status: "released" });
  });

  it("a submission whose reservation the agent released is revoked: refused, nothing moves, nothing counts", async () => {
    const authorized = await authorize("buyer", "/released");
    const a = authorized.submission.authorization;
    const released = await rest(test.system, buyerKey, "POST", `/v1/agents/buyer/payments/${authorized.reservationId}/release`, {});
    expect(released.status).toBe(200);
    const before = await tokenBalanceUnits(test, payTo);
    const refused = await pay(authorized.submission, sellerKey, randomUUID());
    expect(refused.body).toMatchObject({ success: false, reason: "payment_revoked" });
    expect(await tokenBalanceUnits(test, payTo)).toBe(before);
    expect(await linkedReservation(test.system.pool, mppPaymentRef(a.payer, a.nonce))).toMatchObject({ status: "released", txHash: null });
  });

  it("bad input is a typed 4xx and moves nothing", async () => {
    const authorized = await authorize("buyer", "/bad");
    const cases: [unknown, string][] = [
      [{ request: request(), submission: authorized.submission, payTo, serviceOrigin: `${ORIGIN}/path` }, "serviceOrigin"],
      [{ request: request(), submission: authorized.submission, payTo: "not-an-address", serviceOrigin: ORIGIN }, "payTo"],
      [{ request: request(), submission: { method: "stablecoin" }, payTo, serviceOrigin: ORIGIN }, "amount"],
      [
        {
          request: { ...request(), paymentEndpoint: "https://elsewhere.example/pay" },
          submission: authorized.submission,
          payTo,
          serviceOrigin: ORIGIN,
        },
        "request.paymentEndpoint",
      ],
      [{ request: request(), submission: authorized.submission, payTo }, "serviceOrigin"],
    ];
    for (const [body, field] of cases) {
      const answer = await rest(test.system, sellerKey, "POST", "/v1/mpp/payments", body);
      expect(answer.status, JSON.stringify(body)).toBe(400);
      expect(answer.headers.get("content-type")).toContain("application/problem+json");
      expect(answer.body.code).toBe("BAD_USER_INPUT");
      expect(JSON.stringify(answer.body)).toContain(field);
    }
    expect((await rest(test.system, null, "POST", "/v1/mpp/payments", {})).status).toBe(401);
    expect((await rest(test.system, sellerKey, "POST", "/v1/mpp/payments", "{not json")).status).toBe(400);
    const a = authorized.submission.authorization;
    expect(await linkedReservation(test.system.pool, mppPaymentRef(a.payer, a.nonce))).toMatchObject({ status: "reserved" });
  });
});

describe("POST /v1/mpp/sessions/redeem", () => {
  it("the first use is the prepaid call; later uses charge the session on-chain within the policy", async () => {
    const authorized = await authorize("buyer", "/s");
    const paid = await pay(authorized.submission);
    const token = paid.body.sessionToken as string;
    const before = await tokenBalanceUnits(test, payTo);

    const first = await redeem(token, "/s");
    expect(first.body).toMatchObject({ success: true, charged: false, txHash: paid.body.txHash, token, refreshed: false });
    expect(await tokenBalanceUnits(test, payTo)).toBe(before);

    const second = await redeem(token, "/s/2");
    expect(second.body).toMatchObject({ success: true, charged: true, token });
    expect(second.body.txHash).not.toBe(paid.body.txHash);
    expect(await tokenBalanceUnits(test, payTo)).toBe(before + PRICE_UNITS);
    const charge = await test.system.pool.query<{ id: string }>(
      "SELECT id FROM mpp_payments WHERE kind = 'session_charge' AND tx_hash = $1",
      [second.body.txHash],
    );
    expect(await linkedReservation(test.system.pool, `mpp-charge:${charge.rows[0]!.id}`)).toMatchObject({
      status: "settled",
      txHash: second.body.txHash,
      agentId: await agentKey(test.system.pool, "buyer"),
    });
  });

  it("a session charge the policy refuses is recorded rejected, emits policy.violation and moves nothing", async () => {
    const authorized = await authorize("capped", "/p");
    const paid = await pay(authorized.submission);
    const token = paid.body.sessionToken as string;
    expect((await redeem(token, "/p")).body).toMatchObject({ success: true, charged: false });

    const policy = await rest(test.system, buyerKey, "PUT", "/v1/policies/capped", { perCallLimit: { usdc: 0.01 } });
    expect(policy.status).toBe(200);
    const before = await tokenBalanceUnits(test, payTo);
    const refused = await redeem(token, "/p/again");
    expect(refused.body).toMatchObject({
      success: false,
      reason: "policy_violation",
      reasonCode: "per_call_limit_exceeded",
      errorClass: "PolicyViolationError",
    });
    expect(refused.body.detail).toMatch(/^per_call_limit_exceeded: requested 0\.05 usdc, limit is 0\.01 usdc$/);
    expect(await tokenBalanceUnits(test, payTo)).toBe(before);

    const capped = await agentKey(test.system.pool, "capped");
    const rejections = await test.system.pool.query(
      "SELECT reason_code, endpoint, protocol, amount_units FROM payment_rejections WHERE agent_id = $1",
      [capped],
    );
    expect(rejections.rows).toEqual([
      { reason_code: "per_call_limit_exceeded", endpoint: "shop.example/p/again", protocol: "mpp", amount_units: "50000" },
    ]);
    const events = await test.system.pool.query(
      "SELECT payload FROM gateway_events WHERE agent_id = 'capped' AND type = 'policy.violation'",
    );
    expect(events.rows).toHaveLength(1);
    const listed = await rest(test.system, buyerKey, "GET", "/v1/transactions?agentId=capped");
    expect(JSON.stringify(listed.body)).toContain("rejected");
    const charges = await test.system.pool.query("SELECT 1 FROM mpp_payments WHERE agent_id = $1 AND kind = 'session_charge'", [capped]);
    expect(charges.rowCount).toBe(0);
  });

  it("a single-use token redeems once; unknown tokens and bad input are refused", async () => {
    const authorized = await authorize("buyer", "/once", false);
    const paid = await rest(test.system, sellerKey, "POST", "/v1/mpp/payments", {
      request: request(false),
      submission: authorized.submission,
      payTo,
      serviceOrigin: ORIGIN,
    });
    expect(paid.body).toMatchObject({ success: true, reusable: false });
    const token = paid.body.sessionToken as string;
    expect((await redeem(token, "/once")).body).toMatchObject({ success: true, charged: false });
    expect((await redeem(token, "/once")).body).toMatchObject({ success: false, reason: "session_exhausted" });
    expect((await redeem(`mpps_${"A".repeat(43)}`, "/x")).body).toMatchObject({ success: false, reason: "session_unknown" });

    expect((await redeem("nope", "/x")).status).toBe(400);
    expect((await redeem(token, "/x", { endpoint: "https://elsewhere.example/x" })).status).toBe(400);
    expect((await redeem(token, "/x", { amount: { value: "0.0000001", currency: "USDC" } })).status).toBe(400);
    expect((await redeem(token, "/x", { amount: { value: "0.05", currency: "EUR" } })).status).toBe(400);
    expect((await redeem(token, "/x", { extra: 1 })).status).toBe(400);
  });

  it("a token is bound to its service: another payTo or origin finds no session", async () => {
    const authorized = await authorize("buyer", "/iso");
    const paid = await pay(authorized.submission);
    const token = paid.body.sessionToken as string;
    const otherTill = await fundedAgent(test.system, otherKey, "other-till", 0);
    const before = await tokenBalanceUnits(test, otherTill);
    expect((await redeem(token, "/iso", { payTo: otherTill }, otherKey)).body).toMatchObject({ success: false, reason: "session_unknown" });
    expect(
      (await redeem(token, "/iso", { serviceOrigin: "https://other.example", endpoint: "https://other.example/iso" }, otherKey)).body,
    ).toMatchObject({ success: false, reason: "session_unknown" });
    expect(await tokenBalanceUnits(test, otherTill)).toBe(before);
    // Still usable at its own service.
    expect((await redeem(token, "/iso")).body).toMatchObject({ success: true, charged: false });
  });
});
