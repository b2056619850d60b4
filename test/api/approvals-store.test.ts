/**
 * The approvals store against a real Postgres (migration 049): tenant-scoped reads, paging, and
 * the one promise that matters, each approval decided exactly once, by people, the signed link and
 * the timeout loop racing on separate connections. Also the held reservation's status
 * `pending_approval`, which must count against the budget like `reserved`.
 */
import { createHash, randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Approval } from "../../api/shared/approvals/approval.js";
import { ApprovalNotFoundError } from "../../api/shared/approvals/errors.js";
import {
  createApproval,
  type DecisionResult,
  decideApproval,
  decideByLink,
  expireDueApprovals,
  findApprovalByIdempotencyKey,
  getApproval,
  listApprovals,
  nextApprovalExpiry,
  recordApprovalOutcome,
} from "../../api/shared/approvals/store.js";
import { approvalFromColumns, approvalToColumns } from "../../api/shared/policy/approval.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { randomScenario } from "./policy-reference.js";

const T0 = new Date("2026-03-01T12:00:00.000Z");
const MINUTE = 60_000;
const at = (ms: number) => new Date(T0.getTime() + ms);

let db: FreshDatabase;
let accountA: string;
let accountB: string;
let serial = 0;

beforeAll(async () => {
  db = await createFreshDatabase();
  accountA = await newAccount("a");
  accountB = await newAccount("b");
});

afterAll(async () => {
  await db?.drop();
});

async function newAccount(name: string): Promise<string> {
  const { rows } = await db.pool.query<{ id: string }>("INSERT INTO accounts (name) VALUES ($1) RETURNING id", [name]);
  return rows[0]!.id;
}

async function newAgent(accountId: string): Promise<string> {
  const agentKey = `${accountId}/agent-${++serial}`;
  await db.pool.query("INSERT INTO agents (agent_id, account_id, wallet_address) VALUES ($1, $2, $3)", [
    agentKey,
    accountId,
    `wallet-${serial}-${randomBytes(4).toString("hex")}`,
  ]);
  return agentKey;
}

async function heldReservation(agentKey: string, amountUnits: bigint, createdAt = T0): Promise<string> {
  const { rows } = await db.pool.query<{ id: string }>(
    `INSERT INTO spend_reservations (agent_id, amount_units, endpoint, domain, protocol, status, created_at, budget_window_start)
     VALUES ($1, $2, 'https://api.example.com/v1/x', 'api.example.com', 'x402', 'pending_approval', $3, $3) RETURNING id::text AS id`,
    [agentKey, amountUnits.toString(), createdAt],
  );
  return rows[0]!.id;
}

async function hold(
  accountId: string,
  agentKey: string,
  options: { requestedAt?: Date; timeoutMs?: number; idempotencyKey?: string | null; token?: string | null; amountUnits?: bigint } = {},
) {
  const amountUnits = options.amountUnits ?? 6_000_000n;
  const requestedAt = options.requestedAt ?? T0;
  return createApproval(db.pool, {
    accountId,
    agentKey,
    reservationId: await heldReservation(agentKey, amountUnits, requestedAt),
    idempotencyKey: options.idempotencyKey ?? null,
    amountUnits,
    endpoint: "https://api.example.com/v1/x",
    domain: "api.example.com",
    rule: "above",
    reason: "approval_required: 6 usdc is above the approval threshold of 5 usdc",
    requestedAt,
    timeoutMs: options.timeoutMs ?? 15 * MINUTE,
    linkTokenHash: options.token == null ? null : sha256(options.token),
  });
}

function sha256(text: string): Buffer {
  return createHash("sha256").update(text).digest();
}

async function row(id: string) {
  const { rows } = await db.pool.query("SELECT status, decided_by, decided_at, note, link_used_at, outcome FROM approvals WHERE id = $1", [
    id,
  ]);
  return rows[0];
}

