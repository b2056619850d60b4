/**
 * The projections: every read model derived from `chain_events` (and `settlement_transfers`),
 * as set-based SQL over a `ProjectionInput` (projection-input.ts). Ingest passes the events it
 * just stored, from memory; rebuild passes the event store by id ranges, in order. One statement
 * text either way, so both produce the same rows (test/indexer/projection-equivalence.test.ts).
 */
import type pg from "pg";
import { CHANNEL_PROJECTION_TABLES, projectChannelEvents, unprojectChannelEvents } from "./channels.js";
import { type ProjectionInput, storedEventsInput } from "./projection-input.js";

/** Channel the live feed listens on; Postgres delivers these only if the batch commits. */
export const LEDGER_TRANSACTIONS_CHANNEL = "ledger_transactions";

export const PROJECTION_TABLES = [
  "payment_edges",
  "payment_closure",
  "transactions",
  "spend_rollups",
  "metric_buckets",
  "invocations",
  ...CHANNEL_PROJECTION_TABLES,
] as const;

export interface ProjectionOptions {
  /** Explorer cluster: "mainnet-beta", "devnet", "testnet", or a custom RPC URL (localnet). */
  readonly cluster: string;
}

/** `https://explorer.solana.com/tx/<sig>` + this suffix. */
export function explorerSuffix(cluster: string): string {
  if (cluster === "mainnet-beta" || cluster === "") return "";
  if (cluster === "devnet" || cluster === "testnet") return `?cluster=${cluster}`;
  return `?cluster=custom&customUrl=${encodeURIComponent(cluster)}`;
}

const EXPLORER_TX = "https://explorer.solana.com/tx/";

/** The explorer entry of a transaction (spec 2.2 `solanaExplorer`), as the projections write it. */
export function explorerLink(signature: string, cluster: string): string {
  return `${EXPLORER_TX}${signature}${explorerSuffix(cluster)}`;
}

/**
 * The descendant payment's columns a payment_closure row carries (migration 060), as in
 * `transactions`: its immutable facts, so no row is ever updated (status is read from the
 * payments still confirmed).
 */
export const CLOSURE_NODE_COLUMNS = 'tx_hash, parent_tx_hash, agent, amount_units, protocol, endpoint_hash, "timestamp", explorer_url';

/** CLOSURE_NODE_COLUMNS qualified by a table alias. */
export const closureNodeColumnsOf = (alias: string): string =>
  CLOSURE_NODE_COLUMNS.split(", ")
    .map((column) => `${alias}.${column}`)
    .join(", ");

// A settlement is verified when the referenced transaction succeeded and its TransferChecked moved
// exactly the recorded amount of the recorded mint from the payer to the payee.
const SETTLEMENT_STATUS = `
  CASE WHEN p->>'settlementReference' IS NULL THEN NULL
       WHEN EXISTS (SELECT 1 FROM settlement_transfers s
                    WHERE s.signature = p->>'settlementReference' AND NOT s.failed
                      AND s.amount_units = (p->>'amountUnits')::numeric
                      AND s.mint = p->>'mint'
                      AND coalesce(s.source_owner, s.authority) = p->>'payer'
                      AND s.destination_owner = p->>'payee') THEN 'verified'
       ELSE 'unverified' END`;

/** The same rule over the typed columns of a projection input row `i`. */
const INPUT_SETTLEMENT_STATUS = `
  CASE WHEN i.settlement_reference IS NULL THEN NULL
       WHEN EXISTS (SELECT 1 FROM settlement_transfers s
                    WHERE s.signature = i.settlement_reference AND NOT s.failed
                      AND s.amount_units = i.amount_units AND s.mint = i.mint
                      AND coalesce(s.source_owner, s.authority) = i.agent
                      AND s.destination_owner = i.payee) THEN 'verified'
       ELSE 'unverified' END`;

/**
 * Projects a set of events not projected before, whatever they come from (projection-input.ts):
 * the batch ingest just stored (typed arrays, no jsonb read back), a range of the event store
 * (rebuild) or a list of its ids. Two statements: invocations opened, then ONE statement whose
 * data-modifying CTEs write the payments, their tree edges and closure, the rollups, the metric buckets and
 * the invocations' consumption from the rows just inserted, and notify the live feed.
 * Returns the number of payments projected.
 */
