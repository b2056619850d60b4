/**
 * Interop, their client to our server (x402): the OFFICIAL x402 client (`@x402/fetch` `wrapFetchWithPayment` with
 * the `@x402/svm` `exact` scheme and a `@solana/kit` signer holding tokens on our local ledger)
 * pays an API protected by OUR `x402Middleware`, settled by the gateway as its facilitator
 * (co-signed by the gateway's fee payer, recorded on payment_ledger as an attested record that
 * references the transfer, verified by the indexer). The packages are used unmodified, configured
 * only through public options: the network id the 402 names (the local ledger answers as devnet,
 * api/gateway/chain/networks.ts), the RPC URL of the local ledger, spend controls and hooks.
 * Also: the official `HTTPFacilitatorClient` reads the gateway's standard facilitator API, and an
 * x402 v1 `X-PAYMENT` made by the official v1 scheme is accepted.
 */
import { createKeyPairSignerFromBytes } from "@solana/kit";
import type { Keypair } from "@solana/web3.js";
import { HTTPFacilitatorClient } from "@x402/core/server";
import { wrapFetchWithPayment, x402Client } from "@x402/fetch";
import { ExactSvmScheme } from "@x402/svm/exact/client";
import { ExactSvmSchemeV1 } from "@x402/svm/exact/v1/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type NodeRequest, type X402Payment, x402Middleware } from "../../sdk/src/server/index.js";
import { fundedAgent, serve, type Served, startTestSystem, type TestSystem, tokenBalanceUnits } from "../sdk/server-support.js";
import {
  recordingFetch,
  recordsReferencing,
  solLamports,
  verifiedRecord,
  expectAttestedRecord,
  sellerAndBuyer,
  serveBehind,
  expectServiceSolSpentOnLandedOnly,
  serviceSol,
} from "./official-client-support.js";

const PRICE = 50_000n;
const DEVNET = "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1";

let test: TestSystem;
let sellerKey: string;
let payTo: string;
let api: Served;
let payer: Keypair;
const paid: X402Payment[] = [];

/** The service keys' SOL once set up: the last test checks what the suite's payments cost them. */
let startSol: Awaited<ReturnType<typeof serviceSol>>;

beforeAll(async () => {
  test = await startTestSystem();
  ({ sellerKey, payTo, payer } = await sellerAndBuyer(test));
  const middleware = x402Middleware({ amount: PRICE, token: "usdc", payTo, facilitatorUrl: test.system.apiUrl, apiKey: sellerKey });
  api = await serveBehind(middleware, paid);
  startSol = await serviceSol(test);
}, 180_000);

afterAll(async () => {
  await api?.close();
  await test?.stop();
});

/** The official client as a buyer configures it: its signer, our ledger's RPC, a cap on our mint. */
async function officialClient(options: { capUnits?: bigint; blockedHosts?: string[] } = {}) {
  const signer = await createKeyPairSignerFromBytes(payer.secretKey);
  const client = new x402Client().register(DEVNET, new ExactSvmScheme(signer, { rpcUrl: test.system.localnet.info.rpcUrl }));
  client.setSpendControls({
    allowedAssets: [{ network: DEVNET, asset: test.system.token, maxAmountPerPayment: (options.capUnits ?? 1_000_000n).toString() }],
  });
  const blocked = options.blockedHosts ?? [];
  client.onBeforePaymentCreation(async (context) => {
    const host = new URL(context.paymentRequired.resource.url).host;
    return blocked.includes(host) ? { abort: true as const, reason: `blocked domain ${host}` } : undefined;
  });
  const recorder = recordingFetch();
  return { pay: wrapFetchWithPayment(recorder.fetch, client), requests: recorder.requests };
}

function decode(header: string | null): Record<string, unknown> {
  expect(header).not.toBeNull();
  return JSON.parse(Buffer.from(header!, "base64").toString("utf8")) as Record<string, unknown>;
}

