/**
 * The MPP service side (spec 2.9, 3, 4.4) for one paid service: it answers the payment endpoint
 * (verify the agent's signed submission, settle on the chosen rail, record it through
 * payment_ledger, issue a session) and redeems `X-MPP-Session` tokens on later requests.
 *
 * Rails: `stablecoin` settles with the program's atomic transfer + record; `card` authorizes with
 * the `CardProcessor`, records the payment on the ledger with rail `card` and the processor's
 * reference, then captures (a failed record voids the hold). Every rail is recorded.
 *
 * Sessions, per agent per service (docs/protocols.md):
 * - Issued on every confirmed submission, with the submission's payment as its one prepaid call;
 *   `reusable` only when the service's request said `sessionSupported`.
 * - Redeeming a token first consumes a prepaid call; afterwards each use charges the session's
 *   per-call price (at most the price agreed at establishment) on its rail, with no negotiation.
 * - Refresh: a use within `refreshBeforeSeconds` of expiry issues one successor token (fresh
 *   `sessionTtlSeconds`, same terms); the old token stays valid until its own expiry, so requests
 *   in flight never break. An expired or unknown token is an `MppSessionError`; the service then
 *   answers 402 and the client negotiates a new session.
 *
 * Replay: a submission's (payer, nonce) is claimed in `mpp_payments` before any money moves and
 * never released, exactly as x402 nonces are (api/x402/facilitator.ts).
 *
 * Session charges and the spend policy: a charge made on a session carries no fresh signature of
 * the agent, so the gateway's `SessionChargePolicy` (api/mpp/charge-policy.ts) admits each one: in
 * the one Postgres transaction that claims the charge row it reserves the amount within the
 * agent's policy and links the reservation to the row, or records the refusal (then no row is
 * claimed and no money moves). After the charge the reservation is settled with its transaction,
 * released on a definite failure, and left open while the outcome is pending.
 *
 * A token is bound to its service: its origin and its payee. Redeeming it for another origin or
 * another receiving wallet finds no session (`session_unknown`).
 *
 * Sub-agents (`agents.invoke`): a submission whose linked reservation (`mpp:<payer>:<nonce>`, made
 * when the gateway authorized it with `parentTxHash`) names a parent settles against the invocation
 * account `invocationAddress(parentTxHash, payer)`, so the program records the parent link and
 * enforces the invocation's budget. The session it establishes keeps that parent
 * (`mpp_sessions.parent_tx_hash`, inherited by refreshed successors): every charge on it settles
 * under the same invocation and passes the invocation budget in the charge policy. A session is
 * therefore only ever charged under the invocation it was established under.
 */
import type pg from "pg";
import { withTransaction } from "../../indexer/db/database.js";
import { claimLinkedReservation, linkedReservation, mppChargeRef, mppPaymentRef } from "../policy/store.js";
import { type AuthorizeRequest, CardDeclinedError, type CardProcessor } from "../card/processor.js";
import { cardSettlementReference } from "../card/reference.js";
import { invocationAddress } from "../x402/facilitator.js";
import { type AgentDirectory, pendingSettlementSignature, type SettleRequest, type SettleResult, type Settler } from "../x402/settler.js";
import { verifySignature } from "../x402/signer.js";
import { MppPaymentError, MppPolicyError, type MppPolicyFailure, MppSessionError } from "./errors.js";
import { type MppRail, railOf } from "./rails.js";
import type { MppPaymentRequest } from "./request.js";
import { newSessionToken, sessionTokenHash } from "./session-token.js";
import { canonicalSubmissionBytes, type MppSubmission } from "./submission.js";

export const DEFAULT_SESSION_TTL_SECONDS = 3_600;
export const DEFAULT_REFRESH_BEFORE_SECONDS = 300;
export const DEFAULT_MAX_SUBMISSION_VALIDITY_SECONDS = 600;

/** A charge about to be made on a session without the agent's per-call signature: the policy gate. */
export interface SessionCharge {
  readonly agentId: string;
  /** The agent wallet the session pays from. */
  readonly payer: string;
  /** The invoking transaction when the session belongs to a sub-agent's invocation, else null. */
  readonly parentTxHash: string | null;
  readonly amountUnits: bigint;
  readonly endpoint: string;
  readonly rail: MppRail;
  readonly sessionId: string;
}

