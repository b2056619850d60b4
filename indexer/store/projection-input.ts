/**
 * What the projections read: typed rows of the events to project, as SQL that yields the same
 * columns whatever the rows come from.
 *
 * - `stagedInput`: the events ingest has just stored, from its staging table (the rows it COPYed
 *   in, typed columns beside the payload, ingest.ts) joined with the ids the event store took.
 *   Nothing is read back from `chain_events`, no jsonb is read at all.
 * - `batchInput`: events from memory with the ids they were stored under, as rows of one jsonb
 *   parameter (`jsonb_to_recordset`): the write path before staging (kept as the reference the
 *   staged one is tested and benched against, test/indexer/jsonb-ingest.ts) and tests.
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

/** Ingest's staging tables (temporary, per session, emptied at commit; created by ingest.ts). */
export const STAGED_EVENTS = "ingest_events";
/** The ids of the staged events the event store took (new ones; duplicates are left out). */
export const STAGED_STORED = "ingest_stored";

const STAGED = (name: string, columns: string): string => `
  SELECT ${columns}
  FROM ${STAGED_EVENTS} s JOIN ${STAGED_STORED} USING (id)
  WHERE s.event_name = '${name}'`;

const STAGED_PAYMENTS = STAGED(
  "PaymentRecorded",
  `s.id AS event_id, s.signature AS tx_hash, s.instruction_index, s.agent, s.payee, s.mint, s.payment_id, s.protocol,
   s.rail, s.amount_units, s.endpoint_hash, s.parent_tx_hash, s.invocation, s.atomic, s.settlement_reference,
   s.budget_units, to_timestamp(s.seconds) AS ts, s.slot, s.commitment = 'finalized' AS finalized`,
);

const STAGED_INVOCATIONS_OPENED = STAGED(
  "InvocationOpened",
  "s.id AS event_id, s.invocation, s.invoker, s.sub_agent, s.parent_tx_hash, s.budget_units, s.slot",
);

/** The staged events the event store took; `has` says which kinds the batch carries at all. */
export function stagedInput(has: { readonly payments: boolean; readonly invocationsOpened: boolean }): ProjectionInput {
  return {
    payments: { sql: STAGED_PAYMENTS, params: [], empty: !has.payments },
    invocationsOpened: { sql: STAGED_INVOCATIONS_OPENED, params: [], empty: !has.invocationsOpened },
  };
}

// Events from memory: one jsonb parameter of rows (cheaper for Postgres than one array per column).
const BATCH_PAYMENTS = `
  SELECT r.event_id, r.tx_hash, r.instruction_index, r.agent, r.payee, r.mint, r.payment_id, r.protocol, r.rail,
         r.amount_units, r.endpoint_hash, r.parent_tx_hash, r.invocation, r.atomic, r.settlement_reference,
         r.budget_units, to_timestamp(r.seconds) AS ts, r.slot, r.finalized
  FROM jsonb_to_recordset($1::jsonb)
       AS r(event_id bigint, tx_hash text, instruction_index int, agent text, payee text, mint text, payment_id numeric,
            protocol text, rail text, amount_units numeric, endpoint_hash text, parent_tx_hash text, invocation text,
            atomic boolean, settlement_reference text, budget_units numeric, seconds float8, slot bigint, finalized boolean)`;

const BATCH_INVOCATIONS_OPENED = `
  SELECT * FROM jsonb_to_recordset($1::jsonb)
         AS r(event_id bigint, invocation text, invoker text, sub_agent text, parent_tx_hash text, budget_units numeric, slot bigint)`;

/** A stored event's key, as `insertEvents` returns it with the id it got. */
export function eventKey(signature: string, instructionIndex: number, innerIndex: number, ordinal: number): string {
  return `${signature}/${instructionIndex}/${innerIndex}/${ordinal}`;
}

type Parent = Readonly<Record<string, string>> | null;

/** `events` paired with the ids the event store gave them, in chain order. */
export function batchInput(events: readonly { readonly id: string; readonly event: DecodedEvent }[]): ProjectionInput {
  const payments = events.filter((e) => e.event.name === "PaymentRecorded");
  const opened = events.filter((e) => e.event.name === "InvocationOpened");
  const p = (e: DecodedEvent, key: string): string | null => (e.payload[key] as string | null | undefined) ?? null;
  const parent = (e: DecodedEvent): Parent => (e.payload.parent as Parent | undefined) ?? null;
  const paymentRows = payments.map(({ id, event: e }) => ({
    event_id: id,
    tx_hash: e.signature,
    instruction_index: e.instructionIndex,
    agent: p(e, "payer"),
    payee: p(e, "payee"),
    mint: p(e, "mint"),
    payment_id: p(e, "paymentId"),
    protocol: p(e, "protocol"),
    rail: p(e, "rail"),
    amount_units: p(e, "amountUnits"),
    endpoint_hash: p(e, "endpointHash"),
    parent_tx_hash: parent(e)?.parentSignature ?? null,
    invocation: parent(e)?.invocation ?? null,
    atomic: e.payload.atomic === true,
    settlement_reference: p(e, "settlementReference"),
    budget_units: parent(e)?.budgetUnits ?? null,
    seconds: e.blockTime ?? (e.payload.recordedAtSeconds as number),
    slot: e.slot.toString(),
    finalized: e.commitment === "finalized",
  }));
  const openedRows = opened.map(({ id, event: e }) => ({
    event_id: id,
    invocation: p(e, "invocation"),
    invoker: p(e, "invoker"),
    sub_agent: p(e, "subAgent"),
    parent_tx_hash: p(e, "parentSignature"),
    budget_units: p(e, "budgetUnits"),
    slot: e.slot.toString(),
  }));
  return {
    payments: { sql: BATCH_PAYMENTS, empty: paymentRows.length === 0, params: [JSON.stringify(paymentRows)] },
    invocationsOpened: { sql: BATCH_INVOCATIONS_OPENED, empty: openedRows.length === 0, params: [JSON.stringify(openedRows)] },
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
