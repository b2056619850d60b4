/**
 * The MPP service side (spec 2.9, 3, 4.4) for one paid service: it answers the payment endpoint
 * (verify the agent's signed submission, settle on the chosen rail, record it through
 * payment_ledger, issue a session) and redeems `X-MPP-Session` tokens on later requests.
 *
 * This file is the submission path; its parts live next to it: `rail-settlement.ts` settles a
 * claimed payment on its rail (stablecoin, or card authorize/capture/void), `sessions.ts` issues,
 * redeems, charges and refreshes sessions (and defines the `SessionChargePolicy` gate that
 * `charge-policy.ts` implements). `MppService` composes them and keeps their public API.
 *
 * Replay: a submission's (payer, nonce) is claimed in `mpp_payments` before any money moves and
 * never released, exactly as x402 nonces are (api/gateway/x402/facilitator.ts).
 *
 * Sub-agents (`agents.invoke`): a submission whose linked reservation (`mpp:<payer>:<nonce>`, made
 * when the gateway authorized it with `parentTxHash`) names a parent settles against the invocation
 * account `invocationAddress(parentTxHash, payer)` (api/gateway/invocations), so the program records the
 * parent link and enforces the invocation's budget. The session it establishes keeps that parent,
 * so every charge on it settles under the same invocation (sessions.ts).
 */
import type { PublicKey } from "@solana/web3.js";
import type pg from "pg";
import type { CardProcessor } from "../card/processor.js";
import { invocationOf } from "../invocations/address.js";
import { claimLinkedReservation, linkedReservation, mppPaymentRef } from "../reservations/store.js";
import type { AgentDirectory, SettleResult, Settler } from "../settlement/settler.js";
import { verifySignature } from "../chain/signer.js";
import { MppPaymentError } from "./errors.js";
import { RailSettlement } from "./rail-settlement.js";
import { type MppRail, railOf } from "./rails.js";
import type { MppPaymentRequest } from "./request.js";
import {
  DEFAULT_REFRESH_BEFORE_SECONDS,
  DEFAULT_SESSION_TTL_SECONDS,
  type IssuedSession,
  MppSessions,
  type SessionChargePolicy,
  type SessionUse,
} from "./sessions.js";
import { claimSubmission, submissionByNonce } from "./store.js";
import { canonicalSubmissionBytes, type MppSubmission } from "./submission.js";

// The service's public API, re-exported so that callers need one import.
export {
  type ChargeAdmission,
  DEFAULT_REFRESH_BEFORE_SECONDS,
  DEFAULT_SESSION_TTL_SECONDS,
  type IssuedSession,
  type SessionCharge,
  type SessionChargePolicy,
  type SessionUse,
} from "./sessions.js";

export const DEFAULT_MAX_SUBMISSION_VALIDITY_SECONDS = 600;

export interface MppServiceOptions {
  readonly pool: pg.Pool;
  readonly settler: Settler;
  /** The program invocation accounts derive from (PROGRAM_ID). */
  readonly programId: PublicKey;
  readonly agents: AgentDirectory;
  readonly cardProcessor: CardProcessor;
  /** `scheme://host[:port]` of the paid service; sessions are scoped to it. */
  readonly serviceOrigin: string;
  /** Base58 address of the service wallet that receives payments. */
  readonly payee: string;
  readonly sessionTtlSeconds?: number;
  readonly refreshBeforeSeconds?: number;
  readonly maxValiditySeconds?: number;
  /** Admits every session charge (the gateway wires its spend-policy reservation here). */
  readonly chargePolicy?: SessionChargePolicy;
  readonly clock?: () => Date;
}

export interface MppConfirmation extends SettleResult {
  readonly agentId: string;
  readonly method: string;
  readonly rail: MppRail;
  readonly cardReference: string | null;
  readonly session: IssuedSession;
}

/** A settled submission found again by `resumeSubmission`, with its session handed out anew. */
export interface ResumedSubmission {
  readonly txHash: string;
  readonly agentId: string;
  readonly method: string;
  readonly rail: MppRail;
  readonly session: IssuedSession;
}

