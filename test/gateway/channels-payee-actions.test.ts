/**
 * A payee acting on chain with its own key (closing with its final voucher and refunding, settling
 * itself before or during the gateway's close, racing the refund, settling before presenting,
 * sending tokens straight to the escrow, closing its token account) on the real program and
 * ledger. Every test ends with the chain's own record (the ChannelClosed / ChannelSettled events)
 * = the gateway's tables = the REST answers = the indexer's channel read model = `usedToday`, and
 * landed money within the budget; every signature the gateway recorded exists on chain.
 */
import { randomUUID } from "node:crypto";
import { setTimeout as delay } from "node:timers/promises";
import { createCloseAccountInstruction, createTransferInstruction, getAssociatedTokenAddressSync } from "@solana/spl-token";
import { ComputeBudgetProgram, type Keypair, PublicKey, type TransactionInstruction } from "@solana/web3.js";
import bs58 from "bs58";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChannelError, ChannelSessions } from "../../api/gateway/channels/index.js";
import { readChannel } from "../../api/gateway/channels/chain.js";
import { channelHistory } from "../../api/gateway/channels/history.js";
import { tokenBalanceUnits } from "../../api/gateway/chain/index.js";
import { putPolicy } from "../../api/shared/policy/index.js";
import { getPolicy, readUsage } from "../../api/shared/policy/store.js";
import { IngestPipeline } from "../../indexer/pipeline.js";
import { RpcSource } from "../../indexer/sources/rpc.js";
import {
  type ChannelAccounts,
  channelAccounts,
  closeChannelInstruction,
  escrowPda,
  PAYMENT_LEDGER_PROGRAM_ID,
  refundChannelInstruction,
  settleChannelInstruction,
  settlementComputeUnits,
  voucherSignatureInstruction,
} from "../../programs/payment_ledger/ts/index.js";
import { mulberry32 } from "../support/random.js";
import { type ChannelGateway, newPayeeKeypair, SERVICE, sendAs, signAs, startChannelGateway, USDC } from "./support/channel-gateway.js";

let gateway: ChannelGateway;
let startSlot: number;

beforeAll(async () => {
  gateway = await startChannelGateway();
  startSlot = await gateway.ledger.connection.getSlot("confirmed");
}, 120_000);

afterAll(async () => {
  await gateway?.stop();
});

interface Opened {
  readonly agentId: string;
  readonly channel: string;
  readonly payer: string;
  readonly payee: Keypair;
  readonly accounts: ChannelAccounts;
  readonly depositUnits: bigint;
}

async function internalId(publicId: string): Promise<string> {
  const { rows } = await gateway.db.pool.query<{ agent_id: string }>("SELECT agent_id FROM agents WHERE public_id = $1", [publicId]);
  return rows[0]!.agent_id;
}

const decimal = (units: bigint): string => `${units / USDC}.${(units % USDC).toString().padStart(6, "0")}`;

function openRequest(agentId: string, payee: Keypair, depositUnits: bigint, extra: Record<string, unknown> = {}) {
  return gateway.call(
    "POST",
    `/v1/agents/${agentId}/channels`,
    {
      payee: payee.publicKey.toBase58(),
      serviceOrigin: SERVICE,
      deposit: decimal(depositUnits),
      protocol: "mpp",
      withdrawDelaySeconds: 1,
      ...extra,
    },
    { idem: randomUUID() },
  );
}

async function open(depositUnits: bigint, options: { budget?: bigint; extra?: Record<string, unknown> } = {}): Promise<Opened> {
  const agentId = await gateway.newAgent();
  if (options.budget !== undefined) await putPolicy(gateway.db.pool, await internalId(agentId), { dailyBudgetUnits: options.budget });
  const payee = await newPayeeKeypair(gateway);
  const opened = await openRequest(agentId, payee, depositUnits, options.extra);
  expect(opened.status).toBe(201);
  const view = (await gateway.call("GET", `/v1/channels/${opened.body.channel}`)).body;
  const accounts = channelAccounts({
    programId: PAYMENT_LEDGER_PROGRAM_ID,
    payer: new PublicKey(opened.body.payer),
    payee: payee.publicKey,
    mint: gateway.ledger.mint,
    channelId: Buffer.from(view.channelId, "hex"),
  });
  return { agentId, channel: opened.body.channel, payer: opened.body.payer, payee, accounts, depositUnits };
}

