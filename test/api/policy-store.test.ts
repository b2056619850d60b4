/**
 * The policy store against a real Postgres: patch semantics, usage from the reservation ledger
 * (rolling 24 h period, sliding rate window, released rows), dry runs that write nothing, and the
 * concurrency guarantee of reservations.
 */
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  checkPolicy,
  clearPolicy,
  getPolicy,
  getPolicyLockingAgent,
  isPolicyInputError,
  policyHistory,
  putPolicy,
  readUsage,
} from "../../api/shared/policy/index.js";
import {
  linkedReservation,
  type PaymentLink,
  releaseReservation,
  reserveInTransaction,
  reserveOrHoldInTransaction,
  reserveWithinPolicy,
  settleReservation,
} from "../../api/gateway/reservations/store.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { ReferenceModel, randomScenario } from "./policy-reference.js";

const T0 = new Date("2026-03-01T12:00:00.000Z");
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const USDC = 1_000_000n;
const at = (ms: number) => new Date(T0.getTime() + ms);
const pay = (amountUnits: bigint, endpoint = "https://api.example.com/v1/data") => ({ endpoint, amountUnits });

let db: FreshDatabase;
let agentSerial = 0;
const newAgent = () => `agent-${++agentSerial}`;

beforeAll(async () => {
  db = await createFreshDatabase();
});

afterAll(async () => {
  await db?.drop();
});

async function reservationCount(agentId: string): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM spend_reservations WHERE agent_id = $1", [agentId]);
  return rows[0]!.n;
}

describe("policies (spec 4.1 semantics)", () => {
  it("an agent without a policy has none", async () => {
    expect(await getPolicy(db.pool, newAgent())).toBeNull();
  });

  it("stores every field and reads it back exactly", async () => {
    const agent = newAgent();
    const stored = await putPolicy(
      db.pool,
      agent,
      {
        dailyBudgetUnits: 18_446_744_073_709_551_615n,
        perCallLimitUnits: 1_500_000n,
        allowedDomains: ["Example.COM.", "api.other.io"],
        blockedDomains: ["ads.example.com"],
        rateLimit: { calls: 10, window: "15m" },
        protocolPreference: "mpp",
      },
      T0,
    );
    expect(await getPolicy(db.pool, agent)).toEqual(stored);
    expect(stored).toMatchObject({
      agentId: agent,
      dailyBudgetUnits: 18_446_744_073_709_551_615n,
      perCallLimitUnits: 1_500_000n,
      allowedDomains: ["example.com", "api.other.io"],
      blockedDomains: ["ads.example.com"],
      rateLimit: { calls: 10, window: "15m" },
      protocolPreference: "mpp",
      updatedAt: T0,
    });
  });

  it("omitted fields keep their value and null removes a limit", async () => {
    const agent = newAgent();
    await putPolicy(db.pool, agent, { dailyBudgetUnits: 5n * USDC, perCallLimitUnits: USDC, allowedDomains: ["example.com"] });
    await putPolicy(db.pool, agent, { perCallLimitUnits: null });
    expect(await getPolicy(db.pool, agent)).toMatchObject({
      dailyBudgetUnits: 5n * USDC,
      perCallLimitUnits: null,
      allowedDomains: ["example.com"],
    });
  });

  it("an empty allowlist is kept apart from no allowlist", async () => {
    const agent = newAgent();
    await putPolicy(db.pool, agent, { allowedDomains: [] });
    expect((await getPolicy(db.pool, agent))?.allowedDomains).toEqual([]);
    await putPolicy(db.pool, agent, { allowedDomains: null });
    expect((await getPolicy(db.pool, agent))?.allowedDomains).toBeNull();
  });

  it("an invalid patch changes nothing", async () => {
    const agent = newAgent();
    const before = await putPolicy(db.pool, agent, { dailyBudgetUnits: USDC });
    await expect(putPolicy(db.pool, agent, { dailyBudgetUnits: 2n * USDC, blockedDomains: ["*.evil.com"] })).rejects.toMatchObject({
      reason: "invalid_domain",
    });
    expect(await getPolicy(db.pool, agent)).toEqual(before);
  });

  it("clear removes the policy and keeps the reservation ledger", async () => {
    const agent = newAgent();
    await putPolicy(db.pool, agent, { dailyBudgetUnits: 5n * USDC });
    await reserveWithinPolicy(db.pool, agent, pay(USDC), T0);
    expect(await clearPolicy(db.pool, agent)).toBe(true);
    expect(await clearPolicy(db.pool, agent)).toBe(false);
    expect(await getPolicy(db.pool, agent)).toBeNull();
    expect(await reservationCount(agent)).toBe(1);
  });
});

