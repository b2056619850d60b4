/**
 * Idempotent batch ingest: the transactions a source yielded, their events, the settlement
 * transfers they name, every projection and the checkpoint, in ONE Postgres transaction. The
 * batch goes in by COPY into session-local staging tables, and from there, set-based, into the
 * event store and every read model. Events are keyed by their place in the chain (ON CONFLICT DO
 * NOTHING), and projections are fed only the staged events the event store took, so re-ingesting
 * anything changes nothing, except a transaction seen `unresolved`: read again with its keys, its
 * row and events come in.
 */
import type pg from "pg";
import { withTransaction } from "../db/database.js";
import type { DecodedEvent, DecodedTransaction } from "../decode/transaction.js";
import type { SettlementTransfer } from "../decode/settlement.js";
import { isChannelEvent, notifyChannelEvents, projectChannelEvents } from "./channels.js";
import { bytea, copyIn, NULL, text } from "./copy.js";
import { ensurePartitions } from "./partitions.js";
import { STAGED_EVENTS, STAGED_STORED, stagedInput } from "./projection-input.js";
import {
  LEDGER_TRANSACTIONS_CHANNEL,
  type ProjectionOptions,
  projectFinality,
  projectInput,
  projectSettlements,
  rollbackSlot,
} from "./projections.js";

export interface Checkpoint {
  readonly source: string;
  readonly slot: bigint;
  readonly blockhash: string | null;
}

export interface IngestBatch {
  readonly transactions: readonly DecodedTransaction[];
  readonly settlements?: readonly SettlementTransfer[];
  /** Advanced (never moved back) in the same transaction. */
  readonly checkpoint?: Checkpoint;
  /** Events at or below this slot are finalized. */
  readonly finalizedSlot?: bigint;
  /** Slots that died (forks): their non-finalized events leave the store and every projection. */
  readonly deadSlots?: readonly bigint[];
}

export interface IngestResult {
  readonly transactionsSeen: number;
  readonly eventsInserted: number;
  readonly settlementsInserted: number;
  readonly eventsRolledBack: number;
}

/** Upper bound on one batch, so its staging and set-based statements stay within memory and lock budgets. */
export const MAX_BATCH_TRANSACTIONS = 5_000;

const STAGED_SEEN = "ingest_seen";

// Temporary (no WAL, private to the session), emptied at every commit; created once per session.
// The events' typed columns are what the projections read (projection-input.ts), so the payload
// is parsed once, as the event store's jsonb, and never read back. Ids are drawn from the event
// store's sequence as rows arrive, in batch order: the order the event store numbered them in
// when each row was its own INSERT, duplicates included.
const STAGING = `
  CREATE TEMP TABLE IF NOT EXISTS ${STAGED_SEEN} (
    signature text, slot bigint, outcome text, event_count int, detail text
  ) ON COMMIT DELETE ROWS;
  CREATE TEMP TABLE IF NOT EXISTS ${STAGED_EVENTS} (
    id bigint NOT NULL DEFAULT nextval('chain_events_id_seq'),
    signature text, instruction_index int, inner_index int, event_ordinal int, slot bigint, block_seconds float8,
    commitment text, event_name text, payload jsonb, raw bytea, source text,
    agent text, payee text, mint text, payment_id numeric, protocol text, rail text, amount_units numeric,
    endpoint_hash text, parent_tx_hash text, invocation text, atomic boolean, settlement_reference text,
    budget_units numeric, seconds float8, invoker text, sub_agent text
  ) ON COMMIT DELETE ROWS;
  CREATE TEMP TABLE IF NOT EXISTS ${STAGED_STORED} (id bigint) ON COMMIT DELETE ROWS`;

const EVENT_COLUMNS = `signature, instruction_index, inner_index, event_ordinal, slot, block_seconds, commitment,
  event_name, payload, raw, source, agent, payee, mint, payment_id, protocol, rail, amount_units, endpoint_hash,
  parent_tx_hash, invocation, atomic, settlement_reference, budget_units, seconds, invoker, sub_agent`;

