/**
 * The gateway under concurrency, end to end on the whole system (`startSystem`: the real program
 * on the local ledger, a real Postgres, the indexer, REST /v1 over real HTTP on loopback).
 *
 * 200 pay flows of one agent race: each authorizes over REST with its own Idempotency-Key, retries
 * a loopback paid API with the returned `X-PAYMENT` headers, that API settles through
 * `POST /v1/x402/settle`, and the flow completes its reservation. The spend policy (spec 2.1, 8)
 * must hold exactly however the flows interleave: what was accepted fits the daily budget and the
 * rate limit, every refusal is a recorded 403 naming the limit it hit, the tokens moved on the
 * ledger by exactly the accepted sum, and the indexer ends up with exactly the settled payments.
 * Then racers at the exact boundaries: a budget consumed to the last unit, one unit short, and a
 * rate limit.
 */
import { PublicKey } from "@solana/web3.js";
import { Keypair } from "@solana/web3.js";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JsonNumber, parseJson } from "../../api/shared/http/json.js";
import { parseMoneyObject } from "../../api/shared/http/money.js";
import { formatUsdcShort } from "../../api/shared/money.js";
import { tokenBalanceUnits } from "../../api/gateway/chain/ledger.js";
import { type System, startSystem } from "../../scripts/system.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { type RestAnswer, restCall } from "../support/rest.js";
import { mulberry32 } from "../support/random.js";
import { type FacilitatedApi, startFacilitatedApi } from "./support/facilitated-api.js";
import { type GatewayClient, type PayOutcome, payThroughGateway } from "./support/gateway-payer.js";
import { agentKey } from "../support/agent-keys.js";
import { pollUntil } from "../support/poll.js";

const USDC = 1_000_000n;
const SEED = 0x4832_0200;
/** How long the indexer may take to show every settled payment (a deadline, not an assertion). */
const INDEX_DEADLINE_MS = 60_000;

let db: FreshDatabase;
let system: System;
let gateway: GatewayClient;
/** The resource server's own key, for the facilitator (another account than the agents'). */
let serverKey: string;
const apis: FacilitatedApi[] = [];

beforeAll(async () => {
  db = await createFreshDatabase();
  system = await startSystem({ databaseUrl: db.url, port: 0, allowPrivateNetworks: true, logger: pino({ level: "warn" }) });
  const agents = await system.createAccount("concurrent payments");
  gateway = { gatewayUrl: system.apiUrl, apiKey: agents.apiKey };
  serverKey = (await system.createAccount("paid API")).apiKey;
});

afterAll(async () => {
  await Promise.all(apis.map((api) => api.close()));
  await system?.stop();
  await db?.drop();
});

function call(method: string, path: string, body?: unknown): Promise<RestAnswer> {
  return restCall(system.apiUrl, method, path, { key: gateway.apiKey, body, lenientJson: true });
}

/** Registers and funds an agent and sets its policy; returns its wallet address. */
async function agentWithPolicy(agentId: string, fundUsdc: number, policy: Record<string, unknown>): Promise<PublicKey> {
  expect((await call("POST", "/v1/agents", { agentId })).status).toBe(201);
  const funded = await call("POST", `/v1/agents/${agentId}/wallet/fund`, { usdc: fundUsdc });
  expect(funded.status, funded.text).toBe(200);
  const set = await call("PUT", `/v1/policies/${agentId}`, policy);
  expect(set.status, set.text).toBe(200);
  const wallet = JSON.parse((await call("GET", `/v1/agents/${agentId}/wallet`)).text) as { address: string };
  return new PublicKey(wallet.address);
}

/** A paid API of its own (own payee), so each group's token movements can be read separately. */
async function paidApi(): Promise<{ api: FacilitatedApi; payee: PublicKey }> {
  const payee = Keypair.generate().publicKey;
  const api = await startFacilitatedApi({
    gatewayUrl: system.apiUrl,
    apiKey: serverKey,
    terms: { scheme: "exact", network: system.network, token: system.token, payTo: payee.toBase58() },
  });
  apis.push(api);
  return { api, payee };
}

