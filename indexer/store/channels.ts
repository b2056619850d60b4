/**
 * The channel read model: `channels`, `channel_settlements` and `channel_payments`, derived from
 * the channel events of `chain_events` (ChannelOpened, ChannelToppedUp, ChannelSettled,
 * ChannelCloseRequested, ChannelClosed) and the PaymentRecorded events a settlement carries.
 *
 * | state | authority |
 * |---|---|
 * | deposit, settled, sequence, refunded, status of a channel | the chain (these tables, from its events) |
 * | vouchers signed and accepted, not yet settled | the gateway (`channel_sessions`, `channel_charges`) |
 * | a charge's amount, endpoint hash, parent link | its `PaymentRecorded` (`transactions`) |
 *
 * A channel is small (an open, a few top ups, its settlements, a close), so each batch touching a
 * channel re-derives that channel from all of its stored events instead of folding the batch into
 * the row: ingest, rollback and rebuild then share one code path, the order events arrive in does
 * not matter, and a rollback is the same derivation without the dead events.
 */
import type pg from "pg";

export const CHANNEL_PROJECTION_TABLES = ["channels", "channel_settlements", "channel_payments"] as const;

/** Written literally in the queries so the partial index `chain_events_channel` applies. */
/** The program's channel events: the only events this module projects or announces. */
const CHANNEL_EVENT_NAMES: ReadonlySet<string> = new Set([
  "ChannelOpened",
  "ChannelToppedUp",
  "ChannelSettled",
  "ChannelCloseRequested",
  "ChannelClosed",
]);
const CHANNEL_EVENTS_SQL = `(${[...CHANNEL_EVENT_NAMES].map((name) => `'${name}'`).join(", ")})`;

/** Whether an event is one of the channel events (ingest passes only those, and none when a batch has none). */
export function isChannelEvent(name: string): boolean {
  return CHANNEL_EVENT_NAMES.has(name);
}

/** A bound on one derivation: channels touched by a batch are re-derived this many at a time. */
export const CHANNELS_PER_DERIVATION = 500;

/** The channels the given events belong to (their channel events only). */
async function touchedChannels(client: pg.ClientBase, eventIds: readonly string[]): Promise<string[]> {
  if (eventIds.length === 0) return [];
  const result = await client.query<{ channel: string }>(
    `SELECT DISTINCT payload->>'channel' AS channel FROM chain_events
     WHERE id IN (SELECT unnest($1::bigint[])) AND event_name IN ${CHANNEL_EVENTS_SQL}`,
    [[...eventIds]],
  );
  return result.rows.map((r) => r.channel).sort();
}

/** Rebuild: every channel with stored events, derived afresh (after the tables were emptied). */
export async function projectAllChannels(client: pg.ClientBase): Promise<void> {
  const result = await client.query<{ channel: string }>(
    `SELECT DISTINCT payload->>'channel' AS channel FROM chain_events WHERE event_name IN ${CHANNEL_EVENTS_SQL}`,
  );
  await deriveChannels(client, result.rows.map((r) => r.channel).sort(), []);
}

/** Projects newly stored events (ingest and projectEvents call it with the ids they project). */
export async function projectChannelEvents(client: pg.ClientBase, eventIds: readonly string[]): Promise<void> {
  await deriveChannels(client, await touchedChannels(client, eventIds), []);
}

/** The inverse, before the given events leave the store (a dead slot): re-derives without them. */
export async function unprojectChannelEvents(client: pg.ClientBase, eventIds: readonly string[]): Promise<void> {
  await deriveChannels(client, await touchedChannels(client, eventIds), eventIds);
}

/** Replaces the rows of `channels` from their stored events, leaving out `excludedIds`. */
async function deriveChannels(client: pg.ClientBase, channels: readonly string[], excludedIds: readonly string[]): Promise<void> {
  for (let start = 0; start < channels.length; start += CHANNELS_PER_DERIVATION) {
    const params = [channels.slice(start, start + CHANNELS_PER_DERIVATION), [...excludedIds]];
    await client.query("DELETE FROM channel_payments WHERE channel = ANY($1::text[])", [params[0]]);
    await client.query("DELETE FROM channel_settlements WHERE channel = ANY($1::text[])", [params[0]]);
    await client.query("DELETE FROM channels WHERE address = ANY($1::text[])", [params[0]]);
    await client.query(`${CURRENT_EVENTS} ${INSERT_SETTLEMENTS}`, params);
    await client.query(INSERT_PAYMENTS, params);
    await client.query(`${CURRENT_EVENTS} ${INSERT_CHANNELS}`, params);
  }
}

// The events of the channels' current incarnation: from the latest ChannelOpened on (all of them
// when the opening is not stored: a backfill that started after it).
const CURRENT_EVENTS = `
  WITH ev AS MATERIALIZED (
    SELECT e.id, e.signature, e.instruction_index, e.slot, e.block_time, e.event_name, e.payload,
           e.payload->>'channel' AS channel
    FROM chain_events e
    WHERE e.payload->>'channel' = ANY($1::text[]) AND e.event_name IN ${CHANNEL_EVENTS_SQL}
      AND NOT (e.id = ANY($2::bigint[]))),
  since AS (
    SELECT channel, coalesce(max(id) FILTER (WHERE event_name = 'ChannelOpened'), 0) AS opened_id FROM ev GROUP BY channel),
  cur AS (SELECT ev.* FROM ev JOIN since USING (channel) WHERE ev.id >= since.opened_id)`;

