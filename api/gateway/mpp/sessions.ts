/**
 * MPP sessions on the service side, per agent per service (spec 4.4 step 5, docs/protocols.md):
 * issued on every confirmed submission (its payment is the one prepaid call; `reusable` only when
 * the request said `sessionSupported`), redeemed with `X-MPP-Session` tokens, charged at the
 * session's per-call price on its rail, refreshed near expiry (one successor token; the old one
 * stays valid until its own expiry, so requests in flight never break). An expired or unknown
 * token is an `MppSessionError` and the client negotiates anew.
 *
 * A charge carries no fresh signature of the agent, so `SessionChargePolicy` (charge-policy.ts)
 * admits each one in the transaction that claims its row. A token is bound to its service's
 * origin and payee, and a session to the invocation it was established under: every charge
 * settles under that parent and passes its budget.
 */
import type pg from "pg";
import { withTransaction } from "../../../indexer/db/database.js";
import { invocationOf } from "../invocations/address.js";
import { mppChargeRef } from "../reservations/store.js";
import type { SettleResult } from "../settlement/settler.js";
import { MppPaymentError, MppPolicyError, type MppPolicyFailure, MppSessionError } from "./errors.js";
import type { RailSettlement } from "./rail-settlement.js";
import type { MppRail } from "./rails.js";
import { newSessionToken, sessionTokenHash } from "./session-token.js";
import {
  claimSessionCharge,
  claimSessionRefresh,
  establishedAnySession,
  insertSession,
  redeemPrepaidCall,
  revokeSessionsEstablishedBy,
  type SessionRow,
  type SessionTerms,
  sessionByToken,
} from "./store.js";

export type { SessionTerms } from "./store.js";

export const DEFAULT_SESSION_TTL_SECONDS = 3_600;
export const DEFAULT_REFRESH_BEFORE_SECONDS = 300;

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

export interface IssuedSession {
  /** The clear token: send it in `X-MPP-Session`; it is not stored anywhere. */
  readonly token: string;
  readonly sessionId: string;
  readonly expiresAt: Date;
  readonly reusable: boolean;
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

export interface MppSessionsDeps {
  readonly pool: pg.Pool;
  /** The service the sessions belong to: its origin and the wallet it is paid to. */
  readonly serviceOrigin: string;
  readonly payee: string;
  readonly ttlSeconds: number;
  readonly refreshBeforeSeconds: number;
  readonly clock: () => Date;
  readonly chargePolicy: SessionChargePolicy | undefined;
  /** Settles session charges on the session's rail. */
  readonly rails: RailSettlement;
}

/** One service's sessions (`MppService` holds one). */
export class MppSessions {
  constructor(private readonly deps: MppSessionsDeps) {}

  /** A new session row with a fresh token; the clear token is returned once and never stored. */
  async issue(terms: SessionTerms): Promise<IssuedSession> {
    const token = newSessionToken();
    const now = this.deps.clock();
    const expiresAt = new Date(now.getTime() + this.deps.ttlSeconds * 1000);
    const sessionId = await insertSession(this.deps.pool, {
      ...terms,
      serviceOrigin: this.deps.serviceOrigin,
      tokenSha256: sessionTokenHash(token),
      createdAt: now,
      expiresAt,
    });
    return { token, sessionId, expiresAt, reusable: terms.reusable };
  }

  /**
   * Revokes the sessions a submission opened and says how many prepaid calls they had left: 1 when
   * it never opened one (the payment's one prepaid call), else what is left (revoked ones included).
   */
  async revokeEstablishedBy(paymentId: string): Promise<number> {
    const revoked = await revokeSessionsEstablishedBy(this.deps.pool, paymentId, this.deps.clock());
    const opened = await establishedAnySession(this.deps.pool, paymentId);
    return !opened
      ? 1
      : Math.min(
          1,
          revoked.reduce((sum, calls) => sum + calls, 0),
        );
  }