const priceUrl = (api: FacilitatedApi, units: bigint, i: number): string => `${api.origin}/x402/price/${units}/call-${i}`;
const balance = (owner: PublicKey): Promise<bigint> => tokenBalanceUnits(system.ledger, owner);
const sum = (values: readonly bigint[]): bigint => values.reduce((a, b) => a + b, 0n);

interface Listed {
  readonly txHash: string | null;
  readonly status: string;
  readonly amountUnits: bigint;
  readonly id: string;
  readonly policyVersion: number | null;
}

/** Every transaction of the agent in the listing (all pages), money parsed exactly. */
async function listed(agentId: string, status?: "rejected"): Promise<Listed[]> {
  const out: Listed[] = [];
  let after: string | null = null;
  for (let page = 0; page < 50; page += 1) {
    const query = new URLSearchParams({ agentId, limit: "200" });
    if (status !== undefined) query.set("status", status);
    if (after !== null) query.set("after", after);
    const answer = await call("GET", `/v1/transactions?${query}`);
    expect(answer.status, answer.text).toBe(200);
    const body = parseJson(answer.text) as {
      transactions: {
        txHash: string | null;
        status: string;
        id: string;
        amountPaid: Parameters<typeof parseMoneyObject>[0];
        policyVersion: JsonNumber | null;
      }[];
      pageInfo: { hasNextPage: boolean; endCursor: string | null };
    };
    for (const tx of body.transactions) {
      out.push({
        txHash: tx.txHash,
        status: tx.status,
        id: tx.id,
        amountUnits: parseMoneyObject(tx.amountPaid, "amountPaid"),
        policyVersion: versionOf(tx.policyVersion),
      });
    }
    if (!body.pageInfo.hasNextPage) return out;
    after = body.pageInfo.endCursor;
  }
  throw new Error("more than 50 pages of transactions");
}

/** A version number as a JSON answer carries it (exact integer token). */
function versionOf(value: unknown): number | null {
  if (value === null || value === undefined) return null;
  return Number(value instanceof JsonNumber ? value.text : value);
}

/** Polls until the indexed (on-chain) transactions of the agent are exactly `settled`, or the deadline. */
async function indexedPayments(agentId: string, expectedCount: number): Promise<Listed[]> {
  let count = 0;
  return pollUntil(
    async () => {
      const chain = (await listed(agentId)).filter((tx) => tx.status !== "rejected");
      count = chain.length;
      return chain.length >= expectedCount ? chain : undefined;
    },
    { timeoutMs: INDEX_DEADLINE_MS, intervalMs: 100, what: () => `${expectedCount} indexed payments of ${agentId} (have ${count})` },
  );
}

/** `usedToday` (exact), `budgetState` and the calls in the rate window, as `GET /v1/policies/{id}` reports them. */
async function policyUsage(agentId: string): Promise<{ usedUnits: bigint; budgetState: string; rateCalls: number }> {
  const answer = await call("GET", `/v1/policies/${agentId}`);
  expect(answer.status, answer.text).toBe(200);
  const body = parseJson(answer.text) as {
    usedToday: Parameters<typeof parseMoneyObject>[0];
    budgetState: string;
    rateUsage: { calls: unknown };
  };
  return {
    usedUnits: parseMoneyObject(body.usedToday, "usedToday"),
    budgetState: body.budgetState,
    rateCalls: Number(String(body.rateUsage.calls)),
  };
}

interface Race {
  readonly paid: (PayOutcome & { kind: "paid" } & { amountUnits: bigint })[];
  readonly refused: (PayOutcome & { kind: "refused" } & { amountUnits: bigint })[];
}

