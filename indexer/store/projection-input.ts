/**
 * What the projections read: typed rows of the events to project, as SQL that yields the same
 * columns whatever the rows come from.
 *
 * - `batchInput`: the events ingest has just stored, sent as typed arrays (`unnest`). Nothing is
 *   read back from `chain_events` and no jsonb is parsed again.
 * - `storedEventsInput`: events already in the store (rebuild: an id range; a list of ids), read
 *   from `chain_events.payload` once per event.
 *
 * Payment columns: event_id, tx_hash, instruction_index, agent, payee, mint, payment_id, protocol,
 * rail, amount_units, endpoint_hash, parent_tx_hash, invocation, atomic, settlement_reference,
 * budget_units, ts, slot, finalized. Invocation-opened columns: event_id, invocation, invoker,
 * sub_agent, parent_tx_hash, budget_units, slot.
 */
import type { DecodedEvent } from "../decode/transaction.js";

export interface InputPart {
  readonly sql: string;
  readonly params: readonly unknown[];
  /** Known to yield no rows: the statement reading it can be skipped. */
  readonly empty: boolean;
}

export interface ProjectionInput {
  readonly payments: InputPart;
  readonly invocationsOpened: InputPart;
}

const BATCH_PAYMENTS = `
  SELECT u.event_id, u.tx_hash, u.instruction_index, u.agent, u.payee, u.mint, u.payment_id, u.protocol, u.rail,
         u.amount_units, u.endpoint_hash, u.parent_tx_hash, u.invocation, u.atomic, u.settlement_reference,
         u.budget_units, to_timestamp(u.seconds) AS ts, u.slot, u.finalized
  FROM unnest($1::bigint[], $2::text[], $3::int[], $4::text[], $5::text[], $6::text[], $7::numeric[], $8::text[],
              $9::text[], $10::numeric[], $11::text[], $12::text[], $13::text[], $14::boolean[], $15::text[],
              $16::numeric[], $17::float8[], $18::bigint[], $19::boolean[])
       AS u(event_id, tx_hash, instruction_index, agent, payee, mint, payment_id, protocol, rail, amount_units,
            endpoint_hash, parent_tx_hash, invocation, atomic, settlement_reference, budget_units, seconds, slot, finalized)`;

const BATCH_INVOCATIONS_OPENED = `
  SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::numeric[], $7::bigint[])
         AS u(event_id, invocation, invoker, sub_agent, parent_tx_hash, budget_units, slot)`;

/** A stored event's key, as `insertEvents` returns it with the id it got. */
export function eventKey(signature: string, instructionIndex: number, innerIndex: number, ordinal: number): string {
  return `${signature}/${instructionIndex}/${innerIndex}/${ordinal}`;
}

type Parent = Readonly<Record<string, string>> | null;

/** `events` paired with the ids the event store gave them, in chain order. */
export function batchInput(events: readonly { readonly id: string; readonly event: DecodedEvent }[]): ProjectionInput {
  const payments = events.filter((e) => e.event.name === "PaymentRecorded");
  const opened = events.filter((e) => e.event.name === "InvocationOpened");
  const column = <T>(rows: typeof events, value: (e: DecodedEvent, id: string) => T): T[] => rows.map((r) => value(r.event, r.id));
  const p = (e: DecodedEvent, key: string): string | null => (e.payload[key] as string | null | undefined) ?? null;
  const parent = (e: DecodedEvent): Parent => (e.payload.parent as Parent | undefined) ?? null;
  return {
    payments: {
      sql: BATCH_PAYMENTS,
      empty: payments.length === 0,
      params: [
        column(payments, (_, id) => id),
        column(payments, (e) => e.signature),
        column(payments, (e) => e.instructionIndex),
        column(payments, (e) => p(e, "payer")),
        column(payments, (e) => p(e, "payee")),
        column(payments, (e) => p(e, "mint")),
        column(payments, (e) => p(e, "paymentId")),
        column(payments, (e) => p(e, "protocol")),
        column(payments, (e) => p(e, "rail")),
        column(payments, (e) => p(e, "amountUnits")),
        column(payments, (e) => p(e, "endpointHash")),
        column(payments, (e) => parent(e)?.parentSignature ?? null),
        column(payments, (e) => parent(e)?.invocation ?? null),
        column(payments, (e) => e.payload.atomic === true),
        column(payments, (e) => p(e, "settlementReference")),
        column(payments, (e) => parent(e)?.budgetUnits ?? null),
        column(payments, (e) => e.blockTime ?? (e.payload.recordedAtSeconds as number)),
        column(payments, (e) => e.slot.toString()),
        column(payments, (e) => e.commitment === "finalized"),
      ],
    },
    invocationsOpened: {
      sql: BATCH_INVOCATIONS_OPENED,
      empty: opened.length === 0,
      params: [
        column(opened, (_, id) => id),
        column(opened, (e) => p(e, "invocation")),
        column(opened, (e) => p(e, "invoker")),
        column(opened, (e) => p(e, "subAgent")),
        column(opened, (e) => p(e, "parentSignature")),
        column(opened, (e) => p(e, "budgetUnits")),
        column(opened, (e) => e.slot.toString()),
      ],
    },
  };
}

const STORED_PAYMENTS = (filter: string): string => `
  SELECT e.id AS event_id, e.signature AS tx_hash, e.instruction_index, p->>'payer' AS agent, p->>'payee' AS payee,
         p->>'mint' AS mint, (p->>'paymentId')::numeric AS payment_id, p->>'protocol' AS protocol, p->>'rail' AS rail,
         (p->>'amountUnits')::numeric AS amount_units, p->>'endpointHash' AS endpoint_hash,
         p->'parent'->>'parentSignature' AS parent_tx_hash, p->'parent'->>'invocation' AS invocation,
         (p->>'atomic')::boolean AS atomic, p->>'settlementReference' AS settlement_reference,
         (p->'parent'->>'budgetUnits')::numeric AS budget_units,
         coalesce(e.block_time, to_timestamp((p->>'recordedAtSeconds')::bigint)) AS ts, e.slot, e.finalized
  FROM chain_events e CROSS JOIN LATERAL (SELECT e.payload AS p) x
  WHERE e.event_name = 'PaymentRecorded' AND ${filter}`;

const STORED_INVOCATIONS_OPENED = (filter: string): string => `
  SELECT e.id AS event_id, p->>'invocation' AS invocation, p->>'invoker' AS invoker, p->>'subAgent' AS sub_agent,
         p->>'parentSignature' AS parent_tx_hash, (p->>'budgetUnits')::numeric AS budget_units, e.slot
  FROM chain_events e CROSS JOIN LATERAL (SELECT e.payload AS p) x
  WHERE e.event_name = 'InvocationOpened' AND ${filter}`;

/** Events already in the store: those with the given ids, or with ids in (afterId, throughId]. */
export function storedEventsInput(
  selection: { readonly ids: readonly string[] } | { readonly afterId: string; readonly throughId: string },
): ProjectionInput {
  const [filter, params] =
    "ids" in selection
      ? ["e.id IN (SELECT unnest($1::bigint[]))", [[...selection.ids]]]
      : ["e.id > $1::bigint AND e.id <= $2::bigint", [selection.afterId, selection.throughId]];
  return {
    payments: { sql: STORED_PAYMENTS(filter), params, empty: false },
    invocationsOpened: { sql: STORED_INVOCATIONS_OPENED(filter), params, empty: false },
  };
}
