/**
 * The spend policy on channel sessions, on the real local ledger and Postgres: the deposit is the
 * exposure the budget reserves (concurrent opens never reserve more than the budget), and every
 * charge is held to the rest of the policy and to the session's own rules before it is signed;
 * concurrent charges on one channel get a gap-free sequence and an exact cumulative.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { putPolicy } from "../../api/shared/policy/index.js";
import { type ChannelGateway, expectAgreement, newPayee, SERVICE, startChannelGateway, USDC } from "./support/channel-gateway.js";

let gateway: ChannelGateway;

beforeAll(async () => {
  gateway = await startChannelGateway();
});

afterAll(async () => {
  await gateway?.stop();
});

async function internalId(publicId: string): Promise<string> {
  const { rows } = await gateway.db.pool.query<{ agent_id: string }>("SELECT agent_id FROM agents WHERE public_id = $1", [publicId]);
  return rows[0]!.agent_id;
}

function open(agentId: string, deposit: string, extra: Record<string, unknown> = {}) {
  return gateway.call(
    "POST",
    `/v1/agents/${agentId}/channels`,
    { payee: newPayee(), serviceOrigin: SERVICE, deposit, protocol: "mpp", ...extra },
    { idem: randomUUID() },
  );
}

function voucher(channel: string, amount: string, endpoint = `${SERVICE}/v1/search`) {
  return gateway.call("POST", `/v1/channels/${channel}/vouchers`, { endpoint, amount });
}

async function rejections(agentId: string): Promise<string[]> {
  const { rows } = await gateway.db.pool.query<{ reason_code: string }>(
    "SELECT reason_code FROM payment_rejections WHERE agent_id = $1 ORDER BY id",
    [await internalId(agentId)],
  );
  return rows.map((row) => row.reason_code);
}

describe("opening a session within the spend policy", () => {
  it("reserves the deposit against the daily budget, not the per-call limit, and refuses one over it", async () => {
    const agentId = await gateway.newAgent();
    await putPolicy(gateway.db.pool, await internalId(agentId), { dailyBudgetUnits: 3n * USDC, perCallLimitUnits: 10_000n });
    const first = await open(agentId, "2");
    expect(first.status).toBe(201);
    const over = await open(agentId, "1.5");
    expect(over.status).toBe(403);
    expect(over.body).toMatchObject({
      code: "POLICY_VIOLATION",
      reasonCode: "daily_budget_exceeded",
      errorClass: "DailyBudgetExceededError",
    });
    expect(await rejections(agentId)).toEqual(["daily_budget_exceeded"]);
    const { rows } = await gateway.db.pool.query("SELECT count(*)::int AS n FROM channel_sessions WHERE agent_id = $1", [
      await internalId(agentId),
    ]);
    expect(rows[0].n).toBe(1);
    await expectAgreement(gateway, first.body.channel, first.body.payer, 10n * USDC);
  });

  it("concurrent opens racing the budget never reserve more than it", async () => {
    const agentId = await gateway.newAgent();
    await putPolicy(gateway.db.pool, await internalId(agentId), { dailyBudgetUnits: 2n * USDC });
    const answers = await Promise.all(Array.from({ length: 6 }, () => open(agentId, "0.5")));
    const opened = answers.filter((a) => a.status === 201);
    expect(opened).toHaveLength(4);
    expect(answers.filter((a) => a.status === 403).every((a) => a.body.reasonCode === "daily_budget_exceeded")).toBe(true);
    const { rows } = await gateway.db.pool.query<{ sum: string }>(
      "SELECT coalesce(sum(amount_units), 0)::text AS sum FROM spend_reservations WHERE agent_id = $1 AND status <> 'released'",
      [await internalId(agentId)],
    );
    expect(BigInt(rows[0]!.sum)).toBe(2n * USDC);
  });

  it("a retried open with the same Idempotency-Key answers the same session and reserves once", async () => {
    const agentId = await gateway.newAgent();
    const idem = randomUUID();
    const body = { payee: newPayee(), serviceOrigin: SERVICE, deposit: "1", protocol: "x402" };
    const [a, b] = [
      await gateway.call("POST", `/v1/agents/${agentId}/channels`, body, { idem }),
      await gateway.call("POST", `/v1/agents/${agentId}/channels`, body, { idem }),
    ];
    expect(a.status).toBe(201);
    expect(b.status).toBe(201);
    expect(b.body.channel).toBe(a.body.channel);
    const { rows } = await gateway.db.pool.query("SELECT count(*)::int AS n FROM spend_reservations WHERE agent_id = $1", [
      await internalId(agentId),
    ]);
    expect(rows[0].n).toBe(1);
  });
  it("a deposit the wallet cannot fund is refused 422 and its reservation released", async () => {
    const agentId = await gateway.newAgent(100_000n);
    const refused = await open(agentId, "1");
    expect(refused.status).toBe(422);
    expect(refused.body).toMatchObject({ code: "INSUFFICIENT_FUNDS", reason: "channel_open_failed" });
    const { rows } = await gateway.db.pool.query<{ status: string; r: string }>(
      `SELECT s.status, r.status AS r FROM channel_sessions s JOIN spend_reservations r ON r.payment_ref = 'channel:' || s.channel
       WHERE s.agent_id = $1`,
      [await internalId(agentId)],
    );
    expect(rows).toEqual([{ status: "failed", r: "released" }]);
  });
  it("a payee the ledger cannot credit safely is refused before anything is reserved", async () => {
    const agentId = await gateway.newAgent();
    const refused = await gateway.call(
      "POST",
      `/v1/agents/${agentId}/channels`,
      { payee: gateway.ledger.mint.toBase58(), serviceOrigin: SERVICE, deposit: "1", protocol: "mpp" },
      { idem: randomUUID() },
    );
    expect(refused.status).toBe(422);
    expect(refused.body).toMatchObject({ code: "PAYEE_REFUSED", reason: "payee_is_mint" });
    const { rows } = await gateway.db.pool.query("SELECT count(*)::int AS n FROM spend_reservations WHERE agent_id = $1", [
      await internalId(agentId),
    ]);
    expect(rows[0].n).toBe(0);
  });
});

describe("signing a charge", () => {
  it("refuses over the per-call limit, a blocked domain, another origin, past the deposit, and after close; refusals are recorded", async () => {
    const agentId = await gateway.newAgent();
    const key = await internalId(agentId);
    await putPolicy(gateway.db.pool, key, { perCallLimitUnits: 300_000n });
    const opened = await open(agentId, "1", { withdrawDelaySeconds: 1 });
    const channel = opened.body.channel as string;

    const perCall = await voucher(channel, "0.300001");
    expect(perCall.status).toBe(403);
    expect(perCall.body.reasonCode).toBe("per_call_limit_exceeded");

    const origin = await voucher(channel, "0.1", "https://evil.example.net/v1/search");
    expect(origin.status).toBe(400);
    expect(origin.body.reason).toBe("channel_origin_mismatch");

    for (const amount of ["0.3", "0.3", "0.3"]) expect((await voucher(channel, amount)).status).toBe(200);
    const exhausted = await voucher(channel, "0.2");
    expect(exhausted.status).toBe(409);
    expect(exhausted.body).toMatchObject({ reason: "channel_deposit_exhausted", remainingUnits: "100000" });

    await putPolicy(gateway.db.pool, key, { blockedDomains: ["api.example.com"] });
    const blocked = await voucher(channel, "0.0001");
    expect(blocked.status).toBe(403);
    expect(blocked.body.reasonCode).toBe("domain_blocked");
    await putPolicy(gateway.db.pool, key, { blockedDomains: [] });
    expect((await voucher(channel, "0.1")).status).toBe(200);
    expect(await rejections(agentId)).toEqual(["per_call_limit_exceeded", "domain_blocked"]);

    const state = await gateway.call("GET", `/v1/channels/${channel}`);
    expect(state.body).toMatchObject({ signedSequence: "4", signedCumulativeUnits: String(USDC), settledCumulativeUnits: "0" });

    expect((await gateway.call("POST", `/v1/channels/${channel}/close`)).body.status).toBe("closed");
    const closed = await voucher(channel, "0.0001");
    expect(closed.status).toBe(409);
    expect(closed.body.reason).toBe("channel_closed");
    await expectAgreement(gateway, channel, opened.body.payer, 10n * USDC);
  });

  it("refuses past the rate limit, counting the session's charges", async () => {
    const agentId = await gateway.newAgent();
    await putPolicy(gateway.db.pool, await internalId(agentId), { rateLimit: { calls: 4, window: "1m" } });
    const opened = await open(agentId, "1");
    // The deposit's reservation is one call of the window; three charges fill it.
    for (let i = 0; i < 3; i += 1) expect((await voucher(opened.body.channel, "0.01")).status).toBe(200);
    const limited = await voucher(opened.body.channel, "0.01");
    expect(limited.status).toBe(403);
    expect(limited.body.reasonCode).toBe("rate_limit_exceeded");
  });

  it("concurrent charges on two channels of one agent never pass its rate limit together", async () => {
    const agentId = await gateway.newAgent();
    await putPolicy(gateway.db.pool, await internalId(agentId), { rateLimit: { calls: 10, window: "1m" } });
    const [a, b] = [await open(agentId, "1"), await open(agentId, "1")];
    // Two deposits are two calls of the window: eight charges are left, whichever channel asks.
    const answers = await Promise.all(Array.from({ length: 14 }, (_, i) => voucher((i % 2 === 0 ? a : b).body.channel, "0.01")));
    expect(answers.filter((x) => x.status === 200)).toHaveLength(8);
    expect(answers.filter((x) => x.status === 403).every((x) => x.body.reasonCode === "rate_limit_exceeded")).toBe(true);
  });

  it("vouchers and ordinary payments racing one rate limit: admitted together never pass it, and rateUsage counts them all", async () => {
    const agentId = await gateway.newAgent();
    await putPolicy(gateway.db.pool, await internalId(agentId), { rateLimit: { calls: 10, window: "1m" } });
    const opened = await open(agentId, "1");
    const endpoint = `${SERVICE}/v1/data`;
    const requirement = {
      scheme: "exact",
      network: gateway.ledger.network,
      token: gateway.ledger.mint.toBase58(),
      amount: "1000",
      payTo: newPayee(),
      resource: endpoint,
    };
    const authorize = () =>
      gateway.call("POST", `/v1/agents/${agentId}/payments/authorize`, { endpoint, x402: requirement }, { idem: randomUUID() });
    // The deposit is one call of the window; nine are left, whichever kind asks first.
    const answers = await Promise.all(
      Array.from({ length: 24 }, (_, i) => (i % 2 === 0 ? voucher(opened.body.channel, "0.001") : authorize())),
    );
    expect(answers.filter((x) => x.status === 200)).toHaveLength(9);
    expect(answers.filter((x) => x.status !== 200).every((x) => x.status === 403 && x.body.reasonCode === "rate_limit_exceeded")).toBe(
      true,
    );
    const usage = await gateway.call("GET", `/v1/policies/${agentId}`);
    expect(usage.body.rateUsage).toMatchObject({ calls: 10, limit: 10 });
    // And one after the other: the window is full for both kinds.
    expect((await voucher(opened.body.channel, "0.001")).body.reasonCode).toBe("rate_limit_exceeded");
    expect((await authorize()).body.reasonCode).toBe("rate_limit_exceeded");
  });

  it("another account cannot sign on the channel or read it", async () => {
    const agentId = await gateway.newAgent();
    const opened = await open(agentId, "0.5");
    const stranger = await gateway.call(
      "POST",
      `/v1/channels/${opened.body.channel}/vouchers`,
      { endpoint: `${SERVICE}/x`, amount: "0.01" },
      {
        key: gateway.payeeKey,
      },
    );
    expect(stranger.status).toBe(404);
    expect((await gateway.call("GET", `/v1/channels/${opened.body.channel}`, undefined, { key: gateway.payeeKey })).status).toBe(404);
  });

  it("concurrent charges on one channel get a gap-free sequence and an exact cumulative", async () => {
    const agentId = await gateway.newAgent();
    const opened = await open(agentId, "5");
    const channel = opened.body.channel as string;
    const amounts = Array.from({ length: 40 }, (_, i) => 1_000 + i);
    const answers = await Promise.all(amounts.map((units) => voucher(channel, (units / 1e6).toFixed(6))));
    expect(answers.every((a) => a.status === 200)).toBe(true);
    const sequences = answers.map((a) => Number(a.body.sequence)).sort((x, y) => x - y);
    expect(sequences).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    const total = amounts.reduce((sum, units) => sum + BigInt(units), 0n);
    const byCumulative = answers.map((a) => BigInt(a.body.cumulativeUnits)).sort((x, y) => (x < y ? -1 : 1));
    expect(byCumulative[39]).toBe(total);
    // Each voucher's cumulative is the previous one's plus its own amount; ids strictly increase.
    const ordered = answers.map((a) => a.body).sort((x, y) => Number(x.sequence) - Number(y.sequence));
    for (let i = 1; i < ordered.length; i += 1) {
      expect(BigInt(ordered[i].cumulativeUnits) - BigInt(ordered[i - 1].cumulativeUnits)).toBe(BigInt(ordered[i].amountUnits));
      expect(BigInt(ordered[i].paymentId) > BigInt(ordered[i - 1].paymentId)).toBe(true);
    }
    const { rows } = await gateway.db.pool.query<{ n: number; sum: string; signed: string }>(
      `SELECT count(*)::int AS n, sum(c.amount)::text AS sum, s.signed_cumulative::text AS signed
       FROM channel_charges c JOIN channel_sessions s USING (channel) WHERE channel = $1 GROUP BY s.signed_cumulative`,
      [channel],
    );
    expect(rows[0]).toEqual({ n: 40, sum: total.toString(), signed: total.toString() });
  });
  it("an archived agent's session signs nothing more", async () => {
    const agentId = await gateway.newAgent();
    const opened = await open(agentId, "0.5");
    expect((await voucher(opened.body.channel, "0.01")).status).toBe(200);
    const archived = await gateway.call("DELETE", `/v1/agents/${agentId}?force=true`);
    expect(archived.status).toBe(200);
    const refused = await voucher(opened.body.channel, "0.01");
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe("AGENT_ARCHIVED");
  });
});