async function vouchers(o: Opened, amountUnits: bigint, count: number): Promise<any[]> {
  const signed = [];
  for (let i = 0; i < count; i += 1) {
    const answer = await gateway.call("POST", `/v1/channels/${o.channel}/vouchers`, {
      endpoint: `${SERVICE}/v1/search`,
      amount: decimal(amountUnits),
    });
    expect(answer.status).toBe(200);
    signed.push(answer.body);
  }
  return signed;
}

function presentation(signed: readonly any[], from: number, to: number) {
  const last = signed[to - 1];
  return {
    cumulative: last.cumulativeUnits,
    sequence: last.sequence,
    signature: last.signature,
    charges: signed
      .slice(from - 1, to)
      .map((v) => ({ sequence: v.sequence, paymentId: v.paymentId, amountUnits: v.amountUnits, endpoint: v.endpoint })),
  };
}

function present(o: Opened, signed: readonly any[], from: number, to: number) {
  return gateway.call("POST", `/v1/channels/${o.channel}/settlements`, presentation(signed, from, to), { key: gateway.payeeKey });
}

/** The payee's own settlement of voucher `to` (charges `from..to`): the ed25519 check and its arguments. */
function payeeSettlement(o: Opened, signed: readonly any[], from: number, to: number) {
  const last = signed[to - 1];
  return {
    check: voucherSignatureInstruction(new PublicKey(o.payer), Buffer.from(last.message, "base64"), bs58.decode(last.signature)),
    settlement: {
      cumulativeUnits: BigInt(last.cumulativeUnits),
      sequence: BigInt(last.sequence),
      charges: signed.slice(from - 1, to).map((v) => ({
        paymentId: BigInt(v.paymentId),
        amountUnits: BigInt(v.amountUnits),
        endpointHash: Buffer.from(v.endpointHash, "hex"),
      })),
    },
    count: to - from + 1,
  };
}

async function payeeSettles(o: Opened, signed: readonly any[], from: number, to: number): Promise<string> {
  const { check, settlement, count } = payeeSettlement(o, signed, from, to);
  return sendAs(gateway, o.payee, [
    ComputeBudgetProgram.setComputeUnitLimit({ units: settlementComputeUnits(count) }),
    check,
    await settleChannelInstruction({ settler: o.payee.publicKey, channel: o.accounts, settlement }),
  ]);
}

function payeeRefund(o: Opened): Promise<TransactionInstruction> {
  return refundChannelInstruction({ signer: o.payee.publicKey, channel: o.accounts, rentPayer: gateway.ledger.authority.publicKey });
}

async function chargeRows(channel: string) {
  const { rows } = await gateway.db.pool.query<{ sequence: string; amount: string; status: string; settlement_tx: string | null }>(
    "SELECT sequence::text, amount::text, status, settlement_tx FROM channel_charges WHERE channel = $1 ORDER BY sequence",
    [channel],
  );
  return rows;
}

async function onChain(signature: string): Promise<boolean> {
  const tx = await gateway.ledger.connection.getTransaction(signature, { commitment: "confirmed", maxSupportedTransactionVersion: 0 });
  return tx !== null && tx.meta?.err === null;
}

let pipeline: IngestPipeline | null = null;
let source: RpcSource | null = null;

/** The indexer's channel read model, caught up with the chain by the real RPC source and pipeline. */
async function indexedChannel(channel: string) {
  source ??= new RpcSource({ rpcUrl: gateway.localnet.rpcUrl, programId: PAYMENT_LEDGER_PROGRAM_ID, name: "rpc-payee-actions" });
  const rpc = source;
  pipeline ??= new IngestPipeline({
    pool: gateway.db.pool,
    programId: PAYMENT_LEDGER_PROGRAM_ID,
    cluster: gateway.localnet.rpcUrl,
    lookup: (signature) => rpc.transaction(signature),
  });
  await pipeline.backfill(rpc, { fromSlot: BigInt(startSlot), toSlot: await rpc.currentSlot("confirmed") });
  const { rows } = await gateway.db.pool.query<{ status: string; settled: string; refunded: string | null }>(
    "SELECT status, settled_units::text AS settled, refunded_units::text AS refunded FROM channels WHERE address = $1",
    [channel],
  );
  return rows[0];
}