describe("a payment's first read: the agent's archive lock and its policy in one statement", () => {
  async function registered(): Promise<string> {
    const { rows } = await db.pool.query<{ id: string }>("INSERT INTO accounts (name) VALUES ('first read') RETURNING id");
    const agent = `${rows[0]!.id}/${newAgent()}`;
    await db.pool.query("INSERT INTO agents (agent_id, account_id, wallet_address) VALUES ($1, $2, $3)", [
      agent,
      rows[0]!.id,
      `w-${agent}`,
    ]);
    return agent;
  }

  it("answers the policy getPolicy answers, with the agent's archived_at", async () => {
    const agent = await registered();
    expect(await getPolicyLockingAgent(db.pool, agent)).toEqual({ archivedAt: null, policy: null });
    await putPolicy(db.pool, agent, { dailyBudgetUnits: 5n * USDC, protocolPreference: "mpp", blockedDomains: ["ads.example.com"] });
    const archivedAt = new Date("2026-03-02T00:00:00.000Z");
    await db.pool.query("UPDATE agents SET archived_at = $2 WHERE agent_id = $1", [agent, archivedAt]);
    const read = await getPolicyLockingAgent(db.pool, agent);
    expect(read.policy).toEqual(await getPolicy(db.pool, agent));
    expect(read.policy?.protocolPreference).toBe("mpp");
    expect(read.archivedAt).toEqual(archivedAt);
    expect(await getPolicyLockingAgent(db.pool, "no-such-agent")).toEqual({ archivedAt: null, policy: null });
  });

  it("holds the agent's row against an archive (FOR UPDATE) until its transaction ends", async () => {
    const agent = await registered();
    const payment = await db.pool.connect();
    const archive = await db.pool.connect();
    try {
      await payment.query("BEGIN");
      await getPolicyLockingAgent(payment, agent);
      await archive.query("BEGIN");
      await archive.query("SET LOCAL lock_timeout = '200ms'");
      await expect(archive.query("SELECT 1 FROM agents WHERE agent_id = $1 FOR UPDATE", [agent])).rejects.toThrow(/lock timeout/);
      await archive.query("ROLLBACK");
      await payment.query("COMMIT");
      await archive.query("BEGIN");
      await archive.query("SELECT 1 FROM agents WHERE agent_id = $1 FOR UPDATE", [agent]);
      await archive.query("ROLLBACK");
    } finally {
      payment.release();
      archive.release();
    }
  });
});

