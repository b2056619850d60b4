/**
 * Payment authorization (spec 4.7 `pay` steps 2–5, done by the gateway for the client):
 *
 * `POST /v1/agents/{agentId}/payments/authorize` with the 402 body the target answered
 * (`x402`: spec 2.7, `mpp`: spec 2.9, or both) and the `endpoint` called. The gateway picks the
 * protocol (x402 by default, spec 1 routing rules; the body's or the policy's
 * `protocolPreference`), checks the spend policy and reserves the amount, then signs with the
 * agent's wallet key: an x402 PaymentPayload with its `X-PAYMENT` headers, or an MPP submission
 * for `paymentEndpoint`. A policy rejection is recorded (status `rejected`, `policy.violation`)
 * and answered 403 with the spec 7 class. Reservation or rejection, the events and the
 * Idempotency-Key commit in one transaction: a retried request gets the same signed payment and
 * reserves nothing twice.
 *
 * The reservation is linked to the signed payment (`x402:<payer>:<nonce>` / `mpp:<payer>:<nonce>`,
 * with its `validUntil`) in the same transaction, so the facilitator that settles it closes the
 * reservation by itself and the sweeper releases it once the payment expired unused.
 *
 * Sub-agents (`agents.invoke`, spec 2.6, 4.7, 7 `BudgetExceededError`): `parentTxHash` makes the
 * payment one of a sub-agent under the invocation its invoker opened with that transaction. The
 * invocation's remaining budget (on-chain spend plus this agent's still-open reservations under
 * it) is checked under the agent's reservation lock, so concurrent authorizations cannot together
 * exceed it; a breach is recorded like a policy rejection and answered 422 `BUDGET_EXCEEDED`. The
 * program enforces the same cap when the payment settles. `invocationBudget` (x402) makes the
 * payment invoke its payee, an agent of this gateway, as a sub-agent with that budget: the
 * facilitator opens the invocation once the payment settled.
 *
 * `POST /v1/agents/{agentId}/payments/{reservationId}/complete` (`{ txHash }`) and `.../release`
 * close the reservation when the payment was settled elsewhere (a third-party facilitator); both
 * are idempotent with the facilitator's own closing. `release` revokes the signed payment: once
 * released, no settler of this gateway moves its money (`payment_revoked`). A payment a settler
 * already took cannot be released (409: its money may land; it keeps counting until the outcome
 * is known), so landed money always counts against the budget and the rate limit.
 */
import { PublicKey } from "@solana/web3.js";
import { lockAgentArchivedAt } from "../../agent-archive.js";
import { emitPaymentEvents } from "../../events/gateway.js";
import {
  chooseProtocol,
  EMPTY_POLICY,
  endpointHost,
  getPolicy,
  linkReservation,
  mppPaymentRef,
  releaseReservation,
  type ReserveOptions,
  reserveInTransaction,
  settleReservation,
  x402PaymentRef,
} from "../../../shared/policy/index.js";
import type { Protocol, ProtocolPreference } from "../../../shared/policy/policy.js";
import { asRejection, invocationAddress, invocationBudgetRefusal, type Invocations } from "../../invocations/index.js";
import { recordRefusedPayment } from "../../rejections.js";
import { explorerLink } from "../../../../indexer/store/projections.js";
import { parseTxHash } from "../../../shared/validation.js";
import { parseMppPaymentRequest, type MppPaymentRequest } from "../../mpp/request.js";
import { chooseMethod } from "../../mpp/rails.js";
import { signMppSubmission, submissionBody } from "../../mpp/submission.js";
import { encodePaymentHeaders } from "../../x402/headers.js";
import { payloadBody } from "../../x402/payload.js";
import { parsePaymentRequirement, type PaymentRequirement } from "../../x402/requirement.js";
import { signPaymentPayload } from "../../x402/sign.js";
import { keypairSigner } from "../../x402/signer.js";
import { runDatabaseEffect, type RouteResponse } from "../../../shared/http/idempotency.js";
import { checkPayee } from "../../settlement/payee.js";
import {
  objectBody,
  optionalString,
  plainJson,
  refuseArchived,
  requireActiveAgent,
  requireAgent,
  stringField,
} from "../../../shared/http/input.js";
import { parseMoneyObject } from "../../../shared/http/money.js";
import { usdcJson } from "../../../shared/money.js";
import { badRequest, HttpError, httpError, problemResponse } from "../../../shared/http/problem.js";
import { json } from "../../../shared/http/router.js";
import type { Route, RouteContext } from "../deps.js";

