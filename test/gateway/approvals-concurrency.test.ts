/**
 * Approvals under contention (docs/policy.md "Approvals"), over the real REST routes, the real
 * facilitator and the real program on the local ledger (`startSystem`): 50 concurrent payments
 * needing approval under one daily budget and rate limit, then every held one raced by two people
 * (approve and deny), its signed link and three timeout-loop passes whose clock is past the
 * deadline, then resumed all at once and settled on the ledger. Every approval is decided exactly
 * once (one winner among the deciders, one `approval.decided`), landed money never exceeds a limit,
 * and the ledger (the payee's balance), the tables and the answers agree.
 */
import { randomUUID } from "node:crypto";
import { setTimeout as delay } from "node:timers/promises";
import { PublicKey } from "@solana/web3.js";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tokenBalanceUnits } from "../../api/gateway/chain/ledger.js";
import { expireApprovals } from "../../api/gateway/loops/index.js";
import { requirementBody } from "../../api/gateway/x402/index.js";
import { type System, startSystem } from "../../scripts/system.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { fundedAgent, type RestAnswer, rest } from "../sdk/server-support.js";
import { restCall } from "../support/rest.js";

const ENDPOINT = "https://api.example.com/v1/report";
const PAYMENTS = 50;
const AMOUNT_UNITS = 1_000_000n;
const BUDGET_UNITS = 30_000_000n;
const RATE_CALLS = 40;
const TIMEOUT = "60s";

let db: FreshDatabase;
let system: System;
let adminKey: string;
let approverKey: string;
/** The payee's own key: the facilitator is called by the resource server, another account. */
let serverKey: string;
let payee: PublicKey;
const agentId = "racer";
/** The agent's internal key (agents.agent_id), which the gateway's tables hold. */
let agentKey: string;

beforeAll(async () => {
  db = await createFreshDatabase();
  system = await startSystem({ databaseUrl: db.url, port: 0, allowPrivateNetworks: true, logger: pino({ level: "warn" }) });
  adminKey = (await system.createAccount("approvals under contention")).apiKey;
  serverKey = (await system.createAccount("approvals payee")).apiKey;
  const approver = await rest(system, adminKey, "POST", "/v1/api-keys", { scope: "approver" });
  expect(approver.status, approver.text).toBe(201);
  approverKey = approver.body.apiKey;
  payee = new PublicKey(await fundedAgent(system, serverKey, "approvals-payee", 0.01));
  await fundedAgent(system, adminKey, agentId, 40);
  agentKey = (await system.pool.query<{ agent_id: string }>("SELECT agent_id FROM agents WHERE public_id = $1", [agentId])).rows[0]!
    .agent_id;
  const policy = await rest(system, adminKey, "PUT", `/v1/policies/${agentId}`, {
    dailyBudget: { usdc: 30 },
    rateLimit: { calls: RATE_CALLS, window: "1h" },
    approval: { above: { usdc: 0.5 }, timeout: TIMEOUT },
  });
  expect(policy.status, policy.text).toBe(200);
}, 120_000);

afterAll(async () => {
  await system?.stop();
  await db?.drop();
});

const requirement = () =>
  requirementBody({
    scheme: "exact",
    network: system.network,
    token: system.token,
    amountUnits: AMOUNT_UNITS,
    payTo: payee.toBase58(),
    resource: ENDPOINT,
  });

function authorize(idem: string): Promise<RestAnswer> {
  return rest(system, adminKey, "POST", `/v1/agents/${agentId}/payments/authorize`, { endpoint: ENDPOINT, x402: requirement() }, idem);
}

async function linkOf(approvalId: string): Promise<string> {
  const { rows } = await system.pool.query<{ url: string }>(
    "SELECT payload->>'decideUrl' AS url FROM gateway_events WHERE type = 'approval.requested' AND payload->>'approvalId' = $1",
    [approvalId],
  );
  return rows[0]!.url;
}

