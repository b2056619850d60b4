/**
 * The pay flow: spec 4.7 `pay`, its seven steps, against an API answering 402. It never holds a
 * key; each protocol module does its steps 4-7 over the same `PayCall`:
 *
 * 1. the original request (`call.ts`), with what this scope holds for the origin: a channel
 *    voucher (`channel.ts`) or an MPP session token (`mpp.ts`, step 4's reuse);
 * 2. the 402's requirement (`readPaymentOffer`: the spec's formats and the real protocols');
 * 3. `#authorize`, the one call to the gateway's authorization: policy check, reservation, signature;
 *    a payment the policy held for a person (202, docs/rest.md "Approvals") is waited for by
 *    long-poll up to `approvalTimeoutMs`, then the authorization is repeated under the same
 *    Idempotency-Key, which resumes it: signed once approved, APPROVAL_DENIED / APPROVAL_EXPIRED
 *    otherwise; still undecided, `ApprovalRequiredError` (`pay` again with the key resumes);
 * 4-5. the payment by the protocol the gateway chose (`mpp.ts`, `x402.ts`, `transfer.ts`);
 * 6. the reservation completed with the transaction, or released on failure (`reservation.ts`);
 * 7. the paid API's answer as `PaidResult` (`result.ts`).
 */
import { type Authorization, parseAuthorization } from "../authorization.js";
import { type ApprovalRequiredError, approvalRequiredFrom, PaymentProtocolError } from "../errors.js";
import { type PaymentOffer, readPaymentOffer } from "../payment-required.js";
import { PayCall, type PayExtras, type PayOptions } from "./call.js";
import { channelPayment } from "./channel.js";
import { mppPayment, mppSession } from "./mpp.js";
import { type PaidResult, type PaymentResult, unpaid } from "./result.js";
import { type PayScope, sessionScope } from "./scope.js";
import { transferPayment } from "./transfer.js";
import { x402Payment } from "./x402.js";

export class PayFlow {
  readonly #scope: PayScope;

  constructor(scope: PayScope) {
    this.#scope = scope;
  }

  /** The channels this scope opened (`Client.closeChannelSessions`). */
  get channelScope(): string {
    return sessionScope(this.#scope);
  }

  /** Spec 4.7 `pay`, steps 1-7; `extras` only from `agents.invoke`. */
  async pay(options: PayOptions, extras: PayExtras): Promise<PaymentResult> {
    const call = new PayCall(this.#scope, options, extras);
    // Spec 2.1's domain rules before anything is sent: a refused host receives nothing.
    await call.shared.domainRules.check(call.agentId, new URL(call.endpoint), call.signal);

    // Step 1: a held channel pays without a 402; a held MPP session's token goes with the request.
    const onChannel = await channelPayment.payHeld(call);
    if (onChannel !== undefined) return onChannel;
    const session = mppSession.held(call);
    const first = await call.callApi(session === undefined ? {} : mppSession.headers(session), false);
    if (first.status !== 402) return session === undefined ? unpaid(first) : mppSession.answered(call, session, first);

    // Step 2: the offer.
    let offer: PaymentOffer;
    try {
      offer = readPaymentOffer(first.data, call.endpoint, first.headers);
    } catch (error) {
      if (session !== undefined) mppSession.forget(call);
      throw error;
    }
    // A 402 that offers MPP refuses the session; one that offers only x402 comes from an
    // endpoint of the same origin that does not take MPP at all, and says nothing about the
    // session: keep it for the origin's MPP endpoints (otherwise every x402 call on a mixed origin
    // would cost the next MPP call a whole new negotiation and settlement).
    if (session !== undefined && offer.mpp !== undefined) mppSession.forget(call);
    const challenge = channelPayment.challenge(call, offer);
    if (challenge !== undefined) return channelPayment.pay(call, challenge);

    // Step 3: the gateway's authorization.
    const authorization = await this.#authorize(call, offer);

    // Steps 4-7: the protocol the gateway chose.
    if (transferPayment.takes(authorization, offer))
      return withPolicyVersion(await transferPayment.pay(call, authorization, offer), authorization);
    if (x402Payment.takes(authorization, offer)) return withPolicyVersion(await x402Payment.pay(call, authorization, offer), authorization);
    if (mppPayment.takes(authorization, offer)) return withPolicyVersion(await mppPayment.pay(call, authorization, offer), authorization);
    throw new PaymentProtocolError(
      `the gateway chose ${String((authorization as { protocol?: unknown }).protocol)}, which ${call.endpoint} did not offer`,
      call.endpoint,
    );
  }

  /**
   * Spec 4.7 step 3, `POST /v1/agents/{id}/payments/authorize`: the gateway checks the policy,
   * reserves the amount and signs with the agent's custodial wallet. The offer goes as read; the
   * preference, parent and invocation budget say how and under what it pays. A held payment (202)
   * is waited for, then asked again under the same key (`#awaitDecision`).
   */
  async #authorize(call: PayCall, offer: PaymentOffer): Promise<Authorization> {
    const preference = call.extras.protocolPreference ?? call.shared.protocolPreference;
    const body: Record<string, unknown> = {
      endpoint: call.endpoint,
      ...(offer.x402 === undefined ? {} : { x402: offer.x402 }),
      ...(offer.mpp === undefined ? {} : { mpp: offer.mpp }),
      ...(offer.x402v2 === undefined ? {} : { x402v2: offer.x402v2 }),
      ...(offer.x402v1 === undefined ? {} : { x402v1: offer.x402v1 }),
      ...(offer.mppChallenges === undefined ? {} : { mppChallenges: offer.mppChallenges }),
      ...(preference === undefined ? {} : { protocolPreference: preference }),
      ...(call.parentTxHash === undefined ? {} : { parentTxHash: call.parentTxHash }),
      ...(call.extras.invocationBudget === undefined ? {} : { invocationBudget: call.extras.invocationBudget }),
    };
    const authorize = () =>
      call.shared.transport.request<Record<string, unknown>>("POST", `/v1/agents/${encodeURIComponent(call.agentId)}/payments/authorize`, {
        body,
        idempotencyKey: call.idempotencyKey,
        ...(call.signal === undefined ? {} : { signal: call.signal }),
      });
    let answer = await authorize();
    const held = approvalRequiredFrom(answer, 202, undefined, call.idempotencyKey);
    if (held !== null) {
      await this.#awaitDecision(call, held);
      // Decided: the same key answers the signed payment, or the denial / expiry / re-check's refusal.
      answer = await authorize();
      const still = approvalRequiredFrom(answer, 202, undefined, call.idempotencyKey);
      if (still !== null) throw still;
    }
    return parseAuthorization(answer, call.endpoint);
  }

  /**
   * Long-polls the held payment's approval (`GET /v1/approvals/{id}?wait=`, one request per wait)
   * until it is decided; still pending after `approvalTimeoutMs`, the 202's `ApprovalRequiredError`.
   */
  async #awaitDecision(call: PayCall, held: ApprovalRequiredError): Promise<void> {
    if (call.approvalTimeoutMs === 0) throw held;
    const approval = await this.#scope.approvals.waitForDecision(held.approvalId, {
      timeoutMs: call.approvalTimeoutMs,
      ...(call.signal === undefined ? {} : { signal: call.signal }),
    });
    if (approval.status === "pending") throw held;
  }
}

/** The receipt names the policy version the gateway authorized the payment under, when it said. */
function withPolicyVersion(result: PaidResult, authorization: Authorization): PaidResult {
  return authorization.policyVersion === undefined ? result : { ...result, policyVersion: authorization.policyVersion };
}
