/**
 * The gateway's pay path closes its own reservations, end to end on the whole system
 * (`startSystem`: the real program on the local ledger, a real Postgres, REST /v1 over real HTTP
 * on loopback): the facilitator settles or releases the reservation an authorization linked, the
 * sweeper finishes what a crash or an unused authorization left, and `agents.invoke`
 * invocations open on-chain and cap their sub-agent's payments, both at authorization (under the
 * agent's lock, so concurrent authorizations cannot overshoot) and on-chain at settlement.
 */
import { randomBytes } from "node:crypto";
import { Keypair, PublicKey } from "@solana/web3.js";
import bs58 from "bs58";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseJson } from "../../api/shared/http/json.js";
import { parseUsdcNumber } from "../../api/shared/http/money.js";
import { claimLinkedReservation, x402PaymentRef } from "../../api/gateway/reservations/store.js";
import { sweepReservations } from "../../api/gateway/loops/sweeper.js";
import { tokenBalanceUnits } from "../../api/gateway/chain/ledger.js";
import { invocationAddress } from "../../api/gateway/invocations/index.js";
import { parsePaymentPayload, parsePaymentRequirement } from "../../api/gateway/x402/index.js";
import { bindNonceClaim } from "../../api/gateway/x402/nonces.js";
import { PAYMENT_LEDGER_PROGRAM_ID } from "../../programs/payment_ledger/ts/index.js";
import { type System, startSystem } from "../../scripts/system.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { type RestAnswer as Answer, restCall } from "../support/rest.js";
import { agentKey } from "../support/agent-keys.js";

const USDC = 1_000_000n;
const ORIGIN = "https://paid.example.com";

let db: FreshDatabase;
let system: System;
let agentsKey: string;
let serverKey: string;
let otherKey: string;

beforeAll(async () => {
  db = await createFreshDatabase();
  system = await startSystem({ databaseUrl: db.url, port: 0, allowPrivateNetworks: true, logger: pino({ level: "warn" }) });
  agentsKey = (await system.createAccount("pay path agents")).apiKey;
  serverKey = (await system.createAccount("paid API")).apiKey;
  otherKey = (await system.createAccount("another tenant")).apiKey;
});

afterAll(async () => {
  await system?.stop();
  await db?.drop();
});

function call(method: string, path: string, body?: unknown, key = agentsKey): Promise<Answer> {
  return restCall(system.apiUrl, method, path, { key, body });
}

/** Registers (and funds) an agent; returns its wallet address. */
async function agent(agentId: string, fundUsdc: number, policy?: Record<string, unknown>): Promise<string> {
  const created = await call("POST", "/v1/agents", { agentId });
  expect(created.status, created.text).toBe(201);
  if (fundUsdc > 0) {
    const funded = await call("POST", `/v1/agents/${agentId}/wallet/fund`, { usdc: fundUsdc });
    expect(funded.status, funded.text).toBe(200);
  }
  if (policy !== undefined) expect((await call("PUT", `/v1/policies/${agentId}`, policy)).status).toBe(200);
  return (await call("GET", `/v1/agents/${agentId}/wallet`)).body.address as string;
}

const requirement = (units: bigint, payTo: string, path = "/data") => ({
  scheme: "exact",
  network: system.network,
  token: system.token,
  amount: units.toString(),
  payTo,
  resource: `${ORIGIN}${path}`,
});

async function authorize(agentId: string, units: bigint, payTo: string, extra: Record<string, unknown> = {}): Promise<Answer> {
  const x402 = requirement(units, payTo);
  return call("POST", `/v1/agents/${agentId}/payments/authorize`, { endpoint: x402.resource, x402, ...extra });
}

/** The resource server's side: settle the authorized payment through our facilitator. */
async function settle(authorized: Answer): Promise<Answer> {
  const payment = authorized.body.payment;
  const x402 = requirement(BigInt(payment.payload.amount), payment.payload.to);
  return call("POST", "/v1/x402/settle", { payment, requirement: x402 }, serverKey);
}

async function reservation(
  id: string,
): Promise<{ status: string; tx_hash: string | null; invocation: string | null; payment_ref: string }> {
  const { rows } = await system.pool.query("SELECT status, tx_hash, invocation, payment_ref FROM spend_reservations WHERE id = $1", [id]);
  return rows[0];
}

