/**
 * MPP end to end: paid APIs on loopback answer 402 with the spec's MPP body, the agent submits a
 * signed payment to the payment endpoint, our MPP service settles it on the chosen rail through
 * the REAL payment_ledger program (stablecoin: atomic transfer + record; card: the stand-in
 * processor, then a record with rail `card`), and sessions live hashed in a REAL Postgres.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readCardSettlementReference, StandInCardProcessor } from "../../api/gateway/card/index.js";
import {
  MppPaymentError,
  MppService,
  type MppServiceOptions,
  MppSessionError,
  signMppSubmission,
  submissionBody,
  X_MPP_SESSION,
} from "../../api/gateway/mpp/index.js";
import { type AgentSigner, keypairSigner } from "../../api/gateway/chain/index.js";
import { endpointHash, type PaymentRecorded, PAYMENT_LEDGER_PROGRAM_ID } from "../../programs/payment_ledger/ts/index.js";
import { type AgentWallet, createAgentWallet, type LedgerAccess, ledgerAccess, tokenBalanceUnits } from "../../scripts/agent-wallets.js";
import { type Localnet, startLocalnet } from "../../scripts/localnet.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { recordedPayment } from "../support/ledger-events.js";
import { LedgerSettler } from "./support/ledger-settler.js";
import { type PaidApi, type PaidApiRoutes, startPaidApi, X_MPP_ERROR } from "./support/paid-api.js";
import { payMpp } from "./support/paying-client.js";
import { MppSessions } from "../../sdk/src/sessions.js";

const USDC = 1_000_000n;
const PRICE_UNITS = 50_000n;
const TTL_SECONDS = 3_600;
const REFRESH_BEFORE_SECONDS = 300;

let localnet: Localnet;
let ledger: LedgerAccess;
let db: FreshDatabase;
let settler: LedgerSettler;
let service: AgentWallet;
let agent: AgentWallet;
let signer: AgentSigner;
const card = new StandInCardProcessor({ declinedCustomers: ["agent-declined"] });
const apis: PaidApi[] = [];
const services = new Map<PaidApi, MppService>();

interface Clock {
  now: Date;
}

async function paidApi(paymentMethods: string[], sessionSupported: boolean, clock: Clock = { now: new Date() }): Promise<PaidApi> {
  let mpp: MppService | undefined;
  const api = await startPaidApi((origin): PaidApiRoutes => {
    const options: MppServiceOptions = {
      pool: db.pool,
      settler,
      programId: PAYMENT_LEDGER_PROGRAM_ID,
      agents: settler,
      cardProcessor: card,
      serviceOrigin: origin,
      payee: service.publicKey.toBase58(),
      sessionTtlSeconds: TTL_SECONDS,
      refreshBeforeSeconds: REFRESH_BEFORE_SECONDS,
      clock: () => clock.now,
    };
    mpp = new MppService(options);
    return { mpp: { service: mpp, amountUnits: PRICE_UNITS, paymentMethods, sessionSupported } };
  });
  apis.push(api);
  services.set(api, mpp!);
  return api;
}

beforeAll(async () => {
  [localnet, db] = await Promise.all([startLocalnet(), createFreshDatabase()]);
  ledger = ledgerAccess(localnet);
  settler = new LedgerSettler(ledger);
  [service, agent] = await Promise.all([createAgentWallet(ledger), createAgentWallet(ledger, { usdcUnits: 10n * USDC })]);
  settler.registerPayee(service);
  settler.registerAgent("agent-1", agent);
  signer = keypairSigner(agent.keypair);
});

afterAll(async () => {
  await Promise.all(apis.map((api) => api.close()));
  await db?.drop();
  await localnet?.stop();
});

const paymentEvent = (txHash: string): Promise<PaymentRecorded> => recordedPayment(ledger.provider.connection, txHash);

describe("MPP rails, every one recorded by the program", () => {
  it("the stablecoin rail is the default: one atomic transfer + record with protocol mpp", async () => {
    const api = await paidApi(["card", "stablecoin"], true);
    const before = await tokenBalanceUnits(ledger.provider, agent.tokenAccount);
    const paid = await payMpp(`${api.origin}/mpp/report`, "agent-1", signer, new MppSessions());
    expect(paid.negotiated).toBe(true);
    expect(paid.body.data).toBe("paid content of /mpp/report");

    const event = await paymentEvent(paid.txHash);
    expect(event).toMatchObject({ protocol: "mpp", rail: "stablecoin", atomic: true, amountUnits: PRICE_UNITS, settlementReference: null });
    expect(event.payee.toBase58()).toBe(service.publicKey.toBase58());
    expect(Buffer.from(event.endpointHash)).toEqual(Buffer.from(endpointHash(`${api.origin}/mpp/report`)));
    expect(await tokenBalanceUnits(ledger.provider, agent.tokenAccount)).toBe(before - PRICE_UNITS);
  });

  it("the card rail is taken when no stablecoin rail is offered: authorized, recorded with rail card and the processor's reference, captured", async () => {
    const api = await paidApi(["lightning", "card"], true);
    const before = await tokenBalanceUnits(ledger.provider, agent.tokenAccount);
    const paid = await payMpp(`${api.origin}/mpp/card`, "agent-1", signer, new MppSessions());

    const event = await paymentEvent(paid.txHash);
    expect(event).toMatchObject({ protocol: "mpp", rail: "card", atomic: false, amountUnits: PRICE_UNITS });
    const reference = readCardSettlementReference(event.settlementReference!);
    expect(reference).toMatch(/^standin_auth_/);
    expect(card.lookup(reference)?.status).toBe("captured");
    // The card paid: the agent's stablecoin balance is untouched.
    expect(await tokenBalanceUnits(ledger.provider, agent.tokenAccount)).toBe(before);
    const { rows } = await db.pool.query("SELECT rail, status, card_reference, tx_hash FROM mpp_payments WHERE tx_hash = $1", [
      paid.txHash,
    ]);
    expect(rows).toEqual([{ rail: "card", status: "settled", card_reference: reference, tx_hash: paid.txHash }]);
  });

  it("a card session charges later calls on the card rail too, each with its own authorization", async () => {
    const api = await paidApi(["card"], true);
    const sessions = new MppSessions();
    const first = await payMpp(`${api.origin}/mpp/c1`, "agent-1", signer, sessions);
    const second = await payMpp(`${api.origin}/mpp/c2`, "agent-1", signer, sessions);
    expect(second.negotiated).toBe(false);
    const [a, b] = [await paymentEvent(first.txHash), await paymentEvent(second.txHash)];
    expect([a.rail, b.rail]).toEqual(["card", "card"]);
    const references = [readCardSettlementReference(a.settlementReference!), readCardSettlementReference(b.settlementReference!)];
    expect(new Set(references).size).toBe(2);
    expect(references.map((reference) => card.lookup(reference)?.status)).toEqual(["captured", "captured"]);
  });

  it("a declined card records nothing and the submission is refused with card_declined", async () => {
    const declined = await createAgentWallet(ledger, { airdropLamports: 0 });
    settler.registerAgent("agent-declined", declined);
    const api = await paidApi(["card"], true);
    const settled = settler.requests.length;
    await expect(payMpp(`${api.origin}/mpp/x`, "agent-declined", keypairSigner(declined.keypair), new MppSessions())).rejects.toThrow(
      /402 .*card_declined/,
    );
    expect(settler.requests.length).toBe(settled);
    const { rows } = await db.pool.query("SELECT status FROM mpp_payments WHERE agent_id = 'agent-declined'");
    expect(rows).toEqual([{ status: "failed" }]);
  });
});

describe("MPP settlement with an unknown outcome", () => {
  it("a card payment sent but not confirmed keeps its hold and its row open with the transaction, for reconciliation", async () => {
    const api = await paidApi(["card"], true);
    const request = api.mppRequest();
    const submission = await signMppSubmission(signer, request, { method: "card", resource: `${api.origin}/mpp/pending` });
    const pending = Object.assign(new Error("payment sent and not confirmed yet"), {
      reason: "payment_pending",
      signature: "4".repeat(88),
    });
    settler.failWith = pending;
    try {
      await expect(services.get(api)!.submitPayment(submission, request)).rejects.toMatchObject({ reason: "settlement_pending" });
    } finally {
      settler.failWith = null;
    }
    const { rows } = await db.pool.query<{ status: string; tx_hash: string; card_reference: string }>(
      "SELECT status, tx_hash, card_reference FROM mpp_payments WHERE tx_hash = $1",
      [pending.signature],
    );
    expect(rows.map((r) => [r.status, r.tx_hash])).toEqual([["authorized", pending.signature]]);
    // Not voided: the record may still land, and a voided hold would leave it unpaid.
    expect(card.lookup(rows[0]!.card_reference)?.status).toBe("authorized");
  });
});

describe("MPP submissions", () => {
  it.each<[string, Partial<{ method: string; amountUnits: bigint; resource: string; validUntilSeconds: number }>]>([
    ["method_not_offered", { method: "card" }],
    ["method_unsupported", { method: "lightning" }],
    ["amount_mismatch", { amountUnits: PRICE_UNITS - 1n }],
    ["resource_mismatch", { resource: "https://elsewhere.example/x" }],
    ["expired", { validUntilSeconds: Math.floor(Date.now() / 1000) - 1 }],
    ["validity_too_long", { validUntilSeconds: Math.floor(Date.now() / 1000) + 86_400 }],
  ])("are refused with %s before any money moves", async (reason, change) => {
    const api = await paidApi(["stablecoin", "lightning"], true);
    const request = api.mppRequest();
    const settled = settler.requests.length;
    const submission = await signMppSubmission(
      signer,
      { ...request, amountUnits: change.amountUnits ?? request.amountUnits },
      {
        method: change.method ?? "stablecoin",
        resource: change.resource ?? `${api.origin}/mpp/x`,
        ...(change.validUntilSeconds === undefined ? {} : { validUntilSeconds: change.validUntilSeconds }),
      },
    );
    const refusal = services.get(api)!.submitPayment(submission, request);
    await expect(refusal).rejects.toBeInstanceOf(MppPaymentError);
    await expect(refusal).rejects.toMatchObject({ reason });
    expect(settler.requests.length).toBe(settled);
  });

  it("a tampered submission fails its signature; a replayed one is refused with nonce_reused", async () => {
    const api = await paidApi(["stablecoin"], true);
    const request = api.mppRequest();
    const submission = await signMppSubmission(signer, request, { method: "stablecoin", resource: `${api.origin}/mpp/x` });
    const tampered = { ...submission, authorization: { ...submission.authorization, resource: `${api.origin}/mpp/y` } };
    await expect(services.get(api)!.submitPayment(tampered, request)).rejects.toMatchObject({ reason: "invalid_signature" });

    const post = () =>
      fetch(request.paymentEndpoint, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(submissionBody(submission)),
      });
    expect((await post()).status).toBe(200);
    const settled = settler.requests.length;
    const replay = await post();
    expect(replay.status).toBe(402);
    expect(replay.headers.get(X_MPP_ERROR)).toBe("nonce_reused");
    expect(settler.requests.length).toBe(settled);
  });

  it("10 concurrent submissions of one payment settle exactly once", async () => {
    const api = await paidApi(["stablecoin"], true);
    const request = api.mppRequest();
    const submission = await signMppSubmission(signer, request, { method: "stablecoin", resource: `${api.origin}/mpp/x` });
    const settled = settler.requests.length;
    const outcomes = await Promise.allSettled(Array.from({ length: 10 }, () => services.get(api)!.submitPayment(submission, request)));
    expect(outcomes.filter((outcome) => outcome.status === "fulfilled")).toHaveLength(1);
    const reasons = outcomes.flatMap((outcome) => (outcome.status === "rejected" ? [(outcome.reason as MppPaymentError).reason] : []));
    expect(reasons).toEqual(Array(9).fill("nonce_reused"));
    expect(settler.requests.length).toBe(settled + 1);
  });
});

describe("MPP sessions per agent per service", () => {
  it("a second payment reuses the session: no 402, no submission, one new charge recorded on the session's rail", async () => {
    const api = await paidApi(["stablecoin"], true);
    const sessions = new MppSessions();
    const settledBefore = settler.requests.length;
    const first = await payMpp(`${api.origin}/mpp/a`, "agent-1", signer, sessions);
    // The confirmed submission paid the first call: the retried request charges nothing more.
    expect(settler.requests.length).toBe(settledBefore + 1);
    expect({ ...api.counters }).toMatchObject({ mppChallenges: 1, mppSubmissions: 1, served: 1 });

    const second = await payMpp(`${api.origin}/mpp/b`, "agent-1", signer, sessions);
    expect(second.negotiated).toBe(false);
    expect(second.sessionId).toBe(first.sessionId);
    expect(second.txHash).not.toBe(first.txHash);
    expect({ ...api.counters }).toMatchObject({ mppChallenges: 1, mppSubmissions: 1, served: 2 });
    const event = await paymentEvent(second.txHash);
    expect(event).toMatchObject({ protocol: "mpp", rail: "stablecoin", amountUnits: PRICE_UNITS });
    expect(Buffer.from(event.endpointHash)).toEqual(Buffer.from(endpointHash(`${api.origin}/mpp/b`)));
  });

  it("near expiry a use refreshes the token; at expiry the token is refused and the agent negotiates again", async () => {
    const clock: Clock = { now: new Date() };
    const api = await paidApi(["stablecoin"], true, clock);
    const mpp = services.get(api)!;
    const sessions = new MppSessions();
    const url = `${api.origin}/mpp/life`;
    await payMpp(url, "agent-1", signer, sessions, () => clock.now);
    const original = sessions.get("agent-1", api.origin)!.token;

    // Inside the refresh window: the answer carries a successor, which the agent keeps.
    clock.now = new Date(clock.now.getTime() + (TTL_SECONDS - REFRESH_BEFORE_SECONDS + 10) * 1000);
    const refreshedCall = await payMpp(url, "agent-1", signer, sessions, () => clock.now);
    expect(refreshedCall.negotiated).toBe(false);
    const successor = sessions.get("agent-1", api.origin)!.token;
    expect(successor).not.toBe(original);
    expect(refreshedCall.headers.get(X_MPP_SESSION)).toBe(successor);
    const rows = await db.pool.query("SELECT id, refreshed_from, refreshed_at FROM mpp_sessions WHERE service_origin = $1 ORDER BY id", [
      api.origin,
    ]);
    expect(rows.rows).toHaveLength(2);
    expect(rows.rows[1].refreshed_from).toBe(rows.rows[0].id);
    expect(rows.rows[0].refreshed_at).not.toBeNull();
    // The old token keeps working until its own expiry (requests in flight never break) and refreshes only once.
    const stillValid = await mpp.useSession(original, { endpoint: url, amountUnits: PRICE_UNITS });
    expect(stillValid).toMatchObject({ charged: true, refreshed: false, token: original });

    // Past the original expiry: the old token is refused, typed; the successor still pays.
    clock.now = new Date(clock.now.getTime() + REFRESH_BEFORE_SECONDS * 1000);
    await expect(mpp.useSession(original, { endpoint: url, amountUnits: PRICE_UNITS })).rejects.toMatchObject({
      reason: "session_expired",
    });
    expect((await payMpp(url, "agent-1", signer, sessions, () => clock.now)).negotiated).toBe(false);

    // Past the successor's expiry too: the service answers 402 and the agent negotiates a new session.
    clock.now = new Date(clock.now.getTime() + TTL_SECONDS * 1000);
    const renewed = await payMpp(url, "agent-1", signer, sessions, () => clock.now);
    expect(renewed.negotiated).toBe(true);
    expect(api.counters.mppSubmissions).toBe(2);
  });

  it("unknown tokens, another service's tokens, and pricier calls are refused with typed errors", async () => {
    const apiA = await paidApi(["stablecoin"], true);
    const apiB = await paidApi(["stablecoin"], true);
    const sessions = new MppSessions();
    await payMpp(`${apiA.origin}/mpp/a`, "agent-1", signer, sessions);
    const token = sessions.get("agent-1", apiA.origin)!.token;
    const mppA = services.get(apiA)!;
    const mppB = services.get(apiB)!;
    const refusal = (promise: Promise<unknown>) => expect(promise).rejects.toBeInstanceOf(MppSessionError);
    await refusal(mppA.useSession("mpps_unknown", { endpoint: `${apiA.origin}/mpp/a`, amountUnits: PRICE_UNITS }));
    await expect(mppB.useSession(token, { endpoint: `${apiB.origin}/mpp/a`, amountUnits: PRICE_UNITS })).rejects.toMatchObject({
      reason: "session_unknown",
    });
    await expect(mppA.useSession(token, { endpoint: `${apiA.origin}/mpp/a`, amountUnits: PRICE_UNITS + 1n })).rejects.toMatchObject({
      reason: "session_amount_exceeded",
    });
    const answer = await fetch(`${apiA.origin}/mpp/a`, { headers: { [X_MPP_SESSION]: "mpps_unknown" } });
    expect(answer.status).toBe(402);
    expect(answer.headers.get(X_MPP_ERROR)).toBe("session_unknown");
  });

  it("a service without session support hands out a single-use token: it redeems its paid call once", async () => {
    const api = await paidApi(["stablecoin"], false);
    const sessions = new MppSessions();
    const first = await payMpp(`${api.origin}/mpp/once`, "agent-1", signer, sessions);
    expect(sessions.get("agent-1", api.origin)).toBeUndefined();
    const token = first.headers.get(X_MPP_SESSION)!;
    await expect(
      services.get(api)!.useSession(token, { endpoint: `${api.origin}/mpp/once`, amountUnits: PRICE_UNITS }),
    ).rejects.toMatchObject({
      reason: "session_exhausted",
    });
    expect((await payMpp(`${api.origin}/mpp/once`, "agent-1", signer, sessions)).negotiated).toBe(true);
  });

  it("the database holds only sha256 of each token, never the token", async () => {
    const api = await paidApi(["stablecoin"], true);
    const sessions = new MppSessions();
    const paid = await payMpp(`${api.origin}/mpp/secret`, "agent-1", signer, sessions);
    const token = paid.headers.get(X_MPP_SESSION)!;
    expect(token).toMatch(/^mpps_[A-Za-z0-9_-]{43}$/);
    const hashed = await db.pool.query("SELECT id FROM mpp_sessions WHERE token_sha256 = sha256(convert_to($1, 'UTF8'))", [token]);
    expect(hashed.rows).toHaveLength(1);
    for (const table of ["mpp_sessions", "mpp_payments", "x402_nonces"]) {
      const clear = await db.pool.query(`SELECT count(*)::int AS n FROM ${table} t WHERE strpos(row_to_json(t)::text, $1) > 0`, [
        token.slice(5),
      ]);
      expect(clear.rows[0].n).toBe(0);
    }
    const bytes = await db.pool.query("SELECT count(*)::int AS n FROM mpp_sessions WHERE strpos(encode(token_sha256, 'escape'), $1) > 0", [
      token,
    ]);
    expect(bytes.rows[0].n).toBe(0);
  });
});