describe("the official x402 client pays an API behind our x402Middleware", () => {
  it("answers one 402 with the spec's body, PAYMENT-REQUIRED (v2) and an MPP challenge", async () => {
    const response = await fetch(`${api.origin}/report`);
    expect(response.status).toBe(402);
    const body = (await response.json()) as Record<string, unknown>;
    expect(body).toEqual({
      scheme: "exact",
      network: test.system.network,
      token: test.system.token,
      amount: PRICE.toString(),
      payTo,
      resource: `${api.origin}/report`,
    });
    const required = decode(response.headers.get("payment-required"));
    expect(required.x402Version).toBe(2);
    expect(required.resource).toEqual({ url: `${api.origin}/report`, mimeType: "application/json" });
    expect(required.accepts).toEqual([
      {
        scheme: "exact",
        network: DEVNET,
        amount: PRICE.toString(),
        asset: test.system.token,
        payTo,
        maxTimeoutSeconds: 60,
        extra: { feePayer: test.system.feePayer.publicKey.toBase58() },
      },
    ]);
    expect(response.headers.get("www-authenticate")).toMatch(
      /^Payment id="[A-Za-z0-9_-]+", realm="127\.0\.0\.1:\d+", method="solana", intent="charge"/,
    );
  });

  it("pays: 200 with the paid body, exact balances, the record on chain and verified in the index", async () => {
    const before = {
      payer: await tokenBalanceUnits(test, payer.publicKey.toBase58()),
      payee: await tokenBalanceUnits(test, payTo),
      payerSol: await solLamports(test, payer.publicKey),
      feePayerSol: await solLamports(test, test.system.feePayer.publicKey),
    };
    const { pay, requests } = await officialClient();
    const response = await pay(`${api.origin}/report`);
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ data: "paid content" });

    const settle = decode(response.headers.get("payment-response"));
    expect(settle).toMatchObject({ success: true, network: DEVNET, payer: payer.publicKey.toBase58() });
    const transfer = settle.transaction as string;
    expect(paid.at(-1)).toMatchObject({ protocol: "x402", standard: "x402-v2", txHash: transfer, amountUnits: PRICE });
    expect(requests.filter((r) => r.headers.has("payment-signature"))).toHaveLength(1);

    expect(await tokenBalanceUnits(test, payer.publicKey.toBase58())).toBe(before.payer - PRICE);
    expect(await tokenBalanceUnits(test, payTo)).toBe(before.payee + PRICE);
    // The payer holds no SOL and spent none: the gateway's fee payer paid the fee.
    expect(before.payerSol).toBe(0);
    expect(await solLamports(test, payer.publicKey)).toBe(0);
    expect(await solLamports(test, test.system.feePayer.publicKey)).toBeLessThan(before.feePayerSol);

    // The transfer itself: fee payer ours, the payer's signature, the tokens moved to the payee.
    const chain = await test.connection.getTransaction(transfer, { commitment: "confirmed", maxSupportedTransactionVersion: 0 });
    expect(chain?.meta?.err).toBeNull();
    expect(chain?.transaction.message.staticAccountKeys[0]?.toBase58()).toBe(test.system.feePayer.publicKey.toBase58());

    // Recorded once, verified, and seen by the seller in GraphQL as received by its agent from a
    // wallet the gateway does not hold.
    await expectAttestedRecord(test, {
      transfer,
      payer: payer.publicKey.toBase58(),
      payTo,
      amountUnits: PRICE,
      protocol: "x402",
      recordTxHash: paid.at(-1)!.recordTxHash,
      seller: { apiKey: sellerKey, agentId: "till" },
      endpoint: `${new URL(api.origin).host}/report`,
    });
  });

  it("pays a seller registered a moment ago and never funded: its token account was opened at registration", async () => {
    const newPayTo = await fundedAgent(test.system, sellerKey, "new-till", 0);
    const newPaid: X402Payment[] = [];
    const newApi = await serveBehind(
      x402Middleware({ amount: PRICE, token: "usdc", payTo: newPayTo, facilitatorUrl: test.system.apiUrl, apiKey: sellerKey }),
      newPaid,
    );
    try {
      const { pay } = await officialClient();
      const response = await pay(`${newApi.origin}/report`);
      expect(response.status, await response.clone().text()).toBe(200);
      expect(newPaid).toHaveLength(1);
      expect(await tokenBalanceUnits(test, newPayTo)).toBe(PRICE);
    } finally {
      await newApi.close();
    }
  });

  it("refuses a replayed payment: nothing moves, the handler does not run, nothing more is recorded", async () => {
    const { pay, requests } = await officialClient();
    const first = await pay(`${api.origin}/replayed`);
    expect(first.status).toBe(200);
    const transfer = decode(first.headers.get("payment-response")).transaction as string;
    const signed = requests.find((r) => r.headers.has("payment-signature"))!;
    await verifiedRecord(test, transfer);

    const runs = paid.length;
    const balances = [await tokenBalanceUnits(test, payer.publicKey.toBase58()), await tokenBalanceUnits(test, payTo)];
    const replay = await fetch(`${api.origin}/replayed`, { headers: { "payment-signature": signed.headers.get("payment-signature")! } });
    expect(replay.status).toBe(402);
    expect(replay.headers.get("x-payment-error")).toBe("duplicate_settlement");
    expect(replay.headers.get("payment-required")).not.toBeNull();
    expect(paid.length).toBe(runs);
    expect([await tokenBalanceUnits(test, payer.publicKey.toBase58()), await tokenBalanceUnits(test, payTo)]).toEqual(balances);
    expect(await recordsReferencing(test, transfer)).toBe(1);
  });

  it("a payment for other terms (another resource's cheaper requirement) is refused before the gateway settles", async () => {
    const { pay, requests } = await officialClient();
    const cheap = x402Middleware({ amount: 1n, token: "usdc", payTo, facilitatorUrl: test.system.apiUrl, apiKey: sellerKey });
    const cheapApi = await serve((req, res) => cheap(req as NodeRequest, res, () => res.end("cheap")));
    try {
      // A payload accepting the cheap route's requirement, presented to the 50_000 route.
      const before = await tokenBalanceUnits(test, payer.publicKey.toBase58());
      const response = await pay(`${cheapApi.origin}/x`);
      expect(response.status).toBe(200);
      expect(await tokenBalanceUnits(test, payer.publicKey.toBase58())).toBe(before - 1n);
      const signedForCheap = requests.find((r) => r.headers.has("payment-signature"))!.headers.get("payment-signature")!;
      const refused = await fetch(`${api.origin}/report`, { headers: { "payment-signature": signedForCheap } });
      expect(refused.status).toBe(402);
      expect(refused.headers.get("x-payment-error")).toBe("invalid_exact_svm_payment_requirements_mismatch");
    } finally {
      await cheapApi.close();
    }
  });

  it("the client's spend policy refuses over its per-call cap before anything is signed", async () => {
    const { pay, requests } = await officialClient({ capUnits: PRICE - 1n });
    const before = await tokenBalanceUnits(test, payer.publicKey.toBase58());
    await expect(pay(`${api.origin}/report`)).rejects.toThrow(/spendControls/);
    expect(requests.some((r) => r.headers.has("payment-signature"))).toBe(false);
    expect(await tokenBalanceUnits(test, payer.publicKey.toBase58())).toBe(before);
  });

  it("the client's spend policy refuses a blocked domain before anything is signed", async () => {
    const host = new URL(api.origin).host;
    const { pay, requests } = await officialClient({ blockedHosts: [host] });
    const before = await tokenBalanceUnits(test, payer.publicKey.toBase58());
    await expect(pay(`${api.origin}/report`)).rejects.toThrow(/blocked domain/);
    expect(requests.some((r) => r.headers.has("payment-signature"))).toBe(false);
    expect(await tokenBalanceUnits(test, payer.publicKey.toBase58())).toBe(before);
  });

  it("accepts an x402 v1 X-PAYMENT made by the official v1 scheme, answered with X-PAYMENT-RESPONSE", async () => {
    const signer = await createKeyPairSignerFromBytes(payer.secretKey);
    const scheme = new ExactSvmSchemeV1(signer, { rpcUrl: test.system.localnet.info.rpcUrl });
    const requirement = {
      scheme: "exact",
      network: "solana-devnet",
      maxAmountRequired: PRICE.toString(),
      resource: `${api.origin}/v1-report`,
      description: "",
      mimeType: "application/json",
      payTo,
      maxTimeoutSeconds: 60,
      asset: test.system.token,
      extra: { feePayer: test.system.feePayer.publicKey.toBase58() },
    };
    const payload = await scheme.createPaymentPayload(1, requirement as never);
    const header = Buffer.from(JSON.stringify({ ...payload, scheme: "exact", network: "solana-devnet" })).toString("base64");
    const before = await tokenBalanceUnits(test, payTo);
    const response = await fetch(`${api.origin}/v1-report`, { headers: { "x-payment": header } });
    expect(response.status).toBe(200);
    const settle = decode(response.headers.get("x-payment-response"));
    expect(settle).toMatchObject({ success: true, network: "solana-devnet", payer: payer.publicKey.toBase58() });
    expect(paid.at(-1)).toMatchObject({ standard: "x402-v1", amountUnits: PRICE });
    expect(await tokenBalanceUnits(test, payTo)).toBe(before + PRICE);
    await verifiedRecord(test, settle.transaction as string);
  });

  it("the official HTTPFacilitatorClient reads the gateway's standard facilitator API and verifies with it", async () => {
    const facilitator = new HTTPFacilitatorClient({
      url: `${test.system.apiUrl}/v1/x402/facilitator`,
      createAuthHeaders: async () => {
        const headers = { Authorization: `Bearer ${sellerKey}` };
        return { verify: headers, settle: headers, supported: headers };
      },
    });
    const supported = await facilitator.getSupported();
    expect(supported.kinds).toContainEqual({
      x402Version: 2,
      scheme: "exact",
      network: DEVNET,
      extra: { feePayer: test.system.feePayer.publicKey.toBase58() },
    });
    expect(supported.signers).toEqual({ "solana:*": [test.system.feePayer.publicKey.toBase58()] });

    // verify with the official bodies: the official client's payload for our requirement, then for other terms.
    const required = decode((await fetch(`${api.origin}/verify-me`)).headers.get("payment-required")) as never;
    const signer = await createKeyPairSignerFromBytes(payer.secretKey);
    const client = new x402Client().register(DEVNET, new ExactSvmScheme(signer, { rpcUrl: test.system.localnet.info.rpcUrl }));
    client.setSpendControls(false);
    const payload = await client.createPaymentPayload(required);
    const requirement = payload.accepted;
    expect(await facilitator.verify(payload, requirement)).toMatchObject({ isValid: true, payer: payer.publicKey.toBase58() });
    const dearer = { ...requirement, amount: (PRICE + 1n).toString() };
    expect(await facilitator.verify({ ...payload, accepted: dearer }, dearer)).toMatchObject({
      isValid: false,
      invalidReason: "invalid_exact_svm_payload_amount_mismatch",
    });
    const otherFeePayer = { ...requirement, extra: { feePayer: payer.publicKey.toBase58() } };
    expect(await facilitator.verify({ ...payload, accepted: otherFeePayer }, otherFeePayer)).toMatchObject({
      isValid: false,
      invalidReason: "invalid_exact_svm_fee_payer_not_managed_by_facilitator",
    });
  });
});

describe("the service's own SOL", () => {
  it("the fee payer and the authority paid exactly the fees and rent of the transactions that landed", async () => {
    await expectServiceSolSpentOnLandedOnly(test, startSol);
  });
});