/** The policy's answer to a session charge. A refusal's records (rejection, events) commit. */
export type ChargeAdmission =
  | { readonly admitted: true; readonly reservationId: string | null }
  | {
      readonly admitted: false;
      readonly reasonCode: string;
      readonly reason: string;
      readonly errorClass: string;
      /** The redeem answer's `reason`: `policy_violation` (the default) or `budget_exceeded` (the invocation's budget). */
      readonly failure?: MppPolicyFailure;
    };

/** The gate every session charge passes (the gateway wires the spend policy here). */
export interface SessionChargePolicy {
  /** In the transaction that claims the charge: reserve within the policy, or refuse. */
  admit(client: pg.PoolClient, charge: SessionCharge): Promise<ChargeAdmission>;
  /** Same transaction, once the charge row exists: tie the reservation to it (and to the charge's parent). */
  link(client: pg.PoolClient, reservationId: string, chargeId: string, parentTxHash: string | null): Promise<void>;
  /** The charge landed on the ledger with `txHash`. */
  settled(chargeId: string, txHash: string): Promise<void>;
  /** The charge definitely did not happen. */
  released(chargeId: string): Promise<void>;
}

export interface MppServiceOptions {
  readonly pool: pg.Pool;
  readonly settler: Settler;
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

export interface IssuedSession {
  /** The clear token: send it in `X-MPP-Session`; it is not stored anywhere. */
  readonly token: string;
  readonly sessionId: string;
  readonly expiresAt: Date;
  readonly reusable: boolean;
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

export interface SessionUse {
  readonly sessionId: string;
  /** The agent wallet paying through the session, and the method it was established with. */
  readonly payer: string;
  readonly method: string;
  /** false: the call was paid by the establishing submission (its `txHash`). */
  readonly charged: boolean;
  readonly txHash: string;
  readonly rail: MppRail;
  readonly amountUnits: bigint;
  /** The token the client keeps: a refreshed successor, or the one it sent. */
  readonly token: string;
  readonly refreshed: boolean;
  readonly expiresAt: Date;
}

interface SessionRow {
  id: string;
  agent_id: string;
  payer: string;
  method: string;
  rail: MppRail;
  amount_units: string;
  reusable: boolean;
  expires_at: Date;
  refreshed_at: Date | null;
  revoked_at: Date | null;
  established_by: string | null;
  parent_tx_hash: string | null;
  prepaid_calls: number;
}

interface PaymentClaim {
  readonly id: string;
  /** Names the signed payment on its settlement (api/policy/store.ts payment links). */
  readonly paymentRef: string;
  readonly agentId: string;
  readonly rail: MppRail;
  readonly amountUnits: bigint;
  readonly endpoint: string;
  /** The invocation account a sub-agent's payment settles against, else null. */
  readonly invocation: string | null;
}

/** The invocation account of `payer`'s payments under `parentTxHash` (none for a top-level payment). */
const invocationOf = (parentTxHash: string | null, payer: string): string | null =>
  parentTxHash === null ? null : invocationAddress(parentTxHash, payer);

const detailOf = (error: unknown): string => (error instanceof Error ? error.message : String(error)).slice(0, 1_000);

export class MppService {
  private readonly ttlSeconds: number;
  private readonly refreshBeforeSeconds: number;
  private readonly maxValiditySeconds: number;
  private readonly clock: () => Date;

