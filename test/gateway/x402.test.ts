/**
 * x402 end to end: a paid API on loopback answers 402 with the spec body, the agent signs a
 * PaymentPayload, and our facilitator verifies it and settles through the REAL payment_ledger
 * program on a local ledger, with nonces claimed in a REAL Postgres.
 */
import { Keypair } from "@solana/web3.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type PaymentPayload,
  type PaymentRequirement,
  pruneExpiredNonces,
  signPaymentPayload,
  X402Facilitator,
} from "../../api/gateway/x402/index.js";
import { type AgentSigner, keypairSigner } from "../../api/gateway/chain/index.js";
import { sweepReservations } from "../../api/gateway/loops/sweeper.js";
import { endpointHash, type PaymentRecorded, PAYMENT_LEDGER_PROGRAM_ID } from "../../programs/payment_ledger/ts/index.js";
import { type AgentWallet, createAgentWallet, type LedgerAccess, ledgerAccess, tokenBalanceUnits } from "../../scripts/agent-wallets.js";
import { type Localnet, startLocalnet } from "../../scripts/localnet.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { recordedPayment } from "../support/ledger-events.js";
import { LedgerSettler } from "./support/ledger-settler.js";
import { type PaidApi, startPaidApi, X_PAYMENT_ERROR } from "./support/paid-api.js";
import { payX402, retryX402 } from "./support/paying-client.js";

const USDC = 1_000_000n;
const NETWORK = "solana-localnet";
const PRICE_UNITS = 12_345n;

let localnet: Localnet;
let ledger: LedgerAccess;
let db: FreshDatabase;
let settler: LedgerSettler;
let facilitator: X402Facilitator;
let api: PaidApi;
let service: AgentWallet;
let agent: AgentWallet;
let signer: AgentSigner;
let requirement: PaymentRequirement;
let now = new Date();

beforeAll(async () => {
  [localnet, db] = await Promise.all([startLocalnet(), createFreshDatabase()]);
  ledger = ledgerAccess(localnet);
  settler = new LedgerSettler(ledger);
  [service, agent] = await Promise.all([createAgentWallet(ledger), createAgentWallet(ledger, { usdcUnits: 10n * USDC })]);
  settler.registerPayee(service);
  settler.registerAgent("agent-1", agent);
  signer = keypairSigner(agent.keypair);
  facilitator = new X402Facilitator({
    programId: PAYMENT_LEDGER_PROGRAM_ID,
    pool: db.pool,
    settler,
    agents: settler,
    network: NETWORK,
    token: localnet.info.mint.toBase58(),
    clock: () => now,
  });
  const terms = {
    scheme: "exact" as const,
    network: NETWORK,
    token: localnet.info.mint.toBase58(),
    amountUnits: PRICE_UNITS,
    payTo: service.publicKey.toBase58(),
  };
  api = await startPaidApi(() => ({ x402: { facilitator, terms } }));
  requirement = { ...terms, resource: `${api.origin}/x402/quote` };
});

afterAll(async () => {
  await api?.close();
  await db?.drop();
  await localnet?.stop();
});

const paymentEvent = (txHash: string): Promise<PaymentRecorded> => recordedPayment(ledger.provider.connection, txHash);

const sign = (overrides: Partial<PaymentRequirement> = {}, options: Parameters<typeof signPaymentPayload>[2] = {}) =>
  signPaymentPayload(signer, { ...requirement, ...overrides }, { now, ...options });

