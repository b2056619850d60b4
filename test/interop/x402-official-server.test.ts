/**
 * Interop, our client to their server (x402): our `Client.pay` (the gateway signs for the agent) against an API
 * protected by the official x402 server middleware (`@x402/express` `paymentMiddleware` with
 * `@x402/svm`'s exact server scheme), whose facilitator is the official facilitator package run
 * in process (`@x402/core` `x402Facilitator` with `@x402/svm`'s exact facilitator scheme, its own
 * fee payer holding SOL on the local ledger). All official packages unmodified, configured only
 * through public options: the devnet network id (the SDKs know no local one) with the local RPC
 * URL, and the local ledger's mint as asset. The whole system runs on loopback.
 *
 * The variant "facilitator = our gateway": the same official middleware, its facilitator the
 * official `HTTPFacilitatorClient` pointed at the gateway's standard facilitator API. The payer
 * is then one of the gateway's own agents on both sides: one record, made by the paying side.
 */
import { createServer } from "node:http";
import { type Keypair, PublicKey } from "@solana/web3.js";
import { createKeyPairSignerFromBytes } from "@solana/kit";
import { x402Facilitator } from "@x402/core/facilitator";
import { type FacilitatorClient, HTTPFacilitatorClient } from "@x402/core/server";
import type { SupportedResponse } from "@x402/core/types";
import { paymentMiddleware, x402ResourceServer } from "@x402/express";
import { SOLANA_DEVNET_CAIP2, toFacilitatorSvmSigner } from "@x402/svm";
import { registerExactSvmScheme as registerFacilitatorScheme } from "@x402/svm/exact/facilitator";
import { ExactSvmScheme as ExactSvmServerScheme } from "@x402/svm/exact/server";
import bs58 from "bs58";
import express from "express";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { invocationAddress } from "../../api/gateway/invocations/index.js";
import { sweepReservations } from "../../api/gateway/loops/sweeper.js";
import { PAYMENT_LEDGER_PROGRAM_ID } from "../../programs/payment_ledger/ts/index.js";
import { PolicyViolationError, PaymentError, type Client } from "../../sdk/src/index.js";
import { recordedPayment, recordedPayments } from "../support/ledger-events.js";
import {
  feePayer,
  indexed,
  type InteropSetup,
  lamports,
  listen,
  payeeWallet,
  payingClient,
  reservationsOf,
  rest,
  type Seen,
  startInterop,
  stopInterop,
  tokens,
  transfersOf,
  expectRefusedBeforeSigning,
  paymentHeaders,
} from "./support.js";

const NETWORK = SOLANA_DEVNET_CAIP2;
const PRICE = 25_000n;

let setup: InteropSetup;
let origin = "";
let payTo: PublicKey;
let facilitatorKey: Keypair;
let facilitator: x402Facilitator;
/** The API whose facilitator is the gateway, and whom it pays. */
let viaGateway = "";
let gatewayPayTo: PublicKey;
const seen: Seen[] = [];

