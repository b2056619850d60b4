/**
 * Group commit by key: transactions of one key (an agent) that arrive while a transaction of that
 * key is running wait for it, then run together in the next database transaction, one after the
 * other, each in a savepoint of its own. One BEGIN, one COMMIT (one WAL flush) and one hand-over of
 * the key's database lock then serve the whole group, where each transaction paid for its own.
 *
 * The contract, for `run(key, work)`:
 * - `work` runs once, alone on the group's connection, after every member before it in its group
 *   has finished. It sees their writes (one transaction), never those of a member whose work threw
 *   (rolled back to that member's savepoint).
 * - Its promise settles only after its group's COMMIT: with `work`'s result when the commit
 *   succeeds; with `work`'s own error when `work` threw (its writes undone, the others kept); with
 *   the failure when the group's transaction fails (a COMMIT or a savepoint refused, a connection
 *   lost: nothing of the group is written, as for a transaction of its own).
 * - A member alone in its group runs as `withTransaction` runs it: no savepoint, and an error
 *   rolls the transaction back.
 * - The locks a member takes are held until its group commits, so a later member waiting on a lock
 *   held elsewhere, by a transaction that waits for one of the group's, closes a cycle: Postgres
 *   ends that member's statement (deadlock_detected), its savepoint is rolled back and the rest of
 *   the group goes on. Keep members' locks to the key's own where possible.
 * - Per process: groups of one key in different processes still take turns on the key's database
 *   lock, so the guarantees of that lock are unchanged.
 * With nothing running for its key, a transaction starts at once: grouping adds no wait.
 *
 * On a pipelined connection (pg's `pipeline` client option, which `groupCommitFor`'s pool sets) a
 * member's SAVEPOINT is sent with the member's first statement instead of waiting for its own
 * answer: one round trip fewer per member under the key's lock. The savepoint's answer is still
 * awaited once the member is done, and a refused one fails the group. Members may not use cursors
 * or streams on a pipelined connection (pg refuses them there).
 */
import type pg from "pg";
import { type IsolationLevel, inTransaction, siblingPool } from "./database.js";

/** Members per group at most: each member's savepoint is a subtransaction, and PostgreSQL keeps
 * up to 64 per transaction in shared memory (more make every snapshot slower). */
export const GROUP_MAX = 16;

interface Member {
  readonly work: (client: pg.PoolClient) => Promise<unknown>;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
}

type Outcome = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly error: unknown };

export class GroupCommit {
  /** The members waiting per key; a key is present while a group of it runs. */
  private readonly waiting = new Map<string, Member[]>();

  constructor(
    private readonly pool: pg.Pool,
    private readonly isolation: IsolationLevel = "read committed",
  ) {}

  run<T>(key: string, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const member: Member = { work, resolve: resolve as (value: unknown) => void, reject };
      const queue = this.waiting.get(key);
      if (queue !== undefined) {
        queue.push(member);
        return;
      }
      this.waiting.set(key, []);
      void this.drain(key, [member]);
    });
  }

  /** Runs groups of `key` until none waits. */
  private async drain(key: string, first: Member[]): Promise<void> {
    let group = first;
    for (;;) {
      await this.runGroup(group);
      const queue = this.waiting.get(key)!;
      if (queue.length === 0) {
        this.waiting.delete(key);
        return;
      }
      group = queue.splice(0, GROUP_MAX);
    }
  }

  private async runGroup(group: readonly Member[]): Promise<void> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (error) {
      for (const member of group) member.reject(error);
      return;
    }
    const alone = group.length === 1;
    const outcomes: Outcome[] = [];
    let failure: { readonly error: unknown } | null = null;
    try {
      await inTransaction(
        client,
        async () => {
          for (const member of group) {
            // Pipelined: the savepoint goes out with the member's first statement (module comment).
            const saved = alone ? null : client.query("SAVEPOINT group_member");
            if (saved !== null && !client.pipeline) await saved;
            saved?.catch(() => undefined);
            let outcome: Outcome;
            try {
              outcome = { ok: true, value: await member.work(client) };
            } catch (error) {
              outcome = { ok: false, error };
            }
            // A refused savepoint fails the group (the member's statements ran in an aborted transaction).
            if (saved !== null) await saved;
            outcomes.push(outcome);
            if (!outcome.ok) {
              // Alone, the error ends the transaction, as `withTransaction` does.
              if (alone) throw outcome.error;
              await client.query("ROLLBACK TO SAVEPOINT group_member");
            }
          }
        },
        { isolation: this.isolation },
      );
    } catch (error) {
      failure = { error };
    } finally {
      client.release();
    }
    for (const [i, member] of group.entries()) {
      const outcome = outcomes[i];
      // A member's own error is its answer whatever happened after it; the others share the failure.
      if (outcome !== undefined && !outcome.ok) member.reject(outcome.error);
      else if (failure !== null) member.reject(failure.error);
      else member.resolve(outcome!.value);
    }
  }
}

const shared = new WeakMap<pg.Pool, GroupCommit>();

/**
 * The pool's one `GroupCommit` (READ COMMITTED): groups form only among callers that share it.
 * Its transactions run on pipelined connections of their own, as many at most as `pool` holds
 * (a sibling pool: `pool`'s connections may serve cursors and COPY, which pipelining refuses).
 * An idle one is kept as long as `pool` keeps its own: a new connection costs the group that opens
 * it its setup and the preparation of its named statements (bench:capacity's open-loop p99 showed
 * it when they closed after 1 s).
 */
export function groupCommitFor(pool: pg.Pool): GroupCommit {
  let commits = shared.get(pool);
  if (commits === undefined) {
    commits = new GroupCommit(siblingPool(pool, { pipeline: true }));
    shared.set(pool, commits);
  }
  return commits;
}