export class MppService {
  private readonly maxValiditySeconds: number;
  private readonly clock: () => Date;
  private readonly rails: RailSettlement;
  private readonly sessions: MppSessions;

  constructor(private readonly options: MppServiceOptions) {
    const ttlSeconds = options.sessionTtlSeconds ?? DEFAULT_SESSION_TTL_SECONDS;
    const refreshBeforeSeconds = options.refreshBeforeSeconds ?? DEFAULT_REFRESH_BEFORE_SECONDS;
    this.maxValiditySeconds = options.maxValiditySeconds ?? DEFAULT_MAX_SUBMISSION_VALIDITY_SECONDS;
    this.clock = options.clock ?? (() => new Date());
    if (refreshBeforeSeconds >= ttlSeconds) throw new RangeError("refreshBeforeSeconds must be below sessionTtlSeconds");
    if (new URL(options.serviceOrigin).origin !== options.serviceOrigin) throw new RangeError("serviceOrigin must be an origin");
    this.rails = new RailSettlement(options);
    this.sessions = new MppSessions({
      pool: options.pool,
      serviceOrigin: options.serviceOrigin,
      payee: options.payee,
      ttlSeconds,
      refreshBeforeSeconds,
      clock: this.clock,
      chargePolicy: options.chargePolicy,
      rails: this.rails,
    });
  }

  /** Spec 4.4 step 3–4: verify the submission against the request this service made, settle, open a session. */
  async submitPayment(submission: MppSubmission, request: MppPaymentRequest): Promise<MppConfirmation> {
    const { agentId, rail } = await this.verifySubmission(submission, request);
    const a = submission.authorization;
    const paymentRef = mppPaymentRef(a.payer, a.nonce);
    // Read before the claim: a failed read leaves no claimed row behind. The reservation is the
    // gateway's own record of the authorization, so only a sub-agent the gateway authorized under
    // an invocation pays under one; a hand-signed submission is a top-level payment.
    const linked = await linkedReservation(this.options.pool, paymentRef);
    const parentTxHash = linked !== null && linked.agentId === agentId ? linked.parentTxHash : null;
    const id = await claimSubmission(this.options.pool, {
      agentId,
      payer: a.payer,
      nonce: a.nonce,
      serviceOrigin: this.options.serviceOrigin,
      endpoint: a.resource,
      payee: this.options.payee,
      method: submission.method,
      rail,
      amountUnits: submission.amountUnits,
      validUntilSeconds: a.validUntilSeconds,
      parentTxHash,
    });
    if (id === null) throw new MppPaymentError("nonce_reused", `nonce ${a.nonce} of ${a.payer} was already used`);
    // Take the reservation before money moves: a released one revokes the submission, and once
    // taken the agent can no longer release it while the money may land (api/gateway/reservations/store.ts).
    const taken = await claimLinkedReservation(this.options.pool, paymentRef, this.clock());
    if (taken.outcome === "revoked") {
      const revoked = new MppPaymentError(
        "payment_revoked",
        `reservation ${taken.reservation.id} is ${taken.reservation.status}: its payment was revoked`,
      );
      await this.rails.markFailed(id, revoked);
      throw revoked;
    }
    const settled = await this.rails.settleOnRail({
      id,
      paymentRef,
      agentId,
      rail,
      amountUnits: submission.amountUnits,
      endpoint: a.resource,
      invocation: invocationOf(parentTxHash, a.payer, this.rails.programId),
    });
    const session = await this.sessions.issue({
      agentId,
      payer: a.payer,
      method: submission.method,
      rail,
      amountUnits: submission.amountUnits,
      prepaidCalls: 1,
      reusable: request.sessionSupported,
      establishedBy: id,
      refreshedFrom: null,
      parentTxHash,
    });
    return { ...settled.result, agentId, method: submission.method, rail, cardReference: settled.cardReference, session };
  }

