/**
 * A sub-agent's MPP payments under an `agents.invoke` invocation, on the whole system (the real
 * program on the local ledger, a fresh Postgres, the indexer, REST /v1 over loopback): the
 * submission authorized with `parentTxHash` settles against the invocation account, the session it
 * opens keeps the parent and every charge on it settles under the same invocation, the indexer puts
 * both under the invoking payment, and a charge over the invocation's remaining budget is refused
 * by the gateway (recorded rejected) or, when the gateway does not check it, by the chain.
 *
 * Each test opens an invocation of its own (new orchestrator and sub-agent) and takes it as far as
 * it needs, so none depends on another's order.
 */
import { PublicKey } from "@solana/web3.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { StandInCardProcessor } from "../../api/gateway/card/stand-in.js";
import { SpendPolicyChargeGate } from "../../api/gateway/mpp/charge-policy.js";
import { MppPaymentError } from "../../api/gateway/mpp/errors.js";
import { parseMppPaymentRequest } from "../../api/gateway/mpp/request.js";
import { MppService } from "../../api/gateway/mpp/service.js";
import { parseMppSubmission } from "../../api/gateway/mpp/submission.js";
import { linkedReservation, mppPaymentRef } from "../../api/gateway/reservations/store.js";
import { invocationAddress } from "../../api/gateway/invocations/index.js";
import { PAYMENT_LEDGER_PROGRAM_ID } from "../../programs/payment_ledger/ts/index.js";
import { recordedPayment } from "../support/ledger-events.js";
import { fundedAgent, rest, startTestSystem, type TestSystem, tokenBalanceUnits } from "../sdk/server-support.js";
import { agentKey } from "../support/agent-keys.js";
import { pollUntil } from "../support/poll.js";

const ORIGIN = "https://tools.example";
const PRICE = "0.05";
const PRICE_UNITS = 50_000n;
/** Room for the submission and one charge (0.10), not for a second charge. */
const BUDGET_USDC = 0.12;
const BUDGET_UNITS = 120_000n;

let test: TestSystem;
let agentsKey: string;
let sellerKey: string;
let payTo: string;
let serial = 0;

const mppRequest = () => ({
  protocol: "mpp/1.0",
  amount: { value: PRICE, currency: "USDC" },
  paymentMethods: ["stablecoin"],
  sessionSupported: true,
  paymentEndpoint: `${ORIGIN}/mpp/pay`,
});

const redeem = (token: string, path: string) =>
  rest(test.system, sellerKey, "POST", "/v1/mpp/sessions/redeem", {
    token,
    endpoint: `${ORIGIN}${path}`,
    amount: { value: PRICE, currency: "USDC" },
    payTo,
    serviceOrigin: ORIGIN,
  });

/** The sub-agent's MPP authorization (through the gateway) and the seller's submission of it. */
async function subAgentPays(sub: string, path: string, parent: string | null) {
  const authorized = await rest(test.system, agentsKey, "POST", `/v1/agents/${sub}/payments/authorize`, {
    endpoint: `${ORIGIN}${path}`,
    mpp: mppRequest(),
    ...(parent === null ? {} : { parentTxHash: parent }),
  });
  expect(authorized.status, authorized.text).toBe(200);
  expect(authorized.body.protocol).toBe("mpp");
  const paid = await rest(test.system, sellerKey, "POST", "/v1/mpp/payments", {
    request: mppRequest(),
    submission: authorized.body.submission,
    payTo,
    serviceOrigin: ORIGIN,
  });
  expect(paid.status, paid.text).toBe(200);
  expect(paid.body, paid.text).toMatchObject({ success: true });
  return { authorized: authorized.body, paid: paid.body };
}

beforeAll(async () => {
  test = await startTestSystem();
  agentsKey = (await test.system.createAccount("orchestrator and sub-agent")).apiKey;
  sellerKey = (await test.system.createAccount("tool seller")).apiKey;
  payTo = await fundedAgent(test.system, agentsKey, "till", 0);
}, 120_000);

/** An open invocation: its orchestrator paid its sub-agent with a budget. */
interface Invoked {
  readonly orchestrator: string;
  readonly sub: string;
  readonly subAddress: string;
  readonly parentTxHash: string;
  readonly invocation: string;
}

/**
 * A new orchestrator and sub-agent (2 usdc each); the orchestrator pays the sub-agent 0.1 usdc over
 * x402 with an invocation budget of BUDGET_USDC, settled through the facilitator.
 */
