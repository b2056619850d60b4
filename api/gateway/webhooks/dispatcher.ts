/**
 * The outbox dispatcher: claims due deliveries, sends them, records the outcome.
 *
 * - Claim: `FOR UPDATE SKIP LOCKED` over due `pending` rows, leased in the same statement, so any
 *   number of dispatchers can run and each row is held by one. A claim skips receivers with
 *   `perEndpointConcurrency` deliveries in flight and accounts with `perAccountConcurrency` (counted
 *   across dispatchers, under an advisory lock), so one tenant's hanging receivers hold only its share.
 * - Deliveries run independently, at most `concurrency` in flight; a slow receiver delays only its own.
 * - A dispatcher that dies leaves its rows `pending` with a lease that runs out: they are re-sent,
 *   and receivers dedupe on `webhook-id`. The lease must outlast the request timeout.
 * - 2xx (or the SMTP server's acceptance) → `delivered`; a failure → `pending` after exponential
 *   backoff with jitter (or a longer Retry-After); after `maxAttempts` → `failed`, the dead letter;
 *   410 Gone → `failed` and the endpoint disabled.
 * - Wake-up: `emitEvent` NOTIFYs `event_outbox` at commit and a dispatcher LISTENs; polling every
 *   `pollMs` remains the fallback, so a missed notification only delays.
 */
import { randomUUID } from "node:crypto";
import type pg from "pg";
import pino from "pino";
import { withTransaction } from "../../../indexer/db/database.js";
import { readStoredPayload } from "./payloads.js";
import { type BackoffPolicy, DEFAULT_BACKOFF, DEFAULT_MAX_ATTEMPTS, retryDelayMs } from "./backoff.js";
import { type Mailer, renderEmail } from "./email.js";
import { postWebhook } from "./http.js";
import type { SecretBox } from "../../shared/secret-box.js";
import { signedHeaders } from "./signature.js";
import { slackBody } from "./slack.js";
import { type Channel, isSlackUrl, redactUrl, SLACK_HOSTS } from "./targets.js";

/** The channel `emitEvent` notifies when it writes deliveries. */
export const OUTBOX_CHANNEL = "event_outbox";

export interface DispatcherOptions {
  readonly pool: pg.Pool;
  readonly secrets: SecretBox;
  /** Sends `email:` targets; without one they fail and are retried. */
  readonly mailer?: Mailer | null;
  readonly logger?: pino.Logger;
  readonly leaseMs?: number;
  readonly timeoutMs?: number;
  /** At most this many rows per claim statement (1..100; default 16). */
  readonly batchSize?: number;
  /** Deliveries in flight in this dispatcher at once (default 64). */
  readonly concurrency?: number;
  /** Deliveries in flight to one endpoint (or one alert target), over all dispatchers (default 4). */
  readonly perEndpointConcurrency?: number;
  /** Deliveries in flight for one account, over all dispatchers (default 16; below `concurrency`). */
  readonly perAccountConcurrency?: number;
  readonly pollMs?: number;
  readonly maxAttempts?: number;
  readonly backoff?: BackoffPolicy;
  readonly slackHosts?: readonly string[];
  /** LISTEN for new deliveries while started (default true); otherwise poll only. */
  readonly listen?: boolean;
  /**
   * Deliver webhooks to loopback and private addresses too. Off by default: a customer's URL must
   * not reach the gateway's own network (api/gateway/webhooks/http.ts). Local setups and tests turn it on.
   */
  readonly allowPrivateNetworks?: boolean;
}

export interface DeliveryOutcome {
  readonly deliveryId: string;
  readonly eventId: string;
  readonly status: "delivered" | "retry" | "failed" | "lost_lease";
}

interface ClaimedRow {
  id: string;
  event_id: string;
  channel: Channel;
  destination: string;
  endpoint_id: string | null;
  secret_ciphertext: Buffer | null;
  attempts: number;
  lease_token: string;
  body: string;
  /** The id of the HTTP request that caused the event (api/shared/ops/request-id.ts), if one did. */
  request_id: string | null;
}