beforeAll(async () => {
  setup = await startInterop();
  const { system } = setup.test;
  const payee = await payeeWallet(setup);
  payTo = payee.publicKey;
  facilitatorKey = await feePayer(setup);

  facilitator = new x402Facilitator();
  registerFacilitatorScheme(facilitator, {
    signer: toFacilitatorSvmSigner(await createKeyPairSignerFromBytes(facilitatorKey.secretKey), {
      defaultRpcUrl: system.localnet.info.rpcUrl,
    }),
    networks: NETWORK,
  });
  // The official facilitator in process, behind the client interface the resource server uses.
  const facilitatorClient: FacilitatorClient = {
    verify: (payload, requirements) => facilitator.verify(payload, requirements),
    settle: (payload, requirements) => facilitator.settle(payload, requirements),
    getSupported: async () => facilitator.getSupported() as SupportedResponse,
  };
  const resourceServer = new x402ResourceServer(facilitatorClient).register(NETWORK, new ExactSvmServerScheme());
  const accepts = {
    scheme: "exact",
    network: NETWORK as `${string}:${string}`,
    payTo: payTo.toBase58(),
    price: { amount: PRICE.toString(), asset: system.token },
  };
  const app = express();
  app.use(paymentMiddleware({ "GET /report": { accepts, description: "a paid report" } }, resourceServer));
  app.get("/report", (_req, res) => {
    res.json({ report: "paid content" });
  });
  // x402 v1 (no official v1 resource server is a dependency): a 402 body with `accepts`, and
  // X-PAYMENT verified and settled by the same official facilitator's v1 scheme.
  app.get("/v1/report", async (req, res) => {
    const requirement = {
      scheme: "exact",
      network: "solana-devnet",
      maxAmountRequired: PRICE.toString(),
      resource: `${origin}/v1/report`,
      description: "a paid report (v1)",
      mimeType: "application/json",
      outputSchema: null,
      payTo: payTo.toBase58(),
      maxTimeoutSeconds: 60,
      asset: system.token,
      extra: { feePayer: facilitatorKey.publicKey.toBase58() },
    };
    const header = req.header("x-payment");
    if (header === undefined) {
      res.status(402).json({ x402Version: 1, error: "X-PAYMENT header is required", accepts: [requirement] });
      return;
    }
    const payload = JSON.parse(Buffer.from(header, "base64").toString("utf8"));
    const verified = await facilitator.verify(payload, requirement as never);
    const settled = verified.isValid ? await facilitator.settle(payload, requirement as never) : null;
    if (settled === null || !settled.success) {
      res.status(402).json({ x402Version: 1, error: verified.invalidReason ?? settled?.errorReason, accepts: [requirement] });
      return;
    }
    res.setHeader("X-PAYMENT-RESPONSE", Buffer.from(JSON.stringify(settled)).toString("base64"));
    res.json({ report: "paid content (v1)" });
  });
  origin = await listen(setup, createServer(app));

  // The same official middleware with the gateway as its facilitator, as a stock server names
  // one: the official HTTP client, the seller's API key through its public `createAuthHeaders`.
  const { apiKey: sellerKey } = await system.createAccount("x402 seller using the gateway");
  gatewayPayTo = (await payeeWallet(setup)).publicKey;
  const gatewayFacilitator = new HTTPFacilitatorClient({
    url: `${system.apiUrl}/v1/x402/facilitator`,
    createAuthHeaders: async () => {
      const headers = { Authorization: `Bearer ${sellerKey}` };
      return { verify: headers, settle: headers, supported: headers };
    },
  });
  const gatewayServer = new x402ResourceServer(gatewayFacilitator).register(NETWORK, new ExactSvmServerScheme());
  const gatewayApp = express();
  gatewayApp.use(
    paymentMiddleware(
      {
        "GET /report": {
          accepts: { ...accepts, payTo: gatewayPayTo.toBase58() },
          description: "a paid report, settled by the gateway",
        },
      },
      gatewayServer,
    ),
  );
  gatewayApp.get("/report", (_req, res) => {
    res.json({ report: "paid content (gateway facilitator)" });
  });
  viaGateway = await listen(setup, createServer(gatewayApp));
}, 180_000);

afterAll(async () => {
  await stopInterop(setup);
});

function client(agentId: string, usdc: number, drop?: (url: string, method: string) => boolean) {
  return payingClient(setup, agentId, usdc, { origin: () => origin, seen, ...(drop === undefined ? {} : { drop }) });
}

