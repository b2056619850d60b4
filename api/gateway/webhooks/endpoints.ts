/**
 * Webhook endpoints registered per account (the REST routes over these come with the gateway).
 * Each endpoint has its own `whsec_…` signing secret: returned once by `createWebhookEndpoint` and
 * `rotateWebhookSecret`, stored only as ciphertext, never listed and never logged.
 */
import type { Db } from "../../../indexer/db/database.js";
import { ServiceError } from "../../shared/errors.js";
import { DEFAULT_EVENT_TYPES, isEventType, SUBSCRIBABLE_EVENT_TYPES, type EventType } from "./payloads.js";
import { generateSigningSecret, type SecretBox } from "../../shared/secret-box.js";
import { InvalidTargetError, parseWebhookUrl, refuseInternalWebhookUrl, type WebhookTargetPolicy } from "./targets.js";

const MAX_ENDPOINTS_PER_ACCOUNT = 50;
const MAX_DESCRIPTION = 500;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export interface WebhookEndpoint {
  readonly id: string;
  readonly accountId: string;
  readonly url: string;
  readonly eventTypes: readonly EventType[];
  readonly description: string;
  readonly createdAt: Date;
}

export interface CreatedEndpoint {
  readonly endpoint: WebhookEndpoint;
  /** Shown once. */
  readonly secret: string;
}

export interface EndpointInput {
  readonly url: string;
  /** Default: every subscribable type (`budget.warning`, `policy.violation`). */
  readonly eventTypes?: readonly string[];
  readonly description?: string;
}

interface EndpointRow {
  id: string;
  account_id: string;
  url: string;
  event_types: EventType[];
  description: string;
  created_at: Date;
}

/** The account has as many webhook endpoints as it may (LIMIT_EXCEEDED). */
export class EndpointLimitError extends ServiceError {
  constructor(message: string) {
    super("LIMIT_EXCEEDED", message);
    this.name = "EndpointLimitError";
  }
}

/**
 * Registers an endpoint. Its URL must name a public host (WebhookTargetRefusedError otherwise);
 * `targets.allowLoopback` admits loopback receivers for local development only.
 */
export async function createWebhookEndpoint(
  db: Db,
  box: SecretBox,
  accountId: string,
  input: EndpointInput,
  targets: WebhookTargetPolicy = {},
): Promise<CreatedEndpoint> {
  const url = parseWebhookUrl(input.url);
  refuseInternalWebhookUrl(url, targets);
  const eventTypes = parseEventTypes(input.eventTypes);
  const description = input.description ?? "";
  if (description.length > MAX_DESCRIPTION) throw new InvalidTargetError(`description over ${MAX_DESCRIPTION} characters`);
  const secret = generateSigningSecret();
  // The count and the insert in one statement: the limit holds without a lock for every but
  // simultaneous creations, which can overshoot by their number; the limit is a guard, not a quota.
  const { rows } = await db.query<EndpointRow>(
    `INSERT INTO webhook_endpoints (account_id, url, event_types, description, secret_ciphertext)
     SELECT $1, $2, $3, $4, $5
     WHERE (SELECT count(*) FROM webhook_endpoints WHERE account_id = $1 AND disabled_at IS NULL) < $6
     RETURNING id, account_id, url, event_types, description, created_at`,
    [accountId, url, eventTypes, description, box.encrypt(secret), MAX_ENDPOINTS_PER_ACCOUNT],
  );
  if (rows[0] === undefined) throw new EndpointLimitError(`at most ${MAX_ENDPOINTS_PER_ACCOUNT} webhook endpoints per account`);
  return { endpoint: fromRow(rows[0]), secret };
}

export async function listWebhookEndpoints(db: Db, accountId: string): Promise<WebhookEndpoint[]> {
  const { rows } = await db.query<EndpointRow>(
    `SELECT id, account_id, url, event_types, description, created_at FROM webhook_endpoints
     WHERE account_id = $1 AND disabled_at IS NULL ORDER BY created_at, id LIMIT $2`,
    [accountId, MAX_ENDPOINTS_PER_ACCOUNT],
  );
  return rows.map(fromRow);
}

/** Stops new deliveries to the endpoint; ones already in the outbox are still attempted. */
export async function deleteWebhookEndpoint(db: Db, accountId: string, endpointId: string): Promise<boolean> {
  if (!UUID.test(endpointId)) return false;
  const result = await db.query(
    `UPDATE webhook_endpoints SET disabled_at = now(), disabled_reason = 'deleted'
     WHERE id = $1 AND account_id = $2 AND disabled_at IS NULL`,
    [endpointId, accountId],
  );
  return (result.rowCount ?? 0) > 0;
}

/** A new secret for new deliveries; deliveries already queued keep the one they were queued with. */
export async function rotateWebhookSecret(db: Db, box: SecretBox, accountId: string, endpointId: string): Promise<string | null> {
  if (!UUID.test(endpointId)) return null;
  const secret = generateSigningSecret();
  const result = await db.query(
    "UPDATE webhook_endpoints SET secret_ciphertext = $3 WHERE id = $1 AND account_id = $2 AND disabled_at IS NULL",
    [endpointId, accountId, box.encrypt(secret)],
  );
  return (result.rowCount ?? 0) > 0 ? secret : null;
}

function parseEventTypes(types: readonly string[] | undefined): EventType[] {
  if (types === undefined) return [...DEFAULT_EVENT_TYPES];
  if (!Array.isArray(types) || types.length === 0) throw new InvalidTargetError("eventTypes must list at least one event type");
  const unique = [...new Set(types)];
  for (const type of unique) {
    if (!isEventType(type) || !SUBSCRIBABLE_EVENT_TYPES.includes(type)) {
      throw new InvalidTargetError(`eventTypes: ${String(type)} is not one of ${SUBSCRIBABLE_EVENT_TYPES.join(", ")}`);
    }
  }
  return unique as EventType[];
}

function fromRow(row: EndpointRow): WebhookEndpoint {
  return {
    id: row.id,
    accountId: row.account_id,
    url: row.url,
    eventTypes: row.event_types,
    description: row.description,
    createdAt: row.created_at,
  };
}