const units = (money: { usdc: unknown }): bigint =>
  parseUsdcNumber((parseJson(JSON.stringify(money)) as { usdc: never }).usdc, "usdc", true);
const payee = (): string => Keypair.generate().publicKey.toBase58();
const sweep = (at: Date) => sweepReservations(system.pool, { agents: system.wallets, invocations: system.settlement }, at);
/** Far enough ahead that every payload signed so far has expired past the grace. */
const later = (): Date => new Date(Date.now() + 15 * 60_000);

describe("the facilitator closes the reservation it settles", () => {
  it("settled with the transaction, without /complete; /complete with the same hash is still 200", async () => {
    await agent("payer-a", 5);
    const to = payee();
    const authorized = await authorize("payer-a", 1_250_000n, to);
    expect(authorized.status, authorized.text).toBe(200);
    const id = authorized.body.reservationId as string;
    expect(await reservation(id)).toMatchObject({
      status: "reserved",
      payment_ref: x402PaymentRef(authorized.body.payment.payload.from, authorized.body.payment.payload.nonce),
    });

    const settled = await settle(authorized);
    expect(settled.body, settled.text).toMatchObject({ success: true });
    const txHash = settled.body.txHash as string;
    expect(await reservation(id)).toMatchObject({ status: "settled", tx_hash: txHash });
    expect(await tokenBalanceUnits(system.ledger, new PublicKey(to))).toBe(1_250_000n);
    const row = await system.pool.query("SELECT payment_ref, status FROM settlements WHERE signature = $1", [txHash]);
    expect(row.rows[0]).toEqual({ payment_ref: (await reservation(id)).payment_ref, status: "confirmed" });

    const completed = await call("POST", `/v1/agents/payer-a/payments/${id}/complete`, { txHash });
    expect(completed.status, completed.text).toBe(200);
    const otherHash = bs58.encode(randomBytes(64));
    expect((await call("POST", `/v1/agents/payer-a/payments/${id}/complete`, { txHash: otherHash })).status).toBe(409);
    expect((await call("POST", `/v1/agents/payer-a/payments/${id}/release`)).status).toBe(409);
  });

  it("a settlement the ledger refuses (insufficient funds at settle time) releases the reservation", async () => {
    await agent("payer-poor", 1, { dailyBudget: { usdc: 10 } });
    const authorized = await authorize("payer-poor", 3n * USDC, payee());
    expect(authorized.status, authorized.text).toBe(200);
    const settled = await settle(authorized);
    expect(settled.body, settled.text).toMatchObject({ success: false, reason: "settlement_failed" });
    expect(await reservation(authorized.body.reservationId)).toMatchObject({ status: "released", tx_hash: null });
    const policy = await call("GET", `/v1/policies/payer-poor`);
    expect(units(policy.body.usedToday)).toBe(0n);
  });
});