describe("Client.pay against the official x402 middleware and facilitator", () => {
  it("pays: 200 with the paid body, exact balances, the record on chain referencing the transfer, verified in the index", async () => {
    const { client: payer, address } = await client("x402-payer", 1);
    const before = {
      payer: await tokens(setup, address),
      payee: await tokens(setup, payTo),
      fees: await lamports(setup, facilitatorKey.publicKey),
    };
    seen.length = 0;

    const result = await payer.pay({ endpoint: `${origin}/report` });
    if (!result.paid) throw new Error(`not paid: ${JSON.stringify(result)}`);
    expect(result).toMatchObject({
      status: 200,
      protocol: "x402",
      format: "x402-v2",
      data: { report: "paid content" },
      amountPaid: { usdc: 0.025 },
    });
    // The request, then the retry with the v2 payment header only.
    expect(seen.map((s) => [s.method, s.path, paymentHeaders(s)])).toEqual([
      ["GET", "/report", []],
      ["GET", "/report", ["payment-signature"]],
    ]);
    expect(result.receipt).toMatchObject({ header: "PAYMENT-RESPONSE", success: true, transaction: result.settlementTxHash });
    expect(result.receipt?.value).toMatchObject({ success: true, network: NETWORK, payer: address });

    // Exact token movements; the facilitator paid the fee, the agent's wallet no SOL.
    expect(before.payer - (await tokens(setup, address))).toBe(PRICE);
    expect((await tokens(setup, payTo)) - before.payee).toBe(PRICE);
    const settlement = await setup.test.connection.getTransaction(result.settlementTxHash!, {
      commitment: "confirmed",
      maxSupportedTransactionVersion: 0,
    });
    expect(settlement?.meta?.err).toBeNull();
    expect(settlement?.transaction.message.staticAccountKeys[0]?.toBase58()).toBe(facilitatorKey.publicKey.toBase58());
    expect(before.fees - (await lamports(setup, facilitatorKey.publicKey))).toBe(BigInt(settlement!.meta!.fee));
    expect(await lamports(setup, address)).toBe(0n);

    // A separate record in payment_ledger naming the transfer, moving nothing.
    expect(result.txHash).not.toBe(result.settlementTxHash);
    const recorded = await recordedPayment(setup.test.connection, result.txHash);
    expect(recorded.payer.toBase58()).toBe(address);
    expect(recorded.payee.toBase58()).toBe(payTo.toBase58());
    expect(recorded.amountUnits).toBe(PRICE);
    expect(recorded.protocol).toBe("x402");
    expect(recorded.atomic).toBe(false);
    expect(bs58.encode(recorded.settlementReference!)).toBe(result.settlementTxHash);
    expect(recorded.parent).toBeNull();

    // The reservation closed with the record; the policy counts the payment once.
    expect(await reservationsOf(setup, "x402-payer")).toEqual([
      expect.objectContaining({ status: "settled", tx_hash: result.txHash, amount_units: PRICE.toString() }),
    ]);
    expect(await transfersOf(setup, "x402-payer")).toEqual([
      expect.objectContaining({ status: "recorded", format: "x402-v2", settlement_tx: result.settlementTxHash, record_tx: result.txHash }),
    ]);
    expect((await payer.policies.get()).usedToday).toEqual({ usdc: 0.025 });

    // The indexer checked the referenced TransferChecked on chain.
    const row = await indexed(setup, result.txHash, (r) => r.settlement_status !== null);
    expect(row).toMatchObject({
      settlement_reference: result.settlementTxHash,
      settlement_status: "verified",
      amount_units: PRICE.toString(),
    });
  });

  it("x402 v1: the body's requirement, paid with X-PAYMENT, verified and settled by the official facilitator's v1 scheme", async () => {
    const { client: payer, address } = await client("x402-v1-payer", 1);
    seen.length = 0;
    const result = await payer.pay({ endpoint: `${origin}/v1/report` });
    if (!result.paid) throw new Error("not paid");
    expect(result).toMatchObject({ status: 200, protocol: "x402", format: "x402-v1", data: { report: "paid content (v1)" } });
    expect(seen.map((s) => paymentHeaders(s))).toEqual([[], ["x-payment"]]);
    expect(result.receipt).toMatchObject({ header: "X-PAYMENT-RESPONSE", success: true, transaction: result.settlementTxHash });
    expect(await tokens(setup, address)).toBe(1_000_000n - PRICE);
    const recorded = await recordedPayment(setup.test.connection, result.txHash);
    expect(bs58.encode(recorded.settlementReference!)).toBe(result.settlementTxHash);
    const row = await indexed(setup, result.txHash, (r) => r.settlement_status !== null);
    expect(row?.settlement_status).toBe("verified");
  });

  it("refuses over the per-call limit before anything is signed", async () => {
    const payer = await client("x402-capped", 1);
    await payer.client.policies.set({ perCallLimit: { usdc: 0.01 } });
    await expectRefusedBeforeSigning(setup, seen, payer, "x402-capped", `${origin}/report`, (error) =>
      expect(error).toBeInstanceOf(PolicyViolationError),
    );
  });

  it("refuses a blocked domain before anything is signed", async () => {
    const payer = await client("x402-blocked", 1);
    await payer.client.policies.set({ blockedDomains: ["127.0.0.1"] });
    await expectRefusedBeforeSigning(setup, seen, payer, "x402-blocked", `${origin}/report`, (error) =>
      expect(error).toMatchObject({ name: "DomainNotAllowedError", reasonCode: "domain_blocked" }),
    );
    // The client judged the domain before the first request: the blocked server received nothing.
    expect(seen).toEqual([]);
  });

  it("a replayed payment is refused and moves nothing", async () => {
    const { client: payer, address } = await client("x402-replayer", 1);
    seen.length = 0;
    const result = await payer.pay({ endpoint: `${origin}/report` });
    expect(result.paid).toBe(true);
    const signature = seen.find((s) => s.headers["payment-signature"] !== undefined)!.headers["payment-signature"]!;
    const balances = { payer: await tokens(setup, address), payee: await tokens(setup, payTo) };

    const replay = await fetch(`${origin}/report`, { headers: { "PAYMENT-SIGNATURE": signature } });
    expect(replay.status).toBe(402);
    expect(await tokens(setup, address)).toBe(balances.payer);
    expect(await tokens(setup, payTo)).toBe(balances.payee);
    expect((await payer.policies.get()).usedToday).toEqual({ usdc: 0.025 });
  });
});

