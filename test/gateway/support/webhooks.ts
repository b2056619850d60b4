/**
 * The shared setup of the webhook and alert suites (test/gateway/webhooks*.test.ts, alerts.test.ts):
 * a fresh database and secret box per file, receivers and dispatchers that are closed after each
 * test, accounts with one agent, endpoints on loopback, and policy.violation events emitted the way
 * the gateway emits them (inside a transaction). Test files only; imports nothing of the tests.
 */
import type pg from "pg";
import pino from "pino";
import { afterAll, afterEach, beforeAll } from "vitest";
import { emitEvent } from "../../../api/gateway/events/index.js";
import { type PolicyViolationPayload, policyViolationPayload } from "../../../api/gateway/webhooks/index.js";
import {
  type CreatedEndpoint,
  createWebhookEndpoint,
  Dispatcher,
  type DispatcherOptions,
  type EndpointInput,
  SecretBox,
} from "../../../api/gateway/webhooks/index.js";
import { createAccount, registerAgent } from "../../../api/shared/keys.js";
import { withTransaction } from "../../../indexer/db/database.js";
import { createFreshDatabase, type FreshDatabase } from "../../indexer/fresh-database.js";
import { WebhookReceiver } from "./webhook-receiver.js";

/** The receivers are on loopback: registration allows it, as a local development setup does. */
export const LOOPBACK = { allowLoopback: true } as const;

/** When the violations of `violation` happened, unless a test gives another time. */
export const VIOLATION_AT = new Date("2026-03-01T12:00:00.000Z");

/** The spec 6 policy.violation payload of a per-call limit refusal; `n` tells events apart. */
export function violation(agentId: string, n = 1, at: Date = VIOLATION_AT): PolicyViolationPayload {
  return policyViolationPayload({
    agentId,
    reasonCode: "per_call_limit_exceeded",
    reason: `per_call_limit_exceeded: requested ${n}.5 usdc, limit is 1 usdc`,
    endpoint: `https://api.example.com/v1/quote/${n}`,
    at,
  });
}

/** `count` consecutive numbers from `from`: the `n`s of a batch of events. */
export function range(from: number, count: number): number[] {
  return Array.from({ length: count }, (_, i) => from + i);
}

export interface TestAccount {
  readonly accountId: string;
  readonly agentId: string;
}

export interface Subscriber extends TestAccount {
  readonly receiver: WebhookReceiver;
  /** The endpoint's signing secret. */
  readonly secret: string;
}

export interface WebhookSuite {
  readonly db: FreshDatabase;
  readonly pool: pg.Pool;
  readonly box: SecretBox;
  /** The box's key as WEBHOOK_SECRETS_KEY takes it (base64), for a dispatcher in another process. */
  readonly secretsKey: string;
  /** A receiver on loopback, closed after the test. */
  receiver(): Promise<WebhookReceiver>;
  /** A dispatcher (not started) allowed to reach loopback, stopped after the test. */
  dispatcher(options?: Partial<DispatcherOptions>): Dispatcher;
  /** A fresh account with one agent, so that other tests' endpoints never receive this test's events. */
  account(): Promise<TestAccount>;
  /** Registers an endpoint of the account; loopback URLs allowed. */
  endpoint(accountId: string, input: EndpointInput): Promise<CreatedEndpoint>;
  /** A fresh account (as `account`) with one endpoint (every event type) at a fresh receiver. */
  subscriber(): Promise<Subscriber>;
  /**
   * Runs `work` in one transaction; with `commit: false` it is rolled back even when `work`
   * succeeds (as when a payment's transaction fails after its events were written).
   */
  transaction<T>(work: (client: pg.PoolClient) => Promise<T>, options?: { commit?: boolean }): Promise<T>;
  /** Emits one `violation(agentId, n, at)` event per `n`, all in one transaction; their ids, in order. */
  emitViolations(accountId: string, agentId: string, ns: readonly number[], at?: Date): Promise<string[]>;
  /** Emits `violation(agentId, n, at)` in a transaction of its own; the event's id. */
  emitViolation(accountId: string, agentId: string, n?: number, at?: Date): Promise<string>;
}

/**
 * Registers the suite's hooks in the calling test file (call it at the file's top level) and
 * answers its fixtures. `prefix` names the accounts, agents and wallets it creates.
 */
export function webhookSuite(prefix: string): WebhookSuite {
  const secretsKey = SecretBox.generateKey();
  const box = new SecretBox(Buffer.from(secretsKey, "base64"));
  const receivers: WebhookReceiver[] = [];
  const dispatchers: Dispatcher[] = [];
  const silent = pino({ level: "silent" });
  let db: FreshDatabase | undefined;
  let serial = 0;

  const fresh = (): FreshDatabase => {
    if (db === undefined) throw new Error("webhookSuite: the database is created in beforeAll");
    return db;
  };

  beforeAll(async () => {
    db = await createFreshDatabase();
  });

  afterEach(async () => {
    // Receivers first: closing them ends the requests they hold, so the dispatchers stop at once.
    await Promise.all(receivers.splice(0).map((r) => r.close()));
    await Promise.all(dispatchers.splice(0).map((d) => d.stop()));
    // A dispatcher claims every due delivery of the database: what a test leaves pending must not
    // reach the next test's dispatcher (its receiver is closed; the attempt would count there).
    await db?.pool.query("UPDATE event_deliveries SET status = 'failed' WHERE status = 'pending'");
  });

  afterAll(async () => {
    await db?.drop();
  });

  const suite: WebhookSuite = {
    get db() {
      return fresh();
    },
    get pool() {
      return fresh().pool;
    },
    box,
    secretsKey,
    async receiver() {
      const r = await WebhookReceiver.start();
      receivers.push(r);
      return r;
    },
    dispatcher(options = {}) {
      const d = new Dispatcher({ pool: fresh().pool, secrets: box, logger: silent, allowPrivateNetworks: true, ...options });
      dispatchers.push(d);
      return d;
    },
    async account() {
      const n = ++serial;
      const accountId = await createAccount(fresh().pool, `${prefix}-${n}`);
      const agentId = `${prefix}-agent-${n}`;
      await registerAgent(fresh().pool, accountId, { agentId, walletAddress: `wallet-${prefix}-${n}` });
      return { accountId, agentId };
    },
    endpoint(accountId, input) {
      return createWebhookEndpoint(fresh().pool, box, accountId, input, LOOPBACK);
    },
    async transaction(work, { commit = true } = {}) {
      if (commit) return withTransaction(fresh().pool, work);
      const client = await fresh().pool.connect();
      try {
        await client.query("BEGIN");
        try {
          return await work(client);
        } finally {
          await client.query("ROLLBACK");
        }
      } finally {
        client.release();
      }
    },
    async subscriber() {
      const account = await suite.account();
      const receiver = await suite.receiver();
      const { secret } = await suite.endpoint(account.accountId, { url: receiver.url });
      return { ...account, receiver, secret };
    },
    emitViolations(accountId, agentId, ns, at) {
      return suite.transaction(async (client) => {
        const ids: string[] = [];
        for (const n of ns) ids.push((await emitEvent(client, accountId, "policy.violation", violation(agentId, n, at))).id);
        return ids;
      });
    },
    async emitViolation(accountId, agentId, n = 1, at) {
      const [id] = await suite.emitViolations(accountId, agentId, [n], at);
      return id!;
    },
  };
  return suite;
}