export async function projectInput(
  client: pg.ClientBase,
  input: ProjectionInput,
  options: ProjectionOptions & { readonly notify: boolean },
): Promise<number> {
  // Invocations opened: the budget the chain enforces.
  if (!input.invocationsOpened.empty) {
    await client.query(
      `INSERT INTO invocations (invocation, invoker, sub_agent, parent_tx_hash, budget_units, spent_units, payment_count, opened_slot)
       SELECT o.invocation, o.invoker, o.sub_agent, o.parent_tx_hash, o.budget_units, 0, 0, o.slot
       FROM (${input.invocationsOpened.sql}) o
       ORDER BY o.event_id
       ON CONFLICT (invocation) DO UPDATE
         SET invoker = excluded.invoker, opened_slot = excluded.opened_slot, budget_units = excluded.budget_units`,
      [...input.invocationsOpened.params],
    );
  }
  if (input.payments.empty) return 0;

  const n = input.payments.params.length;
  const result = await client.query<{ projected: string }>(
    `WITH RECURSIVE input AS MATERIALIZED (${input.payments.sql}),
     inserted AS (
       INSERT INTO transactions (event_id, tx_hash, instruction_index, agent, payee, mint, payment_id, protocol, rail,
                                 amount_units, endpoint_hash, parent_tx_hash, invocation, atomic, settlement_reference,
                                 settlement_status, explorer_url, "timestamp", slot, status)
       SELECT i.event_id, i.tx_hash, i.instruction_index, i.agent, i.payee, i.mint, i.payment_id, i.protocol, i.rail,
              i.amount_units, i.endpoint_hash, i.parent_tx_hash, i.invocation, i.atomic, i.settlement_reference,
              ${INPUT_SETTLEMENT_STATUS}, $${n + 1}::text || i.tx_hash || $${n + 2}::text, i.ts, i.slot,
              CASE WHEN i.finalized THEN 'finalized' ELSE 'confirmed' END
       FROM input i ORDER BY i.event_id
       ON CONFLICT (event_id) DO NOTHING
       RETURNING event_id, tx_hash, agent, protocol, endpoint_hash, amount_units, "timestamp", invocation, parent_tx_hash, slot,
                 explorer_url),
     -- Tree edges. Depth = levels walked up through this set's own records, plus the depth of the
     -- edge where the walk leaves the set (an earlier one's child, so parents precede children).
     fresh AS MATERIALIZED (
       SELECT event_id, invocation, ${CLOSURE_NODE_COLUMNS} FROM inserted WHERE parent_tx_hash IS NOT NULL),
     walk (event_id, ancestor, level) AS (
       SELECT event_id, parent_tx_hash, 1 FROM fresh
       UNION ALL
       SELECT w.event_id, f.parent_tx_hash, w.level + 1
       FROM walk w JOIN fresh f ON f.tx_hash = w.ancestor
       WHERE w.level < 64),
     edges AS (
       INSERT INTO payment_edges (child_event_id, parent_tx_hash, child_tx_hash, invocation, child_payer, depth)
       SELECT f.event_id, f.parent_tx_hash, f.tx_hash, f.invocation, f.agent,
              max(w.level + coalesce((SELECT max(pe.depth) FROM payment_edges pe WHERE pe.child_tx_hash = w.ancestor), 0))
       FROM walk w JOIN fresh f USING (event_id)
       GROUP BY f.event_id, f.parent_tx_hash, f.tx_hash, f.invocation, f.agent
       ON CONFLICT (child_event_id) DO NOTHING),
     -- Closure (payment_closure): each new payment's ancestors at every distance. Those the walk
     -- met in this set, and beyond where it leaves the set, the stored ancestors of the parent's
     -- payments one level further (one index lookup per payment: parents precede children). Each
     -- row carries its descendant's tree-node columns (migration 060).
     ancestry AS MATERIALIZED (
       SELECT w.event_id, w.ancestor, w.level AS distance FROM walk w
       UNION
       SELECT w.event_id, pc.ancestor_tx_hash, w.level + pc.distance
       FROM walk w
       JOIN payment_edges pe ON pe.child_tx_hash = w.ancestor
       JOIN payment_closure pc ON pc.descendant_event_id = pe.child_event_id),
     closure AS (
       INSERT INTO payment_closure (ancestor_tx_hash, distance, descendant_event_id, ${CLOSURE_NODE_COLUMNS})
       SELECT a.ancestor, a.distance, a.event_id, ${closureNodeColumnsOf("f")}
       FROM ancestry a JOIN fresh f USING (event_id)
       UNION
       -- Payments stored before this parent (a backfill of an earlier range after a later one): they
       -- gain the new payment's ancestors, beyond their distance to its transaction.
       SELECT a.ancestor, a.distance + pc.distance, pc.descendant_event_id, ${closureNodeColumnsOf("pc")}
       FROM fresh f
       JOIN payment_closure pc ON pc.ancestor_tx_hash = f.tx_hash
       JOIN ancestry a ON a.event_id = f.event_id
       ON CONFLICT DO NOTHING),
     rollups AS (
       INSERT INTO spend_rollups (agent, bucket_start, protocol, endpoint_hash, amount_units, tx_count)
       SELECT agent, date_trunc('minute', "timestamp"), protocol, endpoint_hash, sum(amount_units), count(*)
       FROM inserted GROUP BY 1, 2, 3, 4
       ON CONFLICT (agent, bucket_start, protocol, endpoint_hash) DO UPDATE
         SET amount_units = spend_rollups.amount_units + excluded.amount_units,
             tx_count = spend_rollups.tx_count + excluded.tx_count),
     metrics AS (
       INSERT INTO metric_buckets (agent, bucket_start, spend_units, tx_count, x402_spend_units, x402_count, mpp_spend_units, mpp_count)
       SELECT agent, date_trunc('minute', "timestamp"), sum(amount_units), count(*),
              coalesce(sum(amount_units) FILTER (WHERE protocol = 'x402'), 0), count(*) FILTER (WHERE protocol = 'x402'),
              coalesce(sum(amount_units) FILTER (WHERE protocol = 'mpp'), 0), count(*) FILTER (WHERE protocol = 'mpp')
       FROM inserted GROUP BY 1, 2
       ON CONFLICT (agent, bucket_start) DO UPDATE
         SET spend_units = metric_buckets.spend_units + excluded.spend_units,
             tx_count = metric_buckets.tx_count + excluded.tx_count,
             x402_spend_units = metric_buckets.x402_spend_units + excluded.x402_spend_units,
             x402_count = metric_buckets.x402_count + excluded.x402_count,
             mpp_spend_units = metric_buckets.mpp_spend_units + excluded.mpp_spend_units,
             mpp_count = metric_buckets.mpp_count + excluded.mpp_count),
     -- Consumption of invocation budgets. A payment seen before its InvocationOpened (a backfill
     -- that starts in between) still creates the row, from the budget the event carries.
     consumed AS (
       INSERT INTO invocations (invocation, invoker, sub_agent, parent_tx_hash, budget_units, spent_units, payment_count, opened_slot)
       SELECT t.invocation, NULL, min(t.agent), min(t.parent_tx_hash), max(i.budget_units), sum(t.amount_units), count(*), NULL::bigint
       FROM inserted t JOIN input i USING (event_id)
       WHERE t.invocation IS NOT NULL
       GROUP BY t.invocation
       ON CONFLICT (invocation) DO UPDATE
         SET spent_units = invocations.spent_units + excluded.spent_units,
             payment_count = invocations.payment_count + excluded.payment_count),
     -- One notification per new payment, in chain order; delivered only if the batch commits.
     notified AS (
       SELECT pg_notify('${LEDGER_TRANSACTIONS_CHANNEL}', json_build_object('txHash', tx_hash, 'agent', agent, 'slot', slot::text)::text)
       FROM inserted WHERE $${n + 3}::boolean ORDER BY event_id)
     SELECT (SELECT count(*) FROM inserted) + 0 * (SELECT count(*) FROM notified) AS projected`,
    [...input.payments.params, EXPLORER_TX, explorerSuffix(options.cluster), options.notify],
  );
  return Number(result.rows[0]!.projected);
}