/** Starts every flow at once and sorts the outcomes; any other outcome fails the test. */
async function race(agentId: string, api: FacilitatedApi, amounts: readonly bigint[]): Promise<Race> {
  const outcomes = await Promise.all(
    amounts.map(async (amountUnits, i) => ({ ...(await payThroughGateway(gateway, agentId, priceUrl(api, amountUnits, i))), amountUnits })),
  );
  const unexpected = outcomes.filter((o) => o.kind === "unpaid");
  expect(
    unexpected.length,
    JSON.stringify(unexpected.slice(0, 3), (_, v: unknown) => (typeof v === "bigint" ? String(v) : v)),
  ).toBe(0);
  return {
    paid: outcomes.filter((o): o is Race["paid"][number] => o.kind === "paid"),
    refused: outcomes.filter((o): o is Race["refused"][number] => o.kind === "refused"),
  };
}

/** What must hold after any race, whatever the limits: money, records, ledger and index agree. */
async function expectConsistent(agentId: string, r: Race, payer: PublicKey, payee: PublicKey, before: { payer: bigint; payee: bigint }) {
  const acceptedUnits = sum(r.paid.map((p) => p.amountUnits));

  // Every accepted flow completed its reservation with its own ledger transaction.
  for (const p of r.paid) {
    expect(p.completeStatus, JSON.stringify(p.completeBody)).toBe(200);
    expect(p.completeBody).toMatchObject({ reservationId: p.reservationId, status: "settled", txHash: p.txHash });
  }
  expect(new Set(r.paid.map((p) => p.txHash)).size).toBe(r.paid.length);
  const reservations = await system.pool.query<{ status: string; n: number; units: string }>(
    "SELECT status, count(*)::int AS n, sum(amount_units)::text AS units FROM spend_reservations WHERE agent_id = $1 GROUP BY status",
    [await agentKey(system.pool, agentId)],
  );
  expect(reservations.rows).toEqual([{ status: "settled", n: r.paid.length, units: acceptedUnits.toString() }]);

  // Every refusal is recorded once and listed as rejected, with its amount.
  const rejected = await listed(agentId, "rejected");
  expect(rejected).toHaveLength(r.refused.length);
  const rejectedIds = new Map(rejected.map((tx) => [tx.id, tx.amountUnits]));
  for (const f of r.refused) expect(rejectedIds.get(`rejection:${String(f.problem.rejectionId)}`)).toBe(f.amountUnits);

  // The ledger moved exactly the accepted sum, from the agent's wallet to the service's.
  expect(before.payer - (await balance(payer))).toBe(acceptedUnits);
  expect((await balance(payee)) - before.payee).toBe(acceptedUnits);

  // The indexer projects exactly the settled set: same transactions, same amounts.
  const chain = await indexedPayments(agentId, r.paid.length);
  expect(new Map(chain.map((tx) => [tx.txHash, tx.amountUnits]))).toEqual(new Map(r.paid.map((p) => [p.txHash, p.amountUnits])));
  expect(chain).toHaveLength(r.paid.length);

  // Each payment and each refusal names the policy version it was decided under: the one policy set (version 1).
  for (const tx of [...chain, ...rejected]) expect(tx.policyVersion, tx.id).toBe(1);
  return acceptedUnits;
}

