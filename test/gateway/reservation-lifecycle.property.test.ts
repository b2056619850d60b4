/**
 * Model-based property test of a reservation's lifecycle, over the real REST routes, the real
 * facilitator and the real program on the local ledger (`startSystem`).
 *
 * Per seed, one agent with a daily budget and a rate limit runs a few payment flows at once, each
 * authorizing and then randomly interleaving: settle its payload (possibly twice), release its
 * reservation, complete it, and sweep (now, and with a clock past every payload's expiry). At the end:
 * - landed money never exceeds the budget and landed payments never outnumber the rate limit
 *   (the bypass: authorize → release → settle the payload anyway);
 * - a released reservation's payload never settled; a settled payload's reservation is `settled`;
 * - ledger balances, reservations, settle answers, the policy's usage and the indexed
 *   transactions agree exactly; no answer is a 5xx and no reservation is left claimed but open.
 * Plus deterministic cases of that bypass, and spec 3's `exhausted` state.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { PublicKey } from "@solana/web3.js";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type JsonValue, parseJson } from "../../api/shared/http/json.js";
import { parseUsdcNumber } from "../../api/shared/http/money.js";
import { formatUsdcShort } from "../../api/shared/money.js";
import { claimLinkedReservation, x402PaymentRef } from "../../api/gateway/reservations/store.js";
import { sweepReservations } from "../../api/gateway/loops/sweeper.js";
import { tokenBalanceUnits } from "../../api/gateway/chain/ledger.js";
import { type PaymentRequirement, requirementBody } from "../../api/gateway/x402/index.js";
import { type System, startSystem } from "../../scripts/system.js";
import { fundedAgent, type RestAnswer, rest } from "../sdk/server-support.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { mulberry32 } from "../support/random.js";
import { agentKey } from "../support/agent-keys.js";
import { pollUntil } from "../support/poll.js";

const _USDC = 1_000_000n;
const SEEDS = [0x5e11, 0x5e12, 0x5e13, 0x5e14, 0x5e15, 0x5e16, 0x5e17, 0x5e18];
/** How long the indexer may take to show every landed payment (a deadline, not an assertion). */
const INDEX_DEADLINE_MS = 60_000;

let db: FreshDatabase;
let system: System;
let agentsKey: string;
/** The payee's own key: the facilitator is called by the resource server, another account. */
let serverKey: string;
let payee: PublicKey;

beforeAll(async () => {
  db = await createFreshDatabase();
  system = await startSystem({ databaseUrl: db.url, port: 0, allowPrivateNetworks: true, logger: pino({ level: "warn" }) });
  agentsKey = (await system.createAccount("lifecycle agents")).apiKey;
  serverKey = (await system.createAccount("lifecycle payee")).apiKey;
  // The payee is an agent wallet with a token account, funded once, so every payment credits it.
  payee = new PublicKey(await fundedAgent(system, serverKey, "lifecycle-payee", 0.01));
});

afterAll(async () => {
  await system?.stop();
  await db?.drop();
});

/** A REST call on the system (test/sdk/server-support.ts `rest`); `text` keeps the exact JSON. */
const call = (key: string, method: string, path: string, body?: unknown): Promise<RestAnswer> => rest(system, key, method, path, body);

const balance = (owner: PublicKey): Promise<bigint> => tokenBalanceUnits(system.ledger, owner);
const sum = (values: readonly bigint[]): bigint => values.reduce((a, b) => a + b, 0n);

async function newAgent(agentId: string, policy: Record<string, unknown>): Promise<PublicKey> {
  const address = await fundedAgent(system, agentsKey, agentId, 2);
  const set = await call(agentsKey, "PUT", `/v1/policies/${agentId}`, policy);
  expect(set.status, set.text).toBe(200);
  return new PublicKey(address);
}

function requirement(amountUnits: bigint, resource: string): PaymentRequirement {
  return { scheme: "exact", network: system.network, token: system.token, amountUnits, payTo: payee.toBase58(), resource };
}

interface Authorized {
  readonly reservationId: string;
  readonly payment: unknown;
  readonly paymentRef: string;
}

async function authorize(agentId: string, required: PaymentRequirement): Promise<RestAnswer & { authorized: Authorized | null }> {
  const answer = await call(agentsKey, "POST", `/v1/agents/${agentId}/payments/authorize`, {
    endpoint: required.resource,
    x402: requirementBody(required),
  });
  if (answer.status !== 200) return { ...answer, authorized: null };
  const body = parseJson(answer.text) as { reservationId: string; payment: { payload: { from: string; nonce: string } } };
  return {
    ...answer,
    authorized: {
      reservationId: body.reservationId,
      payment: body.payment,
      paymentRef: x402PaymentRef(body.payment.payload.from, body.payment.payload.nonce),
    },
  };
}