/** Projects the given events (ids of `chain_events` rows not projected before), read from the store. */
export async function projectEvents(client: pg.ClientBase, eventIds: readonly string[], options: ProjectionOptions): Promise<void> {
  if (eventIds.length === 0) return;
  await projectInput(client, storedEventsInput({ ids: eventIds }), { ...options, notify: false });
  await projectChannelEvents(client, eventIds);
}

/** Re-evaluates the settlement status of records naming newly stored settlement transactions. */
export async function projectSettlements(client: pg.ClientBase, signatures: readonly string[]): Promise<void> {
  if (signatures.length === 0) return;
  await client.query(
    `UPDATE transactions t SET settlement_status = ${SETTLEMENT_STATUS}
     FROM chain_events e CROSS JOIN LATERAL (SELECT e.payload AS p) x
     WHERE e.id = t.event_id AND t.settlement_reference = ANY($1::text[])`,
    [[...signatures]],
  );
}

/**
 * Marks the events up to slot $1 finalized: read from `chain_events_unfinalized` (migration 061),
 * the newest slots' events, not from every event stored below $1.
 */
export const FINALIZE_EVENTS_SQL = "UPDATE chain_events SET finalized = true WHERE slot <= $1 AND NOT finalized RETURNING id";

/** Marks events up to `slot` finalized and their transactions with them. */
export async function projectFinality(client: pg.ClientBase, slot: bigint): Promise<number> {
  const marked = await client.query<{ id: string }>(FINALIZE_EVENTS_SQL, [slot.toString()]);
  const ids = marked.rows.map((r) => r.id);
  if (ids.length > 0) {
    await client.query("UPDATE transactions SET status = 'finalized' WHERE event_id IN (SELECT unnest($1::bigint[]))", [ids]);
  }
  return ids.length;
}