describe("Client.pay against the official x402 middleware whose facilitator is our gateway", () => {
  const viaGatewayClient = (agentId: string) => payingClient(setup, agentId, 1, { origin: () => viaGateway, seen });

  it("pays: 200, exact balances, the gateway's fee payer pays the fee, ONE record (the agent's), verified", async () => {
    const { system } = setup.test;
    const { client: payer, address } = await viaGatewayClient("x402-gw-payer");
    const before = {
      payer: await tokens(setup, address),
      payee: await tokens(setup, gatewayPayTo),
      fees: await lamports(setup, system.feePayer.publicKey),
    };
    seen.length = 0;

    const result = await payer.pay({ endpoint: `${viaGateway}/report` });
    if (!result.paid) throw new Error(`not paid: ${JSON.stringify(result)}`);
    expect(result).toMatchObject({
      status: 200,
      protocol: "x402",
      format: "x402-v2",
      data: { report: "paid content (gateway facilitator)" },
      amountPaid: { usdc: 0.025 },
    });
    expect(seen.map((s) => [s.method, s.path, paymentHeaders(s)])).toEqual([
      ["GET", "/report", []],
      ["GET", "/report", ["payment-signature"]],
    ]);
    // The gateway settled it as facilitator and says the payer's side records it.
    expect(result.receipt).toMatchObject({ header: "PAYMENT-RESPONSE", success: true, transaction: result.settlementTxHash });
    expect(result.receipt?.value).toMatchObject({
      success: true,
      network: NETWORK,
      payer: address,
      extra: { record: "by_payer", recordTransaction: null },
    });

    expect(before.payer - (await tokens(setup, address))).toBe(PRICE);
    expect((await tokens(setup, gatewayPayTo)) - before.payee).toBe(PRICE);
    const settlement = await setup.test.connection.getTransaction(result.settlementTxHash!, {
      commitment: "confirmed",
      maxSupportedTransactionVersion: 0,
    });
    expect(settlement?.meta?.err).toBeNull();
    expect(settlement?.transaction.message.staticAccountKeys[0]?.toBase58()).toBe(system.feePayer.publicKey.toBase58());
    expect(before.fees - (await lamports(setup, system.feePayer.publicKey))).toBe(BigInt(settlement!.meta!.fee));
    expect(await lamports(setup, address)).toBe(0n);

    // The agent's record (its signature, the reference mode), and the co-signed side made none.
    const recorded = await recordedPayment(setup.test.connection, result.txHash);
    expect(recorded.payer.toBase58()).toBe(address);
    expect(recorded.payee.toBase58()).toBe(gatewayPayTo.toBase58());
    expect(recorded.amountUnits).toBe(PRICE);
    expect(bs58.encode(recorded.settlementReference!)).toBe(result.settlementTxHash);
    const { rows: cosigned } = await system.pool.query(
      "SELECT payer, status, record, record_signature FROM cosigned_transfers WHERE signature = $1",
      [result.settlementTxHash],
    );
    expect(cosigned).toEqual([{ payer: address, status: "confirmed", record: "payer", record_signature: null }]);
    expect(await transfersOf(setup, "x402-gw-payer")).toEqual([
      expect.objectContaining({ status: "recorded", settlement_tx: result.settlementTxHash, record_tx: result.txHash }),
    ]);
    expect(await reservationsOf(setup, "x402-gw-payer")).toEqual([
      expect.objectContaining({ status: "settled", tx_hash: result.txHash, amount_units: PRICE.toString() }),
    ]);
    expect((await payer.policies.get()).usedToday).toEqual({ usdc: 0.025 });

    const row = await indexed(setup, result.txHash, (r) => r.settlement_status !== null);
    expect(row).toMatchObject({ settlement_reference: result.settlementTxHash, settlement_status: "verified" });
    // Exactly one record references the transfer, even after the reconciler's pass.
    await system.cosigned.reconcilePending();
    const { rows: records } = await system.pool.query("SELECT tx_hash FROM transactions WHERE settlement_reference = $1", [
      result.settlementTxHash,
    ]);
    expect(records).toEqual([{ tx_hash: result.txHash }]);
  });

  it("a replayed payment is refused by the gateway and moves nothing", async () => {
    const { client: payer, address } = await viaGatewayClient("x402-gw-replayer");
    seen.length = 0;
    const result = await payer.pay({ endpoint: `${viaGateway}/report` });
    expect(result.paid).toBe(true);
    const signature = seen.find((s) => s.headers["payment-signature"] !== undefined)!.headers["payment-signature"]!;
    const balances = { payer: await tokens(setup, address), payee: await tokens(setup, gatewayPayTo) };

    const replay = await fetch(`${viaGateway}/report`, { headers: { "PAYMENT-SIGNATURE": signature } });
    expect(replay.status).toBe(402);
    // The gateway's verify knows the transaction was consumed; the middleware says so in its 402.
    const refused = JSON.parse(Buffer.from(replay.headers.get("payment-required")!, "base64").toString("utf8"));
    expect(refused.error).toBe("duplicate_settlement");
    expect(await tokens(setup, address)).toBe(balances.payer);
    expect(await tokens(setup, gatewayPayTo)).toBe(balances.payee);
    expect((await payer.policies.get()).usedToday).toEqual({ usdc: 0.025 });
    const { rows } = await setup.test.system.pool.query("SELECT count(*)::int AS n FROM cosigned_transfers WHERE payer = $1", [address]);
    expect(rows).toEqual([{ n: 1 }]);
  });
});