describe("usage from the reservation ledger", () => {
  it("a dry run records nothing", async () => {
    const agent = newAgent();
    await putPolicy(db.pool, agent, { dailyBudgetUnits: USDC, allowedDomains: ["example.com"] });
    expect((await checkPolicy(db.pool, agent, pay(USDC / 2n), T0)).decision).toBe("allow");
    expect((await checkPolicy(db.pool, agent, pay(USDC, "https://evil.com"), T0)).decision).toBe("reject");
    expect((await checkPolicy(db.pool, agent, pay(2n * USDC), T0)).decision).toBe("reject");
    expect(await reservationCount(agent)).toBe(0);
  });

  it("a reservation stores the normalized domain, the protocol and its period", async () => {
    const agent = newAgent();
    const { decision, reservationId } = await reserveWithinPolicy(
      db.pool,
      agent,
      { endpoint: "https://API.Example.com./v1/x", amountUnits: 1_500_000n, offeredProtocols: ["mpp"] },
      T0,
    );
    expect(decision.decision).toBe("allow");
    const { rows } = await db.pool.query("SELECT * FROM spend_reservations WHERE id = $1", [reservationId]);
    expect(rows[0]).toMatchObject({
      agent_id: agent,
      amount_units: "1500000",
      endpoint: "https://API.Example.com./v1/x",
      domain: "api.example.com",
      protocol: "mpp",
      status: "reserved",
      created_at: T0,
      budget_window_start: T0,
      tx_hash: null,
    });
  });

  it("a rejected reservation writes nothing", async () => {
    const agent = newAgent();
    await putPolicy(db.pool, agent, { perCallLimitUnits: USDC });
    const result = await reserveWithinPolicy(db.pool, agent, pay(USDC + 1n), T0);
    expect(result).toMatchObject({ reservationId: null, decision: { reasonCode: "per_call_limit_exceeded" } });
    expect(await reservationCount(agent)).toBe(0);
  });

  it("the period starts at its first payment and resets exactly 24 h later", async () => {
    const agent = newAgent();
    await putPolicy(db.pool, agent, { dailyBudgetUnits: 10n * USDC });
    await reserveWithinPolicy(db.pool, agent, pay(4n * USDC), T0);
    await reserveWithinPolicy(db.pool, agent, pay(6n * USDC), at(23 * HOUR));
    const policy = (await getPolicy(db.pool, agent))!;

    expect(await readUsage(db.pool, agent, policy, at(DAY - 1))).toMatchObject({
      usedTodayUnits: 10n * USDC,
      windowStart: T0,
      windowResetsAt: at(DAY),
    });
    expect((await reserveWithinPolicy(db.pool, agent, pay(1n), at(DAY - 1))).decision.reasonCode).toBe("daily_budget_exceeded");

    expect(await readUsage(db.pool, agent, policy, at(DAY))).toMatchObject({
      usedTodayUnits: 0n,
      windowStart: null,
      windowResetsAt: null,
    });
    // Not a sliding 24 h: the 6 usdc paid at 23 h belong to the period that just reset.
    const next = await reserveWithinPolicy(db.pool, agent, pay(10n * USDC), at(DAY + HOUR));
    expect(next.decision).toMatchObject({ decision: "allow", budget: { windowStart: at(DAY + HOUR), usedUnits: 10n * USDC } });
    expect(await readUsage(db.pool, agent, policy, at(DAY + 2 * HOUR))).toMatchObject({
      usedTodayUnits: 10n * USDC,
      windowStart: at(DAY + HOUR),
    });
  });

  it("counts calls in the sliding rate window, half-open at its far end", async () => {
    const agent = newAgent();
    await putPolicy(db.pool, agent, { rateLimit: { calls: 2, window: "5m" } });
    await reserveWithinPolicy(db.pool, agent, pay(1n), T0);
    await reserveWithinPolicy(db.pool, agent, pay(1n), at(60_000));
    const policy = (await getPolicy(db.pool, agent))!;
    expect(await readUsage(db.pool, agent, policy, at(5 * 60_000 - 1))).toMatchObject({ rateCalls: 2, rateWindow: "5m" });
    expect((await checkPolicy(db.pool, agent, pay(1n), at(5 * 60_000 - 1))).reasonCode).toBe("rate_limit_exceeded");
    expect(await readUsage(db.pool, agent, policy, at(5 * 60_000))).toMatchObject({ rateCalls: 1 });
    expect((await reserveWithinPolicy(db.pool, agent, pay(1n), at(5 * 60_000))).decision.decision).toBe("allow");
  });

  it("settled reservations keep counting; released ones give back amount and call", async () => {
    const agent = newAgent();
    await putPolicy(db.pool, agent, { dailyBudgetUnits: 3n * USDC, rateLimit: { calls: 2, window: "1h" } });
    const first = await reserveWithinPolicy(db.pool, agent, pay(USDC), T0);
    const second = await reserveWithinPolicy(db.pool, agent, pay(2n * USDC), at(1));
    expect(await settleReservation(db.pool, first.reservationId!, "5tx")).toBe(true);
    expect(await settleReservation(db.pool, first.reservationId!, "5tx")).toBe(false);
    const policy = (await getPolicy(db.pool, agent))!;
    expect(await readUsage(db.pool, agent, policy, at(2))).toMatchObject({ usedTodayUnits: 3n * USDC, rateCalls: 2 });

    expect(await releaseReservation(db.pool, second.reservationId!)).toBe(true);
    expect(await releaseReservation(db.pool, first.reservationId!)).toBe(false);
    expect(await readUsage(db.pool, agent, policy, at(2))).toMatchObject({ usedTodayUnits: USDC, rateCalls: 1, windowStart: T0 });
    expect((await reserveWithinPolicy(db.pool, agent, pay(2n * USDC), at(3))).decision.decision).toBe("allow");
  });

  it("reports the budget.warning of the payment that reaches 80 %", async () => {
    const agent = newAgent();
    await putPolicy(db.pool, agent, { dailyBudgetUnits: 10n * USDC });
    expect((await reserveWithinPolicy(db.pool, agent, pay(7n * USDC), T0)).decision.warnings).toEqual([]);
    expect((await reserveWithinPolicy(db.pool, agent, pay(USDC), at(1))).decision.warnings).toEqual(["budget.warning"]);
    expect((await reserveWithinPolicy(db.pool, agent, pay(USDC), at(2))).decision.warnings).toEqual([]);
  });
});

describe("reserving inside the caller's transaction", () => {
  it("refuses to run outside a transaction, where the lock would protect nothing", async () => {
    const client = await db.pool.connect();
    try {
      await expect(reserveInTransaction(client, newAgent(), pay(1n), T0)).rejects.toThrow(/transaction/);
    } finally {
      client.release();
    }
  });

  it("refuses REPEATABLE READ, whose snapshot predates the lock", async () => {
    const client = await db.pool.connect();
    try {
      await client.query("BEGIN ISOLATION LEVEL REPEATABLE READ");
      await expect(reserveInTransaction(client, newAgent(), pay(1n), T0)).rejects.toThrow(/READ COMMITTED/);
      await client.query("ROLLBACK");
    } finally {
      client.release();
    }
  });

  it("commits or rolls back with the caller's transaction", async () => {
    const agent = newAgent();
    const client = await db.pool.connect();
    try {
      await client.query("BEGIN");
      const { reservationId } = await reserveInTransaction(client, agent, pay(USDC), T0);
      expect(reservationId).not.toBeNull();
      await client.query("ROLLBACK");
    } finally {
      client.release();
    }
    expect(await reservationCount(agent)).toBe(0);
  });
});

