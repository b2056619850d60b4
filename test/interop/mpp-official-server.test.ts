/**
 * Interop, our client to their server (MPP): our `Client.pay` (the gateway signs for the agent) against an `mppx`
 * server with `@solana/mpp`'s `solana` charge method, unmodified and configured only through its
 * public options (recipient, the local mint and its decimals, network `localnet`, the local RPC
 * URL). Pull mode: the credential is `{type: "transaction"}`. Two servers: one that sponsors the
 * fee (`signer`: it co-signs as fee payer), one that does not (the gateway's service authority
 * then pays the fee: the agent's wallet holds no SOL). The whole system runs on loopback.
 */
import { createServer } from "node:http";
import { createKeyPairSignerFromBytes } from "@solana/kit";
import { Mppx as MppxServer, solana as solanaServer } from "@solana/mpp/server";
import type { Keypair, PublicKey } from "@solana/web3.js";
import bs58 from "bs58";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sweepReservations } from "../../api/gateway/loops/sweeper.js";
import { PolicyViolationError } from "../../sdk/src/index.js";
import { recordedPayment } from "../support/ledger-events.js";
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

const AMOUNT = 40_000n;

let setup: InteropSetup;
let sponsored = "";
let unsponsored = "";
let payTo: PublicKey;
let sponsorKey: Keypair;
const seen: Seen[] = [];

async function chargeServer(sponsor: Keypair | undefined): Promise<string> {
  const { system } = setup.test;
  const mppx = MppxServer.create({
    methods: [
      solanaServer.charge({
        recipient: payTo.toBase58(),
        currency: system.token,
        decimals: system.localnet.info.decimals,
        network: "localnet",
        rpcUrl: system.localnet.info.rpcUrl,
        ...(sponsor === undefined ? {} : { signer: await createKeyPairSignerFromBytes(sponsor.secretKey) }),
      }),
    ],
    secretKey: "interop-test-secret-key-0123456789abcdef-0123",
    realm: "127.0.0.1",
  });
  const charge = MppxServer.toNodeListener(mppx.charge({ amount: AMOUNT.toString() }));
  return listen(
    setup,
    createServer(async (req, res) => {
      const result = await charge(req, res);
      if (result.status === 402) return;
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ report: "paid by MPP" }));
    }),
  );
}

beforeAll(async () => {
  setup = await startInterop();
  payTo = (await payeeWallet(setup)).publicKey;
  sponsorKey = await feePayer(setup);
  sponsored = await chargeServer(sponsorKey);
  unsponsored = await chargeServer(undefined);
}, 180_000);

afterAll(async () => {
  await stopInterop(setup);
});

function client(agentId: string, usdc: number) {
  return payingClient(setup, agentId, usdc, { origin: () => [sponsored, unsponsored], seen });
}

