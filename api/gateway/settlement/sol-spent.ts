/**
 * Counters of the SOL (lamports) the service's own keys spent, by kind: what a `/metrics`
 * exporter reads (`snapshot()`), and what the tests compare with the keys' balances. In memory,
 * per process, monotonic; bigint so a count is exact.
 *
 * Kinds:
 * - `fee_payer_fee`: fees of co-signed payer transfers, paid by the dedicated fee payer;
 * - `authority_fee`: fees of the authority's `record_attested_payment` transactions;
 * - `authority_rent`: rent of the payer states those records created (never reclaimed).
 *
 * The amounts come from the landed transaction's metadata (`lamportsSpent`), not from estimates.
 */
import type { Connection, PublicKey } from "@solana/web3.js";

export const SOL_SPEND_KINDS = ["fee_payer_fee", "authority_fee", "authority_rent"] as const;
export type SolSpendKind = (typeof SOL_SPEND_KINDS)[number];

export class SolSpent {
  readonly #totals = new Map<SolSpendKind, bigint>(SOL_SPEND_KINDS.map((kind) => [kind, 0n]));

  add(kind: SolSpendKind, lamports: bigint): void {
    if (lamports < 0n) throw new Error(`a spend of ${lamports} lamports`);
    this.#totals.set(kind, (this.#totals.get(kind) ?? 0n) + lamports);
  }

  total(kind: SolSpendKind): bigint {
    return this.#totals.get(kind) ?? 0n;
  }

  snapshot(): Readonly<Record<SolSpendKind, bigint>> {
    return Object.fromEntries(SOL_SPEND_KINDS.map((kind) => [kind, this.total(kind)])) as Record<SolSpendKind, bigint>;
  }
}

/**
 * What a landed transaction cost `key`: the fee (when `key` paid it) and the rest of its balance
 * drop (rent of accounts it created). Null when the node does not know the transaction.
 */
export async function lamportsSpent(
  connection: Connection,
  signature: string,
  key: PublicKey,
): Promise<{ readonly fee: bigint; readonly other: bigint } | null> {
  const transaction = await connection.getTransaction(signature, { commitment: "confirmed", maxSupportedTransactionVersion: 0 });
  const meta = transaction?.meta;
  if (transaction == null || meta == null) return null;
  const index = transaction.transaction.message.staticAccountKeys.findIndex((candidate) => candidate.equals(key));
  if (index < 0) return null;
  const drop = BigInt(meta.preBalances[index]! - meta.postBalances[index]!);
  const fee = index === 0 ? BigInt(meta.fee) : 0n;
  return { fee, other: drop - fee };
}