async function settle(
  authorized: Authorized,
  required: PaymentRequirement,
): Promise<RestAnswer & { txHash: string | null; reason: string | null }> {
  const answer = await call(serverKey, "POST", "/v1/x402/settle", { payment: authorized.payment, requirement: requirementBody(required) });
  const body = parseJson(answer.text) as { success?: boolean; txHash?: string; reason?: string };
  return { ...answer, txHash: body.success === true ? body.txHash! : null, reason: body.reason ?? null };
}

const release = (agentId: string, reservationId: string): Promise<RestAnswer> =>
  call(agentsKey, "POST", `/v1/agents/${agentId}/payments/${reservationId}/release`, {});
const complete = (agentId: string, reservationId: string, txHash: string): Promise<RestAnswer> =>
  call(agentsKey, "POST", `/v1/agents/${agentId}/payments/${reservationId}/complete`, { txHash });

/** A sweep at `now`, or with a clock far enough ahead that every unclaimed payload looks expired. */
const sweep = (aheadMs: number) => sweepReservations(system.pool, { agents: system.wallets }, new Date(Date.now() + aheadMs));

async function policyUsage(agentId: string): Promise<{ usedUnits: bigint; budgetState: string; rateCalls: number }> {
  const answer = await call(agentsKey, "GET", `/v1/policies/${agentId}`);
  expect(answer.status, answer.text).toBe(200);
  const body = parseJson(answer.text) as { usedToday: unknown; budgetState: string; rateUsage: { calls: unknown } };
  return {
    usedUnits: parseUsdcNumber((body.usedToday as { usdc: JsonValue }).usdc, "usedToday", true),
    budgetState: body.budgetState,
    rateCalls: Number(String(body.rateUsage.calls)),
  };
}

interface ReservationRow {
  readonly id: string;
  readonly status: string;
  readonly amount_units: string;
  readonly tx_hash: string | null;
  readonly claimed_at: Date | null;
}

async function reservations(agentId: string): Promise<ReservationRow[]> {
  const { rows } = await system.pool.query<ReservationRow>(
    "SELECT id::text, status, amount_units::text, tx_hash, claimed_at FROM spend_reservations WHERE agent_id = $1 ORDER BY id",
    [await agentKey(system.pool, agentId)],
  );
  return rows;
}

/** The agent's indexed (on-chain) transaction hashes, polled until `expected` of them are there or the deadline. */
async function indexedTxHashes(agentId: string, expected: number): Promise<string[]> {
  let count = 0;
  return pollUntil(
    async () => {
      const answer = await call(agentsKey, "GET", `/v1/transactions?${new URLSearchParams({ agentId, limit: "200" })}`);
      expect(answer.status, answer.text).toBe(200);
      const body = parseJson(answer.text) as { transactions: { txHash: string | null; status: string }[] };
      const hashes = body.transactions.filter((tx) => tx.status !== "rejected" && tx.txHash !== null).map((tx) => tx.txHash!);
      count = hashes.length;
      return hashes.length >= expected ? hashes : undefined;
    },
    { timeoutMs: INDEX_DEADLINE_MS, intervalMs: 100, what: () => `${expected} indexed transactions of ${agentId} (have ${count})` },
  );
}

type Step = "settle" | "release" | "complete" | "sweep-now" | "sweep-expired";

interface FlowLog {
  readonly amountUnits: bigint;
  readonly steps: Step[];
  authorizeStatus: number;
  authorized: Authorized | null;
  /** Successful settles (transaction hashes) and every status seen. */
  landed: string[];
  settleReasons: (string | null)[];
  releaseStatuses: number[];
  completeStatuses: number[];
  statuses: number[];
}

/** What the interleavings exercised, so the test proves it reached the races it claims to. */
interface Coverage {
  landed: number;
  revoked: number;
  nonceReused: number;
  released: number;
  releaseRefused: number;
  policyRefused: number;
}

describe("a reservation's lifecycle under any interleaving (real routes, real ledger)", () => {
  it(`${SEEDS.length} seeded scenarios: landed money stays within the budget and the rate limit, and every record agrees`, async () => {
    const coverage: Coverage = { landed: 0, revoked: 0, nonceReused: 0, released: 0, releaseRefused: 0, policyRefused: 0 };
    for (const seed of SEEDS) await scenario(seed, coverage);
    // Every kind of outcome occurred somewhere, or the interleavings did not test the lifecycle.
    expect(coverage.landed, JSON.stringify(coverage)).toBeGreaterThan(5);
    expect(coverage.revoked, JSON.stringify(coverage)).toBeGreaterThan(0);
    expect(coverage.nonceReused, JSON.stringify(coverage)).toBeGreaterThan(0);
    expect(coverage.released, JSON.stringify(coverage)).toBeGreaterThan(0);
    expect(coverage.releaseRefused, JSON.stringify(coverage)).toBeGreaterThan(0);
    expect(coverage.policyRefused, JSON.stringify(coverage)).toBeGreaterThan(0);
  });
});