describe("migration 049", () => {
  it("a pending_approval reservation counts in the period's total like a reserved one, and a release gives it back", async () => {
    const agent = await newAgent(accountA);
    const id = await heldReservation(agent, 7_000_000n);
    const total = async () =>
      (await db.pool.query<{ used: string | null }>("SELECT sum(used_units)::text AS used FROM spend_periods WHERE agent_id = $1", [agent]))
        .rows[0]!.used;
    expect(await total()).toBe("7000000");
    await db.pool.query("UPDATE spend_reservations SET status = 'reserved' WHERE id = $1", [id]);
    expect(await total()).toBe("7000000");
    await db.pool.query("UPDATE spend_reservations SET status = 'released' WHERE id = $1", [id]);
    expect(await total()).toBe("0");
  });

  it("refuses an unknown reservation status", async () => {
    const agent = await newAgent(accountA);
    const id = await heldReservation(agent, 1n);
    await expect(db.pool.query("UPDATE spend_reservations SET status = 'waiting' WHERE id = $1", [id])).rejects.toThrow(/status_check/);
  });

  it("stores a policy's approval whole, and refuses half of one or a timeout out of range", async () => {
    const agent = await newAgent(accountA);
    await db.pool.query(
      `INSERT INTO policies (agent_id, approval_above_units, approval_timeout_ms, approval_on_timeout) VALUES ($1, 5000000, 900000, 'deny')`,
      [agent],
    );
    const bad = [
      "approval_above_units, approval_timeout_ms) VALUES ($1, 1, 900000)",
      "approval_above_units, approval_timeout_ms, approval_on_timeout) VALUES ($1, 1, 999, 'deny')",
      "approval_above_units, approval_timeout_ms, approval_on_timeout) VALUES ($1, 1, 604800001, 'deny')",
      "approval_timeout_ms, approval_on_timeout) VALUES ($1, 60000, 'deny')",
      "approval_above_units) VALUES ($1, 1)",
      "approval_first_payment_to_domain) VALUES ($1, true)",
    ];
    for (const columns of bad) {
      const other = await newAgent(accountA);
      await expect(db.pool.query(`INSERT INTO policies (agent_id, ${columns}`, [other]), columns).rejects.toThrow(/check/);
    }
  });
});

describe("the policy's approval columns", () => {
  it("every valid approval rule (and none) satisfies the table's CHECK and reads back the same", async () => {
    let rules = 0;
    for (let seed = 1; seed <= 60; seed += 1) {
      const { approval } = randomScenario(seed, 0, T0, { approvals: true }).policy;
      const agent = await newAgent(accountA);
      const columns = approvalToColumns(approval);
      await db.pool.query(
        `INSERT INTO policies (agent_id, approval_above_units, approval_domains, approval_first_payment_to_domain, approval_timeout_ms, approval_on_timeout)
         VALUES ($1, $2, $3, $4, $5, $6)`,
        [
          agent,
          columns.approval_above_units,
          columns.approval_domains,
          columns.approval_first_payment_to_domain,
          columns.approval_timeout_ms,
          columns.approval_on_timeout,
        ],
      );
      const { rows } = await db.pool.query(
        `SELECT approval_above_units::text AS approval_above_units, approval_domains, approval_first_payment_to_domain,
                approval_timeout_ms::text AS approval_timeout_ms, approval_on_timeout FROM policies WHERE agent_id = $1`,
        [agent],
      );
      expect(approvalFromColumns(rows[0]), `seed ${seed}`).toEqual(approval ?? null);
      if (approval != null) rules += 1;
    }
    expect(rules).toBeGreaterThan(20);
  });
});

describe("reads are scoped to the account and, for an agent key, its agent", () => {
  it("another account, another agent and a malformed id all read as none", async () => {
    const agent = await newAgent(accountA);
    const otherAgent = await newAgent(accountA);
    const approval = await hold(accountA, agent, { idempotencyKey: "idem-1" });
    expect(approval).toMatchObject({ status: "pending", agentId: agent.split("/")[1], amountUnits: 6_000_000n, rule: "above" });
    expect(approval.expiresAt).toEqual(at(15 * MINUTE));
    expect(await getApproval(db.pool, { accountId: accountA }, approval.id)).toEqual(approval);
    expect(await getApproval(db.pool, { accountId: accountA, agentKey: agent }, approval.id)).toEqual(approval);
    expect(await getApproval(db.pool, { accountId: accountA, agentKey: otherAgent }, approval.id)).toBeNull();
    expect(await getApproval(db.pool, { accountId: accountB }, approval.id)).toBeNull();
    expect(await getApproval(db.pool, { accountId: accountA }, "not-a-uuid")).toBeNull();
    expect(await findApprovalByIdempotencyKey(db.pool, accountA, "idem-1")).toEqual(approval);
    expect(await findApprovalByIdempotencyKey(db.pool, accountB, "idem-1")).toBeNull();
  });

  it("lists newest first by pages that neither skip nor repeat (equal times included), filtered by status and agent", async () => {
    const account = await newAccount("paging");
    const agent = await newAgent(account);
    const other = await newAgent(account);
    const made: Approval[] = [];
    for (let i = 0; i < 7; i += 1)
      made.push(await hold(account, i % 3 === 0 ? other : agent, { requestedAt: at(Math.floor(i / 2) * MINUTE) }));
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page = await listApprovals(db.pool, account, { limit: 3, cursor });
      expect(page.approvals.length).toBeLessThanOrEqual(3);
      seen.push(...page.approvals.map((a) => a.id));
      cursor = page.nextCursor;
    } while (cursor !== null);
    expect(seen).toHaveLength(7);
    expect(new Set(seen).size).toBe(7);
    const expected = [...made].sort((x, y) => y.requestedAt.getTime() - x.requestedAt.getTime() || (y.id > x.id ? 1 : -1)).map((a) => a.id);
    expect(seen).toEqual(expected);

    await decideApproval(db.pool, { accountId: account, approvalId: made[1]!.id, decision: "denied", decidedBy: "1", note: null, at: T0 });
    const pendingOfAgent = await listApprovals(db.pool, account, { status: "pending", agentKey: agent });
    expect(pendingOfAgent.approvals.map((a) => a.id).sort()).toEqual(
      made
        .filter((_, i) => i % 3 !== 0 && i !== 1)
        .map((a) => a.id)
        .sort(),
    );
    expect((await listApprovals(db.pool, account, { status: "denied" })).approvals.map((a) => a.id)).toEqual([made[1]!.id]);
    expect((await listApprovals(db.pool, accountB, {})).approvals.some((a) => made.some((m) => m.id === a.id))).toBe(false);
  });

  it("refuses a limit out of range and a cursor it did not issue", async () => {
    await expect(listApprovals(db.pool, accountA, { limit: 0 })).rejects.toMatchObject({ code: "BAD_USER_INPUT", field: "limit" });
    await expect(listApprovals(db.pool, accountA, { limit: 201 })).rejects.toMatchObject({ code: "BAD_USER_INPUT", field: "limit" });
    await expect(listApprovals(db.pool, accountA, { cursor: "bm9wZQ" })).rejects.toMatchObject({ code: "BAD_USER_INPUT", field: "cursor" });
  });
});

