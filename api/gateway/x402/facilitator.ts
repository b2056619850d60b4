/**
 * Our x402 facilitator for the spec's format (spec 1, 4.3 step 5, 4.5): verify a signed
 * PaymentPayload against the requirement it claims to pay, then settle it through payment_ledger's
 * atomic transfer + record and answer with the ledger transaction hash.
 *
 * A payload settles at most once: `settle` claims its (payer, nonce) before asking the settler to
 * move funds, and a claimed nonce is never released, since a settlement that errored may still
 * land (the agent signs a new payload to retry; the sweeper finishes unfinished claims).
 *
 * The reservation an authorization linked (`x402:<payer>:<nonce>`) is taken right after the
 * claim: one the agent released first revokes the payload (`payment_revoked`); once taken,
 * `release` is refused. It is settled on success, released on a definite failure, left open while
 * pending. A sub-agent's payment settles under its invocation account; a payment that invokes its
 * payee opens the invocation once it settled (retried by the sweeper if that fails).
 */
import type { PublicKey } from "@solana/web3.js";
import type pg from "pg";
import { type Invocations, invocationOf, openInvocationOfPayment } from "../invocations/index.js";
import {
  claimLinkedReservation,
  landLinkedReservation,
  type LinkedReservation,
  linkedReservation,
  releaseLinkedReservation,
  x402PaymentRef,
} from "../reservations/store.js";
import type { VerifyFailureReason } from "./errors.js";
import { bindNonceClaim, claimNonce, failNonceClaim, nonceClaim, nonceUsed, recordNonceSent, settleNonceClaim } from "./nonces.js";
import { canonicalPayloadBytes, type PaymentPayload } from "./payload.js";
import type { PaymentRequirement } from "./requirement.js";
import { type AgentDirectory, pendingSettlementSignature, type SettleResult, type Settler } from "../settlement/settler.js";
import { verifySignature } from "../chain/signer.js";
import { payeeRefusal } from "../chain/payee.js";
import { unfailedSettlementOf } from "../settlement/store.js";

// The nonce store's pruning and its grace, where callers have always found them.
export { NONCE_PRUNE_GRACE_SECONDS, pruneExpiredNonces } from "./nonces.js";

/** Default bound on `validUntil - now`: how long a nonce must be remembered at most. */
export const DEFAULT_MAX_VALIDITY_SECONDS = 600;

export interface FacilitatorOptions {
  readonly pool: pg.Pool;
  readonly settler: Settler;
  /** The program invocation accounts derive from (PROGRAM_ID). */
  readonly programId: PublicKey;
  readonly agents: AgentDirectory;
  /** Opens the invocation a payment with an invocation budget starts; without it none is opened. */
  readonly invocations?: Invocations;
  /** Told about failures that leave work for the sweeper (an invocation not opened). Never secrets. */
  readonly onWarning?: (message: string, context: Record<string, unknown>) => void;
  /** The network and settlement token (mint address) this facilitator settles on. */
  readonly network: string;
  readonly token: string;
  readonly maxValiditySeconds?: number;
  readonly clock?: () => Date;
}

export type VerifyResult =
  | { readonly ok: true; readonly payer: string; readonly agentId: string }
  | { readonly ok: false; readonly reason: VerifyFailureReason; readonly detail: string };

export type SettleOutcome =
  | ({ readonly ok: true; readonly payer: string; readonly agentId: string; readonly network: string } & SettleResult)
  | { readonly ok: false; readonly reason: VerifyFailureReason | "settlement_failed" | "settlement_pending"; readonly detail: string };

/**
 * What an earlier settle attempt of a payload left in its nonce claim: settled (with the
 * transaction the claim recorded), failed for good, or still pending.
 */
export type ClaimedSettlement =
  | { readonly ok: true; readonly payer: string; readonly agentId: string; readonly network: string; readonly txHash: string | null }
  | { readonly ok: false; readonly reason: "settlement_failed" | "settlement_pending"; readonly detail: string };

export interface SettleOptions {
  /** Base58 invocation account when the agent pays under an `agents.invoke` budget. */
  readonly invocation?: string;
}

function refuse(reason: VerifyFailureReason, detail: string): VerifyResult & { ok: false } {
  return { ok: false, reason, detail };
}

