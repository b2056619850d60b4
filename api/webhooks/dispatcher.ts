/**
 * The outbox dispatcher: claims due deliveries, sends them, records the outcome.
 *
 * - Claim: `SELECT … FOR UPDATE SKIP LOCKED` over due `pending` rows, in the same statement leased
 *   by moving `next_attempt_at` (and `locked_until`) to now + lease and counting the attempt. Any
 *   number of dispatchers can run; each row is held by one at a time.
 * - A dispatcher that dies (SIGKILL mid-request included) leaves its rows `pending` with a lease
 *   that runs out: they become due again and are re-sent. Nothing is lost; a receiver may see a
 *   delivery twice and dedupes on `webhook-id` (the event id, identical on every attempt).
 * - Success (2xx, or the SMTP server accepting the mail) → `delivered`. Failure → `pending` again
 *   after an exponential backoff with jitter (or the receiver's Retry-After, if longer); after
 *   `maxAttempts` → `failed`, the dead letter (kept, with its last error). 410 Gone → `failed` and
 *   the endpoint disabled.
 * - The lease must outlast the request timeout, or a slow request would be re-sent while in flight.
 * - Wake-up: `emitEvent` NOTIFYs `event_outbox` (delivered at commit only); a running dispatcher
 *   LISTENs on one held connection and claims at once. Polling every `pollMs` remains the
 *   fallback (lost connection, retries coming due), so a missed notification only delays.
 */
import { randomUUID } from "node:crypto";
import type pg from "pg";
import pino from "pino";
import { readStoredPayload } from "../events/payloads.js";
import { type BackoffPolicy, DEFAULT_BACKOFF, DEFAULT_MAX_ATTEMPTS, retryDelayMs } from "./backoff.js";
import { type Mailer, renderEmail } from "./email.js";
import { postWebhook } from "./http.js";
import type { SecretBox } from "./secrets.js";
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
  readonly batchSize?: number;
  readonly pollMs?: number;
  readonly maxAttempts?: number;
  readonly backoff?: BackoffPolicy;
  readonly slackHosts?: readonly string[];
  /** LISTEN for new deliveries while started (default true); otherwise poll only. */
  readonly listen?: boolean;
  /**
   * Deliver webhooks to loopback and private addresses too. Off by default: a customer's URL must
   * not reach the gateway's own network (api/webhooks/http.ts). Local setups and tests turn it on.
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
}

interface Attempt {
  readonly ok: boolean;
  readonly status: number | null;
  readonly error: string | null;
  readonly retryAfterMs: number | null;
  readonly gone: boolean;
}

const MAX_ERROR_TEXT = 500;

export class Dispatcher {
  readonly #pool: pg.Pool;
  readonly #secrets: SecretBox;
  readonly #mailer: Mailer | null;
  readonly #log: pino.Logger;
  readonly #leaseMs: number;
  readonly #timeoutMs: number;
  readonly #batchSize: number;
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
    this.#pollMs = options.pollMs ?? 1_000;
    this.#maxAttempts = options.maxAttempts ?? DEFAULT_MAX_ATTEMPTS;
    this.#backoff = options.backoff ?? DEFAULT_BACKOFF;
    this.#slackHosts = options.slackHosts ?? SLACK_HOSTS;
    this.#listen = options.listen ?? true;
    this.#allowPrivateNetworks = options.allowPrivateNetworks ?? false;
    if (this.#leaseMs <= this.#timeoutMs) throw new Error("leaseMs must exceed timeoutMs, or in-flight deliveries get re-sent");
    if (this.#batchSize < 1 || this.#batchSize > 100) throw new Error("batchSize must be 1..100");
    if (this.#maxAttempts < 1) throw new Error("maxAttempts must be at least 1");
  }

  /** Claims one batch of due deliveries and attempts each (concurrently). */
  async runOnce(): Promise<DeliveryOutcome[]> {
    await this.#expireExhausted();
    const claimed = await this.#claim();
    return Promise.all(claimed.map((row) => this.#deliver(row)));
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
    this.#dropListener(null);
  }

  async #run(): Promise<void> {
    let failures = 0;
    while (this.#running) {
      await this.#ensureListening();
      let idle = true;
      try {
        const outcomes = await this.runOnce();
        idle = outcomes.length < this.#batchSize;
        failures = 0;
      } catch (error) {
        failures++;
        this.#log.error({ err: error, failures }, "dispatcher cycle failed");
      }
      if (idle && this.#running) await this.#sleep(this.#pollMs * Math.min(2 ** failures, 30));
    }
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

  async #claim(): Promise<ClaimedRow[]> {
    const { rows } = await this.#pool.query<ClaimedRow>(
      `WITH due AS (
         SELECT id FROM event_deliveries
         WHERE status = 'pending' AND next_attempt_at <= now()
         ORDER BY next_attempt_at, id
         LIMIT $1
         FOR UPDATE SKIP LOCKED
       )
       UPDATE event_deliveries d
       SET attempts = d.attempts + 1,
           lease_token = $2,
           locked_until = now() + $3 * interval '1 millisecond',
           next_attempt_at = now() + $3 * interval '1 millisecond'
       FROM due, gateway_events e
       WHERE d.id = due.id AND e.id = d.event_id
       RETURNING d.id, d.event_id, d.channel, d.destination, d.endpoint_id, d.secret_ciphertext, d.attempts, d.lease_token,
                 e.payload::text AS body`,
      [this.#batchSize, randomUUID(), this.#leaseMs],
    );
    return rows;
  }

  async #deliver(row: ClaimedRow): Promise<DeliveryOutcome> {
    const context = { deliveryId: row.id, eventId: row.event_id, channel: row.channel, attempt: row.attempts };
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
      [row.id, row.lease_token, final ? "failed" : "pending", final ? 0 : delayMs, attempt.status, attempt.error?.slice(0, MAX_ERROR_TEXT) ?? null],
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
    const outcome = await postWebhook(row.destination, body, { ...headers }, {
      timeoutMs: this.#timeoutMs,
      allowPrivateNetworks: this.#allowPrivateNetworks,
    });
    return { ...outcome, gone: outcome.status === 410 };
  }

  async #sendEmail(row: ClaimedRow): Promise<Attempt> {
    if (this.#mailer === null) return { ok: false, status: null, error: "no SMTP transport configured (SMTP_URL)", retryAfterMs: null, gone: false };
    await this.#mailer.send(renderEmail(row.event_id, row.destination, readStoredPayload(row.body)));
    return { ok: true, status: null, error: null, retryAfterMs: null, gone: false };
  }
}