describe("decided exactly once", () => {
  it("a decision is recorded with who, when and the note; a second one changes nothing", async () => {
    const agent = await newAgent(accountA);
    const approval = await hold(accountA, agent);
    const first = await decideApproval(db.pool, {
      accountId: accountA,
      approvalId: approval.id,
      decision: "approved",
      decidedBy: "42",
      note: "ok",
      at: at(MINUTE),
    });
    expect(first).toMatchObject({ kind: "decided", approval: { status: "approved", decidedBy: "42", note: "ok", decidedAt: at(MINUTE) } });
    const second = await decideApproval(db.pool, {
      accountId: accountA,
      approvalId: approval.id,
      decision: "denied",
      decidedBy: "43",
      note: "no",
      at: at(2 * MINUTE),
    });
    expect(second).toMatchObject({ kind: "already_decided", approval: { status: "approved", decidedBy: "42", note: "ok" } });
    expect(await row(approval.id)).toMatchObject({ status: "approved", decided_by: "42", note: "ok" });
    expect(await recordApprovalOutcome(db.pool, approval.id, "authorized")).toBe(true);
    expect(await recordApprovalOutcome(db.pool, approval.id, "refused")).toBe(false);
    expect(await row(approval.id)).toMatchObject({ outcome: "authorized" });
  });

  it("an unknown id, a malformed one and another account's approval are APPROVAL_NOT_FOUND, and nothing changes", async () => {
    const agent = await newAgent(accountA);
    const approval = await hold(accountA, agent);
    const decide = (accountId: string, approvalId: string) =>
      decideApproval(db.pool, { accountId, approvalId, decision: "approved", decidedBy: "1", note: null, at: T0 });
    await expect(decide(accountB, approval.id)).rejects.toBeInstanceOf(ApprovalNotFoundError);
    await expect(decide(accountA, "6f1c0000-0000-4000-8000-000000000000")).rejects.toMatchObject({
      code: "APPROVAL_NOT_FOUND",
      status: 404,
    });
    await expect(decide(accountA, "nope")).rejects.toMatchObject({ code: "APPROVAL_NOT_FOUND" });
    expect(await row(approval.id)).toMatchObject({ status: "pending", decided_by: null });
  });

  it("a decision after expires_at expires the approval instead (the gateway's clock decides)", async () => {
    const agent = await newAgent(accountA);
    const approval = await hold(accountA, agent, { timeoutMs: MINUTE });
    const late = await decideApproval(db.pool, {
      accountId: accountA,
      approvalId: approval.id,
      decision: "approved",
      decidedBy: "7",
      note: "too late",
      at: at(MINUTE),
    });
    expect(late).toMatchObject({ kind: "expired", approval: { status: "expired", decidedBy: "timeout", note: null } });
  });

  it("racing people, the link and the timeout loop on 24 connections: exactly one wins each of 10 approvals", async () => {
    const agent = await newAgent(accountA);
    // Its own pool: the shared one has 4 connections; 24 racers each need one at the same time.
    const racers = new pg.Pool({ connectionString: db.url, max: 24 });
    racers.on("error", () => undefined);
    try {
      for (let round = 0; round < 10; round += 1) {
        const token = randomBytes(32).toString("base64url");
        const approval = await hold(accountA, agent, { timeoutMs: MINUTE, token });
        // Half the people decide in time, half at the expiry; the loop runs at the expiry too.
        const people = Array.from({ length: 20 }, (_, i) =>
          decideApproval(racers, {
            accountId: accountA,
            approvalId: approval.id,
            decision: i % 2 === 0 ? "approved" : "denied",
            decidedBy: String(100 + i),
            note: `person ${i}`,
            at: i < 10 ? at(MINUTE - 1) : at(MINUTE),
          }),
        );
        const links = [0, 1].map(() =>
          decideByLink(racers, { tokenHash: sha256(token), decision: "approved", note: null, at: at(MINUTE - 1) }),
        );
        const loops = [0, 1].map(() => expireDueApprovals(racers, at(MINUTE)));
        const [decisions, expired] = await Promise.all([Promise.all([...people, ...links]), Promise.all(loops)]);
        const won = (decisions as DecisionResult[]).filter((d) => d.kind !== "already_decided");
        const expiredByLoop = expired.flat().filter((a) => a.id === approval.id);
        expect(won.length + expiredByLoop.length, `round ${round}`).toBe(1);
        const final = await row(approval.id);
        for (const loser of (decisions as DecisionResult[]).filter((d) => d.kind === "already_decided")) {
          expect(loser.approval.status).toBe(final.status);
          expect(loser.approval.decidedBy).toBe(final.decided_by);
        }
        if (won[0] !== undefined)
          expect(won[0].approval).toMatchObject({ status: final.status, decidedBy: final.decided_by, note: final.note });
        else expect(final).toMatchObject({ status: "expired", decided_by: "timeout" });
      }
    } finally {
      await racers.end();
    }
    const { rows } = await db.pool.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM approvals WHERE agent_id = $1 AND status = 'pending'",
      [agent],
    );
    expect(rows[0]!.n).toBe(0);
  });
});

