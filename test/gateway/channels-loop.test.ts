/**
 * The channel loop (`ChannelSessions.runPass`) on the real local ledger: a close whose withdraw
 * delay is too long to wait for answers `closing` and the loop refunds once it passed; a session
 * past its expiry is settled and closed by the loop, so neither the payee's accepted charges nor
 * the payer's deposit are left behind.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pollUntil } from "../support/poll.js";
import {
  type ChannelGateway,
  chargeStatuses,
  expectAgreement,
  newPayee,
  SERVICE,
  startChannelGateway,
  USDC,
} from "./support/channel-gateway.js";

let gateway: ChannelGateway;

beforeAll(async () => {
  gateway = await startChannelGateway();
});

afterAll(async () => {
  await gateway?.stop();
});

async function open(deposit: string, extra: Record<string, unknown>) {
  const agentId = await gateway.newAgent();
  const opened = await gateway.call(
    "POST",
    `/v1/agents/${agentId}/channels`,
    { payee: newPayee(), serviceOrigin: SERVICE, deposit, protocol: "mpp", ...extra },
    { idem: randomUUID() },
  );
  expect(opened.status).toBe(201);
  return opened.body as { channel: string; payer: string };
}

async function signAndPresent(channel: string, count: number) {
  const signed = [];
  for (let i = 0; i < count; i += 1) {
    const answer = await gateway.call("POST", `/v1/channels/${channel}/vouchers`, { endpoint: `${SERVICE}/v1/search`, amount: "0.01" });
    expect(answer.status).toBe(200);
    signed.push(answer.body);
  }
  const last = signed[signed.length - 1];
  const presented = await gateway.call(
    "POST",
    `/v1/channels/${channel}/settlements`,
    {
      cumulative: last.cumulativeUnits,
      sequence: last.sequence,
      signature: last.signature,
      charges: signed.map((v) => ({ sequence: v.sequence, paymentId: v.paymentId, amountUnits: v.amountUnits, endpoint: v.endpoint })),
    },
    { key: gateway.payeeKey },
  );
  expect(presented.status).toBe(200);
}

async function statusOf(channel: string): Promise<string> {
  return (await gateway.db.pool.query("SELECT status FROM channel_sessions WHERE channel = $1", [channel])).rows[0].status;
}

describe("the channel loop", () => {
  it("a close with a long withdraw delay answers closing; the loop refunds once the delay passed", async () => {
    const opened = await open("1", { withdrawDelaySeconds: 12 });
    await signAndPresent(opened.channel, 2);
    const closing = await gateway.call("POST", `/v1/channels/${opened.channel}/close`);
    expect(closing.body).toMatchObject({ status: "closing", refundedUnits: null, settledCumulativeUnits: "20000" });
    expect(
      (await gateway.call("POST", `/v1/channels/${opened.channel}/vouchers`, { endpoint: `${SERVICE}/v1/x`, amount: "0.01" })).body.reason,
    ).toBe("channel_closed");
    await gateway.channels.runPass();
    expect(await statusOf(opened.channel)).toBe("closing");
    await pollUntil(
      async () => {
        await gateway.channels.runPass();
        return (await statusOf(opened.channel)) === "closed";
      },
      { timeoutMs: 40_000, intervalMs: 1_000, what: () => "the loop to refund after the withdraw delay" },
    );
    await expectAgreement(gateway, opened.channel, opened.payer, 10n * USDC);
  });

  it("a session past its expiry is closed by the loop: its accepted charges settled, the rest of the deposit refunded", async () => {
    // Vouchers are refused within 30 s of expiry: 33 s leaves a moment to sign.
    const opened = await open("1", { expiresInSeconds: 33, withdrawDelaySeconds: 1 });
    await signAndPresent(opened.channel, 3);
    await gateway.call("POST", `/v1/channels/${opened.channel}/vouchers`, { endpoint: `${SERVICE}/v1/search`, amount: "0.01" });
    await gateway.channels.runPass();
    expect(await statusOf(opened.channel)).toBe("open");
    await pollUntil(
      async () => {
        await gateway.channels.runPass();
        return (await statusOf(opened.channel)) === "closed";
      },
      { timeoutMs: 60_000, intervalMs: 1_000, what: () => "the loop to close the expired session" },
    );
    expect(await chargeStatuses(gateway, opened.channel)).toEqual({ settled: 3, void: 1 });
    const { rows } = await gateway.db.pool.query(
      "SELECT amount_units::text AS amount, status FROM spend_reservations WHERE payment_ref = $1",
      [`channel:${opened.channel}`],
    );
    expect(rows).toEqual([{ amount: "30000", status: "settled" }]);
    await expectAgreement(gateway, opened.channel, opened.payer, 10n * USDC);
  });
});