describe("200 concurrent x402 payments of one agent through the gateway", () => {
  it("accept within the daily budget and the rate limit; every refusal is a recorded 403; ledger and index agree", async () => {
    const agentId = "racer-200";
    const BUDGET = 5n * USDC;
    const RATE = 120;
    const payer = await agentWithPolicy(agentId, 6, { dailyBudget: { usdc: 5 }, rateLimit: { calls: RATE, window: "1h" } });
    const { api, payee } = await paidApi();
    // 0.010000–0.070999 usdc: in issue order the 120th call leaves 0.038 usdc of the budget, so
    // later calls above it hit the budget and those below it the rate limit. The real interleaving
    // decides which limit stops a given flow (no order yields both for sure), so every refusal is
    // checked against the rule it names, and what was accepted against both limits.
    const random = mulberry32(SEED);
    const amounts = Array.from({ length: 200 }, () => 10_000n + BigInt(Math.floor(random() * 61_000)));
    const before = { payer: await balance(payer), payee: await balance(payee) };

    const r = await race(agentId, api, amounts);
    expect(r.paid.length + r.refused.length).toBe(200);
    const acceptedUnits = await expectConsistent(agentId, r, payer, payee, before);

    expect(acceptedUnits).toBeLessThanOrEqual(BUDGET);
    expect(r.paid.length).toBeLessThanOrEqual(RATE);
    const left = BUDGET - acceptedUnits;
    for (const f of r.refused) {
      expect(f.status).toBe(403);
      expect(f.problem.code).toBe("POLICY_VIOLATION");
      if (f.problem.reasonCode === "daily_budget_exceeded") {
        // Refused because it did not fit what was left then, or because an earlier refusal that
        // did not fit exhausted the period (spec 3): checked over all budget refusals below.
        expect(f.problem.errorClass).toBe("DailyBudgetExceededError");
        expect(f.problem.reason).toMatch(
          new RegExp(
            `^daily_budget_exceeded: requested ${formatUsdcShort(f.amountUnits)} usdc, limit is [0-9.]+ usdc \\(used [0-9.]+ usdc, (left [0-9.]+ usdc|exhausted until \\S+)\\)$`,
          ),
        );
      } else {
        // Refused by count only once the window held all of its calls.
        expect(f.problem).toMatchObject({
          reasonCode: "rate_limit_exceeded",
          errorClass: "PolicyViolationError",
          reason: `rate_limit_exceeded: requested ${RATE + 1} calls/1h, limit is ${RATE} calls/1h`,
        });
        expect(r.paid.length).toBe(RATE);
      }
    }
    // The first budget refusal did not fit what was left then, so it cannot fit what is left now;
    // every later one may fit (the period is exhausted from the first on).
    const budgetRefused = r.refused.filter((f) => f.problem.reasonCode === "daily_budget_exceeded");
    if (budgetRefused.length > 0) expect(budgetRefused.some((f) => f.amountUnits > left)).toBe(true);
    // A limit was reached: either every call of the window is used, or the budget refused.
    expect(r.paid.length === RATE || (budgetRefused.length === r.refused.length && budgetRefused.length > 0)).toBe(true);

    expect(await policyUsage(agentId)).toMatchObject({ usedUnits: acceptedUnits, rateCalls: r.paid.length });
    console.info(
      `race of 200: ${r.paid.length} paid (${formatUsdcShort(acceptedUnits)} usdc), ` +
        `${r.refused.filter((f) => f.problem.reasonCode === "daily_budget_exceeded").length} refused by the budget, ` +
        `${r.refused.filter((f) => f.problem.reasonCode === "rate_limit_exceeded").length} by the rate limit`,
    );
  }, 180_000);

  it("at the boundaries: a budget consumed to the last unit passes, one unit short refuses exactly one, a rate limit admits exactly its calls", async () => {
    const PRICE = 50_000n; // 0.05 usdc
    const RACERS = 30;
    const [exact, short, counted, endpoint] = await Promise.all([
      (async () => ({
        agentId: "exact-budget",
        payer: await agentWithPolicy("exact-budget", 2, { dailyBudget: { usdc: 1.5 } }),
        ...(await paidApi()),
      }))(),
      (async () => ({
        agentId: "short-budget",
        payer: await agentWithPolicy("short-budget", 2, { dailyBudget: { usdc: 1.499999 } }),
        ...(await paidApi()),
      }))(),
      (async () => ({
        agentId: "rate-25",
        payer: await agentWithPolicy("rate-25", 1, { rateLimit: { calls: 25, window: "1h" } }),
        ...(await paidApi()),
      }))(),
      (async () => ({
        agentId: "endpoint-short",
        // The agent's own budget is wide; the endpoint rule is one unit short of 30 payments.
        payer: await agentWithPolicy("endpoint-short", 2, {
          dailyBudget: { usdc: 100 },
          endpointBudgets: [{ match: "127.0.0.1/x402/price", dailyBudget: { usdc: 1.499999 } }],
        }),
        ...(await paidApi()),
      }))(),
    ]);
    const groups = [
      { ...exact, amounts: Array<bigint>(RACERS).fill(PRICE) },
      { ...short, amounts: Array<bigint>(RACERS).fill(PRICE) },
      { ...counted, amounts: Array<bigint>(40).fill(10_000n) },
      { ...endpoint, amounts: Array<bigint>(RACERS).fill(PRICE) },
    ];
    const befores = await Promise.all(groups.map(async (g) => ({ payer: await balance(g.payer), payee: await balance(g.payee) })));
    // All three groups race at once (100 flows), each against its own agent's lock.
    const races = await Promise.all(groups.map((g) => race(g.agentId, g.api, g.amounts)));
    for (const [i, g] of groups.entries()) await expectConsistent(g.agentId, races[i]!, g.payer, g.payee, befores[i]!);

    const [exactRace, shortRace, rateRace, endpointRace] = races as [Race, Race, Race, Race];
    // 30 × 0.05 = 1.5: the last payment takes the budget to exactly 100 % and still passes.
    expect(exactRace.paid).toHaveLength(RACERS);
    expect(exactRace.refused).toHaveLength(0);
    expect(await policyUsage("exact-budget")).toMatchObject({ usedUnits: 1_500_000n, budgetState: "exhausted" });
    // Exhausted: one more base unit is refused.
    const oneUnit = await payThroughGateway(gateway, "exact-budget", priceUrl(exact.api, 1n, 999));
    expect(oneUnit).toMatchObject({
      kind: "refused",
      status: 403,
      problem: {
        code: "POLICY_VIOLATION",
        errorClass: "DailyBudgetExceededError",
        reason: expect.stringMatching(
          /^daily_budget_exceeded: requested 0\.000001 usdc, limit is 1\.5 usdc \(used 1\.5 usdc, exhausted until \d{4}-\d\d-\d\dT[\d:.]+Z\)$/,
        ),
        budget: { limit: "1.5", used: "1.5", left: "0", state: "exhausted" },
      },
    });

    // One unit short of 1.5: whichever flow comes last finds 0.049999 left and is the only refusal.
    expect(shortRace.paid).toHaveLength(RACERS - 1);
    expect(shortRace.refused).toHaveLength(1);
    expect(shortRace.refused[0]!.problem).toMatchObject({
      status: 403,
      code: "POLICY_VIOLATION",
      reasonCode: "daily_budget_exceeded",
      errorClass: "DailyBudgetExceededError",
      reason: "daily_budget_exceeded: requested 0.05 usdc, limit is 1.499999 usdc (used 1.45 usdc, left 0.049999 usdc)",
      budget: { limit: "1.499999", used: "1.45", left: "0.049999", state: "warning" },
    });

    // 25 calls per hour: exactly 25 of 40 pass, the other 15 are refused by count.
    expect(rateRace.paid).toHaveLength(25);
    expect(rateRace.refused).toHaveLength(15);
    for (const f of rateRace.refused) {
      expect(f.problem).toMatchObject({
        reasonCode: "rate_limit_exceeded",
        errorClass: "PolicyViolationError",
        reason: "rate_limit_exceeded: requested 26 calls/1h, limit is 25 calls/1h",
      });
    }

    // The endpoint rule under the same race: exactly one refusal, naming the rule; the agent's budget untouched by it.
    expect(endpointRace.paid).toHaveLength(RACERS - 1);
    expect(endpointRace.refused).toHaveLength(1);
    expect(endpointRace.refused[0]!.problem).toMatchObject({
      status: 403,
      reasonCode: "daily_budget_exceeded",
      endpointRule: "127.0.0.1/x402/price",
      reason:
        "daily_budget_exceeded: requested 0.05 usdc, limit is 1.499999 usdc (used 1.45 usdc, left 0.049999 usdc) (endpointBudgets 127.0.0.1/x402/price)",
    });
    expect(versionOf(endpointRace.refused[0]!.problem.policyVersion)).toBe(1);
    expect(endpointRace.refused[0]!.problem.budget).toBeUndefined();
  }, 180_000);
});