describe("the signed link", () => {
  it("decides once; a used token, and a token no approval has, change nothing", async () => {
    const agent = await newAgent(accountA);
    const token = randomBytes(32).toString("base64url");
    const approval = await hold(accountA, agent, { token });
    const first = await decideByLink(db.pool, { tokenHash: sha256(token), decision: "denied", note: "not this one", at: at(MINUTE) });
    expect(first).toMatchObject({
      kind: "decided",
      approval: { id: approval.id, status: "denied", decidedBy: "link", note: "not this one" },
    });
    expect(await row(approval.id)).toMatchObject({ link_used_at: at(MINUTE) });
    const again = await decideByLink(db.pool, { tokenHash: sha256(token), decision: "approved", note: null, at: at(2 * MINUTE) });
    expect(again).toMatchObject({ kind: "already_decided", approval: { status: "denied" } });
    await expect(decideByLink(db.pool, { tokenHash: sha256("forged"), decision: "approved", note: null, at: T0 })).rejects.toMatchObject({
      code: "APPROVAL_NOT_FOUND",
    });
    expect(await row(approval.id)).toMatchObject({ status: "denied", decided_by: "link" });
  });
});

describe("the timeout loop's step", () => {
  it("expires only what is due, oldest first, in bounded batches, each once", async () => {
    const account = await newAccount("timeouts");
    const agent = await newAgent(account);
    const due: Approval[] = [];
    for (let i = 0; i < 5; i += 1) due.push(await hold(account, agent, { requestedAt: at(i * 1_000), timeoutMs: MINUTE }));
    const later = await hold(account, agent, { timeoutMs: 60 * MINUTE });
    const now = at(10 * MINUTE);
    const first = (await expireDueApprovals(db.pool, now, 3)).filter((a) => a.accountId === account);
    expect(first.map((a) => a.id)).toEqual(due.slice(0, 3).map((a) => a.id));
    expect(first.every((a) => a.status === "expired" && a.decidedBy === "timeout" && a.decidedAt?.getTime() === now.getTime())).toBe(true);
    const rest = (await expireDueApprovals(db.pool, now)).filter((a) => a.accountId === account);
    expect(rest.map((a) => a.id)).toEqual(due.slice(3).map((a) => a.id));
    expect((await expireDueApprovals(db.pool, now)).filter((a) => a.accountId === account)).toEqual([]);
    expect(await row(later.id)).toMatchObject({ status: "pending" });
    expect((await nextApprovalExpiry(db.pool))?.getTime()).toBeLessThanOrEqual(later.expiresAt.getTime());
  });
});
