/**
 * `Idempotency-Key` on every POST of REST /v1 (docs/rest.md): the same key and request replay the
 * first response; the same key with another method, path or body is IDEMPOTENCY_KEY_REUSED (422);
 * concurrent duplicates produce one effect. Keys are per account, kept at least 24 h.
 *
 * - `runDatabaseEffect` (the effect is Postgres writes): the key is claimed (`INSERT ... ON
 *   CONFLICT DO NOTHING`) and completed in the effect's own transaction, so both commit or neither;
 *   a concurrent duplicate waits on the unique index, then replays the answer or claims the key.
 *   A `provisional` answer (a held payment's 202) unclaims the key instead: a repeat runs the
 *   effect again, which finds by the key what the first run started (its approval) and resumes it.
 * - `runExternalEffect` (the effect leaves Postgres): a session advisory lock on a dedicated
 *   connection holds the key (a concurrent duplicate gets IDEMPOTENCY_IN_PROGRESS, 409; a crash
 *   frees it) and the row is written `in_progress` first. The effect gets a stable `reference` for
 *   its own idempotency, so a retry that finds `in_progress` reruns it (`resumed: true`) and lands on
 *   the first operation. Only a final outcome is stored as `completed`.
 */
import { createHash } from "node:crypto";
import type pg from "pg";
import { siblingPool, withTransaction } from "../../../indexer/db/database.js";
import { groupCommitFor } from "../../../indexer/db/group-commit.js";
import type { SecretBox } from "../secret-box.js";
import { toServiceError } from "../errors.js";
import { httpError, problemResponse } from "./problem.js";
import type { RouteResponse } from "./route-response.js";

/** Namespace of the two-argument advisory lock (namespace, hashtext(account:key)). */
const IDEMPOTENCY_LOCK_NAMESPACE = 7_240_010;
/** How long a completed key is kept (and replayed); pruning happens after. */
export const IDEMPOTENCY_RETENTION_MS = 24 * 3_600_000;
const KEY_SHAPE = /^[\x21-\x7e]{1,255}$/;

// Re-exported: the routes name the type through the module that stores and replays it.
export type { RouteResponse } from "./route-response.js";

export interface IdempotencyRequest {
  readonly accountId: string;
  readonly key: string;
  readonly method: string;
  readonly path: string;
  readonly fingerprint: string;
}

export interface IdempotencyStore {
  readonly pool: pg.Pool;
  /** Seals responses that carry secrets; such routes are unavailable without it. */
  readonly box?: SecretBox | undefined;
  readonly now: () => Date;
}

/** The `Idempotency-Key` header → a key, or null when absent. Malformed → 400. */
export function parseIdempotencyKey(header: string | null): string | null {
  if (header === null) return null;
  if (!KEY_SHAPE.test(header)) {
    throw httpError("INVALID_IDEMPOTENCY_KEY", "Idempotency-Key must be 1 to 255 visible ASCII characters (a UUID is a good key)");
  }
  return header;
}

/** sha256 over method, path and the canonical body: what "the same request" means. */
export function requestFingerprint(method: string, path: string, canonicalBody: string): string {
  return createHash("sha256").update(`${method.toUpperCase()}\n${path}\n${canonicalBody}`, "utf8").digest("hex");
}

/** The reference an external effect passes to the operation's own idempotency (≤ 128 chars). */
export function effectReference(request: IdempotencyRequest): string {
  return `idem:${createHash("sha256").update(`${request.accountId}\n${request.key}`, "utf8").digest("hex")}`;
}

interface KeyRow {
  fingerprint: string;
  status: "in_progress" | "completed";
  response_status: number | null;
  response_body: string | null;
  response_sealed: Buffer | null;
}

const REPLAYED = { "idempotent-replayed": "true" } as const;

/**
 * Runs a Postgres effect with the key claimed in its transaction. Without a key, the effect simply
 * runs in a transaction. With a `groupKey` (an agent), effects of that key arriving together share
 * one transaction, each in its own savepoint (indexer/db/group-commit.ts): for effects that all
 * take the key's own lock first, which then changes hands once per group, not once per effect.
 */
export async function runDatabaseEffect(
  store: IdempotencyStore,
  request: IdempotencyRequest | null,
  effect: (client: pg.PoolClient) => Promise<RouteResponse>,
  groupKey?: string,
): Promise<RouteResponse> {
  const work = async (client: pg.PoolClient): Promise<RouteResponse> => {
    // The INSERT waits for the key's first transaction to commit: then answer with its result.
    if (request !== null && !(await claimKey(client, store, request)))
      return answerExisting(store, request, await readKey(client, request));
    const response = await effect(client);
    if (request !== null && response.provisional === true) await unclaim(client, request);
    else if (request !== null) await complete(client, store, request, response);
    return response;
  };
  // READ COMMITTED by name (a group's is too): the policy reservation inside the effect relies on it
  // (api/gateway/reservations/store.ts).
  const run =
    groupKey !== undefined
      ? groupCommitFor(store.pool).run(groupKey, work)
      : withTransaction(store.pool, work, { isolation: "read committed" });
  return run.catch(retryableDeadlock);
}