const PREFERENCES: readonly ProtocolPreference[] = ["auto", "x402", "mpp"];

interface Offer {
  readonly x402: PaymentRequirement | null;
  readonly mpp: MppPaymentRequest | null;
}

function hostOf(url: string, field: string): string {
  try {
    return endpointHost(url);
  } catch {
    throw badRequest(field, "must be an http(s) URL");
  }
}

export function invocationNotFound(detail: string): HttpError {
  return new HttpError(404, "INVOCATION_NOT_FOUND", detail);
}

export function invocationService(context: RouteContext): Invocations {
  const service = context.deps.invocations;
  if (service === undefined) throw httpError("SERVICE_UNAVAILABLE", "agent invocations are not configured on this server");
  return service;
}

/** The invocation a sub-agent pays under, as the chain holds it now; 404 when there is none. */
async function invocationOf(context: RouteContext, parentTxHash: string, subAgent: string) {
  const invocation = invocationAddress(parentTxHash, subAgent);
  const state = await invocationService(context).invocationState(new PublicKey(invocation));
  if (state === null || state.subAgent !== subAgent) {
    throw invocationNotFound(`no invocation of this agent under parent transaction ${parentTxHash}`);
  }
  return { invocation, state };
}

/** The protocols the target's 402 offers; authorizeRoute has refused a body with neither. */
function offeredProtocols(offer: Offer): Protocol[] {
  const offered: Protocol[] = [];
  if (offer.x402 !== null) offered.push("x402");
  if (offer.mpp !== null) offered.push("mpp");
  return offered;
}