describe("x402 facilitator", () => {
  it("sign → 402 retry → verify → settle: the ledger records the payment and the tokens move atomically", async () => {
    const before = await tokenBalanceUnits(ledger.provider, agent.tokenAccount);
    const paid = await payX402(`${api.origin}/x402/quote`, signer);
    expect(paid.status).toBe(200);
    expect(paid.body.data).toBe("paid content of /x402/quote");
    expect(paid.txHash).not.toBeNull();

    const event = await paymentEvent(paid.txHash!);
    expect(event.amountUnits).toBe(PRICE_UNITS);
    expect(event.payer.toBase58()).toBe(agent.publicKey.toBase58());
    expect(event.payee.toBase58()).toBe(service.publicKey.toBase58());
    expect(event.protocol).toBe("x402");
    expect(event.rail).toBe("stablecoin");
    expect(event.atomic).toBe(true);
    expect(Buffer.from(event.endpointHash)).toEqual(Buffer.from(endpointHash(`${api.origin}/x402/quote`)));
    expect(await tokenBalanceUnits(ledger.provider, agent.tokenAccount)).toBe(before - PRICE_UNITS);

    const { rows } = await db.pool.query("SELECT status, tx_hash FROM x402_nonces WHERE payer = $1 AND nonce = $2", [
      signer.address,
      paid.payload.payload.nonce,
    ]);
    expect(rows).toEqual([{ status: "settled", tx_hash: paid.txHash }]);
  });

  it("a valid payload verifies before anything is claimed", async () => {
    expect(await facilitator.verify(await sign(), requirement)).toEqual({ ok: true, payer: signer.address, agentId: "agent-1" });
  });

  it.each<[string, () => Promise<PaymentPayload>]>([
    ["invalid_signature", async () => ({ ...(await sign()), signature: (await sign()).signature })],
    ["network_mismatch", () => sign({ network: "solana-mainnet" })],
    ["token_mismatch", () => sign({ token: Keypair.generate().publicKey.toBase58() })],
    ["pay_to_mismatch", () => sign({ payTo: Keypair.generate().publicKey.toBase58() })],
    ["amount_mismatch", () => sign({ amountUnits: PRICE_UNITS - 1n })],
    ["expired", () => sign({}, { validUntilSeconds: Math.floor(now.getTime() / 1000) - 1 })],
    ["validity_too_long", () => sign({}, { validUntilSeconds: Math.floor(now.getTime() / 1000) + 3_600 })],
  ])("verify refuses with %s and nothing settles", async (reason, make) => {
    const settled = settler.requests.length;
    const payload = await make();
    expect(await facilitator.verify(payload, requirement)).toMatchObject({ ok: false, reason });
    expect(await facilitator.settle(payload, requirement)).toMatchObject({ ok: false, reason });
    expect(settler.requests.length).toBe(settled);
  });

  it("verify refuses a wallet the gateway does not hold with unknown_payer", async () => {
    const stranger = keypairSigner(Keypair.generate());
    const payload = await signPaymentPayload(stranger, requirement, { now });
    expect(await facilitator.verify(payload, requirement)).toMatchObject({ ok: false, reason: "unknown_payer" });
  });

  it("the resource server answers a refused payment with 402 and the reason", async () => {
    const payload = await sign({ amountUnits: 1n });
    const answer = await retryX402(`${api.origin}/x402/quote`, payload);
    expect(answer.status).toBe(402);
    expect(answer.headers.get(X_PAYMENT_ERROR)).toBe("amount_mismatch");
  });

  it("a replayed payload is refused with nonce_reused, by verify, settle and over HTTP", async () => {
    const payload = await sign();
    const first = await facilitator.settle(payload, requirement);
    expect(first.ok).toBe(true);
    const settled = settler.requests.length;
    expect(await facilitator.verify(payload, requirement)).toMatchObject({ ok: false, reason: "nonce_reused" });
    expect(await facilitator.settle(payload, requirement)).toMatchObject({ ok: false, reason: "nonce_reused" });
    const replay = await retryX402(requirement.resource, payload);
    expect(replay.status).toBe(402);
    expect(replay.headers.get(X_PAYMENT_ERROR)).toBe("nonce_reused");
    expect(settler.requests.length).toBe(settled);
  });

  it("20 concurrent replays of one payload settle exactly once", async () => {
    const before = await tokenBalanceUnits(ledger.provider, service.tokenAccount);
    const settled = settler.requests.length;
    const payload = await sign();
    const outcomes = await Promise.all(Array.from({ length: 20 }, () => facilitator.settle(payload, requirement)));
    const ok = outcomes.filter((outcome) => outcome.ok);
    expect(ok).toHaveLength(1);
    expect(outcomes.filter((outcome) => !outcome.ok && outcome.reason === "nonce_reused")).toHaveLength(19);
    expect(settler.requests.length).toBe(settled + 1);
    expect(await tokenBalanceUnits(ledger.provider, service.tokenAccount)).toBe(before + PRICE_UNITS);
  });

  it("a failed settlement keeps the nonce burned: the same payload never settles, a new one does", async () => {
    const payload = await sign();
    settler.failWith = new Error("ledger unavailable");
    try {
      expect(await facilitator.settle(payload, requirement)).toMatchObject({ ok: false, reason: "settlement_failed" });
    } finally {
      settler.failWith = null;
    }
    const { rows } = await db.pool.query("SELECT status, failure FROM x402_nonces WHERE nonce = $1", [payload.payload.nonce]);
    expect(rows).toEqual([{ status: "failed", failure: "ledger unavailable" }]);
    expect(await facilitator.settle(payload, requirement)).toMatchObject({ ok: false, reason: "nonce_reused" });
    expect((await facilitator.settle(await sign(), requirement)).ok).toBe(true);
  });

  it("a crash between claim and settlement leaves the claim: no second payment, and the sweeper fails it as abandoned", async () => {
    const payload = await sign();
    // What a process that died right after its claim leaves behind.
    await db.pool.query(
      `INSERT INTO x402_nonces (payer, nonce, agent_id, pay_to, amount_units, resource, expires_at, claimed_at)
       VALUES ($1, $2, 'agent-1', $3, $4, $5, to_timestamp($6), now() - interval '1 minute')`,
      [
        payload.payload.from,
        payload.payload.nonce,
        payload.payload.to,
        PRICE_UNITS.toString(),
        requirement.resource,
        payload.payload.validUntilSeconds,
      ],
    );
    const settled = settler.requests.length;
    expect(await facilitator.settle(payload, requirement)).toMatchObject({ ok: false, reason: "nonce_reused" });
    expect(settler.requests.length).toBe(settled);
    // Reconciliation is the sweeper's: no settlement row was ever prepared, so nothing can have
    // moved and the claim is failed once older than the grace, its nonce still burned.
    const swept = await sweepReservations(db.pool, { agents: settler }, new Date(), { claimGraceMs: 30_000 });
    expect(swept.claimsFailed).toBe(1);
    const { rows } = await db.pool.query("SELECT status, failure FROM x402_nonces WHERE nonce = $1", [payload.payload.nonce]);
    expect(rows).toEqual([{ status: "failed", failure: "abandoned: no settlement was prepared" }]);
    expect(await facilitator.settle(payload, requirement)).toMatchObject({ ok: false, reason: "nonce_reused" });
    expect(settler.requests.length).toBe(settled);
  });

  it("a settlement sent with an unknown outcome keeps the claim open with its transaction: no failure recorded, no second payment", async () => {
    const payload = await sign();
    const pending = Object.assign(new Error("payment sent and not confirmed yet"), {
      reason: "payment_pending",
      signature: "5".repeat(88),
    });
    settler.failWith = pending;
    try {
      expect(await facilitator.settle(payload, requirement)).toMatchObject({ ok: false, reason: "settlement_pending" });
    } finally {
      settler.failWith = null;
    }
    const { rows } = await db.pool.query("SELECT status, tx_hash FROM x402_nonces WHERE nonce = $1", [payload.payload.nonce]);
    expect(rows).toEqual([{ status: "claimed", tx_hash: pending.signature }]);
    const settled = settler.requests.length;
    expect(await facilitator.settle(payload, requirement)).toMatchObject({ ok: false, reason: "nonce_reused" });
    expect(settler.requests.length).toBe(settled);
  });

  it("nonces are pruned only once their payload can never verify again", async () => {
    const payload = await sign();
    expect((await facilitator.settle(payload, requirement)).ok).toBe(true);
    expect(await pruneExpiredNonces(db.pool, now)).toBe(0);
    const later = new Date((payload.payload.validUntilSeconds + 301) * 1000);
    expect(await pruneExpiredNonces(db.pool, later)).toBeGreaterThan(0);
    const { rows } = await db.pool.query("SELECT 1 FROM x402_nonces WHERE nonce = $1", [payload.payload.nonce]);
    expect(rows).toHaveLength(0);
    now = later;
    try {
      expect(await facilitator.verify(payload, requirement)).toMatchObject({ ok: false, reason: "expired" });
    } finally {
      now = new Date();
    }
  });
});