async function insertSeen(client: pg.ClientBase, transactions: readonly DecodedTransaction[]): Promise<number> {
  if (transactions.length === 0) return 0;
  // One row per signature (an upsert may not touch a row twice); a transaction once `unresolved`
  // is replaced when it is read again with its keys, any other outcome is final.
  const latest = new Map(transactions.map((t) => [t.signature, t]));
  const lines: string[] = [];
  for (const t of latest.values()) {
    lines.push(`${t.signature}\t${t.slot}\t${t.outcome}\t${t.events.length}\t${text(t.detail)}\n`);
  }
  await copyIn(client, `${STAGED_SEEN} (signature, slot, outcome, event_count, detail)`, lines);
  const result = await client.query(
    `INSERT INTO chain_transactions_seen (signature, slot, outcome, event_count, detail)
     SELECT signature, slot, outcome, event_count, detail FROM ${STAGED_SEEN}
     ON CONFLICT (signature, slot) DO UPDATE
       SET outcome = excluded.outcome, event_count = excluded.event_count, detail = excluded.detail, seen_at = now()
       WHERE chain_transactions_seen.outcome = 'unresolved'`,
  );
  return result.rowCount ?? 0;
}

type Parent = Readonly<Record<string, string>> | null;

const value = (v: unknown): string => (v === null || v === undefined ? NULL : text(String(v)));

/** One staging line: the event store's columns, then the typed ones its projections read. */
function eventLine(e: DecodedEvent): string {
  const p = e.payload;
  const store = [
    e.signature,
    e.instructionIndex,
    e.innerIndex,
    e.ordinal,
    e.slot,
    e.blockTime ?? NULL,
    e.commitment,
    e.name,
    text(JSON.stringify(p)),
    bytea(e.raw),
    e.source,
  ].join("\t");
  let typed: string;
  if (e.name === "PaymentRecorded") {
    const parent = (p.parent as Parent | undefined) ?? null;
    typed = [
      value(p.payer),
      value(p.payee),
      value(p.mint),
      value(p.paymentId),
      value(p.protocol),
      value(p.rail),
      value(p.amountUnits),
      value(p.endpointHash),
      value(parent?.parentSignature),
      value(parent?.invocation),
      p.atomic === true ? "t" : "f",
      value(p.settlementReference),
      value(parent?.budgetUnits),
      e.blockTime ?? value(p.recordedAtSeconds),
      NULL,
      NULL,
    ].join("\t");
  } else if (e.name === "InvocationOpened") {
    typed = [
      ...Array<string>(8).fill(NULL),
      value(p.parentSignature),
      value(p.invocation),
      NULL,
      NULL,
      value(p.budgetUnits),
      NULL,
      value(p.invoker),
      value(p.subAgent),
    ].join("\t");
  } else {
    typed = Array<string>(16).fill(NULL).join("\t");
  }
  return `${store}\t${typed}\n`;
}

/** What `insertEvents` stored: how many events were new, and the ids of the new channel events. */
interface Stored {
  readonly count: number;
  readonly channelIds: readonly string[];
}

/** Stages the batch's events and stores the new ones; the staging then holds which were new. */
async function insertEvents(client: pg.ClientBase, events: readonly DecodedEvent[]): Promise<Stored> {
  if (events.length === 0) return { count: 0, channelIds: [] };
  await copyIn(client, `${STAGED_EVENTS} (${EVENT_COLUMNS})`, events.map(eventLine));
  const result = await client.query<{ n: number; channel_ids: string[] | null }>(
    `WITH stored AS (
       INSERT INTO chain_events (id, signature, instruction_index, inner_index, event_ordinal, slot, block_time, commitment,
                                 finalized, event_name, payload, raw, source)
       SELECT id, signature, instruction_index, inner_index, event_ordinal, slot, to_timestamp(block_seconds), commitment,
              commitment = 'finalized', event_name, payload, raw, source
       FROM ${STAGED_EVENTS} ORDER BY id
       ON CONFLICT (signature, instruction_index, inner_index, event_ordinal, slot) DO NOTHING
       RETURNING id, event_name),
     kept AS (INSERT INTO ${STAGED_STORED} (id) SELECT id FROM stored)
     SELECT count(*)::int AS n, array_agg(id::text ORDER BY id) FILTER (WHERE event_name = ANY($1::text[])) AS channel_ids
     FROM stored`,
    // The channel event names this batch carries: those new events' ids go to the channel model.
    [[...new Set(events.filter((e) => isChannelEvent(e.name)).map((e) => e.name))]],
  );
  const row = result.rows[0]!;
  return { count: row.n, channelIds: row.channel_ids ?? [] };
}