async function authorizeRoute(context: RouteContext): Promise<RouteResponse> {
  const agent = await requireActiveAgent(context, context.params.agentId!);
  const body = objectBody(context.body, ["endpoint"], ["x402", "mpp", "protocolPreference", "parentTxHash", "invocationBudget"]);
  const endpoint = stringField(body.endpoint, "endpoint");
  const host = hostOf(endpoint, "endpoint");
  const preferenceText = optionalString(body.protocolPreference, "protocolPreference", 8);
  if (preferenceText !== undefined && !(PREFERENCES as readonly string[]).includes(preferenceText)) {
    throw badRequest("protocolPreference", "must be auto, x402 or mpp");
  }
  if (body.x402 === undefined && body.mpp === undefined) {
    throw httpError("BAD_USER_INPUT", "give the target's 402 body as x402 (spec 2.7) or mpp (spec 2.9)", {
      errorClass: "PaymentProtocolError",
      endpoint,
    });
  }
  const offer: Offer = {
    x402: body.x402 === undefined ? null : parsePaymentRequirement(plainJson(body.x402)),
    mpp: body.mpp === undefined ? null : parseMppPaymentRequest(plainJson(body.mpp)),
  };
  // A payee the ledger cannot credit safely is refused before anything is reserved or signed.
  if (offer.x402 !== null) checkPayee(offer.x402.payTo, [offer.x402.token, context.deps.settlementToken], "x402.payTo");
  if (offer.x402 !== null && hostOf(offer.x402.resource, "x402.resource") !== host) {
    throw badRequest("x402.resource", `pays for ${offer.x402.resource}, not for the endpoint's host ${host}`);
  }
  const parentTxHash =
    body.parentTxHash === undefined ? null : parseTxHash("parentTxHash", stringField(body.parentTxHash, "parentTxHash", 128));
  const invocationBudgetUnits = body.invocationBudget === undefined ? null : parseMoneyObject(body.invocationBudget, "invocationBudget");
  if (invocationBudgetUnits !== null && offer.x402 === null) {
    throw badRequest("invocationBudget", "invoking a sub-agent needs an x402 payment (give the target's x402 requirement)");
  }
  const wallets = context.deps.wallets;
  if (wallets === undefined) throw httpError("SERVICE_UNAVAILABLE", "wallets are not configured on this server");
  if (invocationBudgetUnits !== null) {
    const subAgentId = await wallets.agentIdForAddress(offer.x402!.payTo);
    if (subAgentId === null)
      throw badRequest("invocationBudget", `payTo ${offer.x402!.payTo} is not the wallet of an agent of this gateway`);
    if (subAgentId === agent.agent_id) throw badRequest("invocationBudget", "an agent cannot invoke itself");
  }
  // Fails fast (404) when there is no such invocation; the budget is checked again under the lock.
  const invocation = parentTxHash === null ? null : (await invocationOf(context, parentTxHash, agent.wallet_address)).invocation;
  const signer = keypairSigner(await wallets.keypair(agent.agent_id));

  return runDatabaseEffect(context.store, context.idempotency, async (client) => {
    // Again under a share lock: an archive committed since the check above wins, and one that
    // starts now waits for this reservation and then sees it (api/gateway/agent-archive.ts).
    refuseArchived({ public_id: agent.public_id, archived_at: await lockAgentArchivedAt(client, agent.agent_id) });
    const policy = (await getPolicy(client, agent.agent_id)) ?? EMPTY_POLICY;
    // Spec 1 (the policy engine's rule): x402 when both are offered, unless the preference says mpp.
    const preference = (preferenceText as ProtocolPreference | undefined) ?? policy.protocolPreference;
    const protocol = chooseProtocol(preference, offeredProtocols(offer));
    if (protocol === null) throw new Error("authorize: no protocol offered, which the body check refuses earlier");
    if (invocationBudgetUnits !== null && protocol !== "x402") {
      throw badRequest("invocationBudget", "invoking a sub-agent needs the x402 protocol, but this payment would use mpp");
    }
    const amountUnits = protocol === "x402" ? offer.x402!.amountUnits : offer.mpp!.amountUnits;
    const request = { endpoint, amountUnits, protocol, offeredProtocols: [protocol] } as const;
    const options: ReserveOptions =
      parentTxHash === null
        ? {}
        : {
            check: (locked) =>
              invocationBudgetRefusal(locked, {
                agentId: agent.agent_id,
                parentTxHash,
                amountUnits,
                // 404 when the invocation is gone since the fast check above.
                readInvocation: async () => (await invocationOf(context, parentTxHash, agent.wallet_address)).state,
              }),
          };
    const { decision, reservationId, refusal } = await reserveInTransaction(client, agent.agent_id, request, context.now, options);
    if (refusal != null && decision.decision === "allow") {
      const rejectionId = await recordRefusedPayment(client, {
        agentId: agent.agent_id,
        amountUnits,
        endpoint,
        protocol,
        rejected: asRejection(decision, refusal),
        at: context.now,
      });
      return problemResponse(
        httpError("BUDGET_EXCEEDED", refusal.reason, {
          errorClass: "BudgetExceededError",
          reason: refusal.reason,
          reasonCode: refusal.reasonCode,
          requested: refusal.requested,
          limit: refusal.limit,
          unit: refusal.unit,
          parentTxHash,
          invocation,
          rejectionId,
        }),
      );
    }
    if (decision.decision === "reject") {
      const rejectionId = await recordRefusedPayment(client, {
        agentId: agent.agent_id,
        amountUnits,
        endpoint,
        protocol,
        rejected: decision,
        at: context.now,
      });
      const rejected = httpError("POLICY_VIOLATION", decision.reason, {
        errorClass: decision.errorClass,
        reason: decision.reason,
        reasonCode: decision.reasonCode,
        domain: decision.domain,
        requested: decision.requested,
        limit: decision.limit,
        unit: decision.unit,
        rejectionId,
      });
      // Committed with the rejection: a retry answers the same without recording it twice.
      return problemResponse(rejected);
    }
    await emitPaymentEvents(client, { agentId: agent.agent_id, decision, at: context.now });
    const common = {
      agentId: agent.public_id,
      reservationId,
      protocol,
      amount: usdcJson(amountUnits),
      budgetState: decision.budget.state,
      ...(parentTxHash === null ? {} : { parentTxHash, invocation }),
      ...(invocationBudgetUnits === null ? {} : { invocationBudget: usdcJson(invocationBudgetUnits) }),
    };
    const link = { parentTxHash, invocationBudgetUnits };
    if (protocol === "x402") {
      const payload = await signPaymentPayload(signer, offer.x402!, { now: context.now });
      const p = payload.payload;
      await linkReservation(client, reservationId!, {
        paymentRef: x402PaymentRef(p.from, p.nonce),
        expiresAt: new Date(p.validUntilSeconds * 1000),
        ...link,
      });
      return json(200, { ...common, payment: payloadBody(payload), headers: encodePaymentHeaders(payload) });
    }
    const mpp = offer.mpp!;
    let method: string;
    try {
      method = chooseMethod(mpp.paymentMethods);
    } catch (error) {
      throw httpError("BAD_USER_INPUT", (error as Error).message, {
        field: "mpp.paymentMethods",
        errorClass: "PaymentProtocolError",
        endpoint,
      });
    }
    const submission = await signMppSubmission(signer, mpp, { method, resource: endpoint, now: context.now });
    const a = submission.authorization;
    await linkReservation(client, reservationId!, {
      paymentRef: mppPaymentRef(a.payer, a.nonce),
      expiresAt: new Date(a.validUntilSeconds * 1000),
      ...link,
    });
    return json(200, { ...common, method, paymentEndpoint: mpp.paymentEndpoint, submission: submissionBody(submission) });
  });
}

