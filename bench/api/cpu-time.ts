/**
 * CPU time per call, of this process and of the database's backends (read from /proc, so only
 * when Postgres runs on this machine). On a shared machine wall time follows the load and CPU time
 * follows the work: a 10 % difference between two loaders shows here where latency percentiles
 * under a load average of 6 drown it.
 */
import { readFileSync } from "node:fs";
import type pg from "pg";

/** Linux reports process times in USER_HZ ticks, 100 per second. */
const TICK_MS = 10;

export interface CpuPerCall {
  readonly calls: number;
  readonly nodeMs: number;
  /** Null when the backends' /proc entries cannot be read (a server on another machine). */
  readonly postgresMs: number | null;
}

/** user + system ticks of `pid`, or null when unreadable. */
function ticksOf(pid: number): number | null {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return null;
  }
}

export class CpuMeter {
  readonly #pool: pg.Pool;
  #pids: number[] = [];
  readonly #totals = new Map<string, { calls: number; nodeUs: number; ticks: number; readable: boolean }>();

  constructor(pool: pg.Pool) {
    this.#pool = pool;
  }

  /** Reads the pool's backends again (call between rounds: the pool may have opened more). */
  async refresh(): Promise<void> {
    const result = await this.#pool.query<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'",
    );
    this.#pids = result.rows.map((row) => row.pid);
  }

  /** Each readable backend's ticks; null when none is readable. */
  #backendTicks(): Map<number, number> | null {
    const ticks = new Map<number, number>();
    for (const pid of this.#pids) {
      const t = ticksOf(pid);
      if (t !== null) ticks.set(pid, t);
    }
    return ticks.size > 0 ? ticks : null;
  }

  /** Runs `work`, adds its CPU time to `label`, returns its wall time (ms) and result. */
  async time<T>(label: string, work: () => Promise<T>): Promise<[number, T]> {
    const ticksBefore = this.#backendTicks();
    const cpuBefore = process.cpuUsage();
    const started = performance.now();
    const result = await work();
    const wall_ms = performance.now() - started;
    const cpu = process.cpuUsage(cpuBefore);
    const ticksAfter = this.#backendTicks();
    const total = this.#totals.get(label) ?? { calls: 0, nodeUs: 0, ticks: 0, readable: true };
    total.calls += 1;
    total.nodeUs += cpu.user + cpu.system;
    if (ticksBefore === null || ticksAfter === null) total.readable = false;
    else {
      // Per backend: one that ended during the call counts nothing (its ticks are gone with it),
      // instead of taking its whole lifetime off the sum.
      for (const [pid, after] of ticksAfter) total.ticks += after - (ticksBefore.get(pid) ?? after);
    }
    this.#totals.set(label, total);
    return [wall_ms, result];
  }

  perCall(label: string): CpuPerCall | undefined {
    const total = this.#totals.get(label);
    if (total === undefined || total.calls === 0) return undefined;
    return {
      calls: total.calls,
      nodeMs: total.nodeUs / 1000 / total.calls,
      postgresMs: total.readable ? (total.ticks * TICK_MS) / total.calls : null,
    };
  }
}
