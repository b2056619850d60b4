/**
 * Deciding a held payment (docs/policy.md "Deciding: the state of an approval"), by a person's key
 * or the signed link, and closing one the gateway's clock expired. Each runs in the caller's READ
 * COMMITTED transaction, after the store's decide-once UPDATE (`WHERE status = 'pending'`), so what
 * follows runs for exactly one decider:
 *
 * - denied / expired: the held reservation is released (its amount and call stop counting);
 * - approved: the whole policy is re-run under the agent's lock on usage without the held
 *   reservation (`recheckHeldReservation`), with the invocation budget of a sub-agent's payment.
 *   Allowed: the reservation becomes an ordinary `reserved` one, waiting for the caller to resume
 *   and sign it until `decided_at + timeout` (then the approvals loop releases it). Refused: it
 *   stays released and the refusal is recorded as any (`policy.violation`); the approval stays
 *   `approved` with `outcome: refused`.
 *
 * Every decision emits `approval.decided` and wakes the long-polls at commit.
 */
import type pg from "pg";
import type { Approval, ApprovalDecision, ApprovalOutcome } from "../../../shared/approvals/approval.js";
import { ApprovalAlreadyDecidedError } from "../../../shared/approvals/errors.js";
import {
  type DecisionResult,
  decideApproval,
  decideByLink,
  notifyDecided,
  recordApprovalOutcome,
} from "../../../shared/approvals/store.js";
import { httpError } from "../../../shared/errors.js";
import type { PolicyRejected } from "../../../shared/policy/engine.js";
import { heldReservation, recheckHeldReservation, releaseHeldReservation, type ReserveOptions } from "../../reservations/store.js";
import { emitPaymentEvents } from "../../events/gateway.js";
import { emitEvent } from "../../events/events.js";
import { approvalDecidedPayload } from "../../webhooks/payloads.js";
import { asRejection } from "../authorize.js";
import { recordRefusedPayment } from "../rejections.js";

/** A sub-agent's held payment, whose re-check also holds it to its invocation's budget. */
export interface SubAgentPayment {
  readonly agentKey: string;
  readonly parentTxHash: string;
  readonly amountUnits: bigint;
  readonly walletAddress: string;
}

export interface DecideDeps {
  /**
   * The invocation budget check of a sub-agent's payment (api/gateway/invocations
   * `invocationBudgetCheck`, given by the caller above this floor); approving such a payment
   * answers 503 without it.
   */
  readonly subAgentCheck?: ((payment: SubAgentPayment) => ReserveOptions) | undefined;
}

/** Who decides: an API key of the account, or the holder of the signed link. */
export type Decider =
  | { readonly kind: "key"; readonly accountId: string; readonly keyId: string; readonly approvalId: string }
  | { readonly kind: "link"; readonly tokenHash: Buffer };

export interface DecideInput {
  readonly decider: Decider;
  readonly decision: ApprovalDecision;
  readonly note: string | null;
  readonly now: Date;
}

/** The re-check of an approved payment. */
export type RecheckOutcome = (
  | { readonly outcome: "authorized" }
  | { readonly outcome: "refused"; readonly reasonCode: string; readonly reason: string; readonly rejectionId: string }
) & {
  /** The policy version the re-run decided under. */
  readonly policyVersion: number;
};

export interface Decided {
  /** The approval as decided (status, who, when, note, outcome). */
  readonly approval: Approval;
  /** For an approval: what the re-run policy did; else null. */
  readonly recheck: RecheckOutcome | null;
  /**
   * True when the decision arrived after `expires_at`: the store expired the approval instead
   * (the gateway's clock decides), which is committed; the caller answers 409 with it.
   */
  readonly late: boolean;
}

/**
 * Approve or deny, once. Throws ApprovalNotFoundError (no such approval of the account, or no
 * live link) and ApprovalAlreadyDecidedError (decided before; nothing changed).
 */