  /**
   * A submission whose first attempt may already have run (a retried request under the same
   * Idempotency-Key): null when it never claimed its nonce (submit it afresh). A settled payment
   * gets its session handed out again: the clear token of the first attempt exists nowhere, so
   * the sessions it opened are revoked and one successor carries their remaining prepaid calls.
   * Still unresolved → `settlement_pending`; failed → `settlement_failed`.
   */
  async resumeSubmission(submission: MppSubmission, request: MppPaymentRequest): Promise<ResumedSubmission | null> {
    const a = submission.authorization;
    const row = await submissionByNonce(this.options.pool, a.payer, a.nonce);
    if (row === null) return null;
    if (row.serviceOrigin !== this.options.serviceOrigin || row.payee !== this.options.payee || row.method !== submission.method) {
      throw new MppPaymentError("nonce_reused", `nonce ${a.nonce} of ${a.payer} was already used`);
    }
    if (row.status === "failed") throw new MppPaymentError("settlement_failed", row.failure ?? "the payment failed");
    if (row.status !== "settled" || row.txHash === null) throw new MppPaymentError("settlement_pending", "the payment is not resolved yet");
    // The clear token of the first attempt exists nowhere: its sessions give way to one successor.
    const prepaidCalls = await this.sessions.revokeEstablishedBy(row.id);
    const session = await this.sessions.issue({
      agentId: row.agentId,
      payer: a.payer,
      method: row.method,
      rail: row.rail,
      amountUnits: row.amountUnits,
      prepaidCalls,
      reusable: request.sessionSupported,
      establishedBy: row.id,
      refreshedFrom: null,
      parentTxHash: row.parentTxHash,
    });
    return { txHash: row.txHash, agentId: row.agentId, method: row.method, rail: row.rail, session };
  }

  private async verifySubmission(submission: MppSubmission, request: MppPaymentRequest): Promise<{ agentId: string; rail: MppRail }> {
    const a = submission.authorization;
    if (!request.paymentMethods.includes(submission.method)) {
      throw new MppPaymentError("method_not_offered", `${submission.method} is not among ${request.paymentMethods.join(", ")}`);
    }
    const rail = railOf(submission.method);
    if (rail === null) throw new MppPaymentError("method_unsupported", `${submission.method} is not a rail this service settles`);
    const signed = canonicalSubmissionBytes({
      paymentEndpoint: request.paymentEndpoint,
      resource: a.resource,
      method: submission.method,
      amountUnits: submission.amountUnits,
      currency: submission.currency,
      payer: a.payer,
      nonce: a.nonce,
      validUntilSeconds: a.validUntilSeconds,
    });
    if (!verifySignature(a.payer, signed, a.signature)) throw new MppPaymentError("invalid_signature", `not a signature of ${a.payer}`);
    if (submission.currency !== request.currency)
      throw new MppPaymentError("currency_mismatch", `${submission.currency} ≠ ${request.currency}`);
    if (submission.amountUnits !== request.amountUnits) {
      throw new MppPaymentError("amount_mismatch", `submitted ${submission.amountUnits}, requested ${request.amountUnits} base units`);
    }
    if (new URL(a.resource).origin !== this.options.serviceOrigin) {
      throw new MppPaymentError("resource_mismatch", `${a.resource} is not a resource of ${this.options.serviceOrigin}`);
    }
    const nowSeconds = Math.floor(this.clock().getTime() / 1000);
    if (a.validUntilSeconds < nowSeconds) throw new MppPaymentError("expired", `valid until ${a.validUntilSeconds}, now ${nowSeconds}`);
    if (a.validUntilSeconds > nowSeconds + this.maxValiditySeconds) {
      throw new MppPaymentError("validity_too_long", `valid until ${a.validUntilSeconds}, at most ${this.maxValiditySeconds} s ahead`);
    }
    const agentId = await this.options.agents.agentIdForAddress(a.payer);
    if (agentId === null) throw new MppPaymentError("unknown_payer", `${a.payer} is not an agent wallet of this gateway`);
    return { agentId, rail };
  }

  /**
   * Spec 4.4 step 5: a request carrying `X-MPP-Session`. Pays the call (prepaid, or a new charge
   * on the session's rail), refreshes the token when it is close to expiry, and says which token
   * the answer must carry. Throws `MppSessionError` for unknown, expired or exhausted tokens.
   */
  useSession(token: string, call: { endpoint: string; amountUnits: bigint }): Promise<SessionUse> {
    return this.sessions.use(token, call);
  }
}
