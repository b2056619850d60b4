/**
 * The query service through several processes on one port (`QUERY_WORKERS`), so it can use every
 * core: the service keeps nothing a request needs in memory that Postgres does not also hold (the
 * key cache and the live feed each listen for their own changes), so any worker can answer any
 * request. node:cluster's primary accepts connections and hands them to the workers in turn; it
 * runs no request itself. A worker that dies is replaced; SIGTERM/SIGINT stop every worker
 * (each drains its requests) before the primary exits.
 */
import cluster, { type Worker } from "node:cluster";
import type { Logger } from "pino";

/** Restarting a worker that dies at once (a bad port, a database refusing it) is paced, not spun. */
const RESTART_DELAY_MS = 1_000;

export interface Workers {
  /** The port the workers share. */
  readonly port: number;
  /** Stops every worker and resolves once all have exited. */
  stop(): Promise<void>;
}

/** True in a worker forked by `startWorkers` (it serves as a single process would). */
export function isWorker(): boolean {
  return cluster.isWorker;
}

/**
 * Forks `count` workers of the current entry point and resolves once each one listens. The
 * workers run the same script and must serve when `isWorker()` (listening on the same port).
 */
export function startWorkers(count: number, logger?: Logger): Promise<Workers> {
  if (!Number.isInteger(count) || count < 1) throw new Error(`worker count must be a positive integer, got ${count}`);
  let stopping = false;
  const fork = (): Worker => {
    const worker = cluster.fork();
    worker.once("exit", (code, signal) => {
      if (stopping) return;
      logger?.error({ pid: worker.process.pid, code, signal }, "query worker died; starting another");
      setTimeout(() => {
        if (!stopping) fork();
      }, RESTART_DELAY_MS).unref();
    });
    return worker;
  };
  return new Promise((resolve, reject) => {
    let listening = 0;
    let port = 0;
    const onListening = (_worker: Worker, address: { port: number }): void => {
      port = address.port;
      listening += 1;
      if (listening < count) return;
      cluster.off("listening", onListening);
      resolve({
        port,
        async stop() {
          stopping = true;
          const alive = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined && !w.isDead());
          await Promise.all(
            alive.map(
              (worker) =>
                new Promise<void>((done) => {
                  worker.once("exit", () => done());
                  worker.process.kill("SIGTERM");
                }),
            ),
          );
        },
      });
    };
    cluster.on("listening", onListening);
    for (let i = 0; i < count; i += 1) fork();
    // A worker that cannot start at all before every one listens fails the start.
    cluster.once("exit", (worker, code) => {
      if (listening < count && !stopping) {
        stopping = true;
        reject(new Error(`query worker ${worker.process.pid} exited with ${code} before listening`));
      }
    });
  });
}
