/**
 * Idempotent batch ingest: the transactions a source yielded, their events, the settlement
 * transfers they name, every projection and the checkpoint, in ONE Postgres transaction. Events
 * are keyed by their place in the chain (ON CONFLICT DO NOTHING), and projections are fed only
 * the events this call inserted (INSERT ... RETURNING), so re-ingesting anything changes nothing.
 */
import type pg from "pg";
import { withTransaction } from "../db/database.js";
import type { DecodedEvent, DecodedTransaction } from "../decode/transaction.js";
import type { SettlementTransfer } from "../decode/settlement.js";
import { batchInput, eventKey } from "./projection-input.js";
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

/** Upper bound on one batch, so one statement's arrays stay within memory and lock budgets. */
export const MAX_BATCH_TRANSACTIONS = 5_000;

async function insertSeen(client: pg.ClientBase, transactions: readonly DecodedTransaction[]): Promise<number> {
  if (transactions.length === 0) return 0;
  const result = await client.query(
    `INSERT INTO chain_transactions_seen (signature, slot, outcome, event_count, detail)
     SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::int[], $5::text[])
     ON CONFLICT (signature) DO NOTHING`,
    [
      transactions.map((t) => t.signature),
      transactions.map((t) => t.slot.toString()),
      transactions.map((t) => t.outcome),
      transactions.map((t) => t.events.length),
      transactions.map((t) => t.detail),
    ],
  );
  return result.rowCount ?? 0;
}

/** Stores the batch's events; returns those that were new, with their ids, in chain order. */
async function insertEvents(client: pg.ClientBase, transactions: readonly DecodedTransaction[]): Promise<StoredEvent[]> {
  const events = transactions.flatMap((t) => t.events);
  if (events.length === 0) return [];
  const result = await client.query<{ id: string; signature: string; ix: number; inner_ix: number; ord: number }>(
    `INSERT INTO chain_events (signature, instruction_index, inner_index, event_ordinal, slot, block_time, commitment,
                               finalized, event_name, payload, raw, source)
     SELECT sig, ix, inner_ix, ord, slot, to_timestamp(bt), com, com = 'finalized', name, payload, raw, src
     FROM unnest($1::text[], $2::int[], $3::int[], $4::int[], $5::bigint[], $6::float8[], $7::text[], $8::text[],
                 $9::jsonb[], $10::bytea[], $11::text[])
          WITH ORDINALITY AS u(sig, ix, inner_ix, ord, slot, bt, com, name, payload, raw, src, n)
     ORDER BY n
     ON CONFLICT (signature, instruction_index, inner_index, event_ordinal) DO NOTHING
     RETURNING id, signature, instruction_index AS ix, inner_index AS inner_ix, event_ordinal AS ord`,
    [
      events.map((e) => e.signature),
      events.map((e) => e.instructionIndex),
      events.map((e) => e.innerIndex),
      events.map((e) => e.ordinal),
      events.map((e) => e.slot.toString()),
      events.map((e) => e.blockTime),
      events.map((e) => e.commitment),
      events.map((e) => e.name),
      events.map((e) => JSON.stringify(e.payload)),
      events.map((e) => Buffer.from(e.raw.buffer, e.raw.byteOffset, e.raw.byteLength)),
      events.map((e) => e.source),
    ],
  );
  const ids = new Map(result.rows.map((r) => [eventKey(r.signature, r.ix, r.inner_ix, r.ord), r.id]));
  // Project in id order (= chain order within the batch) so parents precede children.
  return events
    .flatMap((event) => {
      const id = ids.get(eventKey(event.signature, event.instructionIndex, event.innerIndex, event.ordinal));
      return id === undefined ? [] : [{ id, event }];
    })
    .sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1));
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

export { LEDGER_TRANSACTIONS_CHANNEL };

interface StoredEvent {
  readonly id: string;
  readonly event: DecodedEvent;
}

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
  return withTransaction(pool, async (client) => {
    let eventsRolledBack = 0;
    for (const slot of batch.deadSlots ?? []) eventsRolledBack += await rollbackSlot(client, slot);
    const transactionsSeen = await insertSeen(client, batch.transactions);
    const settlements = await insertSettlements(client, batch.settlements ?? []);
    const stored = await insertEvents(client, batch.transactions);
    // The projections read the batch from memory; each new payment notifies the live feed.
    if (stored.length > 0) await projectInput(client, batchInput(stored), { ...options, notify: true });
    await projectSettlements(client, settlements);
    if (batch.finalizedSlot !== undefined) await projectFinality(client, batch.finalizedSlot);
    if (batch.checkpoint !== undefined) await advanceCheckpoint(client, batch.checkpoint);
    return { transactionsSeen, eventsInserted: stored.length, settlementsInserted: settlements.length, eventsRolledBack };
  });
}

export async function readCheckpoint(pool: pg.Pool, source: string): Promise<Checkpoint | null> {
  const result = await pool.query<{ slot: string; blockhash: string | null }>("SELECT slot, blockhash FROM checkpoints WHERE source = $1", [
    source,
  ]);
  const row = result.rows[0];
  return row === undefined ? null : { source, slot: BigInt(row.slot), blockhash: row.blockhash };
}