async function scenario(seed: number, coverage: Coverage): Promise<void> {
  {
    const random = mulberry32(seed);
    const int = (below: number) => Math.floor(random() * below);
    const agentId = `lifecycle-${seed.toString(16)}`;
    const budgetUnits = BigInt(4 + int(5)) * 80_000n;
    const rateCalls = 3 + int(4);
    const payer = await newAgent(agentId, {
      dailyBudget: { usdc: Number(formatUsdcShort(budgetUnits)) },
      perCallLimit: { usdc: Number(formatUsdcShort(budgetUnits)) },
      rateLimit: { calls: rateCalls, window: "1h" },
    });
    const [payerBefore, payeeBefore] = await Promise.all([balance(payer), balance(payee)]);

    const flows: FlowLog[] = Array.from({ length: 8 + int(5) }, () => {
      // Each step with its own odds: most payloads are settled, some twice (a replay), some
      // released, and a sweep whose clock is ahead sometimes treats every payload as expired.
      const odds: [Step, number][] = [
        ["settle", 0.85],
        ["settle", 0.25],
        ["release", 0.35],
        ["complete", 0.5],
        ["sweep-now", 0.3],
        ["sweep-expired", 0.15],
      ];
      const steps = odds
        .filter(([, p]) => random() < p)
        .map(([step]) => step)
        .sort(() => random() - 0.5);
      const amountUnits = [budgetUnits / 2n, budgetUnits / 4n, budgetUnits / 8n][int(3)]!;
      return {
        amountUnits,
        steps,
        authorizeStatus: 0,
        authorized: null,
        landed: [],
        settleReasons: [],
        releaseStatuses: [],
        completeStatuses: [],
        statuses: [],
      };
    });
    // Random pauses between the steps on purpose: they make the flows interleave differently per seed.
    const delays = flows.map(() => flows.map(() => int(25)));

    await Promise.all(
      flows.map(async (flow, i) => {
        const required = requirement(flow.amountUnits, `https://paid.example/${seed}/${i}`);
        await sleep(delays[i]![0]);
        const authorized = await authorize(agentId, required);
        flow.authorizeStatus = authorized.status;
        flow.statuses.push(authorized.status);
        flow.authorized = authorized.authorized;
        if (authorized.authorized === null) return;
        const { reservationId } = authorized.authorized;
        for (const [j, step] of flow.steps.entries()) {
          await sleep(delays[i]![j + 1] ?? 0);
          if (step === "settle") {
            const settled = await settle(authorized.authorized, required);
            flow.statuses.push(settled.status);
            flow.settleReasons.push(settled.reason);
            if (settled.txHash !== null) flow.landed.push(settled.txHash);
          } else if (step === "release") {
            const released = await release(agentId, reservationId);
            flow.statuses.push(released.status);
            flow.releaseStatuses.push(released.status);
          } else if (step === "complete") {
            // A careful client completes only with the transaction it was answered.
            if (flow.landed.length === 0) continue;
            const completed = await complete(agentId, reservationId, flow.landed[0]!);
            flow.statuses.push(completed.status);
            flow.completeStatuses.push(completed.status);
          } else {
            await sweep(step === "sweep-now" ? 0 : 30 * 60_000);
          }
        }
      }),
    );
    await sweep(0);

    const context = `seed ${seed}: budget ${budgetUnits}, ${rateCalls} calls/1h, flows ${JSON.stringify(flows, (_, v) => (typeof v === "bigint" ? String(v) : v))}`;
    // No 5xx from any interleaving; refusals are answers.
    for (const flow of flows) for (const status of flow.statuses) expect(status, context).toBeLessThan(500);

    const landed = flows.flatMap((flow) => flow.landed.map((txHash) => ({ txHash, amountUnits: flow.amountUnits })));
    const landedUnits = sum(landed.map((payment) => payment.amountUnits));
    // The policy's promise, on what actually moved.
    expect(landedUnits, context).toBeLessThanOrEqual(budgetUnits);
    expect(landed.length, context).toBeLessThanOrEqual(rateCalls);
    // A payload settles at most once.
    for (const flow of flows) expect(flow.landed.length, context).toBeLessThanOrEqual(1);

    // The ledger moved exactly what the settle answers acknowledged.
    const [payerAfter, payeeAfter] = await Promise.all([balance(payer), balance(payee)]);
    expect(payerBefore - payerAfter, context).toBe(landedUnits);
    expect(payeeAfter - payeeBefore, context).toBe(landedUnits);

    // Our reservations agree with the answers and the ledger.
    const rows = await reservations(agentId);
    const byId = new Map(rows.map((row) => [row.id, row]));
    for (const flow of flows) {
      if (flow.authorized === null) continue;
      const row = byId.get(flow.authorized.reservationId)!;
      if (flow.landed.length === 1) {
        expect(row, context).toMatchObject({ status: "settled", tx_hash: flow.landed[0] });
        // Released first → never settled; settled first → release refused.
        expect(
          flow.releaseStatuses.every((status) => status === 409),
          context,
        ).toBe(true);
      }
      if (flow.releaseStatuses.includes(200)) {
        expect(flow.landed, context).toEqual([]);
        expect(row.status, context).toBe("released");
      }
      // Nothing is left taken by a settler but open.
      expect(row.status === "reserved" && row.claimed_at !== null, context).toBe(false);
    }
    const settledRows = rows.filter((row) => row.status === "settled");
    expect(new Set(settledRows.map((row) => row.tx_hash)), context).toEqual(new Set(landed.map((payment) => payment.txHash)));
    expect(sum(settledRows.map((row) => BigInt(row.amount_units))), context).toBe(landedUnits);

    // usedToday and the rate usage are what still counts: landed plus still reserved.
    const counting = rows.filter((row) => row.status !== "released");
    const usage = await policyUsage(agentId);
    expect(usage.usedUnits, context).toBe(sum(counting.map((row) => BigInt(row.amount_units))));
    expect(usage.rateCalls, context).toBe(counting.length);
    expect(usage.usedUnits, context).toBeLessThanOrEqual(budgetUnits);

    // The index shows exactly the landed payments.
    const indexed = await indexedTxHashes(agentId, landed.length);
    expect(new Set(indexed), context).toEqual(new Set(landed.map((payment) => payment.txHash)));

    coverage.landed += landed.length;
    coverage.revoked += flows.flatMap((flow) => flow.settleReasons).filter((reason) => reason === "payment_revoked").length;
    coverage.nonceReused += flows.flatMap((flow) => flow.settleReasons).filter((reason) => reason === "nonce_reused").length;
    coverage.released += flows.filter((flow) => flow.releaseStatuses.includes(200)).length;
    coverage.releaseRefused += flows.flatMap((flow) => flow.releaseStatuses).filter((status) => status === 409).length;
    coverage.policyRefused += flows.filter((flow) => flow.authorizeStatus === 403).length;
  }
}