describe("a sub-agent paying under agents.invoke", () => {
  it("records the payment under the invocation, counted by its budget; over the budget nothing is signed", async () => {
    const { system } = setup.test;
    await client("x402-orchestrator", 1);
    const { client: sub, address: subAddress } = await client("x402-sub", 1);
    // The orchestrator invokes the sub-agent (spec x402, our facilitator) with a 0.03 budget.
    const requirement = {
      scheme: "exact",
      network: system.network,
      token: system.token,
      amount: "10000",
      payTo: subAddress,
      resource: "https://sub.example/task",
    };
    const authorized = await rest(system, setup.apiKey, "POST", "/v1/agents/x402-orchestrator/payments/authorize", {
      endpoint: requirement.resource,
      x402: requirement,
      invocationBudget: { usdc: 0.03 },
    });
    expect(authorized.status, authorized.text).toBe(200);
    const settled = await rest(system, setup.apiKey, "POST", "/v1/x402/settle", { payment: authorized.body.payment, requirement });
    expect(settled.body, settled.text).toMatchObject({ success: true });
    const parentTxHash: string = settled.body.txHash;
    const invocation = invocationAddress(parentTxHash, subAddress, PAYMENT_LEDGER_PROGRAM_ID);

    const result = await sub.withParent(parentTxHash).pay({ endpoint: `${origin}/report` });
    if (!result.paid) throw new Error("not paid");
    const recorded = await recordedPayment(setup.test.connection, result.txHash);
    expect(recorded.parent?.invocation.toBase58()).toBe(invocation);
    expect(bs58.encode(recorded.settlementReference!)).toBe(result.settlementTxHash);
    expect(await system.settlement.invocationState(new PublicKey(invocation))).toMatchObject({ budgetUnits: 30_000n, spentUnits: PRICE });
    const row = await indexed(setup, result.txHash, (r) => r.settlement_status !== null);
    expect(row).toMatchObject({ parent_tx_hash: parentTxHash, settlement_status: "verified" });

    // 0.025 + 0.025 > 0.03: refused by the gateway before anything is signed.
    seen.length = 0;
    await expect(sub.withParent(parentTxHash).pay({ endpoint: `${origin}/report` })).rejects.toMatchObject({ name: "BudgetExceededError" });
    expect(seen.map((s) => paymentHeaders(s))).toEqual([[]]);
    expect(await transfersOf(setup, "x402-sub")).toHaveLength(1);
  });
});

