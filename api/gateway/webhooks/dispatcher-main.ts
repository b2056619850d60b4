/**
 * The webhook dispatcher as a process of its own:
 *
 *   node --import ./scripts/typescript/register.mjs api/gateway/webhooks/dispatcher-main.ts
 *
 * Environment: DATABASE_URL (Postgres; migrations are applied first), WEBHOOK_SECRETS_KEY
 * (required: decrypts the signing secrets), SMTP_URL (optional: `smtp://host:port`, for `email:`
 * alerts), ALERT_EMAIL_FROM, and tuning: DISPATCHER_LEASE_MS, DISPATCHER_TIMEOUT_MS,
 * DISPATCHER_POLL_MS, DISPATCHER_BATCH_SIZE, DISPATCHER_CONCURRENCY (deliveries in flight),
 * DISPATCHER_ENDPOINT_CONCURRENCY and DISPATCHER_ACCOUNT_CONCURRENCY (in flight per endpoint and per
 * account, over all dispatchers), DISPATCHER_MAX_ATTEMPTS, DISPATCHER_BACKOFF_BASE_MS,
 * DISPATCHER_BACKOFF_FACTOR, DISPATCHER_BACKOFF_MAX_MS, LOG_LEVEL; WEBHOOK_ALLOW_PRIVATE_NETWORKS=1
 * delivers to loopback and private addresses too (refused by default). SIGTERM/SIGINT finish the
 * deliveries in flight and exit; SIGKILL loses nothing (their leases run out and they are re-sent).
 */
import pino from "pino";
import { createPool } from "../../../indexer/db/database.js";
import { migrate } from "../../../indexer/db/migrate.js";
import { DEFAULT_BACKOFF } from "./backoff.js";
import { Dispatcher } from "./dispatcher.js";
import { DEFAULT_FROM, smtpMailer } from "./email.js";
import { SecretBox } from "../../shared/secret-box.js";

function numberEnv(name: string, fallback: number): number {
  const text = process.env[name];
  if (text === undefined || text === "") return fallback;
  const value = Number(text);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number`);
  return value;
}

async function main(): Promise<void> {
  const logger = pino({ name: "webhook-dispatcher", level: process.env.LOG_LEVEL ?? "info" });
  const secrets = SecretBox.fromEnv();
  const timeoutMs = numberEnv("DISPATCHER_TIMEOUT_MS", 15_000);
  const smtpUrl = process.env.SMTP_URL;
  const mailer = smtpUrl ? smtpMailer(smtpUrl, process.env.ALERT_EMAIL_FROM ?? DEFAULT_FROM, timeoutMs) : null;
  if (mailer === null) logger.warn("SMTP_URL is not set: email alerts stay pending until it is");
  const pool = createPool();
  // An idle connection dropped by the server (restart, failover) must not kill the process.
  pool.on("error", (error) => logger.warn({ err: error }, "idle database connection lost"));
  await migrate(pool);
  const dispatcher = new Dispatcher({
    pool,
    secrets,
    mailer,
    logger,
    timeoutMs,
    leaseMs: numberEnv("DISPATCHER_LEASE_MS", Math.max(60_000, timeoutMs * 2)),
    pollMs: numberEnv("DISPATCHER_POLL_MS", 1_000),
    batchSize: numberEnv("DISPATCHER_BATCH_SIZE", 16),
    concurrency: numberEnv("DISPATCHER_CONCURRENCY", 64),
    perEndpointConcurrency: numberEnv("DISPATCHER_ENDPOINT_CONCURRENCY", 4),
    perAccountConcurrency: numberEnv("DISPATCHER_ACCOUNT_CONCURRENCY", 16),
    maxAttempts: numberEnv("DISPATCHER_MAX_ATTEMPTS", 12),
    backoff: {
      ...DEFAULT_BACKOFF,
      baseMs: numberEnv("DISPATCHER_BACKOFF_BASE_MS", DEFAULT_BACKOFF.baseMs),
      factor: numberEnv("DISPATCHER_BACKOFF_FACTOR", DEFAULT_BACKOFF.factor),
      maxMs: numberEnv("DISPATCHER_BACKOFF_MAX_MS", DEFAULT_BACKOFF.maxMs),
    },
    allowPrivateNetworks: process.env.WEBHOOK_ALLOW_PRIVATE_NETWORKS === "1",
  });
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "stopping");
    dispatcher
      .stop()
      .then(() => pool.end())
      .then(() => mailer?.close())
      .then(
        () => process.exit(0),
        (error: unknown) => {
          logger.error({ err: error }, "shutdown failed");
          process.exit(1);
        },
      );
  };
  process.on("SIGTERM", () => shutdown("SIGTERM"));
  process.on("SIGINT", () => shutdown("SIGINT"));
  dispatcher.start();
  logger.info("dispatching");
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