/**
 * The closed channel as the chain recorded it, and everyone agreeing with it: the session row and
 * its charges, the settlements and every signature recorded, the REST view, the deposit's
 * reservation and `usedToday`, the balances, and the indexer. Answers the chain's close.
 */
async function expectChainTruth(o: Opened, payerStartUnits: bigint, options: { payeeUnits?: bigint } = {}) {
  const history = await channelHistory(gateway.ledger, o.accounts.channel);
  const closed = history.closed!;
  expect(closed).not.toBeNull();
  const { rows } = await gateway.db.pool.query(
    `SELECT status, settled_cumulative::text AS settled, settled_sequence::text AS sequence, refunded::text AS refunded, refund_tx, close_tx
     FROM channel_sessions WHERE channel = $1`,
    [o.channel],
  );
  const row = rows[0];
  expect(row).toMatchObject({
    status: "closed",
    settled: closed.settledUnits.toString(),
    sequence: closed.sequence.toString(),
    refunded: closed.refundedUnits.toString(),
    refund_tx: closed.signature,
  });
  if (row.close_tx !== null) expect(await onChain(row.close_tx)).toBe(true);

  // Charges: settled up to the chain's sequence, each by the transaction whose event covered it; the rest void.
  let settledSum = 0n;
  for (const charge of await chargeRows(o.channel)) {
    const sequence = BigInt(charge.sequence);
    if (sequence <= closed.sequence) {
      expect(charge.status).toBe("settled");
      const covering = history.settlements.find((s) => s.fromSequence <= sequence && sequence <= s.toSequence);
      expect(charge.settlement_tx).toBe(covering?.signature);
      settledSum += BigInt(charge.amount);
    } else {
      expect(charge.status).toBe("void");
    }
  }
  expect(settledSum).toBe(closed.settledUnits);
  const sends = await gateway.db.pool.query<{ signature: string }>(
    "SELECT signature FROM channel_settlement_sends WHERE channel = $1 AND status = 'confirmed'",
    [o.channel],
  );
  for (const send of sends.rows) expect(await onChain(send.signature)).toBe(true);
  expect(new Set(sends.rows.map((s) => s.signature))).toEqual(new Set(history.settlements.map((s) => s.signature)));

  const view = (await gateway.call("GET", `/v1/channels/${o.channel}`)).body;
  expect(view).toMatchObject({
    status: "closed",
    settledCumulativeUnits: closed.settledUnits.toString(),
    refundedUnits: closed.refundedUnits.toString(),
  });

  // The deposit's reservation ended at what left the escrow to the payee; usedToday counts exactly it.
  const agent = await internalId(o.agentId);
  const reservation = await gateway.db.pool.query(
    "SELECT amount_units::text AS amount, status FROM spend_reservations WHERE payment_ref = $1",
    [`channel:${o.channel}`],
  );
  expect(reservation.rows).toEqual([
    closed.settledUnits > 0n
      ? { amount: closed.settledUnits.toString(), status: "settled" }
      : { amount: o.depositUnits.toString(), status: "released" },
  ]);
  const policy = (await getPolicy(gateway.db.pool, agent))!;
  const usage = await readUsage(gateway.db.pool, agent, policy ?? {}, new Date());
  expect(usage.usedTodayUnits).toBe(closed.settledUnits);
  const restPolicy = (await gateway.call("GET", `/v1/policies/${o.agentId}`)).body;
  expect(String(restPolicy.usedToday.usdc)).toBe(String(Number(decimal(closed.settledUnits))));

  // Ledger balances: the payee holds what was settled, the payer lost the deposit and got the refund.
  expect(await tokenBalanceUnits(gateway.ledger, o.payee.publicKey)).toBe(options.payeeUnits ?? closed.settledUnits);
  expect(await tokenBalanceUnits(gateway.ledger, new PublicKey(o.payer))).toBe(payerStartUnits - o.depositUnits + closed.refundedUnits);
  expect(
    await gateway.ledger.connection.getAccountInfo(escrowPda(o.accounts.channel, PAYMENT_LEDGER_PROGRAM_ID).address, "confirmed"),
  ).toBeNull();

  expect(await indexedChannel(o.channel)).toEqual({
    status: "closed",
    settled: closed.settledUnits.toString(),
    refunded: closed.refundedUnits.toString(),
  });
  const indexedSettlements = await gateway.db.pool.query<{ tx_hash: string }>(
    "SELECT tx_hash FROM channel_settlements WHERE channel = $1",
    [o.channel],
  );
  expect(new Set(indexedSettlements.rows.map((r) => r.tx_hash))).toEqual(new Set(history.settlements.map((s) => s.signature)));
  return closed;
}