async function ownReservation(context: RouteContext): Promise<string> {
  const agent = await requireAgent(context, context.params.agentId!);
  const id = context.params.reservationId!;
  if (!/^[1-9]\d{0,17}$/.test(id)) throw httpError("NOT_FOUND", `no reservation ${id} of agent ${agent.public_id}`);
  const { rows } = await context.deps.pool.query<{ status: string }>(
    "SELECT status FROM spend_reservations WHERE id = $1 AND agent_id = $2",
    [id, agent.agent_id],
  );
  if (rows[0] === undefined) throw httpError("NOT_FOUND", `no reservation ${id} of agent ${agent.public_id}`);
  return id;
}

async function completeRoute(context: RouteContext): Promise<RouteResponse> {
  const id = await ownReservation(context);
  const body = objectBody(context.body, ["txHash"], []);
  const txHash = parseTxHash("txHash", stringField(body.txHash, "txHash", 128));
  return runDatabaseEffect(context.store, context.idempotency, async (client) => {
    const done = await settleReservation(client, id, txHash);
    const { rows } = await client.query<{ status: string; tx_hash: string | null }>(
      "SELECT status, tx_hash FROM spend_reservations WHERE id = $1",
      [id],
    );
    const row = rows[0]!;
    if (!done && row.status === "reserved") {
      // Our settler took the payment: it records the transaction it sent, not the caller's.
      throw httpError("CONFLICT", `reservation ${id} is being settled: the gateway records its transaction when the outcome is known`);
    }
    if (!done && !(row.status === "settled" && row.tx_hash === txHash)) throw httpError("CONFLICT", `reservation ${id} is ${row.status}`);
    const cluster = context.deps.explorerCluster;
    return json(200, {
      reservationId: id,
      status: "settled",
      txHash,
      ...(cluster === undefined ? {} : { solanaExplorer: explorerLink(txHash, cluster) }),
    });
  });
}

async function releaseRoute(context: RouteContext): Promise<RouteResponse> {
  const id = await ownReservation(context);
  objectBody(context.body, [], []);
  return runDatabaseEffect(context.store, context.idempotency, async (client) => {
    const done = await releaseReservation(client, id);
    const { rows } = await client.query<{ status: string }>("SELECT status FROM spend_reservations WHERE id = $1", [id]);
    const status = rows[0]!.status;
    if (!done && status === "reserved") {
      // A settler took the payment first: its money may land, so it keeps counting.
      throw httpError("CONFLICT", `reservation ${id} is being settled: its payment may land and keeps counting until the outcome is known`);
    }
    if (!done && status !== "released") throw httpError("CONFLICT", `reservation ${id} is ${status}`);
    return json(200, { reservationId: id, status: "released" });
  });
}

export const paymentRoutes: readonly Route[] = [
  { method: "POST", path: "/v1/agents/:agentId/payments/authorize", handler: authorizeRoute },
  { method: "POST", path: "/v1/agents/:agentId/payments/:reservationId/complete", handler: completeRoute },
  { method: "POST", path: "/v1/agents/:agentId/payments/:reservationId/release", handler: releaseRoute },
];
