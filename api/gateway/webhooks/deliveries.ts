/**
 * The outbox as the account sees it (for the REST routes that come with the gateway): listing an
 * account's deliveries, and replaying a dead-lettered (or delivered) one by hand.
 */
import type { Db } from "../../../indexer/db/database.js";
import type { Channel } from "./targets.js";
import { redactUrl } from "./targets.js";

export type DeliveryStatus = "pending" | "delivered" | "failed";

export interface Delivery {
  readonly id: string;
  readonly eventId: string;
  readonly eventType: string;
  readonly channel: Channel;
  /** A webhook's origin only (a Slack URL's path is a credential), or the e-mail address. */
  readonly destination: string;
  readonly status: DeliveryStatus;
  readonly attempts: number;
  readonly nextAttemptAt: Date | null;
  readonly lastStatus: number | null;
  readonly lastError: string | null;
  readonly deliveredAt: Date | null;
  readonly createdAt: Date;
}

interface DeliveryRow {
  id: string;
  event_id: string;
  type: string;
  channel: Channel;
  destination: string;
  status: DeliveryStatus;
  attempts: number;
  next_attempt_at: Date;
  last_status: number | null;
  last_error: string | null;
  delivered_at: Date | null;
  created_at: Date;
}

const MAX_LIMIT = 500;

export async function listDeliveries(
  db: Db,
  accountId: string,
  filter: { status?: DeliveryStatus; eventId?: string; limit?: number } = {},
): Promise<Delivery[]> {
  const limit = Math.min(Math.max(1, filter.limit ?? 100), MAX_LIMIT);
  const { rows } = await db.query<DeliveryRow>(
    `SELECT d.id, d.event_id, e.type, d.channel, d.destination, d.status, d.attempts, d.next_attempt_at,
            d.last_status, d.last_error, d.delivered_at, d.created_at
     FROM gateway_events e JOIN event_deliveries d ON d.event_id = e.id
     WHERE e.account_id = $1 AND ($2::text IS NULL OR d.status = $2) AND ($3::text IS NULL OR e.id = $3)
     ORDER BY e.created_at DESC, d.id DESC LIMIT $4`,
    [accountId, filter.status ?? null, filter.eventId ?? null, limit],
  );
  return rows.map((row) => ({
    id: row.id,
    eventId: row.event_id,
    eventType: row.type,
    channel: row.channel,
    destination: row.channel === "webhook" ? redactUrl(row.destination) : row.destination,
    status: row.status,
    attempts: row.attempts,
    nextAttemptAt: row.status === "pending" ? row.next_attempt_at : null,
    lastStatus: row.last_status,
    lastError: row.last_error,
    deliveredAt: row.delivered_at,
    createdAt: row.created_at,
  }));
}

/**
 * Sends a finished delivery again, now, with a fresh attempt budget and the same `webhook-id`.
 * A pending one is left alone (it is already due or in flight). Returns whether it was re-queued.
 */
export async function redeliver(db: Db, accountId: string, deliveryId: string): Promise<boolean> {
  if (!/^\d{1,18}$/.test(deliveryId)) return false;
  const result = await db.query(
    `UPDATE event_deliveries d SET status = 'pending', attempts = 0, next_attempt_at = now(), locked_until = NULL, delivered_at = NULL
     FROM gateway_events e
     WHERE d.id = $1 AND e.id = d.event_id AND e.account_id = $2 AND d.status <> 'pending'`,
    [deliveryId, accountId],
  );
  return (result.rowCount ?? 0) > 0;
}