describe("the signed payment's link, written by the reservation's INSERT", () => {
  /** Runs `work` in a READ COMMITTED transaction that commits. */
  async function committed<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await db.pool.connect();
    try {
      await client.query("BEGIN");
      const result = await work(client);
      await client.query("COMMIT");
      return result;
    } catch (error) {
      await client.query("ROLLBACK");
      throw error;
    } finally {
      client.release();
    }
  }
  const linkOf = (ref: string): PaymentLink => ({
    paymentRef: ref,
    expiresAt: at(30_000),
    parentTxHash: "a".repeat(64),
    invocationBudgetUnits: 250_000n,
    claimedAt: at(1),
  });

  it("an allowed payment's reservation carries the link from its INSERT; the callback runs once, with the allowed decision", async () => {
    const agent = newAgent();
    await putPolicy(db.pool, agent, { dailyBudgetUnits: 10n * USDC });
    const calls: string[] = [];
    const reservation = await committed((client) =>
      reserveInTransaction(client, agent, pay(USDC), T0, {
        link: async (decision) => {
          calls.push(decision.decision);
          return linkOf(`x402:${agent}:1`);
        },
      }),
    );
    expect(calls).toEqual(["allow"]);
    const linked = await linkedReservation(db.pool, `x402:${agent}:1`);
    expect(linked).toMatchObject({
      id: reservation.reservationId,
      agentId: agent,
      amountUnits: USDC,
      status: "reserved",
      expiresAt: at(30_000),
      parentTxHash: "a".repeat(64),
      invocationBudgetUnits: 250_000n,
    });
    const { rows } = await db.pool.query<{ claimed_at: Date }>("SELECT claimed_at FROM spend_reservations WHERE id = $1", [
      reservation.reservationId,
    ]);
    expect(rows[0]!.claimed_at).toEqual(at(1));
  });

  it("is not asked for a refused payment, a payment the caller's check refuses, nor a held one", async () => {
    const agent = newAgent();
    await putPolicy(db.pool, agent, {
      dailyBudgetUnits: 10n * USDC,
      approval: { aboveUnits: 5n * USDC, domains: [], firstPaymentToDomain: false, timeoutMs: 60_000, onTimeout: "deny" },
    });
    let asked = 0;
    const link = async (): Promise<PaymentLink> => {
      asked += 1;
      return linkOf(`x402:${agent}:${asked}`);
    };
    const over = await committed((client) => reserveInTransaction(client, agent, pay(11n * USDC), T0, { link }));
    expect(over.decision.decision).toBe("reject");
    const checked = await committed((client) =>
      reserveInTransaction(client, agent, pay(USDC), T0, {
        link,
        check: async () => ({ reasonCode: "test_refusal", reason: "refused by the test", requested: "1", limit: "0", unit: "usdc" }),
      }),
    );
    expect(checked.reservationId).toBeNull();
    const held = await committed((client) => reserveOrHoldInTransaction(client, agent, pay(6n * USDC), T0, { link, parentTxHash: null }));
    expect(held.decision.decision).toBe("needs_approval");
    expect(asked).toBe(0);
    const { rows } = await db.pool.query<{ status: string; payment_ref: string | null }>(
      "SELECT status, payment_ref FROM spend_reservations WHERE agent_id = $1",
      [agent],
    );
    expect(rows).toEqual([{ status: "pending_approval", payment_ref: null }]);
  });

  it("a callback that throws reserves nothing and leaves the caller's transaction usable", async () => {
    const agent = newAgent();
    await putPolicy(db.pool, agent, { dailyBudgetUnits: 10n * USDC });
    const after = await committed(async (client) => {
      await expect(
        reserveInTransaction(client, agent, pay(USDC), T0, {
          link: async () => {
            throw new Error("the signer failed");
          },
        }),
      ).rejects.toThrow("the signer failed");
      return reserveInTransaction(client, agent, pay(2n * USDC), T0, { link: async () => linkOf(`x402:${agent}:after`) });
    });
    const { rows } = await db.pool.query<{ amount_units: string; payment_ref: string }>(
      "SELECT amount_units::text, payment_ref FROM spend_reservations WHERE agent_id = $1",
      [agent],
    );
    expect(rows).toEqual([{ amount_units: (2n * USDC).toString(), payment_ref: `x402:${agent}:after` }]);
    // The failed attempt counted nothing: the second payment is the period's only one.
    expect(after.decision.budget.usedUnits).toBe(2n * USDC);
  });

  it("without a savepoint (a caller that rolls back whole) a failed reservation aborts the caller's transaction", async () => {
    const agent = newAgent();
    await putPolicy(db.pool, agent, { dailyBudgetUnits: 10n * USDC });
    const client = await db.pool.connect();
    try {
      await client.query("BEGIN");
      await expect(
        reserveInTransaction(client, agent, pay(USDC), T0, {
          savepoint: false,
          link: async () => linkOf("x402:duplicate:1"),
        }).then(() =>
          reserveInTransaction(client, agent, pay(USDC), T0, { savepoint: false, link: async () => linkOf("x402:duplicate:1") }),
        ),
      ).rejects.toThrow(/spend_reservations_payment_ref/);
      await expect(client.query("SELECT 1")).rejects.toThrow(/current transaction is aborted/);
      await client.query("ROLLBACK");
    } finally {
      client.release();
    }
    expect(await reservationCount(agent)).toBe(0);
  });
});

