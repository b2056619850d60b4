/**
 * Settling a payee's presentations on the real local ledger: 1, 10 and 60 charges settle in
 * batches of at most 25 per transaction and match the chain charge by charge (PaymentRecorded
 * events: ids, amounts, endpoints); a voucher presented twice, or by two requests at once, settles
 * once; a presentation that does not match what was signed is refused and settles nothing.
 */
import { randomUUID } from "node:crypto";
import { PublicKey, sendAndConfirmTransaction, Transaction } from "@solana/web3.js";
import bs58 from "bs58";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  channelAccounts,
  decodeChannelAccount,
  decodeTransactionEvents,
  eventsNamed,
  settleChannelInstruction,
  voucherSignatureInstruction,
  PAYMENT_LEDGER_PROGRAM_ID,
} from "../../programs/payment_ledger/ts/index.js";
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

async function openWith(depositUsdc: string) {
  const agentId = await gateway.newAgent();
  const opened = await gateway.call(
    "POST",
    `/v1/agents/${agentId}/channels`,
    { payee: newPayee(), serviceOrigin: SERVICE, deposit: depositUsdc, protocol: "mpp", withdrawDelaySeconds: 1 },
    { idem: randomUUID() },
  );
  expect(opened.status).toBe(201);
  return opened.body as { channel: string; payer: string; payee: string };
}

async function charges(channel: string, count: number, paths = ["/v1/search", "/v1/quote", "/v1/news"]) {
  const signed = [];
  for (let i = 0; i < count; i += 1) {
    const answer = await gateway.call("POST", `/v1/channels/${channel}/vouchers`, {
      endpoint: `${SERVICE}${paths[i % paths.length]}`,
      amount: ((1_000 + i) / 1e6).toFixed(6),
    });
    expect(answer.status).toBe(200);
    signed.push(answer.body);
  }
  return signed;
}

function presentation(vouchers: readonly any[]) {
  const last = vouchers[vouchers.length - 1];
  return {
    cumulative: last.cumulativeUnits,
    sequence: last.sequence,
    signature: last.signature,
    charges: vouchers.map((v) => ({ sequence: v.sequence, paymentId: v.paymentId, amountUnits: v.amountUnits, endpoint: v.endpoint })),
  };
}

function present(channel: string, body: unknown) {
  return gateway.call("POST", `/v1/channels/${channel}/settlements`, body, { key: gateway.payeeKey });
}

async function chainState(channel: string) {
  return decodeChannelAccount((await gateway.ledger.connection.getAccountInfo(new PublicKey(channel), "confirmed"))!.data);
}

/** Every PaymentRecorded of the settlement transactions, in order: [payment id, amount, endpoint hash]. */
async function recordedOnChain(signatures: readonly string[]) {
  const recorded: [string, string, string][] = [];
  for (const signature of signatures) {
    const tx = await gateway.ledger.connection.getTransaction(signature, { commitment: "confirmed", maxSupportedTransactionVersion: 0 });
    for (const event of eventsNamed(decodeTransactionEvents(tx!, PAYMENT_LEDGER_PROGRAM_ID), "PaymentRecorded")) {
      recorded.push([event.paymentId.toString(), event.amountUnits.toString(), Buffer.from(event.endpointHash).toString("hex")]);
    }
  }
  return recorded;
}

