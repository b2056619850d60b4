/**
 * A process's cache of live API keys (key hash → account, key id, scope), so a request does not
 * wait on a database round trip to learn who sent it. Two rules bound how long a changed key can
 * still be served from here:
 * - pushed: the key store NOTIFYs `api_key_changes` with the key's hash when it revokes a key
 *   (api/shared/keys.ts), and the cache LISTENs on one dedicated connection and drops that entry
 *   at once (in practice a few milliseconds after the commit);
 * - bounded: an entry is served for at most `ttlMs` (500 ms) after the lookup that made it began,
 *   whatever happened, so a change no notification announces (a scope or key edited by hand in
 *   SQL, a key deleted, a notification lost while the listener reconnects) still takes effect
 *   within 1 s.
 * Only live keys are cached: an unknown or revoked key is looked up every time, as before (so the
 * cache cannot be filled by guessed keys, and a new key works at once). At most `maxEntries`.
 */
import pg from "pg";
import type { Logger } from "pino";
import type { Db } from "../../indexer/db/database.js";
import { API_KEY_CHANGES_CHANNEL, apiKeyOfHash, hashApiKey, type LiveApiKey } from "./keys.js";

/** How long an entry is served after its lookup began: well inside the 1 s revocation bound. */
export const KEY_CACHE_TTL_MS = 500;
const MAX_ENTRIES = 10_000;
const RECONNECT_MS = 1_000;

interface Entry {
  readonly key: LiveApiKey;
  readonly expiresAt: number;
}

export interface ApiKeyCacheOptions {
  /** The connection string of the LISTEN connection; without it only the time bound applies. */
  readonly connectionString?: string | undefined;
  readonly ttlMs?: number;
  readonly maxEntries?: number;
  /** Milliseconds on a monotonic clock; tests pin it. */
  readonly now?: () => number;
  readonly logger?: Logger | undefined;
}

export class ApiKeyCache {
  readonly #entries = new Map<string, Entry>();
  /** Lookups under way, by key hash: concurrent first requests of a key share one query. */
  readonly #pending = new Map<string, Promise<LiveApiKey | null>>();
  /** Bumped by every notification: a lookup that began before one is not stored. */
  #generation = 0;
  #client: pg.Client | null = null;
  #started: Promise<void> | null = null;
  #stopped = false;
  readonly #ttlMs: number;
  readonly #maxEntries: number;
  readonly #now: () => number;
  /** Called after each notification is applied (tests wait on it instead of on the clock). */
  onChange: ((keySha256: string) => void) | undefined;

  constructor(private readonly options: ApiKeyCacheOptions = {}) {
    this.#ttlMs = options.ttlMs ?? KEY_CACHE_TTL_MS;
    this.#maxEntries = options.maxEntries ?? MAX_ENTRIES;
    this.#now = options.now ?? (() => performance.now());
  }

  /** The live key `apiKey` names, or null: from the cache while its entry is fresh. */
  async lookup(db: Db, apiKey: string): Promise<LiveApiKey | null> {
    const hash = hashApiKey(apiKey);
    const entry = this.#entries.get(hash);
    const now = this.#now();
    if (entry !== undefined && now < entry.expiresAt) return entry.key;
    if (entry !== undefined) this.#entries.delete(hash);
    const pending = this.#pending.get(hash);
    if (pending !== undefined) return pending;
    const generation = this.#generation;
    const lookup = apiKeyOfHash(db, hash).then(
      (key) => {
        this.#pending.delete(hash);
        if (key !== null && generation === this.#generation) this.#store(hash, { key, expiresAt: now + this.#ttlMs });
        return key;
      },
      (error: unknown) => {
        this.#pending.delete(hash);
        throw error;
      },
    );
    this.#pending.set(hash, lookup);
    return lookup;
  }

  /** Drops the entry of the key with this hash (what a notification does). */
  forget(keySha256: string): void {
    this.#generation += 1;
    this.#entries.delete(keySha256);
  }

  clear(): void {
    this.#generation += 1;
    this.#entries.clear();
  }

  /** Starts listening for revocations (idempotent; nothing without a connection string). */
  start(): Promise<void> {
    if (this.options.connectionString === undefined) return Promise.resolve();
    this.#stopped = false;
    this.#started ??= this.#connect(this.options.connectionString);
    return this.#started;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    const client = this.#client;
    this.#client = null;
    this.#started = null;
    if (client !== null) await client.end().catch(() => undefined);
    this.clear();
  }

  #store(hash: string, entry: Entry): void {
    // Oldest first out: a Map iterates in insertion order.
    if (this.#entries.size >= this.#maxEntries) {
      const oldest = this.#entries.keys().next().value;
      if (oldest !== undefined) this.#entries.delete(oldest);
    }
    this.#entries.set(hash, entry);
  }

  #reconnect(connectionString: string): void {
    setTimeout(() => {
      if (this.#stopped) return;
      this.#started = this.#connect(connectionString).catch((error: unknown) => {
        this.options.logger?.warn({ err: error }, "API key cache: reconnect failed; retrying");
        this.#reconnect(connectionString);
      });
    }, RECONNECT_MS).unref();
  }

  async #connect(connectionString: string): Promise<void> {
    const client = new pg.Client({ connectionString });
    let lost = false;
    const onLost = (error?: Error): void => {
      if (lost || this.#stopped) return;
      lost = true;
      // What was announced while nobody listened is unknown: start over from the database.
      this.clear();
      this.#client = null;
      client.end().catch(() => undefined);
      this.options.logger?.warn({ err: error }, "API key cache: LISTEN connection lost; reconnecting");
      this.#reconnect(connectionString);
    };
    client.on("error", onLost);
    client.on("end", () => onLost());
    client.on("notification", (message) => {
      if (message.channel !== API_KEY_CHANGES_CHANNEL) return;
      const hash = message.payload ?? "";
      if (hash === "") this.clear();
      else this.forget(hash);
      this.onChange?.(hash);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${API_KEY_CHANGES_CHANNEL}`);
    } catch (error) {
      // A loss already reported has scheduled the retry.
      if (lost) return;
      lost = true;
      client.end().catch(() => undefined);
      throw error;
    }
    // Entries made before LISTEN was in place may have missed a notification.
    this.clear();
    if (this.#stopped) {
      await client.end().catch(() => undefined);
      return;
    }
    this.#client = client;
  }
}