async function insertSettlements(client: pg.ClientBase, settlements: readonly SettlementTransfer[]): Promise<string[]> {
  if (settlements.length === 0) return [];
  const result = await client.query<{ signature: string }>(
    `INSERT INTO settlement_transfers (signature, slot, source_owner, destination_owner, authority, mint, amount_units,
                                       decimals, failed)
     SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::numeric[],
                          $8::int[], $9::boolean[])
     ON CONFLICT (signature) DO NOTHING
     RETURNING signature`,
    [
      settlements.map((s) => s.signature),
      settlements.map((s) => s.slot.toString()),
      settlements.map((s) => s.transfer?.sourceOwner ?? null),
      settlements.map((s) => s.transfer?.destinationOwner ?? null),
      settlements.map((s) => s.transfer?.authority ?? null),
      settlements.map((s) => s.transfer?.mint ?? null),
      settlements.map((s) => s.transfer?.amountUnits.toString() ?? null),
      settlements.map((s) => s.transfer?.decimals ?? null),
      settlements.map((s) => s.failed),
    ],
  );
  return result.rows.map((r) => r.signature);
}

/** The live feed's channel; the projection statement notifies it (projections.ts). */
export { LEDGER_TRANSACTIONS_CHANNEL };

async function advanceCheckpoint(client: pg.ClientBase, checkpoint: Checkpoint): Promise<void> {
  await client.query(
    `INSERT INTO checkpoints (source, slot, blockhash, updated_at) VALUES ($1, $2, $3, now())
     ON CONFLICT (source) DO UPDATE
       SET slot = excluded.slot, blockhash = excluded.blockhash, updated_at = now()
       WHERE checkpoints.slot <= excluded.slot`,
    [checkpoint.source, checkpoint.slot.toString(), checkpoint.blockhash],
  );
}

export async function ingestBatch(pool: pg.Pool, batch: IngestBatch, options: ProjectionOptions): Promise<IngestResult> {
  if (batch.transactions.length > MAX_BATCH_TRANSACTIONS) {
    throw new RangeError(`batch of ${batch.transactions.length} transactions exceeds ${MAX_BATCH_TRANSACTIONS}`);
  }
  const events = batch.transactions.flatMap((t) => t.events);
  let known = (): void => undefined;
  const result = await withTransaction(pool, async (client) => {
    let eventsRolledBack = 0;
    for (const slot of batch.deadSlots ?? []) eventsRolledBack += await rollbackSlot(client, slot);
    if (batch.transactions.length > 0) {
      await client.query(STAGING);
      known = await ensurePartitions(
        pool,
        client,
        batch.transactions.map((t) => t.slot),
      );
    }
    const transactionsSeen = await insertSeen(client, batch.transactions);
    const settlements = await insertSettlements(client, batch.settlements ?? []);
    const stored = await insertEvents(client, events);
    // The projections read the staged batch; each new payment notifies the live feed.
    if (stored.count > 0) {
      const has = {
        payments: events.some((e) => e.name === "PaymentRecorded"),
        invocationsOpened: events.some((e) => e.name === "InvocationOpened"),
      };
      await projectInput(client, stagedInput(has), { ...options, notify: true });
      // Most batches carry no channel event: then the channel read model costs no statement.
      await projectChannelEvents(client, stored.channelIds);
      await notifyChannelEvents(client, stored.channelIds);
    }
    await projectSettlements(client, settlements);
    if (batch.finalizedSlot !== undefined) await projectFinality(client, batch.finalizedSlot);
    if (batch.checkpoint !== undefined) await advanceCheckpoint(client, batch.checkpoint);
    return { transactionsSeen, eventsInserted: stored.count, settlementsInserted: settlements.length, eventsRolledBack };
  });
  known();
  return result;
}

export async function readCheckpoint(pool: pg.Pool, source: string): Promise<Checkpoint | null> {
  const result = await pool.query<{ slot: string; blockhash: string | null }>("SELECT slot, blockhash FROM checkpoints WHERE source = $1", [
    source,
  ]);
  const row = result.rows[0];
  return row === undefined ? null : { source, slot: BigInt(row.slot), blockhash: row.blockhash };
}
