/**
 * The Postgres connection: one `pg` pool, and a Kysely instance over it for typed reads.
 * `DATABASE_URL` when set, else the machine's local server.
 */
import { type ColumnType, Kysely, PostgresDialect } from "kysely";
import pg from "pg";

export const DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/postgres";

export function databaseUrl(): string {
  return process.env.DATABASE_URL ?? DEFAULT_DATABASE_URL;
}

// bigint (int8) and numeric come back as strings; money is converted to bigint at the edge.
type Int8 = ColumnType<string, string | bigint, string | bigint>;
type Numeric = ColumnType<string, string | bigint, string | bigint>;

export interface CheckpointsTable {
  source: string;
  slot: Int8;
  blockhash: string | null;
  updated_at: ColumnType<Date, Date | undefined, Date>;
}

export interface ChainTransactionsSeenTable {
  signature: string;
  slot: Int8;
  outcome: string;
  event_count: number;
  detail: string | null;
}

export interface TransactionsTable {
  event_id: Int8;
  tx_hash: string;
  agent: string;
  payee: string;
  mint: string;
  protocol: string;
  rail: string;
  amount_units: Numeric;
  endpoint_hash: string;
  parent_tx_hash: string | null;
  settlement_status: string | null;
  status: string;
  slot: Int8;
}

export interface Database {
  checkpoints: CheckpointsTable;
  chain_transactions_seen: ChainTransactionsSeenTable;
  transactions: TransactionsTable;
}

export function createPool(url: string = databaseUrl()): pg.Pool {
  // JIT compilation costs ~0.6 s per statement that crosses its cost threshold (the projections'
  // set-based statements do), far more than they take to run: off for the indexer's sessions.
  return new pg.Pool({ connectionString: url, max: 4, options: "-c jit=off" });
}

export function createKysely(pool: pg.Pool): Kysely<Database> {
  return new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
}

/** Runs `work` in one transaction on a pooled client: committed if it resolves, rolled back if not. */
export async function withTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    const result = await work(client);
    await client.query("COMMIT");
    return result;
  } catch (error) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}