describe("concurrency", () => {
  let wide: pg.Pool;

  beforeAll(() => {
    wide = new pg.Pool({ connectionString: db.url, max: 25 });
  });

  afterAll(async () => {
    await wide.end();
  });

  async function fire(agent: string, count: number, amountUnits: bigint) {
    return Promise.all(Array.from({ length: count }, (_, i) => reserveWithinPolicy(wide, agent, pay(amountUnits), at(i))));
  }

  it("50 concurrent reservations never sum above the daily budget", async () => {
    const agent = newAgent();
    await putPolicy(db.pool, agent, { dailyBudgetUnits: 10n * USDC });
    const results = await fire(agent, 50, 300_000n);
    const accepted = results.filter((r) => r.decision.decision === "allow");
    expect(accepted).toHaveLength(33);
    expect(results.filter((r) => r.decision.reasonCode === "daily_budget_exceeded")).toHaveLength(17);
    const { rows } = await db.pool.query<{ total: string; n: number }>(
      "SELECT sum(amount_units)::text AS total, count(*)::int AS n FROM spend_reservations WHERE agent_id = $1",
      [agent],
    );
    expect(rows[0]).toEqual({ total: "9900000", n: 33 });
    expect(accepted.filter((r) => r.decision.warnings.length > 0)).toHaveLength(1);
  });

  it("50 concurrent reservations never exceed the rate limit", async () => {
    const agent = newAgent();
    await putPolicy(db.pool, agent, { rateLimit: { calls: 7, window: "1m" } });
    const results = await fire(agent, 50, 1n);
    expect(results.filter((r) => r.decision.decision === "allow")).toHaveLength(7);
    expect(await reservationCount(agent)).toBe(7);
  });

  it("50 concurrent reservations never sum above an endpoint rule's daily budget; the rule is named and other endpoints go on", async () => {
    const agent = newAgent();
    await putPolicy(db.pool, agent, {
      dailyBudgetUnits: 100n * USDC,
      endpointBudgets: [{ match: "api.example.com/v1/search", dailyBudgetUnits: 2n * USDC, perCallLimitUnits: null, rateLimit: null }],
    });
    const search = "https://api.example.com/v1/search/deep?q=1";
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        reserveWithinPolicy(wide, agent, pay(300_000n, i % 2 === 0 ? search : "https://api.example.com/v1/data"), at(i)),
      ),
    );
    const searches = results.filter((_, i) => i % 2 === 0);
    expect(searches.filter((r) => r.decision.decision === "allow")).toHaveLength(6);
    const refused = searches.filter((r) => r.decision.decision === "reject");
    expect(refused).toHaveLength(19);
    for (const r of refused) {
      expect(r.decision).toMatchObject({ reasonCode: "daily_budget_exceeded", endpointRule: "api.example.com/v1/search", limit: "2" });
      expect(r.decision.reason).toContain("(endpointBudgets api.example.com/v1/search)");
    }
    expect(results.filter((_, i) => i % 2 === 1).every((r) => r.decision.decision === "allow")).toBe(true);
    const { rows } = await db.pool.query<{ total: string }>(
      "SELECT sum(amount_units)::text AS total FROM spend_reservations WHERE agent_id = $1 AND endpoint = $2",
      [agent, search],
    );
    expect(rows[0]!.total).toBe("1800000");
  });

  it("50 concurrent reservations never exceed an endpoint rule's rate limit, nor the agent's per-call limit where it is tighter", async () => {
    const agent = newAgent();
    await putPolicy(db.pool, agent, {
      perCallLimitUnits: 200_000n,
      endpointBudgets: [
        { match: "example.com", dailyBudgetUnits: null, perCallLimitUnits: 500_000n, rateLimit: { calls: 4, window: "1h" } },
      ],
    });
    const results = await fire(agent, 50, 100_000n);
    expect(results.filter((r) => r.decision.decision === "allow")).toHaveLength(4);
    const refused = results.filter((r) => r.decision.decision === "reject");
    expect(refused.every((r) => r.decision.reasonCode === "rate_limit_exceeded" && r.decision.endpointRule === "example.com")).toBe(true);
    expect(await reservationCount(agent)).toBe(4);
    // The agent's 0.2 limit is tighter than the rule's 0.5: it refuses, and the refusal is the agent's own.
    const tight = await reserveWithinPolicy(db.pool, agent, pay(300_000n, "https://other.example.org/x"), at(1));
    expect(tight.decision).toMatchObject({ reasonCode: "per_call_limit_exceeded", endpointRule: null, limit: "0.2" });
  });

  it("agents do not share limits or wait on each other's budget", async () => {
    const [a, b] = [newAgent(), newAgent()];
    await putPolicy(db.pool, a, { dailyBudgetUnits: USDC });
    await putPolicy(db.pool, b, { dailyBudgetUnits: 2n * USDC });
    const results = await Promise.all([fire(a, 25, 100_000n), fire(b, 25, 100_000n)]);
    expect(results[0].filter((r) => r.decision.decision === "allow")).toHaveLength(10);
    expect(results[1].filter((r) => r.decision.decision === "allow")).toHaveLength(20);
  });

  it("a policy change waits for an open reservation of the same agent (one lock)", async () => {
    const agent = newAgent();
    await putPolicy(db.pool, agent, { dailyBudgetUnits: 100n * USDC });
    const client = await wide.connect();
    try {
      await client.query("BEGIN");
      await reserveInTransaction(client, agent, pay(USDC), T0);
      let done = false;
      const update = putPolicy(wide, agent, { dailyBudgetUnits: 5n * USDC }).then(() => (done = true));
      await sleep(200); // a window in which the update must not get through
      expect(done).toBe(false);
      await client.query("COMMIT");
      await update;
      expect(done).toBe(true);
    } finally {
      client.release();
    }
  });
});

