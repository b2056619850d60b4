/** Latency samples → nearest-rank percentiles, and the bench's table rows. */

export interface Stats {
  readonly n: number;
  readonly p50: number;
  readonly p99: number;
  readonly mean: number;
  readonly max: number;
}

/** Nearest-rank percentiles (with fewer than 100 samples, p99 is the slowest one). */
export function stats(samples_ms: readonly number[]): Stats {
  if (samples_ms.length === 0) return { n: 0, p50: Number.NaN, p99: Number.NaN, mean: Number.NaN, max: Number.NaN };
  const sorted = [...samples_ms].sort((a, b) => a - b);
  const rank = (p: number): number => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
  return { n: sorted.length, p50: rank(50), p99: rank(99), mean: sorted.reduce((s, x) => s + x, 0) / sorted.length, max: sorted.at(-1)! };
}

export async function timed<T>(work: () => Promise<T>): Promise<[T, number]> {
  const started = performance.now();
  const result = await work();
  return [result, performance.now() - started];
}

const ms = (value: number): string => (Number.isNaN(value) ? "—" : `${value.toFixed(2)} ms`).padStart(11);

export const TABLE_HEADER = `${"".padEnd(62)}${"n".padStart(6)}${"p50".padStart(11)}${"p99".padStart(11)}${"mean".padStart(11)}${"max".padStart(11)}`;

export function row(label: string, s: Stats): string {
  return `${label.padEnd(62)}${String(s.n).padStart(6)}${ms(s.p50)}${ms(s.p99)}${ms(s.mean)}${ms(s.max)}`;
}

export interface Goal {
  readonly label: string;
  readonly p99_ms: number;
  readonly goal_ms: number;
}

export function goalLine(goal: Goal): string {
  const met = goal.p99_ms < goal.goal_ms;
  return `${goal.label}: p99 ${goal.p99_ms.toFixed(2)} ms, goal < ${goal.goal_ms} ms: ${met ? "met" : "NOT met"}`;
}