interface Attempt {
  readonly ok: boolean;
  readonly status: number | null;
  readonly error: string | null;
  readonly retryAfterMs: number | null;
  readonly gone: boolean;
}

const MAX_ERROR_TEXT = 500;
/** Namespace of the transaction-level advisory lock that serializes claims (the limits stay exact). */
const CLAIM_LOCK = 7_240_016;

export class Dispatcher {
  readonly #pool: pg.Pool;
  readonly #secrets: SecretBox;
  readonly #mailer: Mailer | null;
  readonly #log: pino.Logger;
  readonly #leaseMs: number;
  readonly #timeoutMs: number;
  readonly #batchSize: number;
  readonly #concurrency: number;
  readonly #perEndpoint: number;
  readonly #perAccount: number;
  /** The deliveries this dispatcher is running. */
  readonly #inFlight = new Set<Promise<DeliveryOutcome>>();
  readonly #pollMs: number;
  readonly #maxAttempts: number;
  readonly #backoff: BackoffPolicy;
  readonly #slackHosts: readonly string[];
  #running = false;
  #loop: Promise<void> | null = null;
  #wake: (() => void) | null = null;
  /** A notification arrived while no sleep was waiting: skip the next sleep. */
  #woken = false;
  readonly #listen: boolean;
  readonly #allowPrivateNetworks: boolean;
  #listener: pg.PoolClient | null = null;