describe("approvals under contention", () => {
  it("50 held payments raced by people, links and the timeout loop: decided once each, nothing over a limit, ledger = tables = answers", async () => {
    // 1. Fifty at once: the held amounts count against the budget, so 30 are held and 20 refused.
    const keys = Array.from({ length: PAYMENTS }, () => randomUUID());
    const first = await Promise.all(keys.map((key) => authorize(key)));
    const held = first.filter((a) => a.status === 202);
    const refused = first.filter((a) => a.status === 403);
    expect(held).toHaveLength(Number(BUDGET_UNITS / AMOUNT_UNITS));
    expect(refused).toHaveLength(PAYMENTS - held.length);
    for (const answer of refused) expect(answer.body.reasonCode).toBe("daily_budget_exceeded");
    const heldKeys = keys.filter((_, i) => first[i]!.status === 202);
    const approvals: { id: string; expiresAt: string }[] = held.map((a) => a.body.approval);
    expect(new Set(approvals.map((a) => a.id)).size).toBe(held.length);

    // 2. Every held payment raced: approve, deny, its link (approving or denying), and three
    //    timeout-loop passes whose clock is past every deadline.
    const afterDeadline = new Date(Math.max(...approvals.map((a) => new Date(a.expiresAt).getTime())) + 1);
    const links = await Promise.all(approvals.map((a) => linkOf(a.id)));
    // Three are approved before the race, alone, so some payments surely reach the ledger.
    const solo: { id: string; by: string; status: number; decided?: string }[] = [];
    for (const approval of approvals.slice(0, 3)) {
      const answer = await rest(system, approverKey, "POST", `/v1/approvals/${approval.id}/approve`, {});
      expect(answer.body.outcome, answer.text).toBe("authorized");
      solo.push({ id: approval.id, by: "approve", status: answer.status, decided: answer.body.status });
    }
    const deciders = approvals.slice(3).flatMap((approval, index) => {
      const i = index + 3;
      const path = links[i]!; // path-only: no public URL configured
      const calls: Promise<{ id: string; by: string; status: number; decided?: string }>[] = [
        restCall(system.apiUrl, "POST", `/v1/approvals/${approval.id}/approve`, { key: approverKey, body: {} }).then((a) => ({
          id: approval.id,
          by: "approve",
          status: a.status,
          decided: a.body?.status,
        })),
        restCall(system.apiUrl, "POST", `/v1/approvals/${approval.id}/deny`, { key: adminKey, body: { note: "race" } }).then((a) => ({
          id: approval.id,
          by: "deny",
          status: a.status,
          decided: a.body?.status,
        })),
        restCall(system.apiUrl, "POST", path, {
          raw: `decision=${i % 2 === 0 ? "approve" : "deny"}`,
          contentType: "application/x-www-form-urlencoded",
          lenientJson: true,
        }).then((a) => ({ id: approval.id, by: "link", status: a.status })),
      ];
      return calls;
    });
    // Three loops, joining the race a little apart, in small batches (as a loop under load would).
    const loops = [5, 15, 30].map(async (startMs) => {
      await delay(startMs);
      let expired = 0;
      for (;;) {
        const pass = await expireApprovals(system.pool, afterDeadline, 3);
        expired += pass.expired;
        if (pass.expired === 0) return expired;
      }
    });
    const [raced, reports] = await Promise.all([Promise.all(deciders), Promise.all(loops)]);
    const answers = [...solo, ...raced];
    const expiredByLoop = reports.reduce((sum, n) => sum + n, 0);

    // Exactly one winner per approval: one 200 among the people and the link, or the loop.
    const { rows: decided } = await system.pool.query<{ id: string; status: string; decided_by: string; outcome: string | null }>(
      "SELECT id, status, decided_by, outcome FROM approvals WHERE agent_id = $1",
      [agentKey],
    );
    expect(decided).toHaveLength(held.length);
    const byId = new Map(decided.map((row) => [row.id, row]));
    let expiredCount = 0;
    for (const approval of approvals) {
      const row = byId.get(approval.id)!;
      expect(row.status).not.toBe("pending");
      const wins = answers.filter((a) => a.id === approval.id && a.status === 200);
      const losses = answers.filter((a) => a.id === approval.id && a.status !== 200);
      if (row.status === "expired") {
        expiredCount += 1;
        expect(row.decided_by).toBe("timeout");
        expect(wins).toHaveLength(0);
      } else {
        expect(wins, `${approval.id}: ${JSON.stringify(answers.filter((a) => a.id === approval.id))}`).toHaveLength(1);
        if (wins[0]!.by !== "link") expect(wins[0]!.decided).toBe(row.status);
        expect(row.decided_by).toBe(wins[0]!.by === "link" ? "link" : row.decided_by);
      }
      for (const loss of losses) expect(loss.status, JSON.stringify(loss)).toBe(409);
    }
    expect(expiredByLoop).toBe(expiredCount);
    const { rows: events } = await system.pool.query<{ id: string; n: number }>(
      `SELECT payload->>'approvalId' AS id, count(*)::int AS n FROM gateway_events
       WHERE type = 'approval.decided' AND agent_id = $1 GROUP BY 1`,
      [agentId],
    );
    expect(events).toHaveLength(held.length);
    for (const event of events) expect(event.n).toBe(1);

    // 3. Every held payment resumed at once with its key, then every signed one settled.
    const resumed = await Promise.all(heldKeys.map((key) => authorize(key)));
    const signed = resumed.filter((a) => a.status === 200);
    expect(signed.length).toBeGreaterThanOrEqual(solo.length);
    for (const [i, answer] of resumed.entries()) {
      const row = byId.get(approvals[i]!.id)!;
      if (row.status === "approved") {
        expect(row.outcome).toBe("authorized");
        expect(answer.status).toBe(200);
      } else {
        expect(answer.status).toBe(403);
        expect(answer.body.code).toBe(row.status === "denied" ? "APPROVAL_DENIED" : "APPROVAL_EXPIRED");
      }
    }
    const payeeBefore = await tokenBalanceUnits(system.ledger, payee);
    const settles = await Promise.all(
      signed.map((a) => rest(system, serverKey, "POST", "/v1/x402/settle", { payment: a.body.payment, requirement: requirement() })),
    );
    for (const answer of settles) expect(answer.body.success, answer.text).toBe(true);

    // 4. The ledger (the settler's record), the tables and the answers agree; no limit is exceeded.
    const landedUnits = (await tokenBalanceUnits(system.ledger, payee)) - payeeBefore;
    expect(landedUnits).toBe(BigInt(signed.length) * AMOUNT_UNITS);
    expect(landedUnits <= BUDGET_UNITS).toBe(true);
    expect(signed.length <= RATE_CALLS).toBe(true);
    expect(new Set(settles.map((a) => a.body.txHash)).size).toBe(signed.length);
    const { rows: ledgerRows } = await system.pool.query<{ status: string; n: number; units: string }>(
      "SELECT status, count(*)::int AS n, sum(amount_units)::text AS units FROM spend_reservations WHERE agent_id = $1 GROUP BY 1",
      [agentKey],
    );
    const table = Object.fromEntries(ledgerRows.map((r) => [r.status, r]));
    expect(table.settled?.n ?? 0).toBe(signed.length);
    expect(BigInt(table.settled?.units ?? "0")).toBe(landedUnits);
    expect(table.released?.n ?? 0).toBe(held.length - signed.length);
    expect(table.pending_approval).toBeUndefined();
    expect(table.reserved).toBeUndefined();
    expect(decided.filter((r) => r.status === "approved")).toHaveLength(signed.length);
  });
});