  /**
   * Spec 4.4 step 5: a request carrying `X-MPP-Session`. Pays the call (prepaid, or a new charge
   * on the session's rail), refreshes the token when it is close to expiry, and says which token
   * the answer must carry. Throws `MppSessionError` for unknown, expired or exhausted tokens.
   */
  async use(token: string, call: { endpoint: string; amountUnits: bigint }): Promise<SessionUse> {
    const now = this.deps.clock();
    const session = await sessionByToken(this.deps.pool, sessionTokenHash(token), this.deps.serviceOrigin, this.deps.payee);
    if (session === undefined || session.revoked_at !== null)
      throw new MppSessionError("session_unknown", "no such session for this service");
    if (session.expires_at.getTime() <= now.getTime()) {
      throw new MppSessionError("session_expired", `expired at ${session.expires_at.toISOString()}`);
    }
    const priceUnits = BigInt(session.amount_units);
    if (call.amountUnits > priceUnits) {
      throw new MppSessionError("session_amount_exceeded", `call costs ${call.amountUnits}, session price is ${priceUnits} base units`);
    }
    if (new URL(call.endpoint).origin !== this.deps.serviceOrigin)
      throw new RangeError(`${call.endpoint} is not on ${this.deps.serviceOrigin}`);

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
    const redeemed = session.prepaid_calls <= 0 ? undefined : await redeemPrepaidCall(this.deps.pool, session.id, now);
    if (redeemed !== undefined) return { charged: false, txHash: redeemed.tx_hash, amountUnits: BigInt(redeemed.amount_units) };
    if (!session.reusable) throw new MppSessionError("session_exhausted", "single-use token already redeemed");

    const id = await this.claimCharge(session, call);
    const policy = this.deps.chargePolicy;
    let settled: { result: SettleResult };
    try {
      settled = await this.deps.rails.settleOnRail({
        id,
        paymentRef: mppChargeRef(id),
        agentId: session.agent_id,
        rail: session.rail,
        amountUnits: call.amountUnits,
        endpoint: call.endpoint,
        // A session established under an invocation pays only under that invocation.
        invocation: invocationOf(session.parent_tx_hash, session.payer, this.deps.rails.programId),
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
    const policy = this.deps.chargePolicy;
    const charge: SessionCharge = {
      agentId: session.agent_id,
      payer: session.payer,
      parentTxHash: session.parent_tx_hash,
      amountUnits: call.amountUnits,
      endpoint: call.endpoint,
      rail: session.rail,
      sessionId: session.id,
    };
    const claimed = await withTransaction(this.deps.pool, async (client) => {
      const admission: ChargeAdmission =
        policy === undefined ? { admitted: true, reservationId: null } : await policy.admit(client, charge);
      if (!admission.admitted) return admission;
      const id = await claimSessionCharge(client, {
        agentId: session.agent_id,
        payer: session.payer,
        sessionId: session.id,
        serviceOrigin: this.deps.serviceOrigin,
        endpoint: call.endpoint,
        payee: this.deps.payee,
        method: session.method,
        rail: session.rail,
        amountUnits: call.amountUnits,
        parentTxHash: session.parent_tx_hash,
      });
      if (admission.reservationId !== null) await policy!.link(client, admission.reservationId, id, session.parent_tx_hash);
      return { admitted: true as const, id };
    });
    if (!claimed.admitted) throw new MppPolicyError(claimed.reasonCode, claimed.reason, claimed.errorClass, claimed.failure);
    return claimed.id;
  }

  /** One successor per session, issued by whichever use first lands in the refresh window. */
  private async refreshIfDue(session: SessionRow, now: Date): Promise<IssuedSession | null> {
    if (!session.reusable || session.refreshed_at !== null) return null;
    if (session.expires_at.getTime() - now.getTime() > this.deps.refreshBeforeSeconds * 1000) return null;
    if (!(await claimSessionRefresh(this.deps.pool, session.id, now))) return null;
    return this.issue({
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