describe("Client.pay against an mppx server with @solana/mpp's charge method", () => {
  it("pays (server sponsors the fee): 200 with the paid body, exact balances, the record referencing the transfer, verified", async () => {
    const { client: payer, address } = await client("mpp-payer", 1);
    const authority = setup.test.system.ledger.authority.publicKey;
    const before = {
      payer: await tokens(setup, address),
      payee: await tokens(setup, payTo),
      sponsor: await lamports(setup, sponsorKey.publicKey),
      authority: await lamports(setup, authority),
    };
    seen.length = 0;

    const result = await payer.pay({ endpoint: `${sponsored}/report` });
    if (!result.paid) throw new Error(`not paid: ${JSON.stringify(result)}`);
    expect(result).toMatchObject({
      status: 200,
      protocol: "mpp",
      format: "mpp",
      data: { report: "paid by MPP" },
      amountPaid: { usdc: 0.04 },
    });
    expect(seen.map((s) => [s.method, s.path, paymentHeaders(s)])).toEqual([
      ["GET", "/report", []],
      ["GET", "/report", ["authorization"]],
    ]);
    expect(seen[1]!.headers.authorization).toMatch(/^Payment [A-Za-z0-9_-]+$/);
    expect(result.receipt).toMatchObject({ header: "Payment-Receipt", success: true, transaction: result.settlementTxHash });
    expect(result.receipt?.value).toMatchObject({ method: "solana", status: "success", reference: result.settlementTxHash });

    expect(before.payer - (await tokens(setup, address))).toBe(AMOUNT);
    expect((await tokens(setup, payTo)) - before.payee).toBe(AMOUNT);
    const settlement = await setup.test.connection.getTransaction(result.settlementTxHash!, {
      commitment: "confirmed",
      maxSupportedTransactionVersion: 0,
    });
    expect(settlement?.meta?.err).toBeNull();
    // The server's signer paid the transfer's fee; the agent's wallet holds no SOL.
    expect(settlement?.transaction.message.staticAccountKeys[0]?.toBase58()).toBe(sponsorKey.publicKey.toBase58());
    expect(before.sponsor - (await lamports(setup, sponsorKey.publicKey))).toBe(BigInt(settlement!.meta!.fee));
    expect(await lamports(setup, address)).toBe(0n);

    const recorded = await recordedPayment(setup.test.connection, result.txHash);
    expect(recorded).toMatchObject({ amountUnits: AMOUNT, protocol: "mpp", atomic: false, parent: null });
    expect(recorded.payer.toBase58()).toBe(address);
    expect(recorded.payee.toBase58()).toBe(payTo.toBase58());
    expect(bs58.encode(recorded.settlementReference!)).toBe(result.settlementTxHash);

    expect(await reservationsOf(setup, "mpp-payer")).toEqual([
      expect.objectContaining({ status: "settled", tx_hash: result.txHash, amount_units: AMOUNT.toString() }),
    ]);
    expect(await transfersOf(setup, "mpp-payer")).toEqual([
      expect.objectContaining({ status: "recorded", format: "mpp", settlement_tx: result.settlementTxHash, record_tx: result.txHash }),
    ]);
    expect((await payer.policies.get()).usedToday).toEqual({ usdc: 0.04 });
    const row = await indexed(setup, result.txHash, (r) => r.settlement_status !== null);
    expect(row).toMatchObject({ protocol: "mpp", settlement_reference: result.settlementTxHash, settlement_status: "verified" });
  });

  it("pays a server that does not sponsor the fee: the gateway's authority pays it, never the agent", async () => {
    const { client: payer, address } = await client("mpp-self-fee", 1);
    const authority = setup.test.system.ledger.authority.publicKey;
    const result = await payer.pay({ endpoint: `${unsponsored}/report` });
    if (!result.paid) throw new Error("not paid");
    expect(result).toMatchObject({ status: 200, data: { report: "paid by MPP" } });
    const settlement = await setup.test.connection.getTransaction(result.settlementTxHash!, {
      commitment: "confirmed",
      maxSupportedTransactionVersion: 0,
    });
    expect(settlement?.transaction.message.staticAccountKeys[0]?.toBase58()).toBe(authority.toBase58());
    expect(await lamports(setup, address)).toBe(0n);
    expect(await tokens(setup, address)).toBe(1_000_000n - AMOUNT);
    // The gateway knew the transaction's id when it signed it.
    const [transfer] = await transfersOf(setup, "mpp-self-fee");
    expect(transfer).toMatchObject({ status: "recorded", settlement_tx: result.settlementTxHash });
    const recorded = await recordedPayment(setup.test.connection, result.txHash);
    expect(bs58.encode(recorded.settlementReference!)).toBe(result.settlementTxHash);
  });

  it("picks by the agent's protocol preference when a payee offers x402 v2 and MPP", async () => {
    await client("mpp-chooser", 1);
    const challenge = await fetch(`${sponsored}/report`);
    const header = challenge.headers.get("www-authenticate")!;
    const param = (name: string) => new RegExp(`${name}="([^"]*)"`).exec(header)![1]!;
    const mppChallenges = [
      {
        id: param("id"),
        realm: param("realm"),
        method: param("method"),
        intent: param("intent"),
        request: param("request"),
        expires: param("expires"),
      },
    ];
    const x402v2 = {
      x402Version: 2,
      resource: { url: `${sponsored}/report` },
      accepts: [
        {
          scheme: "exact",
          network: "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1",
          amount: "30000",
          asset: setup.test.system.token,
          payTo: payTo.toBase58(),
          maxTimeoutSeconds: 60,
          extra: { feePayer: sponsorKey.publicKey.toBase58() },
        },
      ],
    };
    const authorize = (extra: Record<string, unknown>) =>
      rest(setup.test.system, setup.apiKey, "POST", "/v1/agents/mpp-chooser/payments/authorize", {
        endpoint: `${sponsored}/report`,
        x402v2,
        mppChallenges,
        ...extra,
      });
    // Spec 1 routing: x402 unless the preference says mpp (the request's, else the policy's).
    expect((await authorize({})).body).toMatchObject({ protocol: "x402", format: "x402-v2", amount: { usdc: 0.03 } });
    expect((await authorize({ protocolPreference: "mpp" })).body).toMatchObject({ protocol: "mpp", format: "mpp", amount: { usdc: 0.04 } });
    await rest(setup.test.system, setup.apiKey, "PUT", "/v1/policies/mpp-chooser", { protocolPreference: "mpp" });
    expect((await authorize({})).body).toMatchObject({ protocol: "mpp", format: "mpp" });
    // Nothing payable at all: refused with the reasons, nothing reserved.
    const foreign = await rest(setup.test.system, setup.apiKey, "POST", "/v1/agents/mpp-chooser/payments/authorize", {
      endpoint: `${sponsored}/report`,
      x402v2: { ...x402v2, accepts: [{ ...x402v2.accepts[0], network: "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp" }] },
    });
    expect(foreign.status).toBe(400);
    expect(foreign.body).toMatchObject({
      errorClass: "PaymentProtocolError",
      skipped: [expect.stringMatching(/not this gateway's ledger/)],
    });
    expect(await reservationsOf(setup, "mpp-chooser")).toHaveLength(3);
  });

  it("refuses over the per-call limit before anything is signed", async () => {
    const payer = await client("mpp-capped", 1);
    await payer.client.policies.set({ perCallLimit: { usdc: 0.03 } });
    await expectRefusedBeforeSigning(setup, seen, payer, "mpp-capped", `${sponsored}/report`, (error) =>
      expect(error).toBeInstanceOf(PolicyViolationError),
    );
  });

  it("refuses a blocked domain before anything is signed", async () => {
    const payer = await client("mpp-blocked", 1);
    await payer.client.policies.set({ blockedDomains: ["127.0.0.1"] });
    await expectRefusedBeforeSigning(setup, seen, payer, "mpp-blocked", `${sponsored}/report`, (error) =>
      expect(error).toMatchObject({ name: "DomainNotAllowedError", reasonCode: "domain_blocked" }),
    );
    // The client judged the domain before the first request: the blocked server received nothing.
    expect(seen).toEqual([]);
  });

  it("a replayed credential is refused and moves nothing", async () => {
    const { client: payer, address } = await client("mpp-replayer", 1);
    seen.length = 0;
    const result = await payer.pay({ endpoint: `${sponsored}/report` });
    expect(result.paid).toBe(true);
    const credential = seen.find((s) => s.headers.authorization !== undefined)!.headers.authorization!;
    const balances = { payer: await tokens(setup, address), payee: await tokens(setup, payTo) };

    // mppx answers a credential whose transaction fails simulation (here: AlreadyProcessed) as an
    // internal verification error (500): refused either way, no receipt, no content.
    const replay = await fetch(`${sponsored}/report`, { headers: { authorization: credential } });
    expect(replay.ok).toBe(false);
    expect(await replay.text()).not.toContain("paid by MPP");
    expect(replay.headers.get("payment-receipt")).toBeNull();
    expect(await tokens(setup, address)).toBe(balances.payer);
    expect(await tokens(setup, payTo)).toBe(balances.payee);
    expect((await payer.policies.get()).usedToday).toEqual({ usdc: 0.04 });
  });

  it("an expired challenge is not paid; a credential never presented is released once its blockhash expired", async () => {
    await client("mpp-unused", 1);
    const challenge = await fetch(`${sponsored}/report`);
    expect(challenge.status).toBe(402);
    const header = challenge.headers.get("www-authenticate")!;
    const param = (name: string) => new RegExp(`${name}="([^"]*)"`).exec(header)![1]!;
    const params = { id: param("id"), realm: param("realm"), method: param("method"), intent: param("intent"), request: param("request") };
    const expired = await rest(setup.test.system, setup.apiKey, "POST", "/v1/agents/mpp-unused/payments/authorize", {
      endpoint: `${sponsored}/report`,
      mppChallenges: [{ ...params, expires: "2020-01-01T00:00:00Z" }],
    });
    expect(expired.status).toBe(400);
    expect(expired.body.detail).toMatch(/expired/);

    const authorized = await rest(setup.test.system, setup.apiKey, "POST", "/v1/agents/mpp-unused/payments/authorize", {
      endpoint: `${sponsored}/report`,
      mppChallenges: [{ ...params, expires: param("expires") }],
    });
    expect(authorized.status, authorized.text).toBe(200);
    expect(authorized.body).toMatchObject({
      protocol: "mpp",
      format: "mpp",
      headers: { Authorization: expect.stringMatching(/^Payment /) },
    });
    const lastValid = Number(authorized.body.transfer.lastValidBlockHeight);
    while ((await setup.test.connection.getBlockHeight("confirmed")) <= lastValid) await new Promise((r) => setTimeout(r, 250));
    await sweepReservations(
      setup.test.system.pool,
      { agents: setup.test.system.wallets, transfers: setup.test.system.transfers },
      new Date(),
    );
    expect(await transfersOf(setup, "mpp-unused")).toEqual([expect.objectContaining({ status: "expired" })]);
    expect(await reservationsOf(setup, "mpp-unused")).toEqual([expect.objectContaining({ status: "released" })]);
    // Too late to pay with it (BlockhashNotFound at the server's simulation): refused.
    const late = await fetch(`${sponsored}/report`, { headers: authorized.body.headers });
    expect(late.ok).toBe(false);
    expect(late.headers.get("payment-receipt")).toBeNull();
  }, 60_000);
});