describe("a payee acting on chain by itself", () => {
  it("closes with its final voucher and refunds before the gateway's close: the budget counts the 0.5 it took, no new channel fits", async () => {
    const budget = 500_000n;
    const o = await open(budget, { budget });
    const signed = await vouchers(o, budget, 1);
    const { check, settlement } = payeeSettlement(o, signed, 1, 1);
    const payeeTx = await sendAs(gateway, o.payee, [
      ComputeBudgetProgram.setComputeUnitLimit({ units: settlementComputeUnits(1) + 200_000 }),
      check,
      await closeChannelInstruction({ signer: o.payee.publicKey, channel: o.accounts, finalSettlement: settlement }),
      await payeeRefund(o),
    ]);
    const closed = await gateway.call("POST", `/v1/channels/${o.channel}/close`);
    expect(closed.status).toBe(200);
    expect(closed.body).toMatchObject({ status: "closed", settledCumulativeUnits: "500000", refundedUnits: "0" });
    expect((await chargeRows(o.channel)).map((c) => c.settlement_tx)).toEqual([payeeTx]);
    // The budget is spent: a second channel is refused, so no further cycle moves money.
    const again = await openRequest(o.agentId, await newPayeeKeypair(gateway), budget);
    expect(again.status).toBe(403);
    expect(again.body.reasonCode).toBe("daily_budget_exceeded");
    await expectChainTruth(o, 10n * USDC);
  });

  it("settles and refunds during the gateway's withdraw delay: the close records the payee's settlement and refund", async () => {
    const budget = 500_000n;
    const o = await open(budget, { budget, extra: { withdrawDelaySeconds: 30 } });
    const signed = await vouchers(o, 250_000n, 2);
    expect((await present(o, signed, 1, 1)).status).toBe(200);
    const closing = await gateway.call("POST", `/v1/channels/${o.channel}/close`);
    expect(closing.body.status).toBe("closing");
    const { check, settlement } = payeeSettlement(o, signed, 2, 2);
    const payeeTx = await sendAs(gateway, o.payee, [
      ComputeBudgetProgram.setComputeUnitLimit({ units: settlementComputeUnits(1) + 200_000 }),
      check,
      await settleChannelInstruction({ settler: o.payee.publicKey, channel: o.accounts, settlement }),
      await payeeRefund(o),
    ]);
    await gateway.channels.runPass();
    const after = await gateway.call("GET", `/v1/channels/${o.channel}`);
    expect(after.body).toMatchObject({ status: "closed", settledCumulativeUnits: "500000", refundedUnits: "0" });
    expect((await chargeRows(o.channel)).map((c) => c.settlement_tx)[1]).toBe(payeeTx);
    expect((await openRequest(o.agentId, await newPayeeKeypair(gateway), 100_000n)).status).toBe(403);
    await expectChainTruth(o, 10n * USDC);
  });

  it("a stream of single-charge settlements racing the gateway's refund: every landed settlement recorded, none invented", async () => {
    for (let round = 0; round < 3; round += 1) {
      const o = await open(500_000n);
      const signed = await vouchers(o, 1_000n, 50);
      // Signed beforehand, sent every 40 ms from the close request on: some land before the
      // refund's reads, some between them and the refund, the rest fail on a channel gone.
      const stream = [];
      for (let i = 1; i <= signed.length; i += 1) {
        const { check, settlement } = payeeSettlement(o, signed, i, i);
        stream.push(
          await signAs(gateway, o.payee, [
            ComputeBudgetProgram.setComputeUnitLimit({ units: settlementComputeUnits(1) }),
            check,
            await settleChannelInstruction({ settler: o.payee.publicKey, channel: o.accounts, settlement }),
          ]),
        );
      }
      const closing = gateway.call("POST", `/v1/channels/${o.channel}/close`);
      while (
        (await gateway.db.pool.query("SELECT status FROM channel_sessions WHERE channel = $1", [o.channel])).rows[0].status === "open"
      ) {
        await delay(10);
      }
      for (const tx of stream) {
        await gateway.ledger.connection.sendRawTransaction(Buffer.from(tx.wire, "base64"), { skipPreflight: true }).catch(() => undefined);
        await delay(40);
      }
      const closed = await closing;
      expect(closed.body.status).toBe("closed");
      await delay(500);
      const statuses = await gateway.ledger.connection.getSignatureStatuses(
        stream.map((tx) => tx.signature),
        { searchTransactionHistory: true },
      );
      const landed = statuses.value.filter((status) => status !== null && status.err === null).length;
      const chain = await expectChainTruth(o, 10n * USDC);
      expect(landed).toBeGreaterThan(0);
      expect(chain.settledUnits).toBe(BigInt(landed) * 1_000n);
    }
  });

  it("settles voucher 3 itself, then presents it: the payee's transaction is recorded, no signature of ours that never landed", async () => {
    const o = await open(200_000n);
    const signed = await vouchers(o, 10_000n, 5);
    const payeeTx = await payeeSettles(o, signed, 1, 3);
    const answer = await present(o, signed, 1, 3);
    expect(answer.status).toBe(200);
    expect(answer.body.settlementTxs).toEqual([payeeTx]);
    expect((await chargeRows(o.channel)).map((c) => c.settlement_tx)).toEqual([payeeTx, payeeTx, payeeTx, null, null]);
    expect((await gateway.call("POST", `/v1/channels/${o.channel}/close`)).body.status).toBe("closed");
    await expectChainTruth(o, 10n * USDC);
  });

  it("settles voucher 4, then presents 3 and later 5: charges 1–4 name its transaction, 5 the gateway's", async () => {
    const o = await open(200_000n);
    const signed = await vouchers(o, 10_000n, 5);
    const payeeTx = await payeeSettles(o, signed, 1, 4);
    expect((await present(o, signed, 1, 3)).body.settlementTxs).toEqual([payeeTx]);
    const fifth = await present(o, signed, 5, 5);
    expect(fifth.status).toBe(200);
    expect(fifth.body.settlementTxs).toHaveLength(2);
    const ours = fifth.body.settlementTxs[1];
    expect(await onChain(ours)).toBe(true);
    expect((await chargeRows(o.channel)).map((c) => c.settlement_tx)).toEqual([payeeTx, payeeTx, payeeTx, payeeTx, ours]);
    expect((await gateway.call("POST", `/v1/channels/${o.channel}/close`)).body.status).toBe("closed");
    await expectChainTruth(o, 10n * USDC);
  });

  it("tokens sent straight to the escrow come back in the refund, as the chain's event says", async () => {
    const o = await open(100_000n);
    const signed = await vouchers(o, 30_000n, 1);
    expect((await present(o, signed, 1, 1)).status).toBe(200);
    const payeeToken = getAssociatedTokenAddressSync(gateway.ledger.mint, o.payee.publicKey, true);
    await sendAs(gateway, o.payee, [
      createTransferInstruction(payeeToken, escrowPda(o.accounts.channel, PAYMENT_LEDGER_PROGRAM_ID).address, o.payee.publicKey, 10_000),
    ]);
    const closed = await gateway.call("POST", `/v1/channels/${o.channel}/close`);
    expect(closed.body).toMatchObject({ status: "closed", settledCumulativeUnits: "30000", refundedUnits: "80000" });
    // The payee gave 0.01 of its 0.03 away: its balance is 0.02, the payer got 0.08 back.
    expect(await tokenBalanceUnits(gateway.ledger, o.payee.publicKey)).toBe(20_000n);
    expect(await expectChainTruth(o, 10n * USDC, { payeeUnits: 20_000n })).toMatchObject({ settledUnits: 30_000n, refundedUnits: 80_000n });
  });

  it("closes its token account: the gateway still settles, closes and refunds without the payee", async () => {
    const o = await open(100_000n);
    const payeeToken = getAssociatedTokenAddressSync(gateway.ledger.mint, o.payee.publicKey, true);
    await sendAs(gateway, o.payee, [createCloseAccountInstruction(payeeToken, o.payee.publicKey, o.payee.publicKey)]);
    expect(await gateway.ledger.connection.getAccountInfo(payeeToken, "confirmed")).toBeNull();
    const signed = await vouchers(o, 10_000n, 2);
    const settled = await present(o, signed, 1, 2);
    expect(settled.body).toMatchObject({ settledSequence: "2", settledCumulativeUnits: "20000" });
    // One refused batch (the account was missing), then the account recreated and the batch landed.
    const sends = await gateway.db.pool.query(
      "SELECT status, count(*)::int AS n FROM channel_settlement_sends WHERE channel = $1 GROUP BY status",
      [o.channel],
    );
    expect(Object.fromEntries(sends.rows.map((r) => [r.status, r.n]))).toEqual({ failed: 1, confirmed: 1 });
    const closed = await gateway.call("POST", `/v1/channels/${o.channel}/close`);
    expect(closed.body).toMatchObject({ status: "closed", refundedUnits: "80000" });
    await expectChainTruth(o, 10n * USDC);
  });

  it("a close the program refuses is answered as refused (409), not as pending, and its signature is not kept", async () => {
    const o = await open(100_000n);
    // A gateway process whose key is not the program's authority: the program refuses its
    // close_channel (NotChannelParty), a real refusal on the real ledger.
    const stranger = await newPayeeKeypair(gateway);
    const wrong = new ChannelSessions({
      pool: gateway.db.pool,
      ledger: { ...gateway.ledger, authority: stranger },
      wallets: gateway.wallets,
    });
    const refused = await wrong.close(o.channel, gateway.accountId).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(ChannelError);
    expect((refused as ChannelError).reason).toBe("channel_close_refused");
    const { rows } = await gateway.db.pool.query("SELECT status, close_tx, failure FROM channel_sessions WHERE channel = $1", [o.channel]);
    expect(rows[0]).toMatchObject({ status: "closing", close_tx: null });
    expect(rows[0].failure).toMatch(/close_channel refused: NotChannelParty/);
    // The gateway that is the authority closes it.
    expect((await gateway.call("POST", `/v1/channels/${o.channel}/close`)).body).toMatchObject({
      status: "closed",
      refundedUnits: "100000",
    });
    await expectChainTruth(o, 10n * USDC);
  });

  it("past the expiry the agent gets its deposit back by itself (force close), whatever the payee did to its token account", async () => {
    const o = await open(100_000n, { extra: { expiresInSeconds: 3 } });
    const payeeToken = getAssociatedTokenAddressSync(gateway.ledger.mint, o.payee.publicKey, true);
    await sendAs(gateway, o.payee, [createCloseAccountInstruction(payeeToken, o.payee.publicKey, o.payee.publicKey)]);
    await new Promise((resolve) => setTimeout(resolve, 4_500));
    for (let pass = 0; pass < 5; pass += 1) {
      await gateway.channels.runPass();
      if ((await gateway.call("GET", `/v1/channels/${o.channel}`)).body.status === "closed") break;
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
    const closed = await expectChainTruth(o, 10n * USDC);
    expect(closed).toMatchObject({ forced: true, settledUnits: 0n, refundedUnits: 100_000n });
  });
});

const SEEDS = [0xc4a1, 0xc4a2, 0xc4a3, 0xc4a4, 0xc4a6];

describe("payee actions interleaved at random with the gateway's (seeded)", () => {
  it(`${SEEDS.length} seeded sessions: whatever the payee does, the chain's record = tables = REST = indexer = usedToday, within budget and deposit`, async () => {
    for (const seed of SEEDS) {
      const random = mulberry32(seed);
      const pick = (n: number) => Math.floor(random() * n);
      const budget = 300_000n;
      const o = await open(200_000n, { budget, extra: { withdrawDelaySeconds: random() < 0.5 ? 1 : 11 } });
      const signed: any[] = [];
      let given = 0n; // tokens the payee sent straight to the escrow
      let ended = false;
      const steps: string[] = [];
      for (let step = 0; step < 10 && !ended; step += 1) {
        const chain = await readChannel(gateway.ledger, o.accounts.channel);
        const settledSeq = Number(chain?.settled.sequence ?? 0n);
        // Vouchers most often; the ends (a close by either side) only after a few steps.
        const action = [0, 0, 1, 2, 2, 3, 3, 4, 5, 6][pick(step < 4 ? 8 : 10)]!;
        try {
          if (action <= 1 && chain?.closeRequestedAtSeconds === null) {
            const answer = await gateway.call("POST", `/v1/channels/${o.channel}/vouchers`, {
              endpoint: `${SERVICE}/v1/search`,
              amount: decimal(BigInt(1 + pick(20)) * 1_000n),
            });
            if (answer.status === 200) signed.push(answer.body);
            steps.push("voucher");
          } else if (action === 2 && signed.length > 0) {
            const to = 1 + pick(signed.length);
            await present(o, signed, 1, to);
            steps.push(`present ${to}`);
          } else if (action === 3 && signed.length > settledSeq) {
            const to = settledSeq + 1 + pick(signed.length - settledSeq);
            await payeeSettles(o, signed, settledSeq + 1, to);
            steps.push(`self-settle ${to}`);
          } else if (action === 4 && chain !== null) {
            const held = await tokenBalanceUnits(gateway.ledger, o.payee.publicKey);
            if (held > 0n) {
              const payeeToken = getAssociatedTokenAddressSync(gateway.ledger.mint, o.payee.publicKey, true);
              const amount = held / 2n + 1n;
              await sendAs(gateway, o.payee, [
                createTransferInstruction(
                  payeeToken,
                  escrowPda(o.accounts.channel, PAYMENT_LEDGER_PROGRAM_ID).address,
                  o.payee.publicKey,
                  amount,
                ),
              ]);
              given += amount;
              steps.push(`transfer ${amount}`);
            }
          } else if (action === 5) {
            await gateway.call("POST", `/v1/channels/${o.channel}/close`);
            steps.push("gateway close");
          } else if (action === 6 && chain !== null) {
            // The payee ends the channel: with its highest voucher when it holds one past the settled.
            const final =
              signed.length > settledSeq && chain.closeRequestedAtSeconds === null
                ? payeeSettlement(o, signed, settledSeq + 1, signed.length)
                : null;
            const instructions: TransactionInstruction[] = [ComputeBudgetProgram.setComputeUnitLimit({ units: 1_000_000 })];
            if (chain.closeRequestedAtSeconds === null) {
              if (final !== null) instructions.push(final.check);
              instructions.push(
                await closeChannelInstruction({
                  signer: o.payee.publicKey,
                  channel: o.accounts,
                  finalSettlement: final?.settlement ?? null,
                }),
              );
            }
            instructions.push(await payeeRefund(o));
            await sendAs(gateway, o.payee, instructions);
            ended = true;
            steps.push("payee close+refund");
          }
        } catch (error) {
          steps.push(`(refused: ${String(error).slice(0, 60)})`);
        }
      }
      // The gateway finishes the session however it stands.
      for (let pass = 0; pass < 40; pass += 1) {
        const view = (await gateway.call("GET", `/v1/channels/${o.channel}`)).body;
        if (view.status === "closed") break;
        if (view.status === "open") await gateway.call("POST", `/v1/channels/${o.channel}/close`);
        else await gateway.channels.runPass();
        await delay(1_000);
      }
      const payeeHolds = await tokenBalanceUnits(gateway.ledger, o.payee.publicKey);
      const closed = await expectChainTruth(o, 10n * USDC, { payeeUnits: payeeHolds });
      // Landed money: what the payee received from the escrow, never above the deposit or the budget.
      expect(payeeHolds + given, `seed ${seed.toString(16)}: ${steps.join(", ")}`).toBe(closed.settledUnits);
      expect(closed.settledUnits).toBeLessThanOrEqual(o.depositUnits);
      expect(closed.settledUnits).toBeLessThanOrEqual(budget);
    }
  }, 150_000);
});
