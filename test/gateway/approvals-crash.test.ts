/**
 * The approvals' timeout loop killed with SIGKILL while approvals are pending (some due, some
 * not yet), then started again: every approval is decided exactly once (`expired` by `timeout`,
 * one `approval.decided`, its reservation released), including those that fell due while no loop
 * was running. The loop keeps no state but the rows, so the restart simply finds what is due.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { resolve } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { Keypair } from "@solana/web3.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createGatewayHandler } from "../../api/gateway/http/index.js";
import type { SettlementLedger } from "../../api/gateway/chain/index.js";
import { AgentWallets, createAgentWallet, generateWalletEncryptionKey, keystoreFromEnv } from "../../api/gateway/wallets/index.js";
import { SecretBox } from "../../api/gateway/webhooks/index.js";
import { createAccount, issueApiKey } from "../../api/shared/keys.js";
import { putPolicy } from "../../api/shared/policy/index.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { pollUntil } from "../support/poll.js";
import { restCall } from "../support/rest.js";

const ROOT = resolve(import.meta.dirname, "../..");
const NETWORK = "solana-localnet";
const TOKEN = Keypair.generate().publicKey.toBase58();
const ENDPOINT = "https://api.example.com/v1/report";

let db: FreshDatabase;
let handle: (request: Request) => Promise<Response | null>;
let adminKey: string;
let keystore: ReturnType<typeof keystoreFromEnv>;
let accountId: string;
const children: ChildProcess[] = [];

beforeAll(async () => {
  db = await createFreshDatabase();
  keystore = keystoreFromEnv({ WALLET_ENCRYPTION_KEY: generateWalletEncryptionKey() });
  const ledger = { network: NETWORK } as unknown as SettlementLedger;
  const wallets = new AgentWallets({ pool: db.pool, keystore, ledger, fundingSource: { fund: () => Promise.reject(new Error("unused")) } });
  handle = createGatewayHandler({ pool: db.pool, wallets, keystore, secretBox: new SecretBox(randomBytes(32)) });
  accountId = await createAccount(db.pool, "approvals crash");
  adminKey = (await issueApiKey(db.pool, accountId)).apiKey;
});

afterAll(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  await db?.drop();
});

function startLoop(): ChildProcess {
  // node with tsx's loader in one process, so SIGKILL hits the loop itself.
  const child = spawn(process.execPath, ["--import", "tsx", "test/gateway/support/approval-timeouts-main.ts"], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: db.url, APPROVAL_TIMEOUT_INTERVAL_MS: "50", APPROVAL_TIMEOUT_BATCH: "2" },
    stdio: "ignore",
  });
  children.push(child);
  return child;
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((done) => child.once("exit", () => done()));
}

/** Held payments of a new agent whose policy holds every payment for `timeout`. */
async function holdPayments(count: number, timeout: string): Promise<string[]> {
  const agentId = `agent-${randomUUID().slice(0, 8)}`;
  await createAgentWallet(db.pool, keystore, { accountId, agentId });
  await putPolicy(db.pool, agentId, {
    approval: {
      aboveUnits: 0n,
      domains: [],
      firstPaymentToDomain: false,
      timeoutMs: Number.parseInt(timeout, 10) * 1_000,
      onTimeout: "deny",
    },
  });
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const requirement = {
      scheme: "exact",
      network: NETWORK,
      token: TOKEN,
      amount: "1000",
      payTo: Keypair.generate().publicKey.toBase58(),
      resource: ENDPOINT,
    };
    const answer = await restCall(handle, "POST", `/v1/agents/${agentId}/payments/authorize`, {
      key: adminKey,
      body: { endpoint: ENDPOINT, x402: requirement },
      idem: randomUUID(),
    });
    expect(answer.status).toBe(202);
    ids.push(answer.body.approval.id);
  }
  return ids;
}

async function statuses(ids: readonly string[]): Promise<Record<string, number>> {
  const { rows } = await db.pool.query<{ status: string; n: number }>(
    "SELECT status, count(*)::int AS n FROM approvals WHERE id = ANY ($1::uuid[]) GROUP BY 1",
    [ids],
  );
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

describe("approvals timeout loop crash recovery", () => {
  it("killed with SIGKILL while approvals are pending, then restarted: each is decided exactly once", async () => {
    const soon = await holdPayments(8, "1s");
    const later = await holdPayments(8, "4s");
    const all = [...soon, ...later];

    const first = startLoop();
    // Kill it once it has expired some (mid-run: small batches, more due), before the later ones are due.
    await pollUntil(async () => ((await statuses(all)).expired ?? 0) > 0, {
      timeoutMs: 20_000,
      intervalMs: 20,
      what: "the first loop expiring an approval",
    });
    first.kill("SIGKILL");
    await exited(first);
    const atKill = await statuses(all);
    expect(atKill.pending ?? 0).toBeGreaterThan(0);

    // The later ones fall due while no loop runs; the restarted loop finds them by their rows.
    await delay(4_500);
    expect((await statuses(later)).pending).toBe(later.length);
    const second = startLoop();
    await pollUntil(async () => ((await statuses(all)).expired ?? 0) === all.length, {
      timeoutMs: 20_000,
      intervalMs: 50,
      what: "the restarted loop expiring every approval",
    });
    second.kill("SIGKILL");
    await exited(second);

    const { rows } = await db.pool.query<{ id: string; decided_by: string; events: number; reservation: string }>(
      `SELECT a.id, a.decided_by, r.status AS reservation,
              (SELECT count(*)::int FROM gateway_events e WHERE e.type = 'approval.decided' AND e.payload->>'approvalId' = a.id::text) AS events
       FROM approvals a JOIN spend_reservations r ON r.id = a.reservation_id WHERE a.id = ANY ($1::uuid[])`,
      [all],
    );
    expect(rows).toHaveLength(all.length);
    for (const row of rows) expect(row, row.id).toMatchObject({ decided_by: "timeout", events: 1, reservation: "released" });
  });
});
