/**
 * Long-polls on approvals (`GET /v1/approvals/{id}?wait=`): one LISTEN connection per gateway
 * process on `approval_decided` (each decision notifies at commit, ./store.ts), and the requests
 * waiting on an approval wake when its id arrives, when their wait ends, or when the process
 * drains (`close`, on SIGTERM). Never a busy loop: a waiter reads the approval once before and
 * once after waiting. A lost connection wakes every waiter (each re-reads and answers) and the
 * next wait reconnects. Bounded: at most `MAX_WAITERS` requests wait at once; more answer at once.
 */
import pg from "pg";
import { APPROVAL_DECIDED_CHANNEL } from "../../../shared/approvals/store.js";

export const MAX_WAIT_SECONDS = 60;
export const MAX_WAITERS = 10_000;

export class ApprovalWaits {
  readonly #pool: pg.Pool;
  #client: Promise<pg.Client> | null = null;
  readonly #waiters = new Map<string, Set<() => void>>();
  #count = 0;
  #closed = false;

  constructor(pool: pg.Pool) {
    this.#pool = pool;
  }

  /**
   * Waits up to `ms` for the approval to be decided: registers first, then runs `stillPending`
   * (the caller's read), so a decision committed in between is never missed. Resolves early on a
   * notification, on `close`, or when `signal` aborts.
   */
  async wait(approvalId: string, ms: number, stillPending: () => Promise<boolean>, signal?: AbortSignal): Promise<void> {
    if (this.#closed || ms <= 0 || this.#count >= MAX_WAITERS) return;
    try {
      await this.#listen();
    } catch {
      return; // No listener: answer now; the caller polls again.
    }
    let wake!: () => void;
    const woken = new Promise<void>((resolve) => {
      wake = resolve;
    });
    const set = this.#waiters.get(approvalId) ?? new Set();
    set.add(wake);
    this.#waiters.set(approvalId, set);
    this.#count += 1;
    const timer = setTimeout(wake, ms);
    const onAbort = (): void => wake();
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      if (await stillPending()) await woken;
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      set.delete(wake);
      if (set.size === 0 && this.#waiters.get(approvalId) === set) this.#waiters.delete(approvalId);
      this.#count -= 1;
    }
  }

  /** Ends every wait now and stops listening (the process drains). */
  async close(): Promise<void> {
    this.#closed = true;
    this.#wakeAll();
    const client = this.#client;
    this.#client = null;
    if (client !== null) await client.then((c) => c.end()).catch(() => undefined);
  }

  #wakeAll(): void {
    for (const set of this.#waiters.values()) for (const wake of set) wake();
  }

  #listen(): Promise<pg.Client> {
    if (this.#client !== null) return this.#client;
    const holder: { promise: Promise<pg.Client> | null } = { promise: null };
    const promise = this.#connect(() => {
      if (this.#client === holder.promise) this.#client = null;
      this.#wakeAll();
    });
    holder.promise = promise;
    this.#client = promise;
    promise.catch(() => {
      if (this.#client === promise) this.#client = null;
    });
    return promise;
  }

  async #connect(onDrop: () => void): Promise<pg.Client> {
    const options = (this.#pool as unknown as { options: pg.ClientConfig }).options;
    const client = new pg.Client(options);
    const drop = (): void => {
      onDrop();
      void client.end().catch(() => undefined);
    };
    client.on("error", drop);
    client.on("end", onDrop);
    client.on("notification", (message) => {
      if (message.channel !== APPROVAL_DECIDED_CHANNEL || message.payload === undefined) return;
      for (const wake of this.#waiters.get(message.payload) ?? []) wake();
    });
    await client.connect();
    await client.query(`LISTEN ${APPROVAL_DECIDED_CHANNEL}`);
    return client;
  }
}

const shared = new WeakMap<pg.Pool, ApprovalWaits>();

/** The process's waits on a pool (one LISTEN connection), for routes not given one. */
export function approvalWaitsFor(pool: pg.Pool): ApprovalWaits {
  let waits = shared.get(pool);
  if (waits === undefined) {
    waits = new ApprovalWaits(pool);
    shared.set(pool, waits);
  }
  return waits;
}
