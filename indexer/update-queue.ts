/**
 * The bounded queue between a live source and the commit loop: the source is read while a commit
 * is in flight, and the commit loop takes everything that arrived since in one go. Full, the queue
 * stops reading the source, so a stalled database holds the stream back (the server's flow
 * control) instead of growing memory.
 */

export class UpdateQueue<T> {
  #items: T[] = [];
  #ended = false;
  #failure: { readonly error: unknown } | undefined;
  #wakeTaker: (() => void) | undefined;
  #wakeReader: (() => void) | undefined;

  /** `signal` stops the reading and wakes a waiting `take`. */
  constructor(
    readonly capacity: number,
    private readonly signal: AbortSignal,
  ) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`queue capacity ${capacity} is not a positive integer`);
  }

  /**
   * Reads what `open` returns into the queue until it ends, fails or the signal aborts. Never
   * rejects: a failure is kept for the taker (`failure`), after what was read before it.
   */
  async fill(open: () => AsyncIterable<T>): Promise<void> {
    const onAbort = (): void => this.#wake();
    this.signal.addEventListener("abort", onAbort, { once: true });
    try {
      for await (const item of open()) {
        this.#items.push(item);
        this.#wakeTaker?.();
        while (this.#items.length >= this.capacity && !this.signal.aborted) {
          await new Promise<void>((resolve) => {
            this.#wakeReader = resolve;
          });
        }
        // Leaving the loop closes the source's iterator.
        if (this.signal.aborted) break;
      }
    } catch (error) {
      // A source stopped by the signal may throw for it: that is no failure of the source.
      if (!this.signal.aborted) this.#failure = { error };
    } finally {
      this.signal.removeEventListener("abort", onAbort);
      this.#ended = true;
      this.#wakeTaker?.();
    }
  }

  /**
   * Waits until something is queued, then takes all of it. Empty only once the source ended (or
   * the signal aborted) with nothing left.
   */
  async take(): Promise<T[]> {
    while (this.#items.length === 0 && !this.#ended && !this.signal.aborted) {
      await new Promise<void>((resolve) => {
        this.#wakeTaker = resolve;
      });
    }
    this.#wakeTaker = undefined;
    const items = this.#items;
    this.#items = [];
    this.#wakeReader?.();
    this.#wakeReader = undefined;
    return items;
  }

  /** Why the source stopped, when it failed; set once `take` came back empty. */
  get failure(): { readonly error: unknown } | undefined {
    return this.#failure;
  }

  #wake(): void {
    this.#wakeTaker?.();
    this.#wakeReader?.();
  }
}