describe("the store against the reference model", () => {
  it("agrees with the naive model on 25 random scenarios of 40 requests", async () => {
    const start = new Date("2026-06-01T00:00:00.000Z");
    for (let seed = 1; seed <= 25; seed += 1) {
      const agent = `model-${seed}`;
      const { policy, requests } = randomScenario(seed, 40, start);
      await putPolicy(db.pool, agent, {
        dailyBudgetUnits: policy.dailyBudgetUnits,
        perCallLimitUnits: policy.perCallLimitUnits,
        allowedDomains: policy.allowedDomains,
        blockedDomains: policy.blockedDomains,
        rateLimit: policy.rateLimit,
      });
      const model = new ReferenceModel(policy);
      for (const { at: now, host, request } of requests) {
        const context = `seed ${seed} at ${now.toISOString()} ${request.endpoint} ${request.amountUnits}`;
        const expected = model.decide(host, request.amountUnits, now.getTime());
        const { decision } = await reserveWithinPolicy(db.pool, agent, request, now);
        expect(decision.reasonCode, context).toBe(expected.reasonCode);
        expect(decision.warnings.length === 1, context).toBe(expected.warning);
        if (decision.decision === "allow") model.accept(request.amountUnits, now.getTime());
        const usage = await readUsage(db.pool, agent, policy, now);
        expect(usage.usedTodayUnits, context).toBe(model.usedInPeriod(now.getTime()));
        expect(usage.rateCalls, context).toBe(model.callsInRateWindow(now.getTime()));
      }
      model.assertInvariants();
    }
  });
});

describe("the store with endpoint budgets against the reference model", () => {
  it("agrees with the naive model on 15 random scenarios of 40 requests: each rule's usage read from the ledger", async () => {
    const start = new Date("2026-07-01T00:00:00.000Z");
    let named = 0;
    for (let seed = 1; seed <= 15; seed += 1) {
      const agent = `endpoint-model-${seed}`;
      const { policy, requests } = randomScenario(seed, 40, start, { endpoints: true });
      await putPolicy(db.pool, agent, {
        dailyBudgetUnits: policy.dailyBudgetUnits,
        perCallLimitUnits: policy.perCallLimitUnits,
        allowedDomains: policy.allowedDomains,
        blockedDomains: policy.blockedDomains,
        rateLimit: policy.rateLimit,
        endpointBudgets: policy.endpointBudgets ?? [],
      });
      const model = new ReferenceModel(policy);
      for (const { at: now, host, path, request } of requests) {
        const context = `seed ${seed} at ${now.toISOString()} ${request.endpoint} ${request.amountUnits}`;
        const expected = model.decideLimits(host, request.amountUnits, now.getTime(), path);
        const { decision } = await reserveWithinPolicy(db.pool, agent, request, now);
        expect(decision.reasonCode, context).toBe(expected.reasonCode);
        if (decision.decision === "allow") model.accept(request.amountUnits, now.getTime(), host, path);
        // No refusal is recorded by a bare reservation, so no period becomes exhausted (spec 3): the model is not told of refusals.
        else if (decision.endpointRule != null) named += 1;
        const usage = await readUsage(db.pool, agent, (await getPolicy(db.pool, agent))!, now);
        const expectedUsage = model.endpointUsage(now.getTime());
        for (const [match, value] of expectedUsage) expect(usage.endpointUsage?.get(match), `${context} ${match}`).toEqual(value);
      }
      model.assertInvariants();
    }
    expect(named).toBeGreaterThan(20);
  });
});