describe("release revokes the signed payment (the issue's bypass)", () => {
  it("four authorize → release rounds, then the four payloads settled: nothing moves and usedToday stays 0", async () => {
    const agentId = "bypass-release";
    const payer = await newAgent(agentId, { dailyBudget: { usdc: 0.2 }, perCallLimit: { usdc: 0.2 } });
    const before = await balance(payer);
    const rounds: { authorized: Authorized; required: PaymentRequirement }[] = [];
    for (let i = 0; i < 4; i += 1) {
      const required = requirement(200_000n, `https://paid.example/bypass/${i}`);
      const authorized = await authorize(agentId, required);
      expect(authorized.status, authorized.text).toBe(200);
      expect((await release(agentId, authorized.authorized!.reservationId)).status).toBe(200);
      rounds.push({ authorized: authorized.authorized!, required });
    }
    for (const { authorized, required } of rounds) {
      const settled = await settle(authorized, required);
      expect(settled.status, settled.text).toBe(200);
      expect(settled.txHash).toBeNull();
      expect(settled.reason).toBe("payment_revoked");
    }
    expect(await balance(payer)).toBe(before);
    expect(await policyUsage(agentId)).toMatchObject({ usedUnits: 0n, rateCalls: 0 });
  });

  it("verify refuses a released reservation's payload too", async () => {
    const agentId = "bypass-verify";
    await newAgent(agentId, { dailyBudget: { usdc: 1 } });
    const required = requirement(100_000n, "https://paid.example/verify/1");
    const authorized = (await authorize(agentId, required)).authorized!;
    expect((await release(agentId, authorized.reservationId)).status).toBe(200);
    const verified = await call(serverKey, "POST", "/v1/x402/verify", {
      payment: authorized.payment,
      requirement: requirementBody(required),
    });
    expect(parseJson(verified.text)).toMatchObject({ valid: false, reason: "payment_revoked" });
  });

  it("a payment a settler already took cannot be released: 409, and it keeps counting", async () => {
    const agentId = "release-after-claim";
    await newAgent(agentId, { dailyBudget: { usdc: 1 } });
    const authorized = (await authorize(agentId, requirement(300_000n, "https://paid.example/claimed/1"))).authorized!;
    // A settler between its claim and the ledger's answer.
    expect((await claimLinkedReservation(system.pool, authorized.paymentRef, new Date())).outcome).toBe("claimed");
    const released = await release(agentId, authorized.reservationId);
    expect(released.status, released.text).toBe(409);
    expect(parseJson(released.text)).toMatchObject({ code: "CONFLICT" });
    expect(released.text).toContain("being settled");
    // Nor can a caller's transaction hash close it: the settler records the one it sent.
    const completed = await complete(agentId, authorized.reservationId, "5".repeat(88));
    expect(completed.status, completed.text).toBe(409);
    expect(completed.text).toContain("being settled");
    expect((await reservations(agentId))[0]).toMatchObject({ status: "reserved", tx_hash: null });
    expect((await policyUsage(agentId)).usedUnits).toBe(300_000n);
  });

  it("a settled payment cannot be released afterwards: 409 settled, and it keeps counting", async () => {
    const agentId = "release-after-settle";
    await newAgent(agentId, { dailyBudget: { usdc: 1 } });
    const required = requirement(250_000n, "https://paid.example/settled/1");
    const authorized = (await authorize(agentId, required)).authorized!;
    expect((await settle(authorized, required)).txHash).not.toBeNull();
    const released = await release(agentId, authorized.reservationId);
    expect(released.status).toBe(409);
    expect(released.text).toContain("settled");
    expect((await policyUsage(agentId)).usedUnits).toBe(250_000n);
  });

  it("a late landing of a released payment counts in its own period: the next authorization sees it", async () => {
    const agentId = "late-landing";
    await newAgent(agentId, { dailyBudget: { usdc: 0.3 }, perCallLimit: { usdc: 0.3 } });
    const first = (await authorize(agentId, requirement(200_000n, "https://paid.example/late/1"))).authorized!;
    // The ledger says the payment landed although the reservation had been released (a payload in
    // flight before this fix, or any settler outside ours): the chain is the truth.
    expect((await release(agentId, first.reservationId)).status).toBe(200);
    const second = await authorize(agentId, requirement(100_000n, "https://paid.example/late/2"));
    expect(second.status).toBe(200);
    await system.pool.query("UPDATE spend_reservations SET status = 'settled', tx_hash = 'landed-late' WHERE id = $1", [
      first.reservationId,
    ]);
    // 0.2 landed + 0.1 reserved = 0.3: the budget is used up although the periods started apart.
    expect((await policyUsage(agentId)).usedUnits).toBe(300_000n);
    const third = await authorize(agentId, requirement(50_000n, "https://paid.example/late/3"));
    expect(third.status, third.text).toBe(403);
    expect(parseJson(third.text)).toMatchObject({ errorClass: "DailyBudgetExceededError" });
  });
});