  constructor(private readonly options: MppServiceOptions) {
    this.ttlSeconds = options.sessionTtlSeconds ?? DEFAULT_SESSION_TTL_SECONDS;
    this.refreshBeforeSeconds = options.refreshBeforeSeconds ?? DEFAULT_REFRESH_BEFORE_SECONDS;
    this.maxValiditySeconds = options.maxValiditySeconds ?? DEFAULT_MAX_SUBMISSION_VALIDITY_SECONDS;
    this.clock = options.clock ?? (() => new Date());
    if (this.refreshBeforeSeconds >= this.ttlSeconds) throw new RangeError("refreshBeforeSeconds must be below sessionTtlSeconds");
    if (new URL(options.serviceOrigin).origin !== options.serviceOrigin) throw new RangeError("serviceOrigin must be an origin");
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
    const claimed = await this.options.pool.query<{ id: string }>(
      `INSERT INTO mpp_payments (kind, agent_id, payer, nonce, service_origin, endpoint, payee, method, rail, amount_units, expires_at,
                                 parent_tx_hash)
       VALUES ('submission', $1, $2, $3, $4, $5, $6, $7, $8, $9, to_timestamp($10), $11)
       ON CONFLICT (payer, nonce) DO NOTHING RETURNING id`,
      [agentId, a.payer, a.nonce, this.options.serviceOrigin, a.resource, this.options.payee, submission.method, rail,
        submission.amountUnits.toString(), a.validUntilSeconds, parentTxHash],
    );
    const id = claimed.rows[0]?.id;
    if (id === undefined) throw new MppPaymentError("nonce_reused", `nonce ${a.nonce} of ${a.payer} was already used`);
    // Take the reservation before money moves: a released one revokes the submission, and once
    // taken the agent can no longer release it while the money may land (api/policy/store.ts).
    const taken = await claimLinkedReservation(this.options.pool, paymentRef, this.clock());
    if (taken.outcome === "revoked") {
      const revoked = new MppPaymentError(
        "payment_revoked",
        `reservation ${taken.reservation.id} is ${taken.reservation.status}: its payment was revoked`,
      );
      await this.markFailed(id, revoked);
      throw revoked;
    }
    const settled = await this.settleOnRail({
      id,
      paymentRef,
      agentId,
      rail,
      amountUnits: submission.amountUnits,
      endpoint: a.resource,
      invocation: invocationOf(parentTxHash, a.payer),
    });
    const session = await this.issueSession({
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
    const { rows } = await this.options.pool.query<{
      id: string;
      agent_id: string;
      status: string;
      tx_hash: string | null;
      failure: string | null;
      service_origin: string;
      payee: string;
      method: string;
      rail: MppRail;
      amount_units: string;
      parent_tx_hash: string | null;
    }>(
      `SELECT id, agent_id, status, tx_hash, failure, service_origin, payee, method, rail, amount_units, parent_tx_hash
       FROM mpp_payments WHERE payer = $1 AND nonce = $2 AND kind = 'submission'`,
      [a.payer, a.nonce],
    );
    const row = rows[0];
    if (row === undefined) return null;
    if (row.service_origin !== this.options.serviceOrigin || row.payee !== this.options.payee || row.method !== submission.method) {
      throw new MppPaymentError("nonce_reused", `nonce ${a.nonce} of ${a.payer} was already used`);
    }
    if (row.status === "failed") throw new MppPaymentError("settlement_failed", row.failure ?? "the payment failed");
    if (row.status !== "settled" || row.tx_hash === null) throw new MppPaymentError("settlement_pending", "the payment is not resolved yet");
    const revoked = await this.options.pool.query<{ prepaid_calls: number }>(
      "UPDATE mpp_sessions SET revoked_at = $2 WHERE established_by = $1 AND revoked_at IS NULL RETURNING prepaid_calls",
      [row.id, this.clock()],
    );
    const opened = await this.options.pool.query("SELECT 1 FROM mpp_sessions WHERE established_by = $1", [row.id]);
    // Never opened: the payment's one prepaid call. Opened: what is left of it (revoked ones included).
    const prepaidCalls = (opened.rowCount ?? 0) === 0 ? 1 : Math.min(1, revoked.rows.reduce((sum, r) => sum + r.prepaid_calls, 0));
    const session = await this.issueSession({
      agentId: row.agent_id,
      payer: a.payer,
      method: row.method,
      rail: row.rail,
      amountUnits: BigInt(row.amount_units),
      prepaidCalls,
      reusable: request.sessionSupported,
      establishedBy: row.id,
      refreshedFrom: null,
      parentTxHash: row.parent_tx_hash,
    });
    return { txHash: row.tx_hash, agentId: row.agent_id, method: row.method, rail: row.rail, session };
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
    if (submission.currency !== request.currency) throw new MppPaymentError("currency_mismatch", `${submission.currency} ≠ ${request.currency}`);
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

  /** Settles a claimed payment row on its rail and records the outcome on the row. */
  private async settleOnRail(claim: PaymentClaim): Promise<{ result: SettleResult; cardReference: string | null }> {
    const request: SettleRequest = {
      agentId: claim.agentId,
      payee: this.options.payee,
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
        await this.options.cardProcessor.void(reference).catch(() => undefined);
      }
      throw error;
    }
    try {
      await this.options.cardProcessor.capture(reference);
    } catch (error) {
      // The ledger already records the payment; the capture is retried by reconciliation.
      await this.options.pool.query("UPDATE mpp_payments SET failure = $2 WHERE id = $1", [claim.id, `capture: ${detailOf(error)}`]);
    }
    return { result, cardReference: reference };
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
      const authorization = await this.options.cardProcessor.authorize(request);
      await this.options.pool.query("UPDATE mpp_payments SET status = 'authorized', card_reference = $2 WHERE id = $1", [
        claim.id,
        authorization.reference,
      ]);
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
      result = await this.options.settler.settlePayment(request);
    } catch (error) {
      const pending = pendingSettlementSignature(error);
      if (pending !== null) {
        // Sent, outcome unknown: the row stays unfinished with its transaction, for reconciliation.
        await this.options.pool.query("UPDATE mpp_payments SET tx_hash = $2, failure = $3 WHERE id = $1", [id, pending, detailOf(error)]);
        throw new MppPaymentError("settlement_pending", detailOf(error));
      }
      await this.markFailed(id, error);
      throw new MppPaymentError("settlement_failed", detailOf(error));
    }
    await this.options.pool.query("UPDATE mpp_payments SET status = 'settled', tx_hash = $2, finished_at = now() WHERE id = $1", [
      id,
      result.txHash,
    ]);
    return result;
  }

  private async markFailed(id: string, error: unknown): Promise<void> {
    await this.options.pool.query("UPDATE mpp_payments SET status = 'failed', failure = $2, finished_at = now() WHERE id = $1", [
      id,
      detailOf(error),
    ]);
  }

  private async issueSession(input: {
    agentId: string;
    payer: string;
    method: string;
    rail: MppRail;
    amountUnits: bigint;
    prepaidCalls: number;
    reusable: boolean;
    establishedBy: string | null;
    refreshedFrom: string | null;
    parentTxHash: string | null;
  }): Promise<IssuedSession> {
    const token = newSessionToken();
    const now = this.clock();
    const expiresAt = new Date(now.getTime() + this.ttlSeconds * 1000);
    const { rows } = await this.options.pool.query<{ id: string }>(
      `INSERT INTO mpp_sessions (agent_id, payer, service_origin, token_sha256, method, rail, amount_units, prepaid_calls,
                                 reusable, established_by, refreshed_from, created_at, expires_at, parent_tx_hash)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) RETURNING id`,
      [input.agentId, input.payer, this.options.serviceOrigin, sessionTokenHash(token), input.method, input.rail,
        input.amountUnits.toString(), input.prepaidCalls, input.reusable, input.establishedBy, input.refreshedFrom, now, expiresAt,
        input.parentTxHash],
    );
    return { token, sessionId: rows[0]!.id, expiresAt, reusable: input.reusable };
  }

  /**
   * Spec 4.4 step 5: a request carrying `X-MPP-Session`. Pays the call (prepaid, or a new charge
   * on the session's rail), refreshes the token when it is close to expiry, and says which token
   * the answer must carry. Throws `MppSessionError` for unknown, expired or exhausted tokens.
   */
  async useSession(token: string, call: { endpoint: string; amountUnits: bigint }): Promise<SessionUse> {
    const now = this.clock();
    const { rows } = await this.options.pool.query<SessionRow>(
      `SELECT s.id, s.agent_id, s.payer, s.method, s.rail, s.amount_units, s.reusable, s.expires_at, s.refreshed_at, s.revoked_at,
              s.established_by, s.parent_tx_hash, s.prepaid_calls
       FROM mpp_sessions s JOIN mpp_payments p ON p.id = s.established_by
       WHERE s.token_sha256 = $1 AND s.service_origin = $2 AND p.payee = $3`,
      [sessionTokenHash(token), this.options.serviceOrigin, this.options.payee],
    );
    const session = rows[0];
    if (session === undefined || session.revoked_at !== null) throw new MppSessionError("session_unknown", "no such session for this service");
    if (session.expires_at.getTime() <= now.getTime()) {
      throw new MppSessionError("session_expired", `expired at ${session.expires_at.toISOString()}`);
    }
    const priceUnits = BigInt(session.amount_units);
    if (call.amountUnits > priceUnits) {
      throw new MppSessionError("session_amount_exceeded", `call costs ${call.amountUnits}, session price is ${priceUnits} base units`);
    }
    if (new URL(call.endpoint).origin !== this.options.serviceOrigin) throw new RangeError(`${call.endpoint} is not on ${this.options.serviceOrigin}`);

    const paid = await this.redeemOrCharge(session, call, now);
    const refreshed = await this.refreshIfDue(session, now);
    return {
      sessionId: refreshed?.sessionId ?? session.id,
      payer: session.payer,
      method: session.method,
      charged: paid.charged,
      txHash: paid.txHash,
      rail: session.rail,
      amountUnits: paid.amountUnits,
      token: refreshed?.token ?? token,
      refreshed: refreshed !== null,
      expiresAt: refreshed?.expiresAt ?? session.expires_at,
    };
  }

  private async redeemOrCharge(
    session: SessionRow,
    call: { endpoint: string; amountUnits: bigint },
    now: Date,
  ): Promise<{ charged: boolean; txHash: string; amountUnits: bigint }> {
    // A session's prepaid calls only ever go down: one read as 0 stays 0, and the redeeming UPDATE
    // (a round trip on every charged call) is needed only while some were left.
    const prepaid =
      session.prepaid_calls <= 0
        ? null
        : await this.options.pool.query<{ tx_hash: string; amount_units: string }>(
            `UPDATE mpp_sessions s SET prepaid_calls = prepaid_calls - 1
             FROM mpp_payments p
             WHERE s.id = $1 AND s.prepaid_calls > 0 AND s.expires_at > $2 AND p.id = s.established_by
             RETURNING p.tx_hash, p.amount_units`,
            [session.id, now],
          );
    const redeemed = prepaid?.rows[0];
    if (redeemed !== undefined) return { charged: false, txHash: redeemed.tx_hash, amountUnits: BigInt(redeemed.amount_units) };
    if (!session.reusable) throw new MppSessionError("session_exhausted", "single-use token already redeemed");

    const id = await this.claimCharge(session, call);
    const policy = this.options.chargePolicy;
    let settled: { result: SettleResult };
    try {
      settled = await this.settleOnRail({
        id,
        paymentRef: mppChargeRef(id),
        agentId: session.agent_id,
        rail: session.rail,
        amountUnits: call.amountUnits,
        endpoint: call.endpoint,
        // A session established under an invocation pays only under that invocation.
        invocation: invocationOf(session.parent_tx_hash, session.payer),
      });
    } catch (error) {
      // Pending: the charge may still land, so its reservation keeps counting until reconciled.
      if (policy !== undefined && !(error instanceof MppPaymentError && error.reason === "settlement_pending")) await policy.released(id);
      throw error;
    }
    await policy?.settled(id, settled.result.txHash);
    return { charged: true, txHash: settled.result.txHash, amountUnits: call.amountUnits };
  }

  /** The policy's admission and the charge row in one transaction; a refusal claims nothing. */
  private async claimCharge(session: SessionRow, call: { endpoint: string; amountUnits: bigint }): Promise<string> {
    const policy = this.options.chargePolicy;
    const charge: SessionCharge = {
      agentId: session.agent_id,
      payer: session.payer,
      parentTxHash: session.parent_tx_hash,
      amountUnits: call.amountUnits,
      endpoint: call.endpoint,
      rail: session.rail,
      sessionId: session.id,
    };
    const claimed = await withTransaction(this.options.pool, async (client) => {
      const admission: ChargeAdmission = policy === undefined ? { admitted: true, reservationId: null } : await policy.admit(client, charge);
      if (!admission.admitted) return admission;
      const { rows } = await client.query<{ id: string }>(
        `INSERT INTO mpp_payments (kind, agent_id, payer, session_id, service_origin, endpoint, payee, method, rail, amount_units,
                                   parent_tx_hash)
         VALUES ('session_charge', $1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id`,
        [session.agent_id, session.payer, session.id, this.options.serviceOrigin, call.endpoint, this.options.payee, session.method,
          session.rail, call.amountUnits.toString(), session.parent_tx_hash],
      );
      const id = rows[0]!.id;
      if (admission.reservationId !== null) await policy!.link(client, admission.reservationId, id, session.parent_tx_hash);
      return { admitted: true as const, id };
    });
    if (!claimed.admitted) throw new MppPolicyError(claimed.reasonCode, claimed.reason, claimed.errorClass, claimed.failure);
    return claimed.id;
  }

  /** One successor per session, issued by whichever use first lands in the refresh window. */
  private async refreshIfDue(session: SessionRow, now: Date): Promise<IssuedSession | null> {
    if (!session.reusable || session.refreshed_at !== null) return null;
    if (session.expires_at.getTime() - now.getTime() > this.refreshBeforeSeconds * 1000) return null;
    const won = await this.options.pool.query("UPDATE mpp_sessions SET refreshed_at = $2 WHERE id = $1 AND refreshed_at IS NULL", [
      session.id,
      now,
    ]);
    if (won.rowCount !== 1) return null;
    return this.issueSession({
      agentId: session.agent_id,
      payer: session.payer,
      method: session.method,
      rail: session.rail,
      amountUnits: BigInt(session.amount_units),
      prepaidCalls: 0,
      reusable: true,
      establishedBy: session.established_by,
      refreshedFrom: session.id,
      parentTxHash: session.parent_tx_hash,
    });
  }
}
