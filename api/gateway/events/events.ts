/**
 * Emitting events into the outbox, inside the CALLER's transaction: the event row and one delivery
 * row per destination commit or roll back together with the change that caused them. A rolled-back
 * payment therefore never notifies anybody, and a committed one cannot lose its notifications.
 */
import { randomBytes } from "node:crypto";
import type pg from "pg";
import { writeJson } from "../../shared/http/json.js";
import { currentRequestId } from "../../shared/ops/request-id.js";
import type { NotifyTarget } from "../webhooks/targets.js";
import { type EventType, isEventType, type PayloadOf } from "../webhooks/payloads.js";

export interface EmittedEvent {
  /** `evt_…`: the `webhook-id` of every delivery of this event. */
  readonly id: string;
  readonly type: EventType;
  /** Delivery rows written. */
  readonly deliveries: number;
}

export interface DeliveryTarget extends NotifyTarget {
  readonly endpointId?: string | null;
  readonly alertId?: string | null;
  /** Encrypted `whsec_…`; required for webhooks, absent for e-mail. */
  readonly secretCiphertext?: Buffer | null;
}

export interface EmitOptions {
  /** Set when an alert rule produced the event. */
  readonly alertId?: string;
  /**
   * false: write the event and deliver it to `targets` only (alert notifications). Default true:
   * also to every enabled webhook endpoint of the account subscribed to the type.
   */
  readonly toEndpoints?: boolean;
  readonly targets?: readonly DeliveryTarget[];
}

/** Keeps a payload (and so a Slack message or e-mail) bounded; Standard Webhooks suggests < 20 KB. */
const MAX_PAYLOAD_BYTES = 16_384;

export function newEventId(): string {
  return `evt_${randomBytes(16).toString("hex")}`;
}

/**
 * Writes the event and its deliveries. Must run inside an open transaction (a savepoint makes
 * Postgres refuse otherwise): outside one, a crash between the statements could strand an event
 * without its deliveries.
 */
export async function emitEvent<T extends EventType>(
  client: pg.ClientBase,
  accountId: string,
  type: T,
  payload: PayloadOf<T>,
  options: EmitOptions = {},
): Promise<EmittedEvent> {
  if (!isEventType(type) || payload.event !== type) throw new Error(`payload.event must be ${String(type)}`);
  // writeJson, not JSON.stringify: money is carried as exact number tokens (payloads.ts).
  const body = writeJson(payload);
  if (Buffer.byteLength(body) > MAX_PAYLOAD_BYTES) throw new Error(`event payload over ${MAX_PAYLOAD_BYTES} bytes`);
  const id = newEventId();
  await client.query("SAVEPOINT emit_event");
  try {
    await client.query(
      `INSERT INTO gateway_events (id, account_id, agent_id, type, payload, alert_id, request_id)
       VALUES ($1, $2, $3, $4, $5::json, $6, $7)`,
      // The payload's public agent id (api/shared/agent-ids.ts); with account_id it names the agent.
      // The request that caused the event, so its deliveries log the same id.
      [id, accountId, payload.agentId, type, body, options.alertId ?? null, currentRequestId() ?? null],
    );
    let deliveries = 0;
    if (options.toEndpoints !== false) {
      const result = await client.query(
        `INSERT INTO event_deliveries (event_id, channel, destination, endpoint_id, secret_ciphertext)
         SELECT $1, 'webhook', url, id, secret_ciphertext FROM webhook_endpoints
         WHERE account_id = $2 AND disabled_at IS NULL AND $3 = ANY (event_types)`,
        [id, accountId, type],
      );
      deliveries += result.rowCount ?? 0;
    }
    for (const target of options.targets ?? []) deliveries += await enqueueDelivery(client, id, target);
    // Delivered at commit only: wakes the dispatchers (docs/events.md); polling covers a miss.
    if (deliveries > 0) await client.query("SELECT pg_notify('event_outbox', '')");
    await client.query("RELEASE SAVEPOINT emit_event");
    return { id, type, deliveries };
  } catch (error) {
    await client.query("ROLLBACK TO SAVEPOINT emit_event").catch(() => undefined);
    throw error;
  }
}

/** Adds one destination to an event already written in this transaction (or committed). */
export async function enqueueDelivery(client: pg.ClientBase, eventId: string, target: DeliveryTarget): Promise<number> {
  const secret = target.channel === "webhook" ? (target.secretCiphertext ?? null) : null;
  if (target.channel === "webhook" && secret === null) throw new Error("a webhook delivery needs its signing secret");
  const result = await client.query(
    `INSERT INTO event_deliveries (event_id, channel, destination, endpoint_id, alert_id, secret_ciphertext)
     VALUES ($1, $2, $3, $4, $5, $6)`,
    [eventId, target.channel, target.destination, target.endpointId ?? null, target.alertId ?? null, secret],
  );
  return result.rowCount ?? 0;
}