/**
 * Removes the events of a slot that died (a fork the cluster abandoned) from the event store and
 * from every projection, the exact inverse of `projectEvents`. Finalized events never roll back.
 * Returns the number of events removed.
 */
export async function rollbackSlot(client: pg.ClientBase, slot: bigint): Promise<number> {
  const found = await client.query<{ id: string }>("SELECT id FROM chain_events WHERE slot = $1 AND NOT finalized ORDER BY id", [
    slot.toString(),
  ]);
  const ids = found.rows.map((r) => r.id);
  if (ids.length > 0) await unprojectEvents(client, ids);
  const settlements = await client.query<{ signature: string }>("DELETE FROM settlement_transfers WHERE slot = $1 RETURNING signature", [
    slot.toString(),
  ]);
  await client.query("DELETE FROM chain_events WHERE slot = $2 AND id IN (SELECT unnest($1::bigint[]))", [ids, slot.toString()]);
  await client.query("DELETE FROM chain_transactions_seen WHERE slot = $1", [slot.toString()]);
  await projectSettlements(
    client,
    settlements.rows.map((r) => r.signature),
  );
  return ids.length;
}

async function unprojectEvents(client: pg.ClientBase, ids: readonly string[]): Promise<void> {
  await unprojectChannelEvents(client, ids);
  const params = [[...ids]];
  await client.query(
    `WITH gone AS (
       SELECT agent, date_trunc('minute', "timestamp") AS bucket_start, protocol, endpoint_hash,
              sum(amount_units) AS amount_units, count(*) AS n
       FROM transactions WHERE event_id IN (SELECT unnest($1::bigint[])) GROUP BY 1, 2, 3, 4)
     UPDATE spend_rollups r SET amount_units = r.amount_units - g.amount_units, tx_count = r.tx_count - g.n
     FROM gone g
     WHERE r.agent = g.agent AND r.bucket_start = g.bucket_start AND r.protocol = g.protocol
       AND r.endpoint_hash = g.endpoint_hash`,
    params,
  );
  await client.query("DELETE FROM spend_rollups WHERE tx_count = 0");
  await client.query(
    `WITH gone AS (
       SELECT agent, date_trunc('minute', "timestamp") AS bucket_start, sum(amount_units) AS spend, count(*) AS n,
              coalesce(sum(amount_units) FILTER (WHERE protocol = 'x402'), 0) AS x402_spend,
              count(*) FILTER (WHERE protocol = 'x402') AS x402_n,
              coalesce(sum(amount_units) FILTER (WHERE protocol = 'mpp'), 0) AS mpp_spend,
              count(*) FILTER (WHERE protocol = 'mpp') AS mpp_n
       FROM transactions WHERE event_id IN (SELECT unnest($1::bigint[])) GROUP BY 1, 2)
     UPDATE metric_buckets m
     SET spend_units = m.spend_units - g.spend, tx_count = m.tx_count - g.n,
         x402_spend_units = m.x402_spend_units - g.x402_spend, x402_count = m.x402_count - g.x402_n,
         mpp_spend_units = m.mpp_spend_units - g.mpp_spend, mpp_count = m.mpp_count - g.mpp_n
     FROM gone g WHERE m.agent = g.agent AND m.bucket_start = g.bucket_start`,
    params,
  );
  await client.query("DELETE FROM metric_buckets WHERE tx_count = 0");
  await client.query(
    `WITH gone AS (
       SELECT invocation, sum(amount_units) AS spent, count(*) AS n
       FROM transactions WHERE event_id IN (SELECT unnest($1::bigint[])) AND invocation IS NOT NULL GROUP BY 1)
     UPDATE invocations i SET spent_units = i.spent_units - g.spent, payment_count = i.payment_count - g.n
     FROM gone g WHERE i.invocation = g.invocation`,
    params,
  );
  // An invocation whose opening rolled back keeps only what its surviving payments say of it.
  await client.query(
    `UPDATE invocations i SET invoker = NULL, opened_slot = NULL
     FROM chain_events e
     WHERE e.id IN (SELECT unnest($1::bigint[])) AND e.event_name = 'InvocationOpened' AND i.invocation = e.payload->>'invocation'`,
    params,
  );
  await client.query("DELETE FROM invocations WHERE payment_count = 0 AND opened_slot IS NULL");
  await client.query("DELETE FROM payment_closure WHERE descendant_event_id IN (SELECT unnest($1::bigint[]))", params);
  await client.query("DELETE FROM payment_edges WHERE child_event_id IN (SELECT unnest($1::bigint[]))", params);
  await client.query("DELETE FROM transactions WHERE event_id IN (SELECT unnest($1::bigint[]))", params);
}
