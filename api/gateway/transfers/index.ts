/**
 * Signed transfers: how the gateway pays real x402 and MPP servers. The payee asked in
 * its own format (an x402 v2 `PAYMENT-REQUIRED` header, an x402 v1 body, an MPP `solana`
 * `charge` challenge); the gateway checks the spend policy and reserves the amount exactly as for
 * the spec's formats (pay/authorize.ts), then signs, with the agent's custodial key, the
 * token transfer the payee's facilitator or server co-signs and broadcasts. Once it landed, the
 * payment is recorded in payment_ledger as a separate record naming the transfer as its
 * settlement reference; the indexer marks it verified after checking that transfer on chain.
 *
 * Files: `offers.ts` (the real formats read into `TransferOffer`s, on the ledger names of
 * ../networks.ts), `transaction.ts` (the transaction, signed), `wire.ts` (the headers that
 * carry it back), `store.ts` (`signed_transfers`), `landing.ts` (found on the ledger, recorded
 * once, reservation closed), `sweep.ts` (the sweeper's step). Design: docs/protocols.md
 * "Paying real x402 and MPP servers".
 *
 * Imported by pay/authorize.ts, the payment routes, the sweeper and gateway.ts.
 */
import type { Keypair } from "@solana/web3.js";
import type pg from "pg";
import { type RecentBlockhash, recentBlockhash, type SettlementLedger, tokenBalanceUnits } from "../chain/ledger.js";
import {
  closeUnpaid,
  findTransfer,
  type RecordOutcome,
  recordLanded,
  type TransferDeps,
  type TransferRecorder,
  transferBySignature,
} from "./landing.js";
import type { LedgerNetworks } from "../chain/networks.js";
import { type OfferContext, type ReadOffers, readMppChallenges, readX402V1, readX402V2, type TransferOffer } from "./offers.js";
import { type TransferRow, transferByRef, transferByReservation } from "./store.js";
import { type TransferSweepReport, sweepTransfers } from "./sweep.js";
import { type SignedTransfer, signTransfer } from "./transaction.js";

export { LOCAL_DEVNET_ALIASES, type LedgerNetworks, ledgerNetworks } from "../chain/networks.js";
export type { MppChallenge, TransferFormat, TransferOffer } from "./offers.js";
export { type NewTransfer, TRANSFER_REF_PREFIX, type TransferRow, insertTransfer, transferPaymentRef } from "./store.js";
export type { SignedTransfer } from "./transaction.js";
export type { RecordOutcome, TransferRecorder } from "./landing.js";
export type { TransferSweepReport } from "./sweep.js";
export { paymentHeaders } from "./wire.js";

export interface SignedTransfersOptions {
  readonly pool: pg.Pool;
  readonly ledger: SettlementLedger;
  readonly recorder: TransferRecorder;
  readonly networks: LedgerNetworks;
}

/** The real-protocol offers of an authorize request, as the client forwarded them. */
export interface ForwardedOffers {
  readonly x402v2?: unknown;
  readonly x402v1?: unknown;
  readonly mppChallenges?: unknown;
}

/** What signing needs from the chain, read before the authorization's transaction. */
export interface TransferChainState {
  readonly blockhash: RecentBlockhash;
  /** The agent's settlement-token balance (base units). */
  readonly balanceUnits: bigint;
}

/** How long `complete` waits for a transaction the payee reported to become visible. */
const VISIBILITY_WAIT_MS = 3_000;

export class SignedTransfers {
  readonly #deps: TransferDeps;
  readonly networks: LedgerNetworks;

  constructor(options: SignedTransfersOptions) {
    this.#deps = { pool: options.pool, ledger: options.ledger, recorder: options.recorder };
    this.networks = options.networks;
  }

  /** Every payable offer in the forwarded formats, in the payee's order, and why others were skipped. */
  readOffers(forwarded: ForwardedOffers, now: Date): ReadOffers {
    const { ledger } = this.#deps;
    const context: OfferContext = { networks: this.networks, mint: ledger.mint.toBase58(), decimals: ledger.decimals, now };
    const read: ReadOffers[] = [];
    if (forwarded.x402v2 !== undefined) read.push(readX402V2(forwarded.x402v2, context));
    if (forwarded.x402v1 !== undefined) read.push(readX402V1(forwarded.x402v1, context));
    if (forwarded.mppChallenges !== undefined) read.push(readMppChallenges(forwarded.mppChallenges, context));
    return { offers: read.flatMap((r) => r.offers), skipped: read.flatMap((r) => r.skipped) };
  }

  /** A recent blockhash and the agent's balance, read together. */
  async chainState(payer: Keypair): Promise<TransferChainState> {
    const { ledger } = this.#deps;
    const [blockhash, balanceUnits] = await Promise.all([recentBlockhash(ledger), tokenBalanceUnits(ledger, payer.publicKey)]);
    return { blockhash, balanceUnits };
  }

  sign(offer: TransferOffer, payer: Keypair, blockhash: string): SignedTransfer {
    const { ledger } = this.#deps;
    return signTransfer(offer, { payer, authority: ledger.authority }, { mint: ledger.mint, decimals: ledger.decimals, blockhash });
  }

  /** The transfer a reservation signed, by its payment reference. */
  transfer(paymentRef: string): Promise<TransferRow | null> {
    return transferByRef(this.#deps.pool, paymentRef);
  }

  /** The transfer a reservation signed, by the reservation's id; null for any other reservation. */
  transferOfReservation(reservationId: string): Promise<TransferRow | null> {
    return transferByReservation(this.#deps.pool, reservationId);
  }

  /**
   * The payee reported the transfer as `txHash`: checked on the ledger (it must carry the agent's
   * signature), then recorded. `failed` when it landed and failed (nothing moved: the reservation
   * is released); null when no such transaction of ours is visible.
   */
  async complete(row: TransferRow, txHash: string): Promise<RecordOutcome | { readonly outcome: "failed" } | null> {
    if (row.status === "recorded" && row.recordTx !== null && row.settlementTx === txHash) {
      return { outcome: "recorded", recordTx: row.recordTx, settlementTx: txHash };
    }
    const deadline = Date.now() + VISIBILITY_WAIT_MS;
    for (;;) {
      const found = await transferBySignature(this.#deps, row, txHash);
      if (found !== null && !found.failed) return recordLanded(this.#deps, row, found.signature);
      if (found !== null) {
        await closeUnpaid(this.#deps, row, "failed", "the transfer failed on the ledger", found.signature);
        return { outcome: "failed" };
      }
      if (Date.now() >= deadline) return null;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }

  /** The ledger's word on a transfer nobody reported (for tests and tools). */
  find(row: TransferRow) {
    return findTransfer(this.#deps, row);
  }

  sweep(batch: number, onWarning?: (message: string, context: Record<string, unknown>) => void): Promise<TransferSweepReport> {
    return sweepTransfers(this.#deps, batch, onWarning);
  }
}