/** The agent released the reservation (or closed it elsewhere) before anything settled it. */
function revoked(reservation: LinkedReservation): VerifyResult & { ok: false } {
  return refuse("payment_revoked", `reservation ${reservation.id} is ${reservation.status}: its payment was revoked`);
}

export class X402Facilitator {
  private readonly maxValiditySeconds: number;
  private readonly clock: () => Date;

  constructor(private readonly options: FacilitatorOptions) {
    this.maxValiditySeconds = options.maxValiditySeconds ?? DEFAULT_MAX_VALIDITY_SECONDS;
    this.clock = options.clock ?? (() => new Date());
  }

  /**
   * Every check but the authoritative nonce claim: signature, terms against the requirement,
   * validity window, nonce not yet used (a read; `settle` decides), payer known to the gateway.
   */
  async verify(payment: PaymentPayload, requirement: PaymentRequirement): Promise<VerifyResult> {
    const terms = this.checkTerms(payment, requirement);
    if (terms !== null) return terms;
    const p = payment.payload;
    if (await nonceUsed(this.options.pool, p.from, p.nonce))
      return refuse("nonce_reused", `nonce ${p.nonce} of ${p.from} was already used`);
    const reservation = await linkedReservation(this.options.pool, x402PaymentRef(p.from, p.nonce));
    if (reservation !== null && reservation.status !== "reserved") return revoked(reservation);
    const agentId = await this.options.agents.agentIdForAddress(p.from);
    if (agentId === null) return refuse("unknown_payer", `${p.from} is not an agent wallet of this gateway`);
    return { ok: true, payer: p.from, agentId };
  }

  /** Pure checks, cheapest first after the signature (nothing else means anything without it). */
  private checkTerms(payment: PaymentPayload, requirement: PaymentRequirement): (VerifyResult & { ok: false }) | null {
    const p = payment.payload;
    const bytes = canonicalPayloadBytes(payment.scheme, payment.network, p);
    if (!verifySignature(p.from, bytes, payment.signature)) return refuse("invalid_signature", `not a signature of ${p.from}`);
    // Both parsers admit only scheme "exact", so the schemes cannot differ.
    if (payment.network !== requirement.network || requirement.network !== this.options.network) {
      return refuse(
        "network_mismatch",
        `payload ${payment.network}, requirement ${requirement.network}, facilitator ${this.options.network}`,
      );
    }
    if (p.token !== requirement.token || requirement.token !== this.options.token) {
      return refuse("token_mismatch", `payload ${p.token}, requirement ${requirement.token}, facilitator ${this.options.token}`);
    }
    if (p.to !== requirement.payTo) return refuse("pay_to_mismatch", `payload pays ${p.to}, requirement ${requirement.payTo}`);
    const payee = payeeRefusal(requirement.payTo, [this.options.token, requirement.token]);
    if (payee !== null) return refuse("payee_refused", payee.message);
    if (p.amountUnits !== requirement.amountUnits) {
      return refuse("amount_mismatch", `payload ${p.amountUnits}, requirement ${requirement.amountUnits} base units`);
    }
    const nowSeconds = Math.floor(this.clock().getTime() / 1000);
    if (p.validUntilSeconds < nowSeconds) return refuse("expired", `valid until ${p.validUntilSeconds}, now ${nowSeconds}`);
    if (p.validUntilSeconds > nowSeconds + this.maxValiditySeconds) {
      return refuse("validity_too_long", `valid until ${p.validUntilSeconds}, at most ${this.maxValiditySeconds} s ahead`);
    }
    return null;
  }