async function openInvocation(): Promise<Invoked> {
  const n = ++serial;
  const [orchestrator, sub] = [`orchestrator-${n}`, `sub-${n}`];
  await fundedAgent(test.system, agentsKey, orchestrator, 2);
  const subAddress = await fundedAgent(test.system, agentsKey, sub, 2);
  const requirement = {
    scheme: "exact",
    network: test.system.network,
    token: test.system.token,
    amount: "100000",
    payTo: subAddress,
    resource: "https://sub.example/task",
  };
  const authorized = await rest(test.system, agentsKey, "POST", `/v1/agents/${orchestrator}/payments/authorize`, {
    endpoint: requirement.resource,
    x402: requirement,
    invocationBudget: { usdc: BUDGET_USDC },
  });
  expect(authorized.status, authorized.text).toBe(200);
  const settled = await rest(test.system, sellerKey, "POST", "/v1/x402/settle", { payment: authorized.body.payment, requirement });
  expect(settled.body, settled.text).toMatchObject({ success: true });
  const parentTxHash: string = settled.body.txHash;
  return {
    orchestrator,
    sub,
    subAddress,
    parentTxHash,
    invocation: invocationAddress(parentTxHash, subAddress, PAYMENT_LEDGER_PROGRAM_ID),
  };
}

/** `openInvocation`, then the sub-agent's MPP submission under it: its session has one prepaid call. */
async function parentedSession() {
  const invoked = await openInvocation();
  return { ...invoked, ...(await subAgentPays(invoked.sub, "/search", invoked.parentTxHash)) };
}

/** `parentedSession`, its prepaid call redeemed and one charge made: 0.10 of the 0.12 budget spent. */
async function chargedSession() {
  const session = await parentedSession();
  expect((await redeem(session.paid.sessionToken, "/search")).body).toMatchObject({ success: true, charged: false });
  const charged = await redeem(session.paid.sessionToken, "/search/more");
  expect(charged.body, charged.text).toMatchObject({ success: true, charged: true });
  return { ...session, chargeTx: charged.body.txHash as string };
}

afterAll(async () => {
  await test?.stop();
});