describe("the sweeper", () => {
  it("releases an expired authorization that was never presented, and its budget is usable again", async () => {
    await agent("payer-idle", 2, { dailyBudget: { usdc: 1 } });
    const first = await authorize("payer-idle", USDC, payee());
    expect(first.status, first.text).toBe(200);
    const over = await authorize("payer-idle", 500_000n, payee());
    expect(over.status).toBe(403);
    expect(over.body.reasonCode).toBe("daily_budget_exceeded");

    // Before its payload expired nothing is released, whatever the sweeper runs.
    await sweep(new Date());
    expect((await reservation(first.body.reservationId)).status).toBe("reserved");
    await sweep(later());
    expect((await reservation(first.body.reservationId)).status).toBe("released");

    const again = await authorize("payer-idle", USDC, payee());
    expect(again.status, again.text).toBe(200);
    expect((await call("POST", `/v1/agents/payer-idle/payments/${again.body.reservationId}/release`)).status).toBe(200);

    // A released payload is revoked: presented late (here: the sweep ran ahead of the real clock,
    // as a sweeper racing a stalled facilitator would), it is refused and nothing moves.
    const late = await settle(first);
    expect(late.body, late.text).toMatchObject({ success: false, reason: "payment_revoked" });
    expect(await reservation(first.body.reservationId)).toMatchObject({ status: "released", tx_hash: null });
    expect(units((await call("GET", "/v1/policies/payer-idle")).body.usedToday)).toBe(0n);
  });

  it("resolves a claim whose process died after sending: settled from the settlement row at the next pass, reservation settled", async () => {
    const address = await agent("payer-crash", 3);
    const to = payee();
    const authorized = await authorize("payer-crash", 700_000n, to);
    const payment = parsePaymentPayload(authorized.body.payment);
    const x402 = parsePaymentRequirement(requirement(700_000n, to));
    const p = payment.payload;
    const ref = x402PaymentRef(p.from, p.nonce);
    expect(p.from).toBe(address);
    // What the facilitator leaves if it dies after the ledger confirmed, before it wrote anything.
    await system.pool.query(
      `INSERT INTO x402_nonces (payer, nonce, agent_id, pay_to, amount_units, resource, expires_at)
       VALUES ($1, $2, (SELECT agent_id FROM agents WHERE public_id = 'payer-crash'), $3, $4, $5, to_timestamp($6))`,
      [p.from, p.nonce, p.to, p.amountUnits.toString(), x402.resource, p.validUntilSeconds],
    );
    const landed = await system.settlement.settlePayment({
      agentId: await agentKey(system.pool, "payer-crash"),
      payee: to,
      amountUnits: 700_000n,
      protocol: "x402",
      rail: "stablecoin",
      endpoint: x402.resource,
      paymentRef: ref,
    });
    expect((await reservation(authorized.body.reservationId)).status).toBe("reserved");

    // Found by its settlement row at once, not after the claim grace: until the claim is settled a
    // resumed settle of the payload answers `settlement_pending`, and its client waits.
    await sweep(new Date());
    const nonce = await system.pool.query("SELECT status, tx_hash FROM x402_nonces WHERE payer = $1 AND nonce = $2", [p.from, p.nonce]);
    expect(nonce.rows[0]).toEqual({ status: "settled", tx_hash: landed.txHash });
    expect(await reservation(authorized.body.reservationId)).toMatchObject({ status: "settled", tx_hash: landed.txHash });
    // The payload cannot settle a second time.
    expect((await settle(authorized)).body).toMatchObject({ success: false, reason: "nonce_reused" });
    expect(await tokenBalanceUnits(system.ledger, new PublicKey(to))).toBe(700_000n);
  });

  it("a claim the sweeper gave up refuses its settlement (nothing sent); a bound claim is never given up", async () => {
    await agent("payer-bind", 3);
    const to = payee();
    const agentId = await agentKey(system.pool, "payer-bind");
    const claimed = async (units: bigint) => {
      const authorized = await authorize("payer-bind", units, to);
      const p = parsePaymentPayload(authorized.body.payment).payload;
      await system.pool.query(
        `INSERT INTO x402_nonces (payer, nonce, agent_id, pay_to, amount_units, resource, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, to_timestamp($7))`,
        [p.from, p.nonce, agentId, p.to, p.amountUnits.toString(), `${ORIGIN}/data`, p.validUntilSeconds],
      );
      expect((await claimLinkedReservation(system.pool, x402PaymentRef(p.from, p.nonce), new Date())).outcome).toBe("claimed");
      const settle = () =>
        system.settlement.settlePayment({
          agentId,
          payee: to,
          amountUnits: units,
          protocol: "x402",
          rail: "stablecoin",
          endpoint: `${ORIGIN}/data`,
          paymentRef: x402PaymentRef(p.from, p.nonce),
          bindClaim: (db, signature) => bindNonceClaim(db, p.from, p.nonce, signature),
        });
      return { authorized, p, settle };
    };
    const nonceOf = async (p: { from: string; nonce: string }) =>
      (await system.pool.query("SELECT status, tx_hash FROM x402_nonces WHERE payer = $1 AND nonce = $2", [p.from, p.nonce])).rows[0];

    // Given up first (a settle that stalled past the grace): the settlement refuses, nothing moves.
    const late = await claimed(200_000n);
    await sweep(later());
    expect(await nonceOf(late.p)).toEqual({ status: "failed", tx_hash: null });
    await expect(late.settle()).rejects.toThrow(/given up/);
    const rows = await system.pool.query("SELECT 1 FROM settlements WHERE payment_ref = $1", [x402PaymentRef(late.p.from, late.p.nonce)]);
    expect(rows.rowCount).toBe(0);
    expect(await tokenBalanceUnits(system.ledger, new PublicKey(to))).toBe(0n);

    // Settled first: the claim carries the transaction from the commit of its settlement on, so the
    // sweeper settles it, however late, and never gives it up.
    const bound = await claimed(300_000n);
    const landed = await bound.settle();
    expect(await nonceOf(bound.p)).toEqual({ status: "claimed", tx_hash: landed.txHash });
    await sweep(later());
    expect(await nonceOf(bound.p)).toEqual({ status: "settled", tx_hash: landed.txHash });
    expect(await tokenBalanceUnits(system.ledger, new PublicKey(to))).toBe(300_000n);
  });

  it("a claim with a pending transaction follows its settlement; a claim that never prepared one fails and releases", async () => {
    await agent("payer-pending", 3);
    const to = payee();
    const sent = await authorize("payer-pending", 400_000n, to);
    const abandoned = await authorize("payer-pending", 300_000n, to);
    const claim = async (authorized: Answer) => {
      const p = parsePaymentPayload(authorized.body.payment).payload;
      await system.pool.query(
        `INSERT INTO x402_nonces (payer, nonce, agent_id, pay_to, amount_units, resource, expires_at)
         VALUES ($1, $2, (SELECT agent_id FROM agents WHERE public_id = 'payer-pending'), $3, $4, $5, to_timestamp($6))`,
        [p.from, p.nonce, p.to, p.amountUnits.toString(), `${ORIGIN}/data`, p.validUntilSeconds],
      );
      // The facilitator takes the reservation right after the nonce, before any money moves: a
      // crash from here on leaves both claims, and release is already refused.
      expect((await claimLinkedReservation(system.pool, x402PaymentRef(p.from, p.nonce), new Date())).outcome).toBe("claimed");
      return p;
    };
    const p1 = await claim(sent);
    const p2 = await claim(abandoned);
    const prepared = await system.settlement.prepareSettlement({
      agentId: await agentKey(system.pool, "payer-pending"),
      payee: to,
      amountUnits: 400_000n,
      protocol: "x402",
      rail: "stablecoin",
      endpoint: `${ORIGIN}/data`,
      paymentRef: x402PaymentRef(p1.from, p1.nonce),
    });
    // Sent with an unknown outcome: the claim holds the transaction, the settlement row is pending.
    await system.pool.query("UPDATE x402_nonces SET tx_hash = $3 WHERE payer = $1 AND nonce = $2", [
      p1.from,
      p1.nonce,
      prepared.signed.signature,
    ]);

    // Within the claim grace the abandoned claim is left alone; a pending one always waits.
    await sweep(new Date());
    expect((await reservation(abandoned.body.reservationId)).status).toBe("reserved");
    expect((await reservation(sent.body.reservationId)).status).toBe("reserved");

    await sweep(later());
    const nonceOf = async (p: { from: string; nonce: string }) =>
      (await system.pool.query("SELECT status, tx_hash FROM x402_nonces WHERE payer = $1 AND nonce = $2", [p.from, p.nonce])).rows[0];
    expect(await nonceOf(p2)).toEqual({ status: "failed", tx_hash: null });
    expect((await reservation(abandoned.body.reservationId)).status).toBe("released");
    expect(await nonceOf(p1)).toEqual({ status: "claimed", tx_hash: prepared.signed.signature });
    expect((await reservation(sent.body.reservationId)).status).toBe("reserved");

    const landed = await system.settlement.completeSettlement(prepared);
    await sweep(later());
    expect(await nonceOf(p1)).toEqual({ status: "settled", tx_hash: landed.txHash });
    expect(await reservation(sent.body.reservationId)).toMatchObject({ status: "settled", tx_hash: landed.txHash });
    expect(await tokenBalanceUnits(system.ledger, new PublicKey(to))).toBe(400_000n);
  });
});

