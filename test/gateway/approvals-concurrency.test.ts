/**
 * Approvals under contention (docs/policy.md "Approvals"), real Postgres through the REST handler:
 * 50 concurrent payments needing approval under one daily budget and rate limit, then every held
 * one raced by two people (approve and deny), its signed link and three timeout-loop passes whose
 * clock is past the deadline, then resumed all at once and settled. Every approval is decided
 * exactly once (one winner among the deciders, one `approval.decided`), landed money never exceeds
 * a limit, and the ledger (the settler's record), the tables and the answers agree.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { setTimeout as delay } from "node:timers/promises";
import { Keypair } from "@solana/web3.js";
import bs58 from "bs58";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { expireApprovals } from "../../api/gateway/loops/index.js";
import { createGatewayHandler } from "../../api/gateway/http/index.js";
import type { SettlementLedger } from "../../api/gateway/chain/index.js";
import { AgentWallets, createAgentWallet, generateWalletEncryptionKey, keystoreFromEnv } from "../../api/gateway/wallets/index.js";
import { SecretBox } from "../../api/gateway/webhooks/index.js";
import type { SettleRequest } from "../../api/gateway/settlement/index.js";
import { X402Facilitator } from "../../api/gateway/x402/index.js";
import { createAccount, issueApiKey } from "../../api/shared/keys.js";
import { putPolicy } from "../../api/shared/policy/index.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { type RestAnswer, restCall } from "../support/rest.js";

const NETWORK = "solana-localnet";
const TOKEN = Keypair.generate().publicKey.toBase58();
const PAY_TO = Keypair.generate().publicKey.toBase58();
const ENDPOINT = "https://api.example.com/v1/report";
const PAYMENTS = 50;
const AMOUNT_UNITS = 1_000_000n;
const BUDGET_UNITS = 30_000_000n;
const RATE_CALLS = 40;
const TIMEOUT_MS = 60_000;

let db: FreshDatabase;
let handle: (request: Request) => Promise<Response | null>;
let adminKey: string;
let approverKey: string;
let agentId: string;
const settled: SettleRequest[] = [];

beforeAll(async () => {
  db = await createFreshDatabase();
  const keystore = keystoreFromEnv({ WALLET_ENCRYPTION_KEY: generateWalletEncryptionKey() });
  const ledger = { network: NETWORK } as unknown as SettlementLedger;
  const wallets = new AgentWallets({ pool: db.pool, keystore, ledger, fundingSource: { fund: () => Promise.reject(new Error("unused")) } });
  const facilitator = new X402Facilitator({
    pool: db.pool,
    agents: wallets,
    network: NETWORK,
    token: TOKEN,
    settler: {
      async settlePayment(request) {
        settled.push(request);
        return { txHash: bs58.encode(randomBytes(64)), slot: 1, paymentId: BigInt(settled.length) };
      },
    },
  });
  handle = createGatewayHandler({ pool: db.pool, wallets, keystore, facilitator, secretBox: new SecretBox(randomBytes(32)) });
  const accountId = await createAccount(db.pool, "approvals under contention");
  adminKey = (await issueApiKey(db.pool, accountId)).apiKey;
  approverKey = (await issueApiKey(db.pool, accountId, { kind: "approver" })).apiKey;
  agentId = "racer";
  await createAgentWallet(db.pool, keystore, { accountId, agentId });
  await putPolicy(db.pool, agentId, {
    dailyBudgetUnits: BUDGET_UNITS,
    rateLimit: { calls: RATE_CALLS, window: "1h" },
    approval: { aboveUnits: 500_000n, domains: [], firstPaymentToDomain: false, timeoutMs: TIMEOUT_MS, onTimeout: "deny" },
  });
});

afterAll(async () => {
  await db?.drop();
});

const requirement = { scheme: "exact", network: NETWORK, token: TOKEN, amount: AMOUNT_UNITS.toString(), payTo: PAY_TO, resource: ENDPOINT };

function authorize(idem: string): Promise<RestAnswer> {
  return restCall(handle, "POST", `/v1/agents/${agentId}/payments/authorize`, {
    key: adminKey,
    body: { endpoint: ENDPOINT, x402: requirement },
    idem,
  });
}

async function linkOf(approvalId: string): Promise<string> {
  const { rows } = await db.pool.query<{ url: string }>(
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
    const deciders = approvals.flatMap((approval, i) => {
      const path = links[i]!; // path-only: no public URL configured
      const calls: Promise<{ id: string; by: string; status: number; decided?: string }>[] = [
        restCall(handle, "POST", `/v1/approvals/${approval.id}/approve`, { key: approverKey, body: {} }).then((a) => ({
          id: approval.id,
          by: "approve",
          status: a.status,
          decided: a.body?.status,
        })),
        restCall(handle, "POST", `/v1/approvals/${approval.id}/deny`, { key: adminKey, body: { note: "race" } }).then((a) => ({
          id: approval.id,
          by: "deny",
          status: a.status,
          decided: a.body?.status,
        })),
        restCall(handle, "POST", path, {
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
        const pass = await expireApprovals(db.pool, afterDeadline, 3);
        expired += pass.expired;
        if (pass.expired === 0) return expired;
      }
    });
    const [answers, reports] = await Promise.all([Promise.all(deciders), Promise.all(loops)]);
    const expiredByLoop = reports.reduce((sum, n) => sum + n, 0);

    // Exactly one winner per approval: one 200 among the people and the link, or the loop.
    const { rows: decided } = await db.pool.query<{ id: string; status: string; decided_by: string; outcome: string | null }>(
      "SELECT id, status, decided_by, outcome FROM approvals WHERE agent_id = $1",
      [agentId],
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
    const { rows: events } = await db.pool.query<{ id: string; n: number }>(
      `SELECT payload->>'approvalId' AS id, count(*)::int AS n FROM gateway_events
       WHERE type = 'approval.decided' AND agent_id = $1 GROUP BY 1`,
      [agentId],
    );
    expect(events).toHaveLength(held.length);
    for (const event of events) expect(event.n).toBe(1);

    // 3. Every held payment resumed at once with its key, then every signed one settled.
    const resumed = await Promise.all(heldKeys.map((key) => authorize(key)));
    const signed = resumed.filter((a) => a.status === 200);
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
    const settles = await Promise.all(
      signed.map((a) =>
        restCall(handle, "POST", "/v1/x402/settle", { key: adminKey, body: { payment: a.body.payment, requirement }, idem: randomUUID() }),
      ),
    );
    for (const answer of settles) expect(answer.body.success).toBe(true);

    // 4. The ledger (the settler's record), the tables and the answers agree; no limit is exceeded.
    const landed = settled.filter((s) => s.agentId === agentId);
    expect(landed).toHaveLength(signed.length);
    const landedUnits = BigInt(landed.length) * AMOUNT_UNITS;
    expect(landedUnits <= BUDGET_UNITS).toBe(true);
    expect(landed.length <= RATE_CALLS).toBe(true);
    const { rows: ledgerRows } = await db.pool.query<{ status: string; n: number; units: string }>(
      "SELECT status, count(*)::int AS n, sum(amount_units)::text AS units FROM spend_reservations WHERE agent_id = $1 GROUP BY 1",
      [agentId],
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