describe("MPP payments of a sub-agent under agents.invoke", () => {
  it("the orchestrator pays the sub-agent with an invocation budget over x402: the invocation opens", async () => {
    const { invocation, subAddress } = await openInvocation();
    expect(await test.system.settlement.invocationState(new PublicKey(invocation))).toMatchObject({
      budgetUnits: BUDGET_UNITS,
      spentUnits: 0n,
      subAgent: subAddress,
    });
  });

  it("the submission authorized with parentTxHash settles against the invocation; its session keeps the parent", async () => {
    const { sub, parentTxHash, invocation } = await openInvocation();
    const before = await tokenBalanceUnits(test, payTo);
    const { authorized, paid } = await subAgentPays(sub, "/search", parentTxHash);
    expect(authorized.invocation).toBe(invocation);
    const submissionTx: string = paid.txHash;
    expect(await tokenBalanceUnits(test, payTo)).toBe(before + PRICE_UNITS);

    const event = await recordedPayment(test.connection, submissionTx);
    expect(event.parent?.invocation.toBase58()).toBe(invocation);
    expect(event.parent?.spentUnits).toBe(PRICE_UNITS);
    expect(event.amountUnits).toBe(PRICE_UNITS);

    const a = authorized.submission.authorization;
    expect(await linkedReservation(test.system.pool, mppPaymentRef(a.payer, a.nonce))).toMatchObject({
      status: "settled",
      txHash: submissionTx,
      parentTxHash,
    });
    const session = await test.system.pool.query("SELECT parent_tx_hash FROM mpp_sessions WHERE id = $1", [paid.sessionId]);
    expect(session.rows).toEqual([{ parent_tx_hash: parentTxHash }]);
    const settlement = await test.system.pool.query("SELECT invocation FROM settlements WHERE signature = $1", [submissionTx]);
    expect(settlement.rows).toEqual([{ invocation }]);
  });

  it("a charge on that session settles under the same invocation, its reservation under the parent", async () => {
    const { sub, parentTxHash, invocation, paid } = await parentedSession();
    const [sessionToken, submissionTx] = [paid.sessionToken, paid.txHash];
    const prepaid = await redeem(sessionToken, "/search");
    expect(prepaid.body, prepaid.text).toMatchObject({ success: true, charged: false, txHash: submissionTx });

    const before = await tokenBalanceUnits(test, payTo);
    const charged = await redeem(sessionToken, "/search/more");
    expect(charged.body, charged.text).toMatchObject({ success: true, charged: true });
    const chargeTx: string = charged.body.txHash;
    expect(await tokenBalanceUnits(test, payTo)).toBe(before + PRICE_UNITS);

    const event = await recordedPayment(test.connection, chargeTx);
    expect(event.parent?.invocation.toBase58()).toBe(invocation);
    expect(event.parent?.spentUnits).toBe(2n * PRICE_UNITS);
    const state = await test.system.settlement.invocationState(new PublicKey(invocation));
    expect(state?.spentUnits).toBe(2n * PRICE_UNITS);

    const charge = await test.system.pool.query<{ id: string; parent_tx_hash: string }>(
      "SELECT id, parent_tx_hash FROM mpp_payments WHERE kind = 'session_charge' AND tx_hash = $1",
      [chargeTx],
    );
    expect(charge.rows[0]?.parent_tx_hash).toBe(parentTxHash);
    expect(await linkedReservation(test.system.pool, `mpp-charge:${charge.rows[0]!.id}`)).toMatchObject({
      status: "settled",
      txHash: chargeTx,
      parentTxHash,
      agentId: await agentKey(test.system.pool, sub),
    });
  });

  it("the indexer lists the submission and the charge at depth 1 under the invoking payment", async () => {
    const { orchestrator, sub, parentTxHash, paid, chargeTx } = await chargedSession();
    const submissionTx: string = paid.txHash;
    let last = "";
    const nodes = await pollUntil(
      async () => {
        const chain = await rest(test.system, agentsKey, "GET", `/v1/transactions/${parentTxHash}/chain`);
        last = `${chain.status} ${chain.text}`;
        if (chain.status !== 200) return undefined;
        const listed: { txHash: string; depth: number; parentTxHash: string | null; agentId: string }[] = chain.body.transactions;
        return [submissionTx, chargeTx].every((tx) => listed.some((node) => node.txHash === tx)) ? listed : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 200, what: () => `the chain of ${parentTxHash} to list both (last ${last})` },
    );
    const children = nodes.filter((node) => node.txHash === submissionTx || node.txHash === chargeTx);
    expect(children).toHaveLength(2);
    for (const node of children) expect(node).toMatchObject({ depth: 1, parentTxHash, agentId: sub });
    expect(nodes.find((node) => node.txHash === parentTxHash)).toMatchObject({ depth: 0, agentId: orchestrator });
  });

  it("a charge over the invocation's remaining budget is refused, recorded rejected, and moves nothing", async () => {
    const { sub, invocation, paid } = await chargedSession();
    const sessionToken: string = paid.sessionToken;
    const before = await tokenBalanceUnits(test, payTo);
    const chargesBefore = await test.system.pool.query("SELECT count(*)::int AS n FROM mpp_payments WHERE kind = 'session_charge'");
    const refused = await redeem(sessionToken, "/search/again");
    expect(refused.status).toBe(200);
    expect(refused.body).toEqual({
      success: false,
      reason: "budget_exceeded",
      reasonCode: "invocation_budget_exceeded",
      errorClass: "BudgetExceededError",
      detail: "invocation_budget_exceeded: requested 0.05 usdc, limit is 0.02 usdc",
    });
    expect(await tokenBalanceUnits(test, payTo)).toBe(before);
    expect((await test.system.settlement.invocationState(new PublicKey(invocation)))?.spentUnits).toBe(2n * PRICE_UNITS);

    const subKey = await agentKey(test.system.pool, sub);
    const rejections = await test.system.pool.query(
      "SELECT reason_code, reason, endpoint, protocol, amount_units::text AS amount FROM payment_rejections WHERE agent_id = $1",
      [subKey],
    );
    expect(rejections.rows).toEqual([
      {
        reason_code: "invocation_budget_exceeded",
        reason: "invocation_budget_exceeded: requested 0.05 usdc, limit is 0.02 usdc",
        endpoint: "tools.example/search/again",
        protocol: "mpp",
        amount: "50000",
      },
    ]);
    const events = await test.system.pool.query(
      "SELECT count(*)::int AS n FROM gateway_events WHERE type = 'policy.violation' AND agent_id = $1",
      [sub],
    );
    expect(events.rows[0].n).toBe(1);
    const chargesAfter = await test.system.pool.query("SELECT count(*)::int AS n FROM mpp_payments WHERE kind = 'session_charge'");
    expect(chargesAfter.rows[0].n).toBe(chargesBefore.rows[0].n);
    const open = await test.system.pool.query(
      "SELECT count(*)::int AS n FROM spend_reservations WHERE agent_id = $1 AND status = 'reserved'",
      [subKey],
    );
    expect(open.rows[0].n).toBe(0);
  });

  it("without the gateway's check, the settlement against the invocation refuses it: a definite failure, reservation released", async () => {
    const { parentTxHash, invocation, paid } = await chargedSession();
    // The same service (origin, payee), with the spend-policy gate but no invocation reader: only
    // the invocation account passed at settlement stands between the charge and the budget.
    const unchecked = new MppService({
      programId: PAYMENT_LEDGER_PROGRAM_ID,
      pool: test.system.pool,
      settler: test.system.settlement,
      agents: test.system.wallets,
      cardProcessor: new StandInCardProcessor(),
      serviceOrigin: ORIGIN,
      payee: payTo,
      chargePolicy: new SpendPolicyChargeGate(test.system.pool),
    });
    const before = await tokenBalanceUnits(test, payTo);
    const failure = await unchecked
      .useSession(paid.sessionToken, { endpoint: `${ORIGIN}/search/unchecked`, amountUnits: PRICE_UNITS })
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(MppPaymentError);
    expect((failure as MppPaymentError).reason).toBe("settlement_failed");
    expect(await tokenBalanceUnits(test, payTo)).toBe(before);
    expect((await test.system.settlement.invocationState(new PublicKey(invocation)))?.spentUnits).toBe(2n * PRICE_UNITS);

    const row = await test.system.pool.query<{ id: string; status: string; parent_tx_hash: string }>(
      "SELECT id, status, parent_tx_hash FROM mpp_payments WHERE kind = 'session_charge' AND endpoint = $1",
      [`${ORIGIN}/search/unchecked`],
    );
    expect(row.rows).toHaveLength(1);
    expect(row.rows[0]).toMatchObject({ status: "failed", parent_tx_hash: parentTxHash });
    expect(await linkedReservation(test.system.pool, `mpp-charge:${row.rows[0]!.id}`)).toMatchObject({ status: "released", parentTxHash });
  });

  it("the same sub-agent's MPP payment without parentTxHash is top-level, and so are its session's charges", async () => {
    const { sub, invocation } = await chargedSession();
    const { paid } = await subAgentPays(sub, "/plain", null);
    expect((await recordedPayment(test.connection, paid.txHash)).parent).toBeNull();
    const session = await test.system.pool.query("SELECT parent_tx_hash FROM mpp_sessions WHERE id = $1", [paid.sessionId]);
    expect(session.rows).toEqual([{ parent_tx_hash: null }]);
    expect((await redeem(paid.sessionToken, "/plain")).body).toMatchObject({ success: true, charged: false });
    // The invocation's budget is spent, yet a top-level session is not held to it.
    const charged = await redeem(paid.sessionToken, "/plain/2");
    expect(charged.body, charged.text).toMatchObject({ success: true, charged: true });
    expect((await recordedPayment(test.connection, charged.body.txHash)).parent).toBeNull();
    expect((await test.system.settlement.invocationState(new PublicKey(invocation)))?.spentUnits).toBe(2n * PRICE_UNITS);
  });

  it("the session handed out again for a resumed submission keeps the parent and its budget", async () => {
    const { parentTxHash, authorized, paid } = await chargedSession();
    const service = test.system.mpp.serviceFor(ORIGIN, payTo);
    const resumed = await service.resumeSubmission(parseMppSubmission(authorized.submission), parseMppPaymentRequest(mppRequest()));
    expect(resumed?.txHash).toBe(paid.txHash);
    const session = await test.system.pool.query("SELECT parent_tx_hash, prepaid_calls FROM mpp_sessions WHERE id = $1", [
      resumed!.session.sessionId,
    ]);
    expect(session.rows).toEqual([{ parent_tx_hash: parentTxHash, prepaid_calls: 0 }]);
    expect((await redeem(paid.sessionToken, "/search")).body).toMatchObject({ success: false, reason: "session_unknown" });
    const refused = await redeem(resumed!.session.token, "/search/resumed");
    expect(refused.body).toMatchObject({ success: false, reason: "budget_exceeded", reasonCode: "invocation_budget_exceeded" });
  });
});