  constructor(options: DispatcherOptions) {
    this.#pool = options.pool;
    this.#secrets = options.secrets;
    this.#mailer = options.mailer ?? null;
    this.#log = options.logger ?? pino({ name: "webhook-dispatcher" });
    this.#timeoutMs = options.timeoutMs ?? 15_000;
    this.#leaseMs = options.leaseMs ?? 60_000;
    this.#batchSize = options.batchSize ?? 16;
    this.#concurrency = options.concurrency ?? 64;
    this.#perEndpoint = options.perEndpointConcurrency ?? 4;
    this.#perAccount = options.perAccountConcurrency ?? Math.min(16, this.#concurrency);
    this.#pollMs = options.pollMs ?? 1_000;
    this.#maxAttempts = options.maxAttempts ?? DEFAULT_MAX_ATTEMPTS;
    this.#backoff = options.backoff ?? DEFAULT_BACKOFF;
    this.#slackHosts = options.slackHosts ?? SLACK_HOSTS;
    this.#listen = options.listen ?? true;
    this.#allowPrivateNetworks = options.allowPrivateNetworks ?? false;
    if (this.#leaseMs <= this.#timeoutMs) throw new Error("leaseMs must exceed timeoutMs, or in-flight deliveries get re-sent");
    if (this.#batchSize < 1 || this.#batchSize > 100) throw new Error("batchSize must be 1..100");
    if (this.#maxAttempts < 1) throw new Error("maxAttempts must be at least 1");
    for (const [name, value] of [
      ["concurrency", this.#concurrency],
      ["perEndpointConcurrency", this.#perEndpoint],
      ["perAccountConcurrency", this.#perAccount],
    ] as const) {
      if (!Number.isInteger(value) || value < 1 || value > 10_000) throw new Error(`${name} must be an integer 1..10000`);
    }
    if (this.#perAccount > this.#concurrency) throw new Error("perAccountConcurrency must not exceed concurrency");
    if (this.#perEndpoint > this.#perAccount) throw new Error("perEndpointConcurrency must not exceed perAccountConcurrency");
  }

  /**
   * Claims what is due (within the free slots and the limits) and waits for those deliveries: for
   * tests and one-shot runs. The running loop (`start`) never waits for a batch.
   */
  async runOnce(): Promise<DeliveryOutcome[]> {
    await this.#expireExhausted();
    const claimed = await this.#claim(Math.min(this.#batchSize, this.#concurrency - this.#inFlight.size));
    return Promise.all(claimed.map((row) => this.#launch(row)));
  }

  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#loop = this.#run();
  }

  /** Stops claiming and waits for the deliveries in flight (at most the request timeout). */
  async stop(): Promise<void> {
    this.#running = false;
    this.#wake?.();
    await this.#loop;
    this.#loop = null;
    await Promise.allSettled([...this.#inFlight]);
    this.#dropListener(null);
  }

  /** Deliveries this dispatcher has in flight right now. */
  get inFlight(): number {
    return this.#inFlight.size;
  }

  async #run(): Promise<void> {
    let failures = 0;
    let lastExpiry = 0;
    while (this.#running) {
      await this.#ensureListening();
      let more = false;
      try {
        // Every pass, but at most once a poll interval: passes follow every finished delivery.
        if (Date.now() - lastExpiry >= this.#pollMs) {
          await this.#expireExhausted();
          lastExpiry = Date.now();
        }
        const free = this.#concurrency - this.#inFlight.size;
        if (free > 0) {
          const want = Math.min(this.#batchSize, free);
          const claimed = await this.#claim(want);
          // Started, not awaited: each delivery settles on its own and frees its slot.
          for (const row of claimed) void this.#launch(row);
          more = claimed.length === want && this.#inFlight.size < this.#concurrency;
        }
        failures = 0;
      } catch (error) {
        failures++;
        this.#log.error({ err: error, failures }, "dispatcher cycle failed");
      }
      // A full claim may have left more due: claim again at once. Otherwise wait for a
      // notification, a finished delivery (a freed slot) or the poll.
      if (!more && this.#running) await this.#sleep(this.#pollMs * Math.min(2 ** failures, 30));
    }
  }

  /** Runs one claimed delivery in a slot; its end wakes the loop to fill the slot again. */
  #launch(row: ClaimedRow): Promise<DeliveryOutcome> {
    const running = this.#deliver(row).catch((error: unknown): DeliveryOutcome => {
      // Recording the outcome failed (the database went away): the lease runs out and the row is
      // claimed again, so the delivery is late, not lost.
      this.#log.error({ err: error, deliveryId: row.id, eventId: row.event_id }, "could not record a delivery outcome");
      return { deliveryId: row.id, eventId: row.event_id, status: "lost_lease" };
    });
    this.#inFlight.add(running);
    void running.finally(() => {
      this.#inFlight.delete(running);
      this.#notified();
    });
    return running;
  }

  #sleep(ms: number): Promise<void> {
    if (this.#woken) {
      this.#woken = false;
      return Promise.resolve();
    }
    return new Promise((done) => {
      const finish = () => {
        clearTimeout(timer);
        this.#wake = null;
        this.#woken = false;
        done();
      };
      const timer = setTimeout(finish, ms);
      this.#wake = finish;
    });
  }

  #notified = (): void => {
    this.#woken = true;
    this.#wake?.();
  };

  async #ensureListening(): Promise<void> {
    if (!this.#listen || this.#listener !== null) return;
    let client: pg.PoolClient | null = null;
    try {
      client = await this.#pool.connect();
      const held = client;
      held.on("notification", this.#notified);
      held.on("error", (error: Error) => {
        this.#log.warn({ err: error }, "outbox LISTEN connection lost; polling until it is back");
        if (this.#listener === held) this.#dropListener(error);
      });
      await held.query(`LISTEN ${OUTBOX_CHANNEL}`);
      this.#listener = held;
    } catch (error) {
      this.#log.warn({ err: error }, "could not LISTEN for the outbox; polling");
      client?.release(error instanceof Error ? error : true);
    }
  }

  /** Closes the LISTEN connection (never back into the pool: it would keep listening). */
  #dropListener(error: Error | null): void {
    const client = this.#listener;
    if (client === null) return;
    this.#listener = null;
    client.removeListener("notification", this.#notified);
    client.release(error ?? true);
  }

  /**
   * A delivery whose every attempt killed its dispatcher (a poison message, a crash loop) never
   * reaches the failure branch of `#deliver`; once its attempts are used up and its lease has run
   * out, it is dead-lettered here instead of being claimed forever.
   */
  async #expireExhausted(): Promise<void> {
    await this.#pool.query(
      `UPDATE event_deliveries
       SET status = 'failed', locked_until = NULL, last_error = coalesce(last_error, 'attempts exhausted: the dispatcher stopped mid-attempt')
       WHERE status = 'pending' AND next_attempt_at <= now() AND attempts >= $1`,
      [this.#maxAttempts],
    );
  }

  /**
   * Claims up to `limit` due deliveries, oldest first, skipping those whose endpoint or account
   * already has its limit in flight (leased rows, any dispatcher's). The per-endpoint rank is
   * taken first and the per-account rank over what passed it, so an endpoint's backlog never
   * hides its account's other endpoints. The advisory lock makes the counts and the claim one
   * step across dispatchers; it is held for this one short transaction only.
   */
  async #claim(limit: number): Promise<ClaimedRow[]> {
    if (limit <= 0) return [];
    return withTransaction(this.#pool, async (client) => {
      await client.query("SELECT pg_advisory_xact_lock($1)", [CLAIM_LOCK]);
      const { rows } = await client.query<ClaimedRow>(
        `WITH keyed AS (
           SELECT d.id, d.next_attempt_at, d.locked_until, e.account_id,
                  coalesce(d.endpoint_id::text, d.channel || ':' || d.destination) AS target
           FROM event_deliveries d JOIN gateway_events e ON e.id = d.event_id
           WHERE d.status = 'pending' AND (d.next_attempt_at <= now() OR d.locked_until > now())
         ),
         busy_target AS (SELECT target, count(*) AS n FROM keyed WHERE locked_until > now() GROUP BY target),
         busy_account AS (SELECT account_id, count(*) AS n FROM keyed WHERE locked_until > now() GROUP BY account_id),
         due AS (SELECT * FROM keyed WHERE next_attempt_at <= now() AND (locked_until IS NULL OR locked_until <= now())),
         by_target AS (
           SELECT due.*, coalesce(bt.n, 0) + row_number() OVER (PARTITION BY due.target ORDER BY due.next_attempt_at, due.id) AS slot
           FROM due LEFT JOIN busy_target bt ON bt.target = due.target
         ),
         by_account AS (
           SELECT t.id, t.next_attempt_at,
                  coalesce(ba.n, 0) + row_number() OVER (PARTITION BY t.account_id ORDER BY t.next_attempt_at, t.id) AS slot
           FROM by_target t LEFT JOIN busy_account ba ON ba.account_id = t.account_id
           WHERE t.slot <= $4
         ),
         picked AS (
           SELECT id FROM by_account WHERE slot <= $5 ORDER BY next_attempt_at, id LIMIT $1
         ),
         locked AS (
           SELECT d.id FROM event_deliveries d
           WHERE d.id IN (SELECT id FROM picked) AND d.status = 'pending' AND d.next_attempt_at <= now()
           FOR UPDATE SKIP LOCKED
         )
         UPDATE event_deliveries d
         SET attempts = d.attempts + 1,
             lease_token = $2,
             locked_until = now() + $3 * interval '1 millisecond',
             next_attempt_at = now() + $3 * interval '1 millisecond'
         FROM locked, gateway_events e
         WHERE d.id = locked.id AND e.id = d.event_id
         RETURNING d.id, d.event_id, d.channel, d.destination, d.endpoint_id, d.secret_ciphertext, d.attempts, d.lease_token,
                   e.payload::text AS body, e.request_id`,
        [limit, randomUUID(), this.#leaseMs, this.#perEndpoint, this.#perAccount],
      );
      return rows;
    });
  }

  async #deliver(row: ClaimedRow): Promise<DeliveryOutcome> {
    const context = {
      deliveryId: row.id,
      eventId: row.event_id,
      channel: row.channel,
      attempt: row.attempts,
      ...(row.request_id === null ? {} : { requestId: row.request_id }),
    };
    let attempt: Attempt;
    try {
      attempt = row.channel === "webhook" ? await this.#sendWebhook(row) : await this.#sendEmail(row);
    } catch (error) {
      attempt = { ok: false, status: null, error: error instanceof Error ? error.message : String(error), retryAfterMs: null, gone: false };
    }
    if (attempt.ok) {
      await this.#pool.query(
        `UPDATE event_deliveries SET status = 'delivered', delivered_at = now(), locked_until = NULL, last_status = $2, last_error = NULL
         WHERE id = $1 AND status = 'pending'`,
        [row.id, attempt.status],
      );
      this.#log.info({ ...context, status: attempt.status }, "delivered");
      return { deliveryId: row.id, eventId: row.event_id, status: "delivered" };
    }
    const final = attempt.gone || row.attempts >= this.#maxAttempts;
    const delayMs = Math.max(retryDelayMs(row.attempts, this.#backoff), attempt.retryAfterMs ?? 0);
    const result = await this.#pool.query(
      `UPDATE event_deliveries
       SET status = $3, next_attempt_at = now() + $4 * interval '1 millisecond', locked_until = NULL,
           last_status = $5, last_error = $6
       WHERE id = $1 AND lease_token = $2 AND status = 'pending'`,
      [
        row.id,
        row.lease_token,
        final ? "failed" : "pending",
        final ? 0 : delayMs,
        attempt.status,
        attempt.error?.slice(0, MAX_ERROR_TEXT) ?? null,
      ],
    );
    if ((result.rowCount ?? 0) === 0) {
      // Our lease ran out and another dispatcher owns the row now: its outcome is the one kept.
      this.#log.warn(context, "lease lost before the outcome was recorded");
      return { deliveryId: row.id, eventId: row.event_id, status: "lost_lease" };
    }
    if (attempt.gone && row.endpoint_id !== null) {
      await this.#pool.query(
        "UPDATE webhook_endpoints SET disabled_at = now(), disabled_reason = 'receiver answered 410 Gone' WHERE id = $1 AND disabled_at IS NULL",
        [row.endpoint_id],
      );
    }
    const logged = { ...context, status: attempt.status, error: attempt.error, ...(final ? {} : { retryInMs: delayMs }) };
    if (final) this.#log.error(logged, "delivery failed for good (dead letter)");
    else this.#log.warn(logged, "delivery failed; will retry");
    return { deliveryId: row.id, eventId: row.event_id, status: final ? "failed" : "retry" };
  }

  async #sendWebhook(row: ClaimedRow): Promise<Attempt> {
    const secret = this.#secrets.decrypt(row.secret_ciphertext!);
    const body = isSlackUrl(row.destination, this.#slackHosts) ? slackBody(readStoredPayload(row.body)) : row.body;
    const headers = signedHeaders(secret, row.event_id, new Date(), body);
    this.#log.debug({ deliveryId: row.id, eventId: row.event_id, to: redactUrl(row.destination) }, "posting webhook");
    const outcome = await postWebhook(
      row.destination,
      body,
      { ...headers },
      {
        timeoutMs: this.#timeoutMs,
        allowPrivateNetworks: this.#allowPrivateNetworks,
      },
    );
    return { ...outcome, gone: outcome.status === 410 };
  }

  async #sendEmail(row: ClaimedRow): Promise<Attempt> {
    if (this.#mailer === null)
      return { ok: false, status: null, error: "no SMTP transport configured (SMTP_URL)", retryAfterMs: null, gone: false };
    await this.#mailer.send(renderEmail(row.event_id, row.destination, readStoredPayload(row.body)));
    return { ok: true, status: null, error: null, retryAfterMs: null, gone: false };
  }
}