describe("two sweepers at once", () => {
  it("release each expired authorization exactly once between them", async () => {
    await agent("payer-many", 0);
    const ids: string[] = [];
    for (let i = 0; i < 6; i += 1) {
      const authorized = await authorize("payer-many", 10_000n, payee());
      expect(authorized.status, authorized.text).toBe(200);
      ids.push(authorized.body.reservationId);
    }
    const at = later();
    const open = async () =>
      (await system.pool.query("SELECT count(*)::int AS n FROM spend_reservations WHERE status = 'reserved' AND payment_ref IS NOT NULL"))
        .rows[0].n;
    const before = await open();
    const reports = await Promise.all([sweep(at), sweep(at)]);
    expect(reports[0].reservationsReleased + reports[1].reservationsReleased).toBe(before - (await open()));
    for (const id of ids) expect((await reservation(id)).status).toBe("released");
  });
});

describe("the sweeper on MPP claims (by SQL on mpp_payments)", () => {
  const mppBody = (value: string) => ({
    protocol: "mpp/1.0",
    amount: { value, currency: "USDC" },
    paymentMethods: ["stablecoin"],
    sessionSupported: false,
    paymentEndpoint: `${ORIGIN}/mpp/pay`,
  });
  const authorizeMpp = (agentId: string, value: string) =>
    call("POST", `/v1/agents/${agentId}/payments/authorize`, { endpoint: `${ORIGIN}/data`, mpp: mppBody(value) });

  it("an abandoned claim fails and releases; a landed one settles; an unclaimed expired one releases", async () => {
    await agent("payer-mpp", 3);
    const to = payee();
    const [abandoned, landed, unclaimed] = [
      await authorizeMpp("payer-mpp", "0.2"),
      await authorizeMpp("payer-mpp", "0.3"),
      await authorizeMpp("payer-mpp", "0.4"),
    ];
    for (const a of [abandoned, landed, unclaimed]) expect(a.status, a.text).toBe(200);
    const claim = async (authorized: Answer, units: bigint) => {
      const auth = authorized.body.submission.authorization;
      const { rows } = await system.pool.query(
        `INSERT INTO mpp_payments (kind, agent_id, payer, nonce, service_origin, endpoint, payee, method, rail, amount_units, expires_at)
         VALUES ('submission', (SELECT agent_id FROM agents WHERE public_id = 'payer-mpp'), $1, $2, $3, $4, $5, 'stablecoin', 'stablecoin', $6, to_timestamp($7)) RETURNING id`,
        [auth.payer, auth.nonce, ORIGIN, `${ORIGIN}/data`, to, units.toString(), Number(auth.validUntil)],
      );
      return { id: rows[0].id as string, ref: (await reservation(authorized.body.reservationId)).payment_ref };
    };
    const a = await claim(abandoned, 200_000n);
    const b = await claim(landed, 300_000n);
    expect(b.ref).toBe(`mpp:${landed.body.submission.authorization.payer}:${landed.body.submission.authorization.nonce}`);
    const paid = await system.settlement.settlePayment({
      agentId: await agentKey(system.pool, "payer-mpp"),
      payee: to,
      amountUnits: 300_000n,
      protocol: "mpp",
      rail: "stablecoin",
      endpoint: `${ORIGIN}/data`,
      paymentRef: b.ref,
    });

    await sweep(later());
    const claimOf = async (id: string) => (await system.pool.query("SELECT status, tx_hash FROM mpp_payments WHERE id = $1", [id])).rows[0];
    expect(await claimOf(a.id)).toEqual({ status: "failed", tx_hash: null });
    expect((await reservation(abandoned.body.reservationId)).status).toBe("released");
    expect(await claimOf(b.id)).toEqual({ status: "settled", tx_hash: paid.txHash });
    expect(await reservation(landed.body.reservationId)).toMatchObject({ status: "settled", tx_hash: paid.txHash });
    expect((await reservation(unclaimed.body.reservationId)).status).toBe("released");
    expect(await tokenBalanceUnits(system.ledger, new PublicKey(to))).toBe(300_000n);
  });
});

