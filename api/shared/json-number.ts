/**
 * A JSON number token kept as its exact text. Money leaves the service as the spec's
 * `{ usdc: number }`; writing that number from a JS float would print 0.1 + 0.2 as
 * 0.30000000000000004 and round amounts above 2^53 base units, so the number is carried as the
 * exact decimal text and printed verbatim by `writeJson` (api/shared/http/json.ts). Lives apart from the
 * REST parser so that modules below the HTTP layer (policy amounts, event payloads) can use it.
 */
export class JsonNumber {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}