/**
 * A lock cycle Postgres broke by ending this request's transaction (or its group member's
 * savepoint): nothing of it was written, so it is answered as a retryable conflict, not a 500. A
 * group holds its agent's lock while a later member waits on another lock, so a request elsewhere
 * holding that one (the same Idempotency-Key in flight in another process) and waiting for the
 * agent's lock closes a cycle.
 */
function retryableDeadlock(error: unknown): never {
  if ((error as { code?: unknown } | null)?.code === DEADLOCK_DETECTED) {
    throw httpError("CONFLICT", "a concurrent request held what this one needed; nothing was done, so retry it", { retryable: true });
  }
  throw error;
}

const DEADLOCK_DETECTED = "40P01";

export interface ExternalOutcome {
  readonly response: RouteResponse;
  /** False while the outcome is not known yet (a payment still pending): the key stays in_progress. */
  readonly final: boolean;
}

/**
 * Runs an effect outside Postgres under the key (see the module comment). Without a key the
 * effect runs once with `reference: null`.
 */
export async function runExternalEffect(
  store: IdempotencyStore,
  request: IdempotencyRequest | null,
  effect: (run: { reference: string | null; resumed: boolean }) => Promise<ExternalOutcome>,
): Promise<RouteResponse> {
  if (request === null) return (await effect({ reference: null, resumed: false })).response;
  // The lock's connection is our own, outside the pool: the effect needs pool connections of its
  // own, and holding pool connections while waiting for more would exhaust a small pool.
  const client = await lockConnection(store);
  const lockKey = `${request.accountId}:${request.key}`;
  let locked = false;
  try {
    const lock = await client.query<{ locked: boolean }>("SELECT pg_try_advisory_lock($1, hashtext($2)) AS locked", [
      IDEMPOTENCY_LOCK_NAMESPACE,
      lockKey,
    ]);
    locked = lock.rows[0]!.locked;
    if (!locked) {
      throw httpError("IDEMPOTENCY_IN_PROGRESS", "a request with this Idempotency-Key is still being processed; retry it later", {
        retryable: true,
      });
    }
    let resumed = false;
    if (!(await claimKey(client, store, request))) {
      const row = await readKey(client, request);
      if (row.status === "completed" || row.fingerprint !== request.fingerprint) return answerExisting(store, request, row);
      // Left in_progress by a crash or a pending outcome: resolve it through the same reference.
      resumed = true;
    }
    const outcome = await effect({ reference: effectReference(request), resumed });
    if (outcome.final) await complete(client, store, request, outcome.response);
    return outcome.response;
  } catch (error) {
    const known = locked && !isConnectionError(error) ? toServiceError(error) : null;
    if (known !== null && isDefiniteFailure(known.status, known.code)) {
      // A definite answer once execution began is the key's answer, like a success (Stripe's rule).
      const response = problemResponse(known);
      await complete(client, store, request, response);
      return response;
    }
    throw error;
  } finally {
    // The lock is the session's: unlocked explicitly, the connection goes back to the lock pool;
    // if that fails, the connection is destroyed, and closing the session releases the lock.
    const clean =
      !locked ||
      (await client.query("SELECT pg_advisory_unlock($1, hashtext($2))", [IDEMPOTENCY_LOCK_NAMESPACE, lockKey]).then(
        () => true,
        () => false,
      ));
    client.release(!clean);
  }
}

/** Connections the key locks may hold at once, per pool; more requests wait for one. */
export const IDEMPOTENCY_LOCK_CONNECTIONS = 16;
const lockPools = new WeakMap<pg.Pool, pg.Pool>();

/**
 * A connection of the key locks' own bounded pool, beside the effect's pool: the effect needs
 * connections of that pool, and holding them while waiting for more would exhaust a small pool.
 * Bounded, so a burst of keyed requests waits for a connection instead of exceeding the server's
 * connection limit (which would fail requests mid-payment).
 */
async function lockConnection(store: IdempotencyStore): Promise<pg.PoolClient> {
  let pool = lockPools.get(store.pool);
  if (pool === undefined) {
    // Idle connections beyond a service's warm ones close within a second, so a stopped server
    // leaves few behind for long.
    pool = siblingPool(store.pool, { max: IDEMPOTENCY_LOCK_CONNECTIONS, idleTimeoutMillis: 1_000 });
    lockPools.set(store.pool, pool);
  }
  return pool.connect();
}