describe("policy versions", () => {
  it("every decision names a version that existed when it was made, across concurrent policy writes", async () => {
    const agent = newAgent();
    await putPolicy(db.pool, agent, { perCallLimitUnits: 2n * USDC });
    // Writers flip the per-call limit between 2 usdc (odd versions) and 0.5 usdc (even ones) while
    // 1-usdc payments run: each payment's outcome must be what its named version decides.
    const wide = new pg.Pool({ connectionString: db.url, max: 20 });
    try {
      const writes = Array.from({ length: 20 }, (_, i) =>
        putPolicy(wide, agent, { perCallLimitUnits: i % 2 === 0 ? 500_000n : 2n * USDC }, at(i), `writer-${i}`),
      );
      const payments = Array.from({ length: 60 }, (_, i) => reserveWithinPolicy(wide, agent, pay(USDC), at(i)));
      const [, results] = await Promise.all([Promise.all(writes), Promise.all(payments)]);
      const versions = new Map((await policyHistory(db.pool, agent, { limit: 100 })).map((v) => [v.version, v]));
      expect(versions.size).toBe(21);
      const allowedUnder = new Set<number>();
      for (const r of results) {
        const version = versions.get(r.policyVersion);
        expect(version, `version ${r.policyVersion}`).toBeDefined();
        expect(r.decision.decision === "allow").toBe(version!.policy.perCallLimitUnits === "2000000");
        if (r.reservationId !== null) allowedUnder.add(r.policyVersion);
      }
      // What the ledger recorded is the version the decision returned.
      const { rows } = await db.pool.query<{ policy_version: number }>(
        "SELECT DISTINCT policy_version FROM spend_reservations WHERE agent_id = $1",
        [agent],
      );
      expect(new Set(rows.map((row) => row.policy_version))).toEqual(allowedUnder);
      // Version numbers are 1..21 without a gap; the history names each writer.
      expect([...versions.keys()].sort((a, b) => a - b)).toEqual(Array.from({ length: 21 }, (_, i) => i + 1));
      expect(new Set([...versions.values()].map((v) => v.createdBy)).size).toBe(21);
    } finally {
      await wide.end();
    }
  });

  it("an invalid patch writes no version; clear writes one; an agent that never had a policy decides under version 0", async () => {
    const agent = newAgent();
    expect((await reserveWithinPolicy(db.pool, agent, pay(1n), T0)).policyVersion).toBe(0);
    await putPolicy(db.pool, agent, { dailyBudgetUnits: USDC });
    const bad = [
      { endpointBudgets: [{ match: "api.example.com:8443", dailyBudgetUnits: USDC, perCallLimitUnits: null, rateLimit: null }] },
      {
        endpointBudgets: [
          { match: "example.com", dailyBudgetUnits: USDC, perCallLimitUnits: null, rateLimit: null },
          { match: "EXAMPLE.com.", dailyBudgetUnits: null, perCallLimitUnits: USDC, rateLimit: null },
        ],
      },
      {
        endpointBudgets: [
          { match: "example.com", dailyBudgetUnits: null, perCallLimitUnits: null, rateLimit: { calls: 1, window: "7d" as "1m" } },
        ],
      },
    ];
    for (const patch of bad) {
      const error = await putPolicy(db.pool, agent, patch).catch((e: unknown) => e);
      expect(isPolicyInputError(error, "invalid_endpoint_budget") || isPolicyInputError(error, "invalid_rate_limit")).toBe(true);
    }
    expect((await getPolicy(db.pool, agent))?.version).toBe(1);
    expect(await clearPolicy(db.pool, agent)).toBe(true);
    expect(await clearPolicy(db.pool, agent)).toBe(false);
    expect((await policyHistory(db.pool, agent)).map((v) => v.version)).toEqual([2, 1]);
    // Cleared: the empty policy, at the clearing's version.
    expect((await reserveWithinPolicy(db.pool, agent, pay(1n), T0)).policyVersion).toBe(2);
  });
});

