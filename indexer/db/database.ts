/**
 * The one database module of the indexer and the API: the `pg` pool (`DATABASE_URL` when set,
 * else the machine's local server), the `Db` type every store takes, and `withTransaction`, the
 * only place a transaction is opened and closed.
 *
 * SQL is written by hand in the stores, with bound parameters only (STYLE: "SQL is the engine").
 * There is no query builder: Kysely was declared here for three tables and used by nothing; the
 * queries that matter (recursive trees, set-based projections, conditional UPDATEs that carry
 * the concurrency guarantees, advisory locks) read more plainly as SQL than as a builder chain,
 * and one query language is easier to review than two. Rows are typed at each store's boundary.
 */
import pg from "pg";

export const DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/postgres";

export function databaseUrl(): string {
  return process.env.DATABASE_URL ?? DEFAULT_DATABASE_URL;
}

/** A pool on `DATABASE_READ_URL` (a streaming replica of `DATABASE_URL`), or undefined when it is unset. */
export function readReplicaPool(): pg.Pool | undefined {
  const url = process.env.DATABASE_READ_URL;
  return url === undefined || url === "" ? undefined : createPool(url);
}

export interface PoolOptions {
  /**
   * Keep every connection once opened, however long it idles (pg-pool's `min` at the pool's
   * `max`), in this pool and in its siblings: for a service, whose first requests after a quiet
   * spell would otherwise open them again (connection, authentication, named statements
   * prepared anew). After 11 s idle, a burst's first reservations took 60-110 ms against 2-6 ms
   * warm (docs/performance.md, "after a quiet spell"). Off for scripts and tests, whose pools
   * close their connections 10 s after their last query.
   */
  readonly keepWarm?: boolean;
}

/** Connections a pool of `createPool` opens at most. */
export const POOL_MAX = 4;

export function createPool(url: string = databaseUrl(), options: PoolOptions = {}): pg.Pool {
  // JIT compilation costs ~0.6 s per statement that crosses its cost threshold (the projections'
  // set-based statements do), far more than they take to run: off for the indexer's sessions.
  const pool = new pg.Pool({
    connectionString: url,
    max: POOL_MAX,
    options: "-c jit=off",
    ...(options.keepWarm === true ? { min: POOL_MAX } : {}),
  });
  // An idle client whose connection ends (a server restart, a terminated backend, a dropped test
  // database) is reported as an 'error' event on the pool; without a listener Node treats it as
  // an unhandled error and the process dies. The pool has already discarded that client, and the
  // next query opens a new connection, so there is nothing to do here; callers that want a log
  // line add their own listener (api/gateway/webhooks/dispatcher-main.ts does).
  pool.on("error", () => undefined);
  // The same for a client checked out when its connection ends (between the statements of a
  // transaction, or held for a lock): the pool only listens on idle ones. Its next query fails
  // with an error its caller handles, and the pool discards it when it is released.
  pool.on("connect", (client) => client.on("error", () => undefined));
  return pool;
}

/**
 * A second pool on `pool`'s server and options, with `overrides` (its own bound, idle timeout or
 * pg's `pipeline` mode): for connections that must not be taken from `pool` itself. It keeps as
 * many warm as `pool` does (`keepWarm`), beyond those its own idle timeout applies. Nobody ends
 * it, so its idle connections never keep the process alive; a connection the server drops, idle
 * or held, never kills the process (its holder's next query fails, and the pool discards it).
 */
export function siblingPool(pool: pg.Pool, overrides: pg.PoolConfig): pg.Pool {
  const options = (pool as unknown as { options: pg.PoolConfig }).options;
  const sibling = new pg.Pool({ ...options, allowExitOnIdle: true, ...overrides });
  sibling.on("error", () => undefined);
  sibling.on("connect", (client) => client.on("error", () => undefined));
  return sibling;
}

/** A pool, or one connection (pooled or not): what a store function runs its queries on. */
export type Db = pg.Pool | pg.ClientBase;

/** Postgres isolation levels a transaction may ask for (READ UNCOMMITTED is READ COMMITTED there). */
export type IsolationLevel = "read committed" | "repeatable read" | "serializable";

export interface TransactionOptions {
  /**
   * Default: the server's (READ COMMITTED). The policy store's per-agent lock needs READ COMMITTED
   * (api/shared/policy/store.ts); pass it explicitly where a transaction's correctness depends on it.
   */
  readonly isolation?: IsolationLevel;
}

const BEGIN: Readonly<Record<IsolationLevel | "default", string>> = {
  default: "BEGIN",
  "read committed": "BEGIN ISOLATION LEVEL READ COMMITTED",
  "repeatable read": "BEGIN ISOLATION LEVEL REPEATABLE READ",
  serializable: "BEGIN ISOLATION LEVEL SERIALIZABLE",
};

/**
 * Runs `work` in one transaction on a pooled client: committed if it resolves, rolled back if
 * not (a failed ROLLBACK is ignored: the error that caused it is the one worth reporting).
 */
export async function withTransaction<T>(
  pool: pg.Pool,
  work: (client: pg.PoolClient) => Promise<T>,
  options: TransactionOptions = {},
): Promise<T> {
  const client = await pool.connect();
  try {
    return await inTransaction(client, work, options);
  } finally {
    client.release();
  }
}

/** A transaction rolled back at its COMMIT: a statement in it had failed (its error caught by the work). */
export class TransactionAborted extends Error {
  constructor() {
    super("the transaction was rolled back at COMMIT: one of its statements had failed");
    this.name = "TransactionAborted";
  }
}

/**
 * `withTransaction` on a connection the caller holds (one that keeps a session-level advisory
 * lock across several transactions, as the migrator does).
 */
export async function inTransaction<C extends pg.ClientBase, T>(
  client: C,
  work: (client: C) => Promise<T>,
  options: TransactionOptions = {},
): Promise<T> {
  await client.query(BEGIN[options.isolation ?? "default"]);
  try {
    const result = await work(client);
    // Postgres answers a COMMIT of a transaction that a failed statement aborted with ROLLBACK, and
    // no error: `work` swallowed that statement's error, and nothing of it was written.
    const ended = await client.query("COMMIT");
    if (ended.command === "ROLLBACK") throw new TransactionAborted();
    return result;
  } catch (error) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw error;
  }
}
