/**
 * Interop, their client to our server (MPP): the OFFICIAL MPP client (`mppx` with the `@solana/mpp` `solana` charge
 * method, a `@solana/kit` signer holding tokens on our local ledger) pays an API protected by OUR
 * `mppMiddleware`: one 402 carries the spec's MPP body and a `WWW-Authenticate: Payment` `solana`
 * / `charge` challenge (pull mode, the gateway's fee payer as `feePayerKey`); the credential is
 * settled by the gateway (co-signed, sent, recorded on payment_ledger referencing the transfer,
 * verified by the indexer) before the handler runs, answered with `Payment-Receipt`. The packages
 * are used unmodified, configured only through public options (the signer, the local ledger's RPC
 * URL, `onChallenge` as the client's spend policy, no fetch polyfill).
 */
import { createKeyPairSignerFromBytes } from "@solana/kit";
import { solana } from "@solana/mpp/client";
import type { Keypair } from "@solana/web3.js";
import { Challenge, Receipt } from "mppx";
import { Mppx } from "mppx/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type MppPayment, mppMiddleware, type NodeRequest } from "../../sdk/src/server/index.js";
import { serve, type Served, startTestSystem, type TestSystem, tokenBalanceUnits } from "../sdk/server-support.js";
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

const PRICE = 40_000n;
const SECRET = "interop-test-challenge-secret-0123456789";

let test: TestSystem;
let sellerKey: string;
let payTo: string;
let api: Served;
let payer: Keypair;
const paid: MppPayment[] = [];

/** The service keys' SOL once set up: the last test checks what the suite's payments cost them. */
let startSol: Awaited<ReturnType<typeof serviceSol>>;

beforeAll(async () => {
  test = await startTestSystem();
  ({ sellerKey, payTo, payer } = await sellerAndBuyer(test));
  const middleware = mppMiddleware({
    amount: PRICE,
    paymentMethods: ["stablecoin"],
    sessionSupported: true,
    payTo,
    facilitatorUrl: test.system.apiUrl,
    apiKey: sellerKey,
    challengeSecret: SECRET,
  });
  api = await serveBehind(middleware, paid);
  startSol = await serviceSol(test);
}, 180_000);

afterAll(async () => {
  await api?.close();
  await test?.stop();
});

/** The official client as a buyer configures it; `onChallenge` is its spend policy (throwing refuses). */
async function officialClient(options: { capUnits?: bigint; blockedRealms?: string[] } = {}) {
  const signer = await createKeyPairSignerFromBytes(payer.secretKey);
  const recorder = recordingFetch();
  const cap = options.capUnits ?? 1_000_000n;
  const blocked = options.blockedRealms ?? [];
  const mppx = Mppx.create({
    methods: [solana.charge({ signer, rpcUrl: test.system.localnet.info.rpcUrl })],
    fetch: recorder.fetch,
    polyfill: false,
    onChallenge: async (challenge) => {
      const amount = BigInt((challenge.request as { amount: string }).amount);
      if (amount > cap) throw new Error(`per-call limit: ${amount} is over ${cap}`);
      if (blocked.includes(challenge.realm)) throw new Error(`blocked domain ${challenge.realm}`);
      return undefined;
    },
  });
  return { pay: mppx.fetch, requests: recorder.requests };
}