describe("the sweeper opens an invocation whose payment settled without it", () => {
  it("the crash left a settled invoking payment: the sweeper settles the reservation and opens the invocation once", async () => {
    await agent("orchestrator-2", 3);
    const subAddress = await agent("sub-agent-2", 0);
    const authorized = await authorize("orchestrator-2", 100_000n, subAddress, { invocationBudget: { usdc: 0.5 } });
    expect(authorized.status, authorized.text).toBe(200);
    const p = parsePaymentPayload(authorized.body.payment).payload;
    // The facilitator claimed and settled, then died before it wrote the outcome or opened anything.
    await system.pool.query(
      `INSERT INTO x402_nonces (payer, nonce, agent_id, pay_to, amount_units, resource, expires_at)
       VALUES ($1, $2, (SELECT agent_id FROM agents WHERE public_id = 'orchestrator-2'), $3, $4, $5, to_timestamp($6))`,
      [p.from, p.nonce, p.to, p.amountUnits.toString(), `${ORIGIN}/data`, p.validUntilSeconds],
    );
    const paid = await system.settlement.settlePayment({
      agentId: await agentKey(system.pool, "orchestrator-2"),
      payee: subAddress,
      amountUnits: 100_000n,
      protocol: "x402",
      rail: "stablecoin",
      endpoint: `${ORIGIN}/data`,
      paymentRef: x402PaymentRef(p.from, p.nonce),
    });
    const invocation = invocationAddress(paid.txHash, subAddress, PAYMENT_LEDGER_PROGRAM_ID);
    expect(await system.settlement.invocationState(new PublicKey(invocation))).toBeNull();

    await sweep(later());
    expect(await reservation(authorized.body.reservationId)).toMatchObject({ status: "settled", tx_hash: paid.txHash, invocation });
    expect(await system.settlement.invocationState(new PublicKey(invocation))).toMatchObject({ budgetUnits: 500_000n, spentUnits: 0n });
    const again = await sweep(later());
    expect(again.invocationsOpened).toBe(0);
    const read = await call("GET", `/v1/agents/sub-agent-2/invocations/${paid.txHash}`);
    expect(read.status, read.text).toBe(200);
    expect(units(read.body.budget)).toBe(500_000n);
  });
});

