/**
 * The auditor's tool: re-read the chain for a slot range and report every difference with
 * Postgres. Two checks:
 *   1. chain -> event store: every event the chain holds in the range is stored, byte for byte,
 *      and the store holds no event the chain does not; a transaction whose keys cannot be
 *      resolved (on chain now, or recorded so at ingest) is reported, since its events are unknown;
 *   2. event store -> projections: every read model equals a rebuild from the event store. The
 *      rebuild runs inside a transaction that is rolled back, so verify changes nothing.
 */
import type pg from "pg";
import type { DecodedEvent } from "./decode/transaction.js";
import type { IngestPipeline } from "./pipeline.js";
import type { ChainSource, SlotRange } from "./sources/source.js";
import { withTransaction } from "./db/database.js";
import { PROJECTION_TABLES, type ProjectionOptions } from "./store/projections.js";
import { rebuildProjections } from "./store/rebuild.js";

export interface Difference {
  readonly kind:
    | "missing_event"
    | "extra_event"
    | "changed_event"
    | "unresolved_transaction"
    | "projection_row_missing"
    | "projection_row_extra";
  readonly where: string;
  readonly detail: string;
}

/** Rows listed per projection table; the count is always complete. */
export const MAX_ROWS_REPORTED = 50;

interface StoredEvent {
  signature: string;
  instruction_index: number;
  inner_index: number;
  event_ordinal: number;
  event_name: string;
  payload: unknown;
  raw: string;
  slot: string;
}

const key = (sig: string, ix: number, inner: number, ord: number): string => `${sig}/${ix}/${inner}/${ord}`;

/** Stable JSON: jsonb reorders keys. */
function canonical(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(",")}}`;
}

export async function verifyChainAgainstStore(
  pool: pg.Pool,
  source: ChainSource,
  pipeline: IngestPipeline,
  range: SlotRange & { toSlot: bigint },
  onProgress?: (transactions: number) => void,
): Promise<Difference[]> {
  const expected = new Map<string, DecodedEvent>();
  const differences: Difference[] = [];
  const unresolved = new Set<string>();
  let seen = 0;
  for await (const raw of source.backfill(range)) {
    for (const tx of pipeline.decode([raw])) {
      for (const event of tx.events) expected.set(key(event.signature, event.instructionIndex, event.innerIndex, event.ordinal), event);
      if (tx.outcome === "unresolved") {
        unresolved.add(tx.signature);
        differences.push({ kind: "unresolved_transaction", where: tx.signature, detail: `on chain at slot ${tx.slot}: ${tx.detail}` });
      }
    }
    seen += 1;
    if (seen % 1_000 === 0) onProgress?.(seen);
  }
  const stored = await pool.query<StoredEvent>(
    `SELECT signature, instruction_index, inner_index, event_ordinal, event_name, payload, encode(raw, 'hex') AS raw, slot
     FROM chain_events WHERE slot BETWEEN $1 AND $2`,
    [range.fromSlot.toString(), range.toSlot.toString()],
  );
  const recorded = await pool.query<{ signature: string; slot: string; detail: string | null }>(
    `SELECT signature, slot, detail FROM chain_transactions_seen
     WHERE outcome = 'unresolved' AND slot BETWEEN $1 AND $2 ORDER BY slot, signature`,
    [range.fromSlot.toString(), range.toSlot.toString()],
  );
  for (const row of recorded.rows) {
    if (unresolved.has(row.signature)) continue;
    differences.push({
      kind: "unresolved_transaction",
      where: row.signature,
      detail: `stored unresolved at slot ${row.slot}: ${row.detail}`,
    });
  }
  const storedKeys = new Set<string>();
  for (const row of stored.rows) {
    const k = key(row.signature, row.instruction_index, row.inner_index, row.event_ordinal);
    storedKeys.add(k);
    const chain = expected.get(k);
    if (chain === undefined) {
      differences.push({ kind: "extra_event", where: k, detail: `${row.event_name} at slot ${row.slot} is not on chain` });
      continue;
    }
    const chainRaw = Buffer.from(chain.raw).toString("hex");
    if (chain.name !== row.event_name || chainRaw !== row.raw || canonical(chain.payload) !== canonical(row.payload)) {
      differences.push({
        kind: "changed_event",
        where: k,
        detail: `chain ${chain.name} ${canonical(chain.payload)} != stored ${row.event_name} ${canonical(row.payload)}`,
      });
    }
  }
  for (const [k, event] of expected) {
    if (!storedKeys.has(k)) differences.push({ kind: "missing_event", where: k, detail: `${event.name} at slot ${event.slot}` });
  }
  return differences;
}

class RollbackVerify extends Error {}

export async function verifyProjections(pool: pg.Pool, options: ProjectionOptions): Promise<Difference[]> {
  const differences: Difference[] = [];
  try {
    // One snapshot for the copies and the rebuild: under READ COMMITTED each statement would see
    // the live indexer's later commits (a finality mark between the copy of `transactions` and the
    // rebuild's read of `chain_events` reported a difference that was only time passing).
    await withTransaction(
      pool,
      async (client) => {
        for (const table of PROJECTION_TABLES) {
          await client.query(`CREATE TEMP TABLE verify_${table} ON COMMIT DROP AS TABLE ${table}`);
        }
        await rebuildProjections(client, options);
        for (const table of PROJECTION_TABLES) {
          for (const [kind, a, b] of [
            ["projection_row_extra", `verify_${table}`, table],
            ["projection_row_missing", table, `verify_${table}`],
          ] as const) {
            const rows = await client.query(
              `SELECT row_to_json(d)::text AS row, count(*) OVER () AS n FROM (TABLE ${a} EXCEPT ALL TABLE ${b}) d LIMIT $1`,
              [MAX_ROWS_REPORTED],
            );
            for (const row of rows.rows as { row: string; n: string }[]) {
              differences.push({ kind, where: table, detail: row.row });
            }
          }
        }
        throw new RollbackVerify();
      },
      { isolation: "repeatable read" },
    );
  } catch (error) {
    if (!(error instanceof RollbackVerify)) throw error;
  }
  return differences;
}