describe("the periods' running totals (spend_periods, kept by a trigger)", () => {
  /** What the totals must be: the reservations that count, summed per agent and period. */
  async function recomputed(agents: readonly string[]): Promise<string[]> {
    const { rows } = await db.pool.query<{ line: string }>(
      `SELECT agent_id || ' ' || budget_window_start::text || ' ' || sum(amount_units)::text || ' ' || count(*)::text AS line
       FROM spend_reservations WHERE agent_id = ANY($1) AND status <> 'released'
       GROUP BY agent_id, budget_window_start ORDER BY 1`,
      [agents],
    );
    return rows.map((r) => r.line);
  }

  /** The per-endpoint totals (spend_period_endpoints) and what they must be. */
  async function endpointTotals(agents: readonly string[]): Promise<[string[], string[]]> {
    const kept = await db.pool.query<{ line: string }>(
      `SELECT agent_id || ' ' || window_start::text || ' ' || endpoint || ' ' || used_units::text || ' ' || calls::text AS line
       FROM spend_period_endpoints WHERE agent_id = ANY($1) AND calls > 0 ORDER BY 1`,
      [agents],
    );
    const summed = await db.pool.query<{ line: string }>(
      `SELECT agent_id || ' ' || budget_window_start::text || ' ' || endpoint || ' ' || sum(amount_units)::text || ' ' || count(*)::text AS line
       FROM spend_reservations WHERE agent_id = ANY($1) AND status <> 'released'
       GROUP BY agent_id, budget_window_start, endpoint ORDER BY 1`,
      [agents],
    );
    return [kept.rows.map((r) => r.line), summed.rows.map((r) => r.line)];
  }

  async function totals(agents: readonly string[]): Promise<string[]> {
    const { rows } = await db.pool.query<{ line: string }>(
      `SELECT agent_id || ' ' || window_start::text || ' ' || used_units::text || ' ' || calls::text AS line
       FROM spend_periods WHERE agent_id = ANY($1) AND calls > 0 ORDER BY 1`,
      [agents],
    );
    return rows.map((r) => r.line);
  }

  it("equal the reservations they summarize after concurrent reserves, settles, releases and late landings over several periods", async () => {
    const agents = [newAgent(), newAgent(), newAgent()];
    const endpointBudgets = [{ match: "api.example.com/v1/search", dailyBudgetUnits: USDC, perCallLimitUnits: null, rateLimit: null }];
    for (const agent of agents) await putPolicy(db.pool, agent, { dailyBudgetUnits: 3n * USDC, endpointBudgets });
    const ENDPOINTS = ["https://api.example.com/v1/data", "https://api.example.com/v1/search", "https://api.example.com/v1/search/x"];
    let state = 0x2917;
    const random = (): number => {
      state = (state * 1_103_515_245 + 12_345) % 2_147_483_648;
      return state / 2_147_483_648;
    };
    const reserved: { agent: string; id: string }[] = [];
    // Three days of traffic, 40 moments a day, every agent acting at once at each moment.
    for (let step = 0; step < 120; step += 1) {
      const now = at(step * (DAY / 40));
      await Promise.all(
        agents.map(async (agent) => {
          const roll = random();
          const mine = reserved.filter((r) => r.agent === agent);
          const pick = mine[Math.floor(random() * mine.length)];
          if (roll < 0.55 || pick === undefined) {
            const endpoint = ENDPOINTS[Math.floor(random() * ENDPOINTS.length)]!;
            const { reservationId } = await reserveWithinPolicy(
              db.pool,
              agent,
              pay(BigInt(1 + Math.floor(random() * 400_000)), endpoint),
              now,
            );
            if (reservationId !== null) reserved.push({ agent, id: reservationId });
          } else if (roll < 0.75) {
            await settleReservation(db.pool, pick.id, `tx-${pick.id}`);
          } else if (roll < 0.92) {
            await releaseReservation(db.pool, pick.id);
          } else {
            // A payment released, then landed anyway (a payload already in flight): counts again.
            await db.pool.query("UPDATE spend_reservations SET status = 'settled', tx_hash = $2 WHERE id = $1 AND status = 'released'", [
              pick.id,
              `late-${pick.id}`,
            ]);
          }
        }),
      );
      if (step % 20 === 19) {
        expect(await totals(agents), `after step ${step}`).toEqual(await recomputed(agents));
        const [kept, summed] = await endpointTotals(agents);
        expect(kept, `endpoints after step ${step}`).toEqual(summed);
      }
    }
    expect(reserved.length).toBeGreaterThan(100);
    expect(await totals(agents)).toEqual(await recomputed(agents));
    // No period's accepted search payments exceed the rule's budget (late landings aside, which only re-count released ones).
    const { rows: over } = await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM (
         SELECT agent_id, budget_window_start FROM spend_reservations
         WHERE agent_id = ANY($1) AND status <> 'released' AND tx_hash IS DISTINCT FROM 'late-' || id AND endpoint LIKE '%/v1/search%'
         GROUP BY 1, 2 HAVING sum(amount_units) > $2) x`,
      [agents, USDC.toString()],
    );
    expect(over[0]!.n).toBe(0);
    // A deleted reservation (no route deletes one; an operator might) leaves the totals right too.
    await db.pool.query("DELETE FROM spend_reservations WHERE id = $1", [reserved[0]!.id]);
    expect(await totals(agents)).toEqual(await recomputed(agents));
    const [kept, summed] = await endpointTotals(agents);
    expect(kept).toEqual(summed);
  });

  it("are what the usage read returns: the same as summing the period's reservations", async () => {
    const agent = newAgent();
    await putPolicy(db.pool, agent, { dailyBudgetUnits: 10n * USDC });
    const ids: string[] = [];
    for (let i = 0; i < 30; i += 1) {
      const { reservationId } = await reserveWithinPolicy(db.pool, agent, pay(BigInt(10_000 * (i + 1))), at(i * 60_000));
      ids.push(reservationId!);
    }
    for (const id of ids.filter((_, i) => i % 3 === 0)) await releaseReservation(db.pool, id);
    const now = at(31 * 60_000);
    const { rows } = await db.pool.query<{ used: string }>(
      "SELECT coalesce(sum(amount_units), 0)::text AS used FROM spend_reservations WHERE agent_id = $1 AND status <> 'released'",
      [agent],
    );
    const usage = await readUsage(db.pool, agent, (await getPolicy(db.pool, agent))!, now);
    expect(usage.usedTodayUnits).toBe(BigInt(rows[0]!.used));
    // The period is the one its first reservation opened, even though that one was released.
    expect(usage.windowStart).toEqual(at(0));
    // Every reservation released: the period no longer counts as open (as when usage summed rows).
    for (const id of ids) await releaseReservation(db.pool, id);
    const empty = await readUsage(db.pool, agent, (await getPolicy(db.pool, agent))!, now);
    expect(empty).toMatchObject({ usedTodayUnits: 0n, windowStart: null });
  });
});