describe("sub-agent invocations", () => {
  const subPayee = payee();
  let serial = 0;

  /** A new orchestrator and sub-agent (5 usdc each); the orchestrator pays the sub-agent 0.1 usdc with a budget of 1 usdc. */
  async function openInvocation() {
    const n = ++serial;
    const [orchestrator, sub] = [`orchestrator-inv-${n}`, `sub-agent-inv-${n}`];
    await agent(orchestrator, 5);
    const subAddress = await agent(sub, 5);
    const authorized = await authorize(orchestrator, 100_000n, subAddress, { invocationBudget: { usdc: 1 } });
    expect(authorized.status, authorized.text).toBe(200);
    const settled = await settle(authorized);
    expect(settled.body, settled.text).toMatchObject({ success: true });
    const parentTxHash = settled.body.txHash as string;
    return { orchestrator, sub, subAddress, parentTxHash, authorized };
  }

  /** `openInvocation`, then the sub-agent pays 0.4 usdc twice under it: 0.2 of the budget left. */
  async function spentInvocation() {
    const invoked = await openInvocation();
    const subPayments: string[] = [];
    for (const amount of [400_000n, 400_000n]) {
      const authorized = await authorize(invoked.sub, amount, subPayee, { parentTxHash: invoked.parentTxHash });
      expect(authorized.status, authorized.text).toBe(200);
      expect(authorized.body.invocation).toBe(invocationAddress(invoked.parentTxHash, invoked.subAddress, PAYMENT_LEDGER_PROGRAM_ID));
      const settled = await settle(authorized);
      expect(settled.body, settled.text).toMatchObject({ success: true });
      subPayments.push(settled.body.txHash);
    }
    return { ...invoked, subPayments };
  }

  it("the orchestrator pays its sub-agent with a budget: the invocation opens on-chain before the answer", async () => {
    const { subAddress, parentTxHash, authorized } = await openInvocation();
    expect(authorized.body.invocationBudget).toEqual({ usdc: 1 });
    const invocation = invocationAddress(parentTxHash, subAddress, PAYMENT_LEDGER_PROGRAM_ID);
    expect(await reservation(authorized.body.reservationId)).toMatchObject({ status: "settled", tx_hash: parentTxHash, invocation });
    const state = await system.settlement.invocationState(new PublicKey(invocation));
    expect(state).toMatchObject({ budgetUnits: USDC, spentUnits: 0n, subAgent: subAddress });
  });

  it("the sub-agent's payments under it settle with the invocation; the one over budget is 422 BUDGET_EXCEEDED, recorded", async () => {
    const { sub, subAddress, parentTxHash, subPayments } = await spentInvocation();
    for (const txHash of subPayments) {
      const row = await system.pool.query("SELECT invocation FROM settlements WHERE signature = $1", [txHash]);
      expect(row.rows[0].invocation).toBe(invocationAddress(parentTxHash, subAddress, PAYMENT_LEDGER_PROGRAM_ID));
    }
    const over = await authorize(sub, 300_000n, subPayee, { parentTxHash });
    expect(over.status, over.text).toBe(422);
    expect(over.body).toMatchObject({
      code: "BUDGET_EXCEEDED",
      errorClass: "BudgetExceededError",
      reasonCode: "invocation_budget_exceeded",
      reason: "invocation_budget_exceeded: requested 0.3 usdc, limit is 0.2 usdc",
    });
    const rejected = await system.pool.query(
      "SELECT reason_code, reason, amount_units::text AS amount FROM payment_rejections WHERE agent_id = (SELECT agent_id FROM agents WHERE public_id = $1)",
      [sub],
    );
    expect(rejected.rows).toEqual([
      {
        reason_code: "invocation_budget_exceeded",
        reason: "invocation_budget_exceeded: requested 0.3 usdc, limit is 0.2 usdc",
        amount: "300000",
      },
    ]);
    const events = await system.pool.query(
      "SELECT count(*)::int AS n FROM gateway_events WHERE type = 'policy.violation' AND agent_id = $1",
      [sub],
    );
    expect(events.rows[0].n).toBe(1);
  });

  it("concurrent authorizations cannot together exceed the remaining budget", async () => {
    const { sub, parentTxHash } = await spentInvocation();
    // 0.2 left: two racing 0.15 payments, exactly one fits.
    const answers = await Promise.all([0, 1].map(() => authorize(sub, 150_000n, subPayee, { parentTxHash })));
    expect(answers.map((a) => a.status).sort()).toEqual([200, 422]);
    const accepted = answers.find((a) => a.status === 200)!;
    // Never presented: the sweeper releases it once expired, and the budget is back.
    await sweep(later());
    expect((await reservation(accepted.body.reservationId)).status).toBe("released");
    const fits = await authorize(sub, 200_000n, subPayee, { parentTxHash });
    expect(fits.status, fits.text).toBe(200);
    expect((await call("POST", `/v1/agents/${sub}/payments/${fits.body.reservationId}/release`)).status).toBe(200);
  });

  it("the invocation route answers both sides with the on-chain spend and the sub-agent's payments", async () => {
    const { orchestrator, sub, subAddress, parentTxHash, subPayments } = await spentInvocation();
    for (const agentId of [orchestrator, sub]) {
      const read = await call("GET", `/v1/agents/${agentId}/invocations/${parentTxHash}`);
      expect(read.status, read.text).toBe(200);
      expect(read.body).toMatchObject({
        parentTxHash,
        invocation: invocationAddress(parentTxHash, subAddress, PAYMENT_LEDGER_PROGRAM_ID),
        invoker: orchestrator,
        subAgentId: sub,
        subAgentAddress: subAddress,
        payments: subPayments,
      });
      expect(units(read.body.budget)).toBe(USDC);
      expect(units(read.body.spent)).toBe(800_000n);
      expect(units(read.body.remaining)).toBe(200_000n);
    }
  });

  it("tenant isolation and bad input on the invocation route", async () => {
    const { orchestrator, subAddress, parentTxHash } = await openInvocation();
    const foreign = await call("GET", `/v1/agents/${orchestrator}/invocations/${parentTxHash}`, undefined, otherKey);
    expect(foreign.status).toBe(404);
    expect(foreign.text).not.toContain(subAddress);
    await agent("bystander", 0);
    const bystander = await call("GET", `/v1/agents/bystander/invocations/${parentTxHash}`);
    expect(bystander.status).toBe(404);
    expect(bystander.body.code).toBe("INVOCATION_NOT_FOUND");
    const bad = await call("GET", `/v1/agents/${orchestrator}/invocations/not-a-hash`);
    expect(bad.status).toBe(400);
  });

  it("bad authorization input is a 4xx problem and reserves nothing", async () => {
    const { orchestrator, sub, subAddress } = await openInvocation();
    const count = async () =>
      (
        await system.pool.query(
          "SELECT count(*)::int AS n FROM spend_reservations WHERE agent_id = (SELECT agent_id FROM agents WHERE public_id = $1)",
          [sub],
        )
      ).rows[0].n;
    const before = await count();
    const badHash = await authorize(sub, 100_000n, subPayee, { parentTxHash: "abc" });
    expect(badHash.status).toBe(400);
    expect(badHash.body.field).toBe("parentTxHash");
    const unknown = await authorize(sub, 100_000n, subPayee, { parentTxHash: bs58.encode(randomBytes(64)) });
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe("INVOCATION_NOT_FOUND");
    const negative = await authorize(orchestrator, 100_000n, subAddress, { invocationBudget: { usdc: -1 } });
    expect(negative.status).toBe(400);
    const zero = await authorize(orchestrator, 100_000n, subAddress, { invocationBudget: { usdc: 0 } });
    expect(zero.status).toBe(400);
    const notAgent = await authorize(orchestrator, 100_000n, subPayee, { invocationBudget: { usdc: 1 } });
    expect(notAgent.status).toBe(400);
    expect(notAgent.body.field).toBe("invocationBudget");
    const mpp = {
      protocol: "mpp/1.0",
      amount: { value: "0.1", currency: "USDC" },
      paymentMethods: ["stablecoin"],
      sessionSupported: false,
      paymentEndpoint: `${ORIGIN}/mpp/pay`,
    };
    const mppBudget = await call("POST", `/v1/agents/${orchestrator}/payments/authorize`, {
      endpoint: `${ORIGIN}/data`,
      mpp,
      invocationBudget: { usdc: 1 },
    });
    expect(mppBudget.status).toBe(400);
    expect(mppBudget.body.field).toBe("invocationBudget");
    expect(await count()).toBe(before);
  });

  it("a sub-agent payment settled without the invocation account (MPP) still counts against the budget", async () => {
    const { sub, parentTxHash } = await spentInvocation();
    const mpp = {
      protocol: "mpp/1.0",
      amount: { value: "0.15", currency: "USDC" },
      paymentMethods: ["stablecoin"],
      sessionSupported: false,
      paymentEndpoint: `${ORIGIN}/mpp/pay`,
    };
    const authorized = await call("POST", `/v1/agents/${sub}/payments/authorize`, { endpoint: `${ORIGIN}/data`, mpp, parentTxHash });
    expect(authorized.status, authorized.text).toBe(200);
    const ref = (await reservation(authorized.body.reservationId)).payment_ref;
    await system.settlement.settlePayment({
      agentId: await agentKey(system.pool, sub),
      payee: subPayee,
      amountUnits: 150_000n,
      protocol: "mpp",
      rail: "stablecoin",
      endpoint: `${ORIGIN}/data`,
      paymentRef: ref,
    });
    await sweep(later());
    expect((await reservation(authorized.body.reservationId)).status).toBe("settled");
    // On-chain spend is still 0.8; the settled reservations under the parent are 0.95.
    const over = await authorize(sub, 100_000n, subPayee, { parentTxHash });
    expect(over.status, over.text).toBe(422);
    expect(over.body.reason).toBe("invocation_budget_exceeded: requested 0.1 usdc, limit is 0.05 usdc");
    const fits = await authorize(sub, 50_000n, subPayee, { parentTxHash });
    expect(fits.status, fits.text).toBe(200);
  });
});
