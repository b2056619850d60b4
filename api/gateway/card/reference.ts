/**
 * The card processor's reference on the ledger: payment_ledger records a 64-byte
 * `settlement_reference` for payments it did not move itself. A card payment stores the UTF-8 of
 * the processor's reference, zero-padded to 64 bytes, so anyone reading the chain can name the
 * card authorization behind the record (the trailing zeros are stripped when reading).
 */

export const SETTLEMENT_REFERENCE_BYTES = 64;

export function cardSettlementReference(reference: string): Uint8Array {
  const bytes = Buffer.from(reference, "utf8");
  if (bytes.length === 0 || bytes.length > SETTLEMENT_REFERENCE_BYTES) {
    throw new RangeError(`card reference must be 1 to ${SETTLEMENT_REFERENCE_BYTES} UTF-8 bytes, got ${bytes.length}`);
  }
  if (bytes.includes(0)) throw new RangeError("card reference must not contain NUL");
  const padded = new Uint8Array(SETTLEMENT_REFERENCE_BYTES);
  padded.set(bytes);
  return padded;
}

export function readCardSettlementReference(bytes: Uint8Array): string {
  const end = bytes.indexOf(0);
  return Buffer.from(bytes.subarray(0, end === -1 ? bytes.length : end)).toString("utf8");
}