/** Deletes completed keys past their expiry, oldest first; returns how many. */
export async function pruneIdempotencyKeys(pool: pg.Pool, now: Date, limit = 10_000): Promise<number> {
  const result = await pool.query(
    `DELETE FROM idempotency_keys WHERE ctid IN (
       SELECT ctid FROM idempotency_keys WHERE status = 'completed' AND expires_at <= $1 ORDER BY expires_at LIMIT $2)`,
    [now, limit],
  );
  return result.rowCount ?? 0;
}

function expiry(now: Date): Date {
  return new Date(now.getTime() + IDEMPOTENCY_RETENTION_MS);
}

/**
 * Inserts the key `in_progress`, or puts a new request in place of its completed row once that
 * expired; false when the key has a row still in force: a finished request's answer, or one still
 * running or left unfinished. One statement (named, prepared once per connection): a concurrent
 * claim of the same key waits for this one's transaction, then finds the row in force.
 */
async function claimKey(client: pg.ClientBase, store: IdempotencyStore, request: IdempotencyRequest): Promise<boolean> {
  const now = store.now();
  const claimed = await client.query({
    name: "idempotency-claim",
    text: `INSERT INTO idempotency_keys AS k (account_id, key, fingerprint, method, path, status, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, 'in_progress', $6, $7)
     ON CONFLICT (account_id, key) DO UPDATE
       SET fingerprint = EXCLUDED.fingerprint, method = EXCLUDED.method, path = EXCLUDED.path, status = 'in_progress',
           response_status = NULL, response_body = NULL, response_sealed = NULL, created_at = EXCLUDED.created_at,
           completed_at = NULL, expires_at = EXCLUDED.expires_at
       WHERE k.status = 'completed' AND k.expires_at <= EXCLUDED.created_at`,
    values: [request.accountId, request.key, request.fingerprint, request.method, request.path, now, expiry(now)],
  });
  return (claimed.rowCount ?? 0) > 0;
}

/** The key's row claimed in this transaction, dropped: the answer was not final. */
async function unclaim(client: pg.ClientBase, request: IdempotencyRequest): Promise<void> {
  await client.query("DELETE FROM idempotency_keys WHERE account_id = $1 AND key = $2 AND status = 'in_progress'", [
    request.accountId,
    request.key,
  ]);
}

async function readKey(client: pg.ClientBase, request: IdempotencyRequest): Promise<KeyRow> {
  const { rows } = await client.query<KeyRow>(
    `SELECT fingerprint, status, response_status, response_body, response_sealed FROM idempotency_keys
     WHERE account_id = $1 AND key = $2`,
    [request.accountId, request.key],
  );
  // Absent only if the key expired and was pruned in between: the caller may simply retry.
  if (rows[0] === undefined) throw httpError("IDEMPOTENCY_IN_PROGRESS", "the Idempotency-Key changed state; retry", { retryable: true });
  return rows[0];
}

function answerExisting(store: IdempotencyStore, request: IdempotencyRequest, row: KeyRow): RouteResponse {
  if (row.fingerprint !== request.fingerprint) {
    throw httpError(
      "IDEMPOTENCY_KEY_REUSED",
      "this Idempotency-Key was used with a different request (method, path or body); use a new key for a new request",
    );
  }
  if (row.status !== "completed") {
    throw httpError("IDEMPOTENCY_IN_PROGRESS", "a request with this Idempotency-Key is still being processed; retry it later", {
      retryable: true,
    });
  }
  let body = row.response_body;
  if (row.response_sealed !== null) {
    if (store.box === undefined) throw httpError("SERVICE_UNAVAILABLE", "the stored response is sealed and no secrets key is configured");
    body = store.box.decrypt(row.response_sealed);
  }
  return { status: row.response_status!, body, headers: REPLAYED };
}

async function complete(
  client: pg.ClientBase,
  store: IdempotencyStore,
  request: IdempotencyRequest,
  response: RouteResponse,
): Promise<void> {
  let plain: string | null = response.replayBody ?? response.body ?? "";
  let sealed: Buffer | null = null;
  if (response.sealed === true && response.replayBody === undefined) {
    if (store.box === undefined) throw httpError("SERVICE_UNAVAILABLE", "no secrets key is configured to store this response");
    sealed = store.box.encrypt(response.body ?? "");
    plain = null;
  }
  await client.query({
    name: "idempotency-complete",
    text: `UPDATE idempotency_keys SET status = 'completed', response_status = $3, response_body = $4, response_sealed = $5,
            completed_at = $6
     WHERE account_id = $1 AND key = $2`,
    values: [request.accountId, request.key, response.status, plain, sealed, store.now()],
  });
}

/** Errors that end the request for good; 5xx other than a failed payment may be retried under the key. */
function isDefiniteFailure(status: number, code: string): boolean {
  if (code === "IDEMPOTENCY_IN_PROGRESS" || code === "IDEMPOTENCY_KEY_REUSED") return false;
  return status < 500 || code === "PAYMENT_FAILED";
}

function isConnectionError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && (code.startsWith("08") || code === "57P01" || code === "ECONNRESET");
}
