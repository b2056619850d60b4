/**
 * Holding a payment for a person (docs/policy.md "Approvals"): called by the authorization in its
 * transaction once the policy answered `needs_approval` and the amount is reserved
 * (`pending_approval`). Records the approval (`expires_at` = now + the policy's timeout, by the
 * gateway's clock), signs its one-time link and emits `approval.requested` with it, all committing
 * with the reservation. The event reaches the subscribed webhook endpoints and the targets of the
 * agent's `approval_requested` alert rules (e-mail, Slack), through the same outbox. Nothing is
 * signed for the payment.
 */
import type pg from "pg";
import type { Approval } from "../../../shared/approvals/approval.js";
import { createLinkToken } from "../../../shared/approvals/link-token.js";
import { createApproval, setApprovalLinkToken } from "../../../shared/approvals/store.js";
import { httpError } from "../../../shared/errors.js";
import type { PolicyNeedsApproval } from "../../../shared/policy/engine.js";
import type { SecretBox } from "../../../shared/secret-box.js";
import { approvalAlertTargets } from "../../events/evaluate.js";
import { emitEvent } from "../../events/events.js";
import { approvalRequestedPayload } from "../../webhooks/payloads.js";

/** The secrets-key derivation the links are signed with (./decide's link check uses the same). */
export const LINK_KEY_PURPOSE = "approval-link";

/** What the link needs: the key that signs it and the gateway's public address (absent: a path-only URL). */
export interface ApprovalLinks {
  readonly box: SecretBox | undefined;
  readonly publicUrl?: string | undefined;
}

export interface HoldInput {
  readonly accountId: string;
  /** The agent's internal key. */
  readonly agentKey: string;
  readonly reservationId: string;
  readonly idempotencyKey: string | null;
  readonly amountUnits: bigint;
  readonly endpoint: string;
  readonly decision: PolicyNeedsApproval;
  readonly now: Date;
  /** The policy version that held it. */
  readonly policyVersion?: number | null;
}

/** The link's address: `<publicUrl>/v1/approvals/{id}/decide?token=…`. */
export function decideUrl(links: ApprovalLinks, approvalId: string, token: string): string {
  const base = (links.publicUrl ?? "").replace(/\/+$/, "");
  return `${base}/v1/approvals/${approvalId}/decide?token=${token}`;
}

export async function holdPayment(client: pg.ClientBase, links: ApprovalLinks, input: HoldInput): Promise<Approval> {
  if (links.box === undefined)
    throw httpError("SERVICE_UNAVAILABLE", "approvals need the secrets key (WEBHOOK_SECRETS_KEY) to sign their links");
  const { decision, now } = input;
  const approval = await createApproval(client, {
    accountId: input.accountId,
    agentKey: input.agentKey,
    reservationId: input.reservationId,
    idempotencyKey: input.idempotencyKey,
    amountUnits: input.amountUnits,
    endpoint: input.endpoint,
    domain: decision.domain,
    rule: decision.approvalRule,
    reason: decision.reason,
    requestedAt: now,
    timeoutMs: decision.timeoutMs,
    linkTokenHash: null,
    policyVersion: input.policyVersion ?? null,
  });
  const link = createLinkToken(links.box.derivedKey(LINK_KEY_PURPOSE), approval.id, approval.expiresAt);
  await setApprovalLinkToken(client, approval.id, link.hash);
  await emitEvent(
    client,
    input.accountId,
    "approval.requested",
    approvalRequestedPayload({
      approvalId: approval.id,
      agentId: input.agentKey,
      amountUnits: input.amountUnits,
      endpoint: input.endpoint,
      domain: decision.domain,
      rule: decision.approvalRule,
      reason: decision.reason,
      expiresAt: approval.expiresAt,
      decideUrl: decideUrl(links, approval.id, link.token),
      at: now,
      policyVersion: input.policyVersion ?? null,
    }),
    { targets: await approvalAlertTargets(client, input.agentKey) },
  );
  return approval;
}
