/**
 * MPP `solana` method, `charge` intent, pull mode (protocols.md §2.7; the credential payload
 * `{ type: "transaction", transaction }` a `@solana/mpp` client sends), settled by the gateway for
 * a resource server that challenged with the terms below and `feePayer: true`: the payer's
 * partially signed transfer is checked, co-signed by the gateway's fee payer, sent, and recorded
 * on payment_ledger referencing it (cosigned/cosigned.ts). The transaction's id is the consumed
 * signature: a credential whose transaction was already presented is refused.
 *
 * The challenge itself (its HMAC-bound id, expiry, the request echoed in the credential) is the
 * resource server's to check (sdk/src/server/mpp-standard.ts); what is checked here is what money
 * depends on: amount, recipient, mint, fee payer, signatures. Push mode (`type: "signature"`, the
 * client broadcast itself) cannot be combined with `feePayer: true` and is not accepted.
 *
 * Imported by the MPP solana routes.
 */
import type { CosignedSettle, CosignedTransfers } from "../cosigned/cosigned.js";
import { standardNetworks } from "../chain/networks.js";

/** What a resource server puts in its challenge's `request` for the gateway to settle it. */
export interface SolanaChargeTerms {
  /** `methodDetails.network`. */
  readonly network: string;
  /** `currency`: the settlement mint. */
  readonly currency: string;
  readonly decimals: number;
  readonly tokenProgram: string;
  /** `methodDetails.feePayerKey` (with `feePayer: true`). */
  readonly feePayerKey: string;
}

export function solanaChargeTerms(cosigned: CosignedTransfers): SolanaChargeTerms | null {
  const names = standardNetworks(cosigned.network);
  if (names === null) return null;
  const asset = cosigned.asset;
  return {
    network: names.mpp,
    currency: asset.mint,
    decimals: asset.decimals,
    tokenProgram: asset.tokenProgram,
    feePayerKey: cosigned.feePayer,
  };
}

export interface SolanaCharge {
  readonly accountId: string;
  /** The credential's `payload.transaction` (base64). */
  readonly transaction: string;
  readonly amountUnits: bigint;
  readonly recipient: string;
  /** The paid resource's URL. */
  readonly endpoint: string;
  /** The request's `externalId`: the client then adds it as a memo. */
  readonly externalId?: string | undefined;
}

export function settleSolanaCharge(charge: SolanaCharge, cosigned: CosignedTransfers): Promise<CosignedSettle> {
  return cosigned.settle(chargePayment(charge));
}

export function solanaChargeOutcome(charge: SolanaCharge, cosigned: CosignedTransfers): Promise<CosignedSettle | null> {
  return cosigned.outcomeOf(chargePayment(charge));
}

function chargePayment(charge: SolanaCharge) {
  return {
    protocol: "mpp" as const,
    accountId: charge.accountId,
    endpoint: charge.endpoint,
    transaction: charge.transaction,
    layout: "mpp-charge" as const,
    payTo: charge.recipient,
    amountUnits: charge.amountUnits,
    memo: charge.externalId,
  };
}
