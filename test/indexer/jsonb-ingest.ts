/**
 * The indexer's write path before staging, kept as the reference the staged one is measured and
 * tested against (bench/indexer/ingest.ts, test/indexer/projection-equivalence.test.ts): the batch
 * as one jsonb parameter per statement (`jsonb_to_recordset`), `INSERT ... RETURNING` of the new
 * events' ids, projections fed from memory (`batchInput`). It runs on the schema of its time
 * (`JSONB_SCHEMA`): the unpartitioned event store, whose event key has no slot, with the later
 * changes to the read models the shared projections write.
 */
import type pg from "pg";
import type { FreshDatabaseOptions } from "./fresh-database.js";
import { withTransaction } from "../../indexer/db/database.js";
import type { DecodedEvent, DecodedTransaction } from "../../indexer/decode/transaction.js";
import type { SettlementTransfer } from "../../indexer/decode/settlement.js";
import { isChannelEvent, notifyChannelEvents, projectChannelEvents } from "../../indexer/store/channels.js";
import type { Checkpoint, IngestBatch, IngestResult } from "../../indexer/store/ingest.js";
import { MAX_BATCH_TRANSACTIONS } from "../../indexer/store/ingest.js";
import { batchInput, eventKey } from "../../indexer/store/projection-input.js";
import {
  type ProjectionOptions,
  projectFinality,
  projectInput,
  projectSettlements,
  rollbackSlot,
} from "../../indexer/store/projections.js";

/** `createFreshDatabase` options for this path: before the partitioned store (52), and the closure rows' node columns (60). */
export const JSONB_SCHEMA: FreshDatabaseOptions = { before: 52, also: [60] };

async function insertSeen(client: pg.ClientBase, transactions: readonly DecodedTransaction[]): Promise<number> {
  if (transactions.length === 0) return 0;
  // One row per signature (an upsert may not touch a row twice); a transaction once `unresolved`
  // is replaced when it is read again with its keys, any other outcome is final.
  const latest = new Map(transactions.map((t) => [t.signature, t]));
  const rows = [...latest.values()].map((t) => ({
    signature: t.signature,
    slot: t.slot.toString(),
    outcome: t.outcome,
    event_count: t.events.length,
    detail: t.detail,
  }));
  const result = await client.query(
    `INSERT INTO chain_transactions_seen (signature, slot, outcome, event_count, detail)
     SELECT * FROM jsonb_to_recordset($1::jsonb) AS r(signature text, slot bigint, outcome text, event_count int, detail text)
     ON CONFLICT (signature) DO UPDATE
       SET slot = excluded.slot, outcome = excluded.outcome, event_count = excluded.event_count, detail = excluded.detail, seen_at = now()
       WHERE chain_transactions_seen.outcome = 'unresolved'`,
    [JSON.stringify(rows)],
  );
  return result.rowCount ?? 0;
}

/** An event this batch stored, with the id the event store gave it. */
interface StoredEvent {
  readonly id: string;
  readonly event: DecodedEvent;
}

/** Stores the batch's events; returns those that were new, with their ids, in chain order. */
async function insertEvents(client: pg.ClientBase, transactions: readonly DecodedTransaction[]): Promise<StoredEvent[]> {
  const events = transactions.flatMap((t) => t.events);
  if (events.length === 0) return [];
  const rows = events.map((e) => ({
    sig: e.signature,
    ix: e.instructionIndex,
    inner_ix: e.innerIndex,
    ord: e.ordinal,
    slot: e.slot.toString(),
    bt: e.blockTime,
    com: e.commitment,
    name: e.name,
    payload: e.payload,
    raw: Buffer.from(e.raw.buffer, e.raw.byteOffset, e.raw.byteLength).toString("base64"),
    src: e.source,
  }));
  const result = await client.query<{ id: string; signature: string; ix: number; inner_ix: number; ord: number }>(
    `INSERT INTO chain_events (signature, instruction_index, inner_index, event_ordinal, slot, block_time, commitment,
                               finalized, event_name, payload, raw, source)
     SELECT r.sig, r.ix, r.inner_ix, r.ord, r.slot, to_timestamp(r.bt), r.com, r.com = 'finalized', r.name, r.payload,
            decode(r.raw, 'base64'), r.src
     FROM ROWS FROM (jsonb_to_recordset($1::jsonb) AS (sig text, ix int, inner_ix int, ord int, slot bigint, bt float8,
                                                        com text, name text, payload jsonb, raw text, src text))
          WITH ORDINALITY AS r(sig, ix, inner_ix, ord, slot, bt, com, name, payload, raw, src, n)
     ORDER BY r.n
     ON CONFLICT (signature, instruction_index, inner_index, event_ordinal) DO NOTHING
     RETURNING id, signature, instruction_index AS ix, inner_index AS inner_ix, event_ordinal AS ord`,
    [JSON.stringify(rows)],
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

async function advanceCheckpoint(client: pg.ClientBase, checkpoint: Checkpoint): Promise<void> {
  await client.query(
    `INSERT INTO checkpoints (source, slot, blockhash, updated_at) VALUES ($1, $2, $3, now())
     ON CONFLICT (source) DO UPDATE
       SET slot = excluded.slot, blockhash = excluded.blockhash, updated_at = now()
       WHERE checkpoints.slot <= excluded.slot`,
    [checkpoint.source, checkpoint.slot.toString(), checkpoint.blockhash],
  );
}

export async function ingestBatchJsonb(pool: pg.Pool, batch: IngestBatch, options: ProjectionOptions): Promise<IngestResult> {
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
    if (stored.length > 0) {
      await projectInput(client, batchInput(stored), { ...options, notify: true });
      // Most batches carry no channel event: then the channel read model costs no statement.
      const channelIds = stored.filter((s) => isChannelEvent(s.event.name)).map((s) => s.id);
      await projectChannelEvents(client, channelIds);
      await notifyChannelEvents(client, channelIds);
    }
    await projectSettlements(client, settlements);
    if (batch.finalizedSlot !== undefined) await projectFinality(client, batch.finalizedSlot);
    if (batch.checkpoint !== undefined) await advanceCheckpoint(client, batch.checkpoint);
    return { transactionsSeen, eventsInserted: stored.length, settlementsInserted: settlements.length, eventsRolledBack };
  });
}