describe("failures between the transfer and its record", () => {
  const sweep = () =>
    sweepReservations(setup.test.system.pool, { agents: setup.test.system.wallets, transfers: setup.test.system.transfers }, new Date());

  it("a client that never reports the transfer: the sweeper finds it on the ledger and records it once", async () => {
    const dropComplete = (url: string, method: string) => method === "POST" && url.endsWith("/complete");
    const { client: payer, address } = await client("x402-silent", 1, dropComplete);
    const result = await payer.pay({ endpoint: `${origin}/report` });
    if (!result.paid) throw new Error("not paid");
    // Not recorded yet: the result names the transfer itself.
    expect(result.txHash).toBe(result.settlementTxHash);
    expect(await reservationsOf(setup, "x402-silent")).toEqual([expect.objectContaining({ status: "reserved" })]);
    // Release is refused: the money moved (and would be refused anyway while the bytes may land).
    const reservationId = (await reservationsOf(setup, "x402-silent"))[0]!.id;
    const release = await rest(setup.test.system, setup.apiKey, "POST", `/v1/agents/x402-silent/payments/${reservationId}/release`, {});
    expect(release.status).toBe(409);

    await sweep();
    await sweep();
    const [transfer] = await transfersOf(setup, "x402-silent");
    expect(transfer).toMatchObject({ status: "recorded", settlement_tx: result.settlementTxHash });
    expect(await reservationsOf(setup, "x402-silent")).toEqual([
      expect.objectContaining({ status: "settled", tx_hash: transfer!.record_tx }),
    ]);
    const recorded = await recordedPayments(setup.test.connection, transfer!.record_tx!);
    expect(recorded.map((r) => bs58.encode(r.settlementReference!))).toEqual([result.settlementTxHash]);
    // One record for the transfer, whoever tried.
    const { rows } = await setup.test.system.pool.query("SELECT status FROM settlements WHERE payment_ref LIKE $1", [
      `${transfer!.payment_ref}:r%`,
    ]);
    expect(rows).toEqual([{ status: "confirmed" }]);
    expect((await payer.policies.get()).usedToday).toEqual({ usdc: 0.025 });
    expect(await tokens(setup, address)).toBe(1_000_000n - PRICE);
  });

  it("a record that fails: the payment still counts once, the sweeper records it, never twice", async () => {
    const { client: payer } = await client("x402-record-fails", 1);
    const settlement = setup.test.system.settlement;
    const original = settlement.settlePayment.bind(settlement);
    let failures = 0;
    settlement.settlePayment = async (input, signal) => {
      if (input.paymentRef?.startsWith("transfer:") && failures === 0) {
        failures += 1;
        throw new PaymentError("ledger unavailable (injected)");
      }
      return original(input, signal);
    };
    let result: Awaited<ReturnType<Client["pay"]>>;
    try {
      result = await payer.pay({ endpoint: `${origin}/report` });
    } finally {
      settlement.settlePayment = original;
    }
    if (!result.paid) throw new Error("not paid");
    expect(failures).toBe(1);
    expect(result.txHash).toBe(result.settlementTxHash);
    expect(await transfersOf(setup, "x402-record-fails")).toEqual([expect.objectContaining({ status: "landed", record_tx: null })]);
    expect((await payer.policies.get()).usedToday).toEqual({ usdc: 0.025 });

    await Promise.all([sweep(), sweep()]);
    const [transfer] = await transfersOf(setup, "x402-record-fails");
    expect(transfer).toMatchObject({ status: "recorded" });
    expect(await reservationsOf(setup, "x402-record-fails")).toEqual([
      expect.objectContaining({ status: "settled", tx_hash: transfer!.record_tx }),
    ]);
    expect((await payer.policies.get()).usedToday).toEqual({ usdc: 0.025 });
    // The complete call again, late: the same record, not a second one.
    const reservationId = (await reservationsOf(setup, "x402-record-fails"))[0]!.id;
    const late = await rest(setup.test.system, setup.apiKey, "POST", `/v1/agents/x402-record-fails/payments/${reservationId}/complete`, {
      txHash: result.settlementTxHash,
    });
    expect(late.body).toMatchObject({ status: "settled", txHash: transfer!.record_tx, settlementTxHash: result.settlementTxHash });
    const row = await indexed(setup, transfer!.record_tx!, (r) => r.settlement_status !== null);
    expect(row?.settlement_status).toBe("verified");
  });

  it("a transfer signed but never presented: release refused while it may land, released once its blockhash expired", async () => {
    const { address } = await client("x402-unused", 1);
    const challenge = await fetch(`${origin}/report`);
    expect(challenge.status).toBe(402);
    const x402v2 = JSON.parse(Buffer.from(challenge.headers.get("PAYMENT-REQUIRED")!, "base64").toString("utf8"));
    const authorized = await rest(setup.test.system, setup.apiKey, "POST", "/v1/agents/x402-unused/payments/authorize", {
      endpoint: `${origin}/report`,
      x402v2,
    });
    expect(authorized.status, authorized.text).toBe(200);
    expect(authorized.body).toMatchObject({ protocol: "x402", format: "x402-v2", headers: { "PAYMENT-SIGNATURE": expect.any(String) } });
    const release = await rest(
      setup.test.system,
      setup.apiKey,
      "POST",
      `/v1/agents/x402-unused/payments/${authorized.body.reservationId}/release`,
      {},
    );
    expect(release.status).toBe(409);

    const lastValid = Number(authorized.body.transfer.lastValidBlockHeight);
    while ((await setup.test.connection.getBlockHeight("confirmed")) <= lastValid) await new Promise((r) => setTimeout(r, 250));
    await sweep();
    expect(await transfersOf(setup, "x402-unused")).toEqual([expect.objectContaining({ status: "expired" })]);
    expect(await reservationsOf(setup, "x402-unused")).toEqual([expect.objectContaining({ status: "released" })]);
    // Too late to pay with it now: the facilitator refuses the expired transaction.
    const late = await fetch(`${origin}/report`, { headers: authorized.body.headers });
    expect(late.status).toBe(402);
    expect(await tokens(setup, address)).toBe(1_000_000n);
  }, 60_000);
});