const INSERT_SETTLEMENTS = `
  INSERT INTO channel_settlements (tx_hash, instruction_index, channel, settler, cumulative_units, delta_units, sequence,
                                   charge_count, charges_digest, slot, block_time)
  SELECT signature, instruction_index, channel, payload->>'settler', (payload->>'cumulativeUnits')::numeric,
         (payload->>'deltaUnits')::numeric, (payload->>'sequence')::bigint, (payload->>'chargeCount')::integer,
         payload->>'chargesDigest', slot, block_time
  FROM cur WHERE event_name = 'ChannelSettled'
  ON CONFLICT (tx_hash, instruction_index) DO NOTHING`;

// A settlement's charges are the PaymentRecorded events of its own instruction (docs/ledger.md §5).
const INSERT_PAYMENTS = `
  INSERT INTO channel_payments (event_id, channel, payment_id, settlement_tx, settlement_instruction_index)
  SELECT p.id, s.channel, (p.payload->>'paymentId')::numeric, s.tx_hash, s.instruction_index
  FROM channel_settlements s
  JOIN chain_events p ON p.signature = s.tx_hash AND p.instruction_index = s.instruction_index
  WHERE s.channel = ANY($1::text[]) AND p.event_name = 'PaymentRecorded' AND NOT (p.id = ANY($2::bigint[]))
  ON CONFLICT (event_id) DO NOTHING`;

const INSERT_CHANNELS = `,
  opened AS (SELECT * FROM cur WHERE event_name = 'ChannelOpened'),
  totals AS (
    SELECT channel,
           (array_agg(payload->>'depositUnits' ORDER BY id DESC) FILTER (WHERE event_name = 'ChannelToppedUp'))[1]::numeric AS topped_up,
           max((payload->>'cumulativeUnits')::numeric) FILTER (WHERE event_name = 'ChannelSettled') AS settled,
           max((payload->>'sequence')::bigint) FILTER (WHERE event_name = 'ChannelSettled') AS sequence,
           count(*) FILTER (WHERE event_name = 'ChannelSettled') AS settlements
    FROM cur GROUP BY channel),
  requested AS (SELECT DISTINCT ON (channel) * FROM cur WHERE event_name = 'ChannelCloseRequested' ORDER BY channel, id),
  closed AS (SELECT DISTINCT ON (channel) * FROM cur WHERE event_name = 'ChannelClosed' ORDER BY channel, id)
  INSERT INTO channels (address, payer, payee, mint, channel_id, protocol, invocation, deposit_units, settled_units, sequence,
                        settlement_count, refunded_units, status, forced, open_tx, opened_slot, opened_at, expires_at,
                        withdraw_delay_seconds, close_requested_tx, close_requested_by, close_requested_at, refundable_at,
                        close_tx, closed_by, closed_slot, closed_at)
  SELECT o.channel, o.payload->>'payer', o.payload->>'payee', o.payload->>'mint', o.payload->>'channelId',
         o.payload->>'protocol', o.payload->>'invocation',
         coalesce((c.payload->>'depositUnits')::numeric, t.topped_up, (o.payload->>'depositUnits')::numeric),
         coalesce((c.payload->>'settledUnits')::numeric, t.settled, 0),
         coalesce((c.payload->>'sequence')::bigint, t.sequence, 0),
         t.settlements,
         (c.payload->>'refundedUnits')::numeric,
         CASE WHEN c.id IS NOT NULL THEN 'closed' WHEN r.id IS NOT NULL THEN 'closing' ELSE 'open' END,
         coalesce((c.payload->>'forced')::boolean, false),
         o.signature, o.slot, coalesce(o.block_time, to_timestamp((o.payload->>'openedAtSeconds')::bigint)),
         to_timestamp((o.payload->>'expiresAtSeconds')::bigint), (o.payload->>'withdrawDelaySeconds')::integer,
         r.signature, r.payload->>'requestedBy', to_timestamp((r.payload->>'closeRequestedAtSeconds')::bigint),
         to_timestamp((r.payload->>'refundableAtSeconds')::bigint),
         c.signature, c.payload->>'closedBy', c.slot, c.block_time
  FROM opened o
  JOIN totals t USING (channel)
  LEFT JOIN requested r USING (channel)
  LEFT JOIN closed c USING (channel)`;

/** Channel the live feed listens on for channel events; Postgres delivers these only if the batch commits. */
export const LEDGER_CHANNELS_CHANNEL = "ledger_channels";

/**
 * One notification per newly stored channel event: `{"channel", "event", "txHash", "agent", "slot"}`
 * (`agent` = the payer address, from the event or, for a top up or close request, its channel).
 * Ingest calls it after the projections, never rebuild: a replay is not news.
 */
export async function notifyChannelEvents(client: pg.ClientBase, eventIds: readonly string[]): Promise<void> {
  if (eventIds.length === 0) return;
  await client.query(
    // Sorted in a subquery, so the notifications go out in event order without relying on the
    // planner postponing a volatile target list (pg_notify) past the sort.
    `SELECT pg_notify($2, n.body) FROM (
       SELECT json_build_object('channel', e.payload->>'channel', 'event', e.event_name, 'txHash', e.signature,
                                'agent', coalesce(e.payload->>'payer', c.payer), 'slot', e.slot::text)::text AS body
       FROM chain_events e LEFT JOIN channels c ON c.address = e.payload->>'channel'
       WHERE e.id IN (SELECT unnest($1::bigint[])) AND e.event_name IN ${CHANNEL_EVENTS_SQL}
         AND coalesce(e.payload->>'payer', c.payer) IS NOT NULL
       ORDER BY e.id) n`,
    [[...eventIds], LEDGER_CHANNELS_CHANNEL],
  );
}