describe("the official MPP client (mppx + @solana/mpp) pays an API behind our mppMiddleware", () => {
  it("answers one 402 with the spec's MPP body, an HMAC-bound solana charge challenge and PAYMENT-REQUIRED", async () => {
    const response = await fetch(`${api.origin}/report`);
    expect(response.status).toBe(402);
    const body = (await response.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ protocol: "mpp/1.0", amount: { value: "0.04", currency: "USDC" }, paymentMethods: ["stablecoin"] });
    expect(response.headers.get("payment-required")).not.toBeNull();
    const [challenge, ...others] = Challenge.fromResponseList(response);
    expect(others).toHaveLength(0);
    expect(challenge).toMatchObject({ method: "solana", intent: "charge", realm: new URL(api.origin).host });
    expect(challenge!.request).toEqual({
      amount: PRICE.toString(),
      currency: test.system.token,
      recipient: payTo,
      methodDetails: {
        network: "localnet",
        decimals: 6,
        tokenProgram: "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA",
        feePayer: true,
        feePayerKey: test.system.feePayer.publicKey.toBase58(),
      },
    });
    // mppx's own HMAC binding of the seven slots verifies our id: the challenge is bound.
    expect(Challenge.verify(challenge!, { secretKey: SECRET })).toBe(true);
    expect(Challenge.verify(challenge!, { secretKey: `${SECRET}-other` })).toBe(false);
    expect(Date.parse(challenge!.expires!)).toBeGreaterThan(Date.now());
  });

  it("pays: 200 with the paid body and Payment-Receipt, exact balances, the record verified in the index", async () => {
    const before = {
      payer: await tokenBalanceUnits(test, payer.publicKey.toBase58()),
      payee: await tokenBalanceUnits(test, payTo),
      feePayerSol: await solLamports(test, test.system.feePayer.publicKey),
    };
    const { pay, requests } = await officialClient();
    const response = await pay(`${api.origin}/report`);
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ data: "paid content" });
    expect(response.headers.get("cache-control")).toBe("private");

    const receipt = Receipt.fromResponse(response);
    expect(receipt).toMatchObject({ method: "solana", status: "success" });
    const transfer = receipt.reference;
    expect(paid.at(-1)).toMatchObject({
      protocol: "mpp",
      standard: "mpp-solana-charge",
      txHash: transfer,
      sessionId: null,
      amountUnits: PRICE,
    });
    expect(requests.filter((r) => (r.headers.get("authorization") ?? "").startsWith("Payment "))).toHaveLength(1);

    expect(await tokenBalanceUnits(test, payer.publicKey.toBase58())).toBe(before.payer - PRICE);
    expect(await tokenBalanceUnits(test, payTo)).toBe(before.payee + PRICE);
    expect(await solLamports(test, payer.publicKey)).toBe(0);
    expect(await solLamports(test, test.system.feePayer.publicKey)).toBeLessThan(before.feePayerSol);

    // Recorded once, verified, and seen by the seller in GraphQL as received by its agent from a
    // wallet the gateway does not hold.
    await expectAttestedRecord(test, {
      transfer,
      payer: payer.publicKey.toBase58(),
      payTo,
      amountUnits: PRICE,
      protocol: "mpp",
      recordTxHash: paid.at(-1)!.recordTxHash,
      seller: { apiKey: sellerKey, agentId: "till" },
      endpoint: `${new URL(api.origin).host}/report`,
    });
  });

  it("refuses a replayed credential (its transaction is consumed): nothing moves, nothing more is recorded", async () => {
    const { pay, requests } = await officialClient();
    const first = await pay(`${api.origin}/replayed`);
    expect(first.status).toBe(200);
    const transfer = Receipt.fromResponse(first).reference;
    await verifiedRecord(test, transfer);
    const credential = requests.find((r) => (r.headers.get("authorization") ?? "").startsWith("Payment "))!.headers.get("authorization")!;

    const runs = paid.length;
    const balances = [await tokenBalanceUnits(test, payer.publicKey.toBase58()), await tokenBalanceUnits(test, payTo)];
    const replay = await fetch(`${api.origin}/replayed`, { headers: { authorization: credential } });
    expect(replay.status).toBe(402);
    expect(replay.headers.get("x-mpp-error")).toBe("duplicate_settlement");
    expect(replay.headers.get("www-authenticate")).toMatch(/^Payment /);
    expect(paid.length).toBe(runs);
    expect([await tokenBalanceUnits(test, payer.publicKey.toBase58()), await tokenBalanceUnits(test, payTo)]).toEqual(balances);
    expect(await recordsReferencing(test, transfer)).toBe(1);
  });

  it("refuses a credential for another route's terms, and one whose challenge this server did not issue", async () => {
    const cheap = mppMiddleware({
      amount: 1n,
      paymentMethods: ["stablecoin"],
      sessionSupported: false,
      payTo,
      facilitatorUrl: test.system.apiUrl,
      apiKey: sellerKey,
      challengeSecret: SECRET,
    });
    const cheapApi = await serve((req, res) => cheap(req as NodeRequest, res, () => res.end("cheap")));
    try {
      // Same host (realm), same secret: only the request terms differ.
      const signer = await createKeyPairSignerFromBytes(payer.secretKey);
      const method = solana.charge({ signer, rpcUrl: test.system.localnet.info.rpcUrl });
      const challengeFor = async (url: string) => Challenge.fromResponseList(await fetch(url))[0]!;
      const cheapChallenge = await challengeFor(`${cheapApi.origin}/x`);
      const credential = await method.createCredential({ challenge: cheapChallenge as never });
      const before = await tokenBalanceUnits(test, payer.publicKey.toBase58());
      const wrongRoute = await fetch(`${api.origin}/report`, { headers: { authorization: credential } });
      expect(wrongRoute.status).toBe(402);
      expect(wrongRoute.headers.get("x-mpp-error")).toBe("invalid-challenge");

      const { id: _ours, ...terms } = await challengeFor(`${api.origin}/report`);
      const forged = Challenge.from({ ...terms, secretKey: "someone-elses-secret-0123456789abcdef" });
      const forgedCredential = await method.createCredential({ challenge: forged as never });
      const refused = await fetch(`${api.origin}/report`, { headers: { authorization: forgedCredential } });
      expect(refused.status).toBe(402);
      expect(refused.headers.get("x-mpp-error")).toBe("invalid-challenge");
      expect(await tokenBalanceUnits(test, payer.publicKey.toBase58())).toBe(before);
    } finally {
      await cheapApi.close();
    }
  });

  it("the client's spend policy refuses over its per-call limit before anything is signed", async () => {
    const { pay, requests } = await officialClient({ capUnits: PRICE - 1n });
    const before = await tokenBalanceUnits(test, payer.publicKey.toBase58());
    await expect(pay(`${api.origin}/report`)).rejects.toThrow(/per-call limit/);
    expect(requests.some((r) => r.headers.has("authorization"))).toBe(false);
    expect(await tokenBalanceUnits(test, payer.publicKey.toBase58())).toBe(before);
  });

  it("the client's spend policy refuses a blocked domain before anything is signed", async () => {
    const { pay, requests } = await officialClient({ blockedRealms: [new URL(api.origin).host] });
    const before = await tokenBalanceUnits(test, payer.publicKey.toBase58());
    await expect(pay(`${api.origin}/report`)).rejects.toThrow(/blocked domain/);
    expect(requests.some((r) => r.headers.has("authorization"))).toBe(false);
    expect(await tokenBalanceUnits(test, payer.publicKey.toBase58())).toBe(before);
  });
});

describe("the service's own SOL", () => {
  it("the fee payer and the authority paid exactly the fees and rent of the transactions that landed", async () => {
    await expectServiceSolSpentOnLandedOnly(test, startSol);
  });
});
