/**
 * Channel sessions through the gateway's REST routes, on the real local ledger and Postgres: a
 * session opens within the agent's budget, vouchers are signed and checked like a payee checks
 * them, a payee's presentation settles exactly the charges it covers, and the close refunds
 * deposit − settled to the agent's wallet and returns the unused deposit to the budget.
 */
import { randomUUID } from "node:crypto";
import { PublicKey } from "@solana/web3.js";
import bs58 from "bs58";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { putPolicy } from "../../api/shared/policy/index.js";
import { decodeChannelAccount, verifyVoucherSignature } from "../../programs/payment_ledger/ts/index.js";
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

async function open(agentId: string, payee: string, deposit: string, extra: Record<string, unknown> = {}) {
  return gateway.call(
    "POST",
    `/v1/agents/${agentId}/channels`,
    { payee, serviceOrigin: SERVICE, deposit, protocol: "mpp", withdrawDelaySeconds: 1, ...extra },
    { idem: randomUUID() },
  );
}

function voucher(channel: string, amount: string, path = "/v1/search") {
  return gateway.call("POST", `/v1/channels/${channel}/vouchers`, { endpoint: `${SERVICE}${path}`, amount });
}

/** What a payee presents: its highest voucher and the charges since its last presentation. */
function presentation(vouchers: readonly any[]) {
  const last = vouchers[vouchers.length - 1];
  return {
    cumulative: last.cumulativeUnits,
    sequence: last.sequence,
    signature: last.signature,
    charges: vouchers.map((v) => ({ sequence: v.sequence, paymentId: v.paymentId, amountUnits: v.amountUnits, endpoint: v.endpoint })),
  };
}

async function reservation(channel: string) {
  const { rows } = await gateway.db.pool.query<{ amount: string; status: string }>(
    "SELECT amount_units::text AS amount, status FROM spend_reservations WHERE payment_ref = $1",
    [`channel:${channel}`],
  );
  return rows[0];
}