describe("settling presented vouchers", () => {
  for (const count of [1, 10, 60]) {
    it(`${count} charge(s) settle in ⌈${count}/25⌉ transaction(s) that record exactly the signed charges`, async () => {
      const opened = await openWith("1");
      const signed = await charges(opened.channel, count);
      const answer = await present(opened.channel, presentation(signed));
      expect(answer.status).toBe(200);
      const total = signed[signed.length - 1].cumulativeUnits;
      expect(answer.body).toMatchObject({ settledCumulativeUnits: total, settledSequence: String(count), acceptedSequence: String(count) });
      expect(answer.body.settlementTxs).toHaveLength(Math.ceil(count / 25));
      const state = await chainState(opened.channel);
      expect(state.settled.cumulativeUnits.toString()).toBe(total);
      expect(state.settled.sequence).toBe(BigInt(count));
      expect(await recordedOnChain(answer.body.settlementTxs)).toEqual(signed.map((v) => [v.paymentId, v.amountUnits, v.endpointHash]));
      const { rows } = await gateway.db.pool.query<{ settlement_tx: string; n: number }>(
        "SELECT settlement_tx, count(*)::int AS n FROM channel_charges WHERE channel = $1 GROUP BY settlement_tx ORDER BY min(sequence)",
        [opened.channel],
      );
      expect(rows.map((row) => row.settlement_tx)).toEqual(answer.body.settlementTxs);
      expect(rows.every((row) => row.n <= 25)).toBe(true);
      await expectAgreement(gateway, opened.channel, opened.payer, 10n * USDC);
    });
  }

  it("a presentation larger than one request settles is finished by the loop", async () => {
    const opened = await openWith("2");
    const signed = await charges(opened.channel, 210, ["/v1/search"]);
    const answer = await present(opened.channel, presentation(signed));
    expect(answer.body).toMatchObject({
      acceptedSequence: "210",
      settledSequence: "200",
      settledCumulativeUnits: signed[199].cumulativeUnits,
    });
    await gateway.channels.runPass();
    const state = await chainState(opened.channel);
    expect(state.settled.sequence).toBe(210n);
    const after = await gateway.call("GET", `/v1/channels/${opened.channel}`);
    expect(after.body).toMatchObject({ settledSequence: "210", settledCumulativeUnits: signed[209].cumulativeUnits });
    expect(after.body.settlementTxs).toHaveLength(9);
    await expectAgreement(gateway, opened.channel, opened.payer, 10n * USDC);
  });

  it("a voucher presented twice, or by two requests at once, settles once", async () => {
    const opened = await openWith("1");
    const signed = await charges(opened.channel, 12);
    const first = presentation(signed.slice(0, 5));
    const [a, b] = await Promise.all([present(opened.channel, first), present(opened.channel, first)]);
    expect([a.status, b.status]).toEqual([200, 200]);
    const again = await present(opened.channel, first);
    expect(again.body).toMatchObject({ settledSequence: "5", settledCumulativeUnits: signed[4].cumulativeUnits });
    expect(again.body.settlementTxs).toHaveLength(1);

    // The next presentation, twice at once: the charges since the last one.
    const second = presentation(signed.slice(5));
    const both = await Promise.all([present(opened.channel, second), present(opened.channel, second)]);
    expect(both.map((x) => x.status)).toEqual([200, 200]);
    const done = await present(opened.channel, second);
    expect(done.body).toMatchObject({ settledSequence: "12", settledCumulativeUnits: signed[11].cumulativeUnits });
    expect(done.body.settlementTxs).toHaveLength(2);
    expect(await recordedOnChain(done.body.settlementTxs)).toEqual(signed.map((v) => [v.paymentId, v.amountUnits, v.endpointHash]));
    const { rows } = await gateway.db.pool.query("SELECT count(*)::int AS n FROM channel_settlement_sends WHERE channel = $1", [
      opened.channel,
    ]);
    expect(rows[0].n).toBe(2);
    await expectAgreement(gateway, opened.channel, opened.payer, 10n * USDC);
  });

  it("refuses a presentation that differs from what was signed, and settles nothing for it", async () => {
    const opened = await openWith("1");
    const signed = await charges(opened.channel, 3);
    const good = presentation(signed);
    const forged = { ...good, signature: presentation(signed.slice(0, 2)).signature };
    expect((await present(opened.channel, forged)).body.reason).toBe("voucher_invalid");
    const inflated = { ...good, cumulative: String(BigInt(good.cumulative) + 1n) };
    expect((await present(opened.channel, inflated)).body.reason).toBe("voucher_invalid");
    const altered = { ...good, charges: good.charges.map((c, i) => (i === 1 ? { ...c, endpoint: "api.example.com/v1/other" } : c)) };
    expect((await present(opened.channel, altered)).body.reason).toBe("charges_mismatch");
    const gap = { ...good, charges: good.charges.slice(1) };
    expect((await present(opened.channel, gap)).body.reason).toBe("charges_mismatch");
    const unknown = { ...good, sequence: "4" };
    expect((await present(opened.channel, unknown)).body.reason).toBe("voucher_unknown");
    expect(await chargeStatuses(gateway, opened.channel)).toEqual({ signed: 3 });
    expect((await chainState(opened.channel)).settled.sequence).toBe(0n);
    await expectAgreement(gateway, opened.channel, opened.payer, 10n * USDC);
  });
  it("a voucher settled on chain outside the gateway is adopted: its charges settled with that transaction, the rest settled after it", async () => {
    const opened = await openWith("1");
    const signed = await charges(opened.channel, 5);
    // Someone settles voucher 2 directly (here the authority's key, as a payee would with its own).
    const accounts = channelAccounts({
      programId: PAYMENT_LEDGER_PROGRAM_ID,
      payer: new PublicKey(opened.payer),
      payee: new PublicKey(opened.payee),
      mint: gateway.ledger.mint,
      channelId: Buffer.from((await gateway.call("GET", `/v1/channels/${opened.channel}`)).body.channelId, "hex"),
    });
    const outside = await sendAndConfirmTransaction(
      gateway.ledger.connection,
      new Transaction().add(
        voucherSignatureInstruction(
          new PublicKey(opened.payer),
          Buffer.from(signed[1].message, "base64"),
          bs58.decode(signed[1].signature),
        ),
        await settleChannelInstruction({
          settler: gateway.ledger.authority.publicKey,
          channel: accounts,
          settlement: {
            cumulativeUnits: BigInt(signed[1].cumulativeUnits),
            sequence: 2n,
            charges: signed.slice(0, 2).map((v) => ({
              paymentId: BigInt(v.paymentId),
              amountUnits: BigInt(v.amountUnits),
              endpointHash: Buffer.from(v.endpointHash, "hex"),
            })),
          },
        }),
      ),
      [gateway.ledger.authority],
      { commitment: "confirmed" },
    );
    const answer = await present(opened.channel, presentation(signed));
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ settledSequence: "5", settledCumulativeUnits: signed[4].cumulativeUnits });
    expect(answer.body.settlementTxs[0]).toBe(outside);
    expect(answer.body.settlementTxs).toHaveLength(2);
    const { rows } = await gateway.db.pool.query<{ sequence: string; settlement_tx: string }>(
      "SELECT sequence, settlement_tx FROM channel_charges WHERE channel = $1 ORDER BY sequence",
      [opened.channel],
    );
    expect(rows.map((row) => row.settlement_tx)).toEqual([outside, outside, ...Array(3).fill(answer.body.settlementTxs[1])]);
    expect(await recordedOnChain(answer.body.settlementTxs)).toEqual(signed.map((v) => [v.paymentId, v.amountUnits, v.endpointHash]));
    await expectAgreement(gateway, opened.channel, opened.payer, 10n * USDC);
  });

  it("a sub-agent's session under an invocation: the deposit is held to the invocation's budget, and its charges settle under it", async () => {
    const orchestrator = await gateway.newAgent();
    const sub = await gateway.newAgent();
    const [orchestratorKey, subKey] = [await internalId(orchestrator), await internalId(sub)];
    const subAddress = (await gateway.wallets.address(subKey)).toBase58();
    const paid = await gateway.settlement.settlePayment({
      agentId: orchestratorKey,
      payee: subAddress,
      amountUnits: 10_000n,
      protocol: "x402",
      rail: "stablecoin",
      endpoint: "api.example.com/v1/invoke",
    });
    const opened = await gateway.settlement.openInvocation({
      invokerAgentId: orchestratorKey,
      parentTxHash: paid.txHash,
      subAgentId: subKey,
      budgetUnits: USDC,
    });
    const open = (deposit: string) =>
      gateway.call(
        "POST",
        `/v1/agents/${sub}/channels`,
        { payee: newPayee(), serviceOrigin: SERVICE, deposit, protocol: "mpp", withdrawDelaySeconds: 1, parentTxHash: paid.txHash },
        { idem: randomUUID() },
      );
    const first = await open("0.6");
    expect(first.status).toBe(201);
    expect(first.body.parentTxHash).toBe(paid.txHash);
    const over = await open("0.6");
    expect(over.status).toBe(422);
    expect(over.body).toMatchObject({ code: "BUDGET_EXCEEDED", reasonCode: "invocation_budget_exceeded" });

    const channel = first.body.channel as string;
    const signed = await charges(channel, 3);
    const answer = await present(channel, presentation(signed));
    expect(answer.status).toBe(200);
    const tx = await gateway.ledger.connection.getTransaction(answer.body.settlementTxs[0], {
      commitment: "confirmed",
      maxSupportedTransactionVersion: 0,
    });
    const recorded = eventsNamed(decodeTransactionEvents(tx!, PAYMENT_LEDGER_PROGRAM_ID), "PaymentRecorded");
    expect(recorded.map((event) => event.parent?.invocation.toBase58())).toEqual([opened.invocation, opened.invocation, opened.invocation]);
    const total = BigInt(signed[2].cumulativeUnits);
    expect((await gateway.settlement.invocationState(new PublicKey(opened.invocation)))?.spentUnits).toBe(total);

    const closed = await gateway.call("POST", `/v1/channels/${channel}/close`);
    expect(closed.body).toMatchObject({ status: "closed", refundedUnits: String(600_000n - total) });
    const { rows } = await gateway.db.pool.query(
      "SELECT amount_units::text AS amount, status, parent_tx_hash FROM spend_reservations WHERE payment_ref = $1",
      [`channel:${channel}`],
    );
    expect(rows).toEqual([{ amount: total.toString(), status: "settled", parent_tx_hash: paid.txHash }]);
    // The unused deposit is back in the invocation's budget: a new session may take it.
    expect((await open("0.9")).status).toBe(201);
    // The sub-agent started with 10 USDC plus the invoking payment; the new session holds 0.9.
    await expectAgreement(gateway, channel, first.body.payer, 10n * USDC + 10_000n - 900_000n);
  });
});

async function internalId(publicId: string): Promise<string> {
  const { rows } = await gateway.db.pool.query<{ agent_id: string }>("SELECT agent_id FROM agents WHERE public_id = $1", [publicId]);
  return rows[0]!.agent_id;
}
