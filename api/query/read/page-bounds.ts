/**
 * First-page time bounds for the transactions listing (api/query/read/transactions.ts). A listing
 * asked again with the same filter (a dashboard or a client polling its newest page; a `since`
 * window counts by its presence alone) is read with `time >= bound`, the time of the last row its
 * previous answer held: each agent's keys then stop at the bound instead of one page each (20
 * agents and a page of 50: about 60 keys read, not 1,020).
 *
 * A bound is a hint, never trusted: an answer read with it is the listing's answer exactly when it
 * is a full page (limit + 1 rows), since every row the bound leaves out is older than each row
 * kept; a shorter answer (payments rolled back, a filter now matching fewer) is read again without
 * it. Per process, at most `capacity` filters, the least recently used dropped first (0: none
 * kept, every listing read without a bound).
 */
export class PageBounds {
  readonly #bounds = new Map<string, bigint>();
  /** Answers read with a bound and kept; answers read with one and read again without it. */
  hits = 0;
  fallbacks = 0;

  constructor(public capacity: number) {}

  /** The bound (epoch microseconds) of this filter, if one is known. */
  get(key: string): bigint | undefined {
    const bound = this.#bounds.get(key);
    if (bound !== undefined) {
      this.#bounds.delete(key);
      this.#bounds.set(key, bound);
    }
    return bound;
  }

  set(key: string, micros: bigint): void {
    this.#bounds.delete(key);
    this.#bounds.set(key, micros);
    if (this.#bounds.size > this.capacity) this.#bounds.delete(this.#bounds.keys().next().value as string);
  }

  delete(key: string): void {
    this.#bounds.delete(key);
  }

  get size(): number {
    return this.#bounds.size;
  }
}
