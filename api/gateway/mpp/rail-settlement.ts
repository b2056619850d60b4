/**
 * Settling one claimed `mpp_payments` row (a submission or a session charge) on its rail, and
 * recording the outcome on the row. Every rail is recorded on payment_ledger:
 * - `stablecoin` settles with the program's atomic transfer + record;
 * - `card` authorizes with the `CardProcessor` (the row becomes `authorized` with the processor's
 *   reference), records the payment on the ledger with rail `card` and that reference, then
 *   captures. A record that definitely failed voids the hold, so no card is charged for an
 *   unrecorded payment; a record that may still land keeps the hold for reconciliation; a failed
 *   capture after a landed record is noted on the row and retried by reconciliation.
 * A send with an unknown outcome leaves the row unfinished with its transaction (`settlement_pending`).
 * The row writes are the MPP store's (store.ts).
 */
import type { PublicKey } from "@solana/web3.js";
import type pg from "pg";
import { type AuthorizeRequest, CardDeclinedError, type CardProcessor } from "../card/processor.js";
import { cardSettlementReference } from "../card/reference.js";
import { pendingSettlementSignature, type SettleRequest, type SettleResult, type Settler } from "../settlement/settler.js";
import { MppPaymentError } from "./errors.js";
import type { MppRail } from "./rails.js";
import { markPaymentAuthorized, markPaymentFailed, markPaymentSettled, notePaymentFailure, recordPaymentSent } from "./store.js";

/** A claimed `mpp_payments` row, about to be settled. */
export interface PaymentClaim {
  readonly id: string;
  /** Names the signed payment on its settlement (api/gateway/reservations/store.ts payment links). */
  readonly paymentRef: string;
  readonly agentId: string;
  readonly rail: MppRail;
  readonly amountUnits: bigint;
  readonly endpoint: string;
  /** The invocation account a sub-agent's payment settles against, else null. */
  readonly invocation: string | null;
}

export interface RailSettlementDeps {
  readonly pool: pg.Pool;
  readonly settler: Settler;
  readonly cardProcessor: CardProcessor;
  /** The program invocation accounts derive from (PROGRAM_ID). */
  readonly programId: PublicKey;
  /** Base58 address of the service wallet that receives payments. */
  readonly payee: string;
}

/** An error's message as stored on a row: bounded, never the whole stack. */
export const detailOf = (error: unknown): string => (error instanceof Error ? error.message : String(error)).slice(0, 1_000);

export class RailSettlement {
  constructor(private readonly deps: RailSettlementDeps) {}

  get programId(): PublicKey {
    return this.deps.programId;
  }

  /** Settles a claimed payment row on its rail and records the outcome on the row. */
  async settleOnRail(claim: PaymentClaim): Promise<{ result: SettleResult; cardReference: string | null }> {
    const request: SettleRequest = {
      agentId: claim.agentId,
      payee: this.deps.payee,
      amountUnits: claim.amountUnits,
      protocol: "mpp",
      rail: claim.rail,
      endpoint: claim.endpoint,
      paymentRef: claim.paymentRef,
      ...(claim.invocation === null ? {} : { invocation: claim.invocation }),
    };
    if (claim.rail === "stablecoin") {
      return { result: await this.settleRow(claim.id, request), cardReference: null };
    }
    const reference = await this.authorizeCard(claim);
    let result: SettleResult;
    try {
      let settlementReference: Uint8Array;
      try {
        settlementReference = cardSettlementReference(reference);
      } catch (error) {
        await this.markFailed(claim.id, error);
        throw new MppPaymentError("settlement_failed", detailOf(error));
      }
      result = await this.settleRow(claim.id, { ...request, settlementReference });
    } catch (error) {
      // A record that may still land keeps its hold (reconciliation captures or voids it);
      // otherwise nothing was recorded: release the hold rather than charge an unrecorded payment.
      if (!(error instanceof MppPaymentError && error.reason === "settlement_pending")) {
        await this.deps.cardProcessor.void(reference).catch(() => undefined);
      }
      throw error;
    }
    try {
      await this.deps.cardProcessor.capture(reference);
    } catch (error) {
      // The ledger already records the payment; the capture is retried by reconciliation.
      await notePaymentFailure(this.deps.pool, claim.id, `capture: ${detailOf(error)}`);
    }
    return { result, cardReference: reference };
  }

  /** Marks a claimed row failed: nothing moved and nothing will (the claim stays, so no replay). */
  async markFailed(id: string, error: unknown): Promise<void> {
    await markPaymentFailed(this.deps.pool, id, detailOf(error));
  }

  private async authorizeCard(claim: PaymentClaim): Promise<string> {
    const request: AuthorizeRequest = {
      customer: claim.agentId,
      amountUnits: claim.amountUnits,
      currency: "USDC",
      idempotencyKey: `mpp_payment_${claim.id}`,
      description: claim.endpoint,
    };
    try {
      const authorization = await this.deps.cardProcessor.authorize(request);
      await markPaymentAuthorized(this.deps.pool, claim.id, authorization.reference);
      return authorization.reference;
    } catch (error) {
      await this.markFailed(claim.id, error);
      if (error instanceof CardDeclinedError) throw new MppPaymentError("card_declined", error.message);
      throw new MppPaymentError("settlement_failed", `card authorization: ${detailOf(error)}`);
    }
  }

  private async settleRow(id: string, request: SettleRequest): Promise<SettleResult> {
    let result: SettleResult;
    try {
      result = await this.deps.settler.settlePayment(request);
    } catch (error) {
      const pending = pendingSettlementSignature(error);
      if (pending !== null) {
        // Sent, outcome unknown: the row stays unfinished with its transaction, for reconciliation.
        await recordPaymentSent(this.deps.pool, id, pending, detailOf(error));
        throw new MppPaymentError("settlement_pending", detailOf(error));
      }
      await this.markFailed(id, error);
      throw new MppPaymentError("settlement_failed", detailOf(error));
    }
    await markPaymentSettled(this.deps.pool, id, result.txHash);
    return result;
  }
}