describe("spec 3: the exhausted daily budget", () => {
  it("after a payment is refused for the budget, a smaller one that fits is refused too until the policy changes", async () => {
    const agentId = "exhausted-budget";
    await newAgent(agentId, { dailyBudget: { usdc: 0.2 } });
    expect((await authorize(agentId, requirement(160_000n, "https://paid.example/exhaust/1"))).status).toBe(200);
    expect((await policyUsage(agentId)).budgetState).toBe("warning");
    const over = await authorize(agentId, requirement(100_000n, "https://paid.example/exhaust/2"));
    expect(over.status).toBe(403);
    expect((await policyUsage(agentId)).budgetState).toBe("exhausted");
    const fits = await authorize(agentId, requirement(40_000n, "https://paid.example/exhaust/3"));
    expect(fits.status, fits.text).toBe(403);
    expect(parseJson(fits.text)).toMatchObject({ errorClass: "DailyBudgetExceededError", reasonCode: "daily_budget_exceeded" });
    // A new policy is a new decision by the owner: the period is no longer exhausted under it.
    expect((await call(agentsKey, "PUT", `/v1/policies/${agentId}`, { dailyBudget: { usdc: 0.5 } })).status).toBe(200);
    expect((await policyUsage(agentId)).budgetState).toBe("open");
    expect((await authorize(agentId, requirement(40_000n, "https://paid.example/exhaust/4"))).status).toBe(200);
  });
});