  /** Verifies, claims the nonce, settles on the ledger; at most one settlement per (payer, nonce). */
  async settle(payment: PaymentPayload, requirement: PaymentRequirement, options: SettleOptions = {}): Promise<SettleOutcome> {
    const verified = await this.verify(payment, requirement);
    if (!verified.ok) return verified;
    const p = payment.payload;
    const claimedNonce = await claimNonce(this.options.pool, {
      payer: p.from,
      nonce: p.nonce,
      agentId: verified.agentId,
      payTo: p.to,
      amountUnits: p.amountUnits,
      resource: requirement.resource,
      validUntilSeconds: p.validUntilSeconds,
    });
    if (!claimedNonce) return refuse("nonce_reused", `nonce ${p.nonce} of ${p.from} was already used`);

    const paymentRef = x402PaymentRef(p.from, p.nonce);
    const { pool } = this.options;
    // Take the reservation before any money moves: a released (or completed) one revokes its
    // payload, and once taken the agent can no longer release it while the money may land.
    const claimed = await claimLinkedReservation(pool, paymentRef, this.clock());
    if (claimed.outcome === "revoked") {
      const refusal = revoked(claimed.reservation);
      await failNonceClaim(pool, p.from, p.nonce, refusal.detail);
      return refusal;
    }
    const reservation: LinkedReservation | null = claimed.outcome === "claimed" ? claimed.reservation : null;
    let settled: SettleResult;
    try {
      // A sub-agent's payment under `agents.invoke` settles against its invocation account.
      const invocation = invocationOf(reservation?.parentTxHash ?? null, p.from, this.options.programId) ?? options.invocation;
      settled = await this.options.settler.settlePayment({
        agentId: verified.agentId,
        payee: p.to,
        amountUnits: p.amountUnits,
        protocol: "x402",
        rail: "stablecoin",
        endpoint: requirement.resource,
        paymentRef,
        bindClaim: (db, signature) => bindNonceClaim(db, p.from, p.nonce, signature),
        ...(invocation === undefined ? {} : { invocation }),
      });
    } catch (error) {
      const detail = error instanceof Error ? error.message : String(error);
      const pending = pendingSettlementSignature(error) ?? (await this.sentSettlement(paymentRef));
      if (pending !== null) {
        // Sent, outcome unknown: the claim stays open with its transaction, for reconciliation;
        // the reservation keeps counting until the sweeper learns the outcome.
        await recordNonceSent(pool, p.from, p.nonce, pending, detail.slice(0, 1_000));
        return { ok: false, reason: "settlement_pending", detail };
      }
      // Kept burned on purpose (see the header comment): the agent retries with a new nonce.
      await failNonceClaim(pool, p.from, p.nonce, detail.slice(0, 1_000));
      await this.bookkeeping("reservation not released", paymentRef, () => releaseLinkedReservation(pool, paymentRef));
      return { ok: false, reason: "settlement_failed", detail };
    }
    // The payment happened: a database error from here on must not turn it into an error answer.
    // The sweeper finishes whatever is not written (it finds the settlement by the reference).
    await this.bookkeeping("claim not marked settled", paymentRef, () => settleNonceClaim(pool, p.from, p.nonce, settled.txHash));
    if (reservation !== null) {
      await this.bookkeeping("reservation not settled", paymentRef, () => landLinkedReservation(pool, paymentRef, settled.txHash));
      await openInvocationOfPayment(
        { pool, agents: this.options.agents, invocations: this.options.invocations, onWarning: this.options.onWarning },
        reservation,
        { invokerAgentId: verified.agentId, payee: p.to, txHash: settled.txHash },
      );
    }
    return { ok: true, payer: p.from, agentId: verified.agentId, network: payment.network, ...settled };
  }

  /**
   * What an earlier attempt to settle this payload left in its nonce claim, or null when no
   * attempt claimed it: how a retried settle request whose first attempt was cut short resolves
   * without settling again.
   */
  async claimedSettlement(payment: PaymentPayload): Promise<ClaimedSettlement | null> {
    const p = payment.payload;
    const claim = await nonceClaim(this.options.pool, p.from, p.nonce);
    if (claim === null) return null;
    if (claim.status === "settled")
      return { ok: true, payer: p.from, agentId: claim.agentId, network: payment.network, txHash: claim.txHash };
    if (claim.status === "failed") return { ok: false, reason: "settlement_failed", detail: claim.failure ?? "" };
    return { ok: false, reason: "settlement_pending", detail: "the settlement is not resolved yet" };
  }

  private async bookkeeping(what: string, paymentRef: string, write: () => Promise<unknown>): Promise<void> {
    try {
      await write();
    } catch (error) {
      this.options.onWarning?.(`${what}; the sweeper finishes it`, {
        paymentRef,
        error: error instanceof Error ? error.message : String(error),
      });
    }
  }

  /**
   * The signature of a settlement row committed for this payment that has not failed: the settler
   * threw after committing it (so it may have been sent), which is not a definite failure.
   */
  private async sentSettlement(paymentRef: string): Promise<string | null> {
    return unfailedSettlementOf(this.options.pool, paymentRef).catch(() => null);
  }
}
