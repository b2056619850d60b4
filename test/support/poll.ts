/**
 * Waiting for something another process or loop makes true (the indexer catching up, a receiver
 * being called, a settlement resolving), by asking again until a deadline. Tests use this instead
 * of sleeping a guessed time: they go on as soon as the condition holds, and a condition that never
 * holds fails with a message naming what was awaited, below the test's own timeout, instead of a
 * bare vitest timeout or an assertion on a half-finished state.
 */
import { setTimeout as delay } from "node:timers/promises";

export interface PollOptions {
  /** Give up after this long (keep it below the test timeout so this error, not vitest's, is seen). */
  readonly timeoutMs: number;
  /** Pause between two checks. */
  readonly intervalMs: number;
  /** What is awaited, for the error; a function is called at the deadline (to show the last state). */
  readonly what: string | (() => string);
}

/** A check's answer that means "not yet". Anything else (including 0 and "") is the awaited value. */
type NotYet = undefined | null | false;

/**
 * Calls `check` until it answers something other than undefined, null or false and returns that
 * answer; checks once at once, then every `intervalMs`; throws once `timeoutMs` has passed.
 */
export async function pollUntil<T>(check: () => T | Promise<T>, options: PollOptions): Promise<Exclude<T, NotYet>> {
  const deadline = Date.now() + options.timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== null && value !== false) return value as Exclude<T, NotYet>;
    if (Date.now() >= deadline) {
      const what = typeof options.what === "function" ? options.what() : options.what;
      throw new Error(`timed out after ${options.timeoutMs} ms waiting for ${what}`);
    }
    await delay(options.intervalMs);
  }
}