describe("channel sessions over REST", () => {
  it("opens within the budget, signs vouchers a payee can verify, settles a presentation, and a close refunds deposit − settled", async () => {
    const agentId = await gateway.newAgent();
    await putPolicy(gateway.db.pool, await agentKey(agentId), { dailyBudgetUnits: 5n * USDC, perCallLimitUnits: 100_000n });
    const payee = newPayee();
    const opened = await open(agentId, payee, "2");
    expect(opened.status).toBe(201);
    const channel = opened.body.channel as string;
    expect(opened.body).toMatchObject({
      status: "open",
      deposit: "2",
      depositUnits: "2000000",
      payee,
      serviceOrigin: SERVICE,
      protocol: "mpp",
    });
    expect(await reservation(channel)).toEqual({ amount: "2000000", status: "reserved" });

    const signed = [];
    for (const amount of ["0.01", "0.02", "0.005"]) {
      const answer = await voucher(channel, amount);
      expect(answer.status).toBe(200);
      signed.push(answer.body);
    }
    expect(signed.map((v) => [v.sequence, v.cumulativeUnits])).toEqual([
      ["1", "10000"],
      ["2", "30000"],
      ["3", "35000"],
    ]);
    const last = signed[2];
    // The payee's local check: the signature is the payer's over the 113-byte message.
    const message = Buffer.from(last.message, "base64");
    expect(message.length).toBe(113);
    expect(verifyVoucherSignature(new PublicKey(last.signer), message, bs58.decode(last.signature))).toBe(true);

    const settled = await gateway.call("POST", `/v1/channels/${channel}/settlements`, presentation(signed.slice(0, 2)), {
      key: gateway.payeeKey,
    });
    expect(settled.status).toBe(200);
    expect(settled.body).toMatchObject({
      acceptedCumulativeUnits: "30000",
      acceptedSequence: "2",
      settledCumulativeUnits: "30000",
      settledSequence: "2",
    });
    expect(settled.body.settlementTxs).toHaveLength(1);
    const account = decodeChannelAccount((await gateway.ledger.connection.getAccountInfo(new PublicKey(channel), "confirmed"))!.data);
    expect(account.settled.cumulativeUnits).toBe(30_000n);
    expect(account.settled.sequence).toBe(2n);
    expect(await chargeStatuses(gateway, channel)).toEqual({ settled: 2, signed: 1 });
    await expectAgreement(gateway, channel, opened.body.payer, 10n * USDC);

    // The third voucher was never presented: at close it is void, never paid.
    const closed = await gateway.call("POST", `/v1/channels/${channel}/close`);
    expect(closed.status).toBe(200);
    expect(closed.body).toMatchObject({ status: "closed", settledCumulativeUnits: "30000", refundedUnits: String(2n * USDC - 30_000n) });
    expect(await chargeStatuses(gateway, channel)).toEqual({ settled: 2, void: 1 });
    expect(await reservation(channel)).toEqual({ amount: "30000", status: "settled" });
    await expectAgreement(gateway, channel, opened.body.payer, 10n * USDC);

    const after = await voucher(channel, "0.01");
    expect(after.status).toBe(409);
    expect(after.body.reason).toBe("channel_closed");
  });
  it("refuses malformed requests by field, before anything is reserved or signed", async () => {
    const agentId = await gateway.newAgent(0n);
    const payee = newPayee();
    const bad = async (body: Record<string, unknown>, field: string) => {
      const answer = await gateway.call("POST", `/v1/agents/${agentId}/channels`, {
        payee,
        serviceOrigin: SERVICE,
        deposit: "1",
        protocol: "mpp",
        ...body,
      });
      expect(answer.status, JSON.stringify(body)).toBe(400);
      expect(answer.body.field).toBe(field);
    };
    await bad({ deposit: "0" }, "deposit");
    await bad({ deposit: "1.0000001" }, "deposit");
    await bad({ deposit: 1e21 }, "deposit");
    await bad({ protocol: "card" }, "protocol");
    await bad({ serviceOrigin: "ftp://api.example.com" }, "serviceOrigin");
    await bad({ withdrawDelaySeconds: 0 }, "withdrawDelaySeconds");
    await bad({ expiresInSeconds: "soon" }, "expiresInSeconds");
    const { rows } = await gateway.db.pool.query(
      "SELECT (SELECT count(*) FROM channel_sessions WHERE agent_id = $1)::int AS sessions, (SELECT count(*) FROM spend_reservations WHERE agent_id = $1)::int AS reserved",
      [await agentKey(agentId)],
    );
    expect(rows[0]).toEqual({ sessions: 0, reserved: 0 });
    const unknown = "11111111111111111111111111111112";
    expect((await gateway.call("POST", `/v1/channels/${unknown}/vouchers`, { endpoint: `${SERVICE}/x`, amount: "0.01" })).status).toBe(404);
    expect((await gateway.call("GET", `/v1/channels/not-an-address`)).status).toBe(404);
    const settlement = await gateway.call(
      "POST",
      `/v1/channels/${unknown}/settlements`,
      { cumulative: "1", sequence: "1", signature: "x", charges: "all" },
      { key: gateway.payeeKey },
    );
    expect(settlement.status).toBe(400);
    expect(settlement.body.field).toBe("charges");
    const amount = await gateway.call(
      "POST",
      `/v1/channels/${unknown}/settlements`,
      { cumulative: "-1", sequence: "1", signature: "x", charges: [] },
      { key: gateway.payeeKey },
    );
    expect(amount.body.field).toBe("cumulative");
  });
});

async function agentKey(publicId: string): Promise<string> {
  const { rows } = await gateway.db.pool.query<{ agent_id: string }>("SELECT agent_id FROM agents WHERE public_id = $1", [publicId]);
  return rows[0]!.agent_id;
}