export async function decideInTransaction(client: pg.ClientBase, deps: DecideDeps, input: DecideInput): Promise<Decided> {
  const { decider, decision, note, now } = input;
  const result: DecisionResult =
    decider.kind === "key"
      ? await decideApproval(client, {
          accountId: decider.accountId,
          approvalId: decider.approvalId,
          decision,
          decidedBy: decider.keyId,
          note,
          at: now,
        })
      : await decideByLink(client, { tokenHash: decider.tokenHash, decision, note, at: now });
  if (result.kind === "already_decided") throw new ApprovalAlreadyDecidedError(result.approval);
  const approval = result.approval;
  if (result.kind === "expired" || approval.status !== "approved") {
    await closeApproval(client, approval, now);
    return { approval, recheck: null, late: result.kind === "expired" };
  }
  const recheck = await recheckApproved(client, deps, approval, now);
  await recordApprovalOutcome(client, approval.id, recheck.outcome);
  const decided: Approval = { ...approval, outcome: recheck.outcome };
  await emitDecided(client, decided, recheck.outcome, now, recheck.policyVersion);
  return { approval: decided, recheck, late: false };
}

/** A denied or expired approval: its reservation released, `approval.decided` emitted, waiters woken. */
export async function closeApproval(client: pg.ClientBase, approval: Approval, now: Date): Promise<void> {
  if (approval.status !== "denied" && approval.status !== "expired") throw new Error(`closeApproval: ${approval.status} is not a refusal`);
  const released = await releaseHeldReservation(client, approval.reservationId);
  // The decide-once UPDATE ran in this transaction: the reservation is still held, or the ledger is wrong.
  if (!released) throw new Error(`approval ${approval.id}: its reservation ${approval.reservationId} was not held`);
  await emitDecided(client, approval, null, now, approval.policyVersion);
}

async function recheckApproved(client: pg.ClientBase, deps: DecideDeps, approval: Approval, now: Date): Promise<RecheckOutcome> {
  const held = await heldReservation(client, approval.reservationId);
  if (held === null) throw new Error(`approval ${approval.id}: its reservation ${approval.reservationId} is gone`);
  const { agentKey, amountUnits, endpoint } = approval;
  const parentTxHash = held.parentTxHash;
  let options: ReserveOptions = {};
  if (parentTxHash !== null) {
    if (deps.subAgentCheck === undefined) throw httpError("SERVICE_UNAVAILABLE", "agent invocations are not configured on this server");
    options = deps.subAgentCheck({ agentKey, parentTxHash, amountUnits, walletAddress: held.walletAddress });
  }
  // The caller gets as long to resume an approved payment as the payment could wait for a decision.
  const resumeBy = new Date(now.getTime() + (approval.expiresAt.getTime() - approval.requestedAt.getTime()));
  const request = { endpoint, amountUnits, protocol: held.protocol, offeredProtocols: [held.protocol] } as const;
  const result = await recheckHeldReservation(client, agentKey, approval.reservationId, request, now, { ...options, resumeBy });
  if (result === null) throw new Error(`approval ${approval.id}: its reservation ${approval.reservationId} was not held`);
  const { decision, refusal, policyVersion } = result;
  if (decision.decision === "allow" && refusal === null) {
    await emitPaymentEvents(client, { agentId: agentKey, decision, at: now, policyVersion });
    return { outcome: "authorized", policyVersion };
  }
  const rejected: PolicyRejected = decision.decision === "reject" ? decision : asRejection(decision, refusal!);
  const rejectionId = await recordRefusedPayment(client, {
    agentId: agentKey,
    amountUnits,
    endpoint,
    protocol: held.protocol,
    rejected,
    at: now,
    policyVersion,
  });
  return { outcome: "refused", reasonCode: rejected.reasonCode, reason: rejected.reason, rejectionId, policyVersion };
}

async function emitDecided(
  client: pg.ClientBase,
  approval: Approval,
  outcome: ApprovalOutcome | null,
  now: Date,
  policyVersion: number | null,
): Promise<void> {
  await emitEvent(
    client,
    approval.accountId,
    "approval.decided",
    approvalDecidedPayload({
      approvalId: approval.id,
      agentId: approval.agentKey,
      status: approval.status as "approved" | "denied" | "expired",
      decidedBy: approval.decidedBy ?? "timeout",
      note: approval.note,
      amountUnits: approval.amountUnits,
      endpoint: approval.endpoint,
      outcome,
      at: now,
      policyVersion,
    }),
  );
  await notifyDecided(client, approval.id);
}
