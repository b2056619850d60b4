/**
 * The agent's payment routes (spec 4.7 `pay` steps 2–5, done by the gateway for the client); this
 * file parses the requests and renders the answers, the use cases are api/gateway/pay/authorize.ts
 * and api/gateway/payments. Wire shapes: docs/rest.md.
 *
 * - `POST /v1/agents/{agentId}/payments/authorize`: the target's 402 offer and the `endpoint`;
 *   answered with the signed payment (x402 `X-PAYMENT` headers, an MPP submission, or a signed
 *   transfer's headers for a real x402 / MPP payee), 403 on a policy refusal, 422
 *   `BUDGET_EXCEEDED` over a sub-agent's invocation budget. Reservation or refusal, the events
 *   and the Idempotency-Key commit in one transaction: a retry gets the same signed payment. A
 *   payment the policy holds for a person answers 202 with its approval (docs/rest.md "Approvals"),
 *   not stored under the key: the same request under the same key resumes it.
 * - `.../domain-check`: the gateway's decision on a host a client's own domain check refused.
 * - `.../{reservationId}/complete` and `.../release`: close the reservation of a payment settled
 *   elsewhere or given up; 409 once a settler took it, since its money may still land.
 */
import { endpointHost, type ProtocolPreference } from "../../../shared/policy/index.js";
import { explorerLink } from "../../../../indexer/store/projections.js";
import { parseTxHash } from "../../../shared/validation.js";
import { checkDomainInTransaction, completeReservation, releaseAgentReservation, requireAgentReservation } from "../../payments/index.js";
import { type AuthorizeResult, authorizeInTransaction, type Offer, prepareAuthorization } from "../../pay/authorize.js";
import { parseMppPaymentRequest } from "../../mpp/request.js";
import { submissionBody } from "../../mpp/submission.js";
import { encodePaymentHeaders } from "../../x402/headers.js";
import { payloadBody } from "../../x402/payload.js";
import { parsePaymentRequirement } from "../../x402/requirement.js";
import { runDatabaseEffect, type RouteResponse } from "../../../shared/http/idempotency.js";
import { objectBody, optionalString, plainJson, requireActiveAgent, requireAgent, stringField } from "../../../shared/http/input.js";
import { parseMoneyObject } from "../../../shared/http/money.js";
import { usdcJson } from "../../../shared/money.js";
import { badRequest, httpError, problemResponse } from "../../../shared/http/problem.js";
import { approvalJson } from "../approval-view.js";
import { budgetExceededAnswer, policyViolationAnswer } from "../refusals.js";
import { json } from "../../../shared/http/router.js";
import { checkPayee } from "../../chain/payee.js";
import type { SignedTransfers, TransferOffer } from "../../transfers/index.js";
import type { Route, RouteContext } from "../deps.js";

const PREFERENCES: readonly ProtocolPreference[] = ["auto", "x402", "mpp"];

function hostOf(url: string, field: string): string {
  try {
    return endpointHost(url);
  } catch {
    throw badRequest(field, "must be an http(s) URL");
  }
}

async function authorizeRoute(context: RouteContext): Promise<RouteResponse> {
  const agent = await requireActiveAgent(context, context.params.agentId!);
  const body = objectBody(
    context.body,
    ["endpoint"],
    ["x402", "mpp", "x402v2", "x402v1", "mppChallenges", "protocolPreference", "parentTxHash", "invocationBudget"],
  );
  const endpoint = stringField(body.endpoint, "endpoint");
  const host = hostOf(endpoint, "endpoint");
  const preferenceText = optionalString(body.protocolPreference, "protocolPreference", 8);
  if (preferenceText !== undefined && !(PREFERENCES as readonly string[]).includes(preferenceText)) {
    throw badRequest("protocolPreference", "must be auto, x402 or mpp");
  }
  const real = body.x402v2 !== undefined || body.x402v1 !== undefined || body.mppChallenges !== undefined;
  if (body.x402 === undefined && body.mpp === undefined && !real) {
    throw httpError(
      "BAD_USER_INPUT",
      "give the target's 402 offer: x402 (spec 2.7), mpp (spec 2.9), x402v2 (the decoded PAYMENT-REQUIRED header), x402v1 (an x402 v1 body) or mppChallenges",
      { errorClass: "PaymentProtocolError", endpoint },
    );
  }
  const offer: Offer = {
    x402: body.x402 === undefined ? null : parsePaymentRequirement(plainJson(body.x402)),
    mpp: body.mpp === undefined ? null : parseMppPaymentRequest(plainJson(body.mpp)),
    transfers: real ? transferOffers(context, body, endpoint) : [],
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
  const prepared = await prepareAuthorization(
    {
      wallets: context.deps.wallets,
      invocations: context.deps.invocations,
      transfers: context.deps.transfers,
      approvals: { box: context.deps.secretBox, publicUrl: context.deps.publicUrl },
    },
    {
      agent,
      endpoint,
      offer,
      preference: preferenceText as ProtocolPreference | undefined,
      parentTxHash,
      invocationBudgetUnits,
      idempotencyKey: context.idempotency?.key ?? null,
    },
  );
  // A refusal is an answer, committed with its rejection and the key: a retry answers the same
  // without recording it twice. The agent's authorizations arriving together share a transaction
  // (group commit): its lock changes hands, and the WAL is flushed, once for all of them.
  return runDatabaseEffect(
    context.store,
    context.idempotency,
    async (client) => authorizeAnswer(agent.public_id, await authorizeInTransaction(client, prepared, context.now)),
    agent.agent_id,
  );
}

/**
 * `POST /v1/agents/{agentId}/payments/domain-check` with `{ endpoint }`: a client refused the host
 * by its own domain check and asks the gateway, which decides on the policy as it stands. Refused:
 * recorded (status `rejected`, `policy.violation`) and answered 403 as the authorization answers a
 * domain refusal; allowed: 200 `{ allowed: true }`, nothing recorded.
 */
async function domainCheckRoute(context: RouteContext): Promise<RouteResponse> {
  const agent = await requireActiveAgent(context, context.params.agentId!);
  const body = objectBody(context.body, ["endpoint"], []);
  const endpoint = stringField(body.endpoint, "endpoint");
  hostOf(endpoint, "endpoint");
  return runDatabaseEffect(context.store, context.idempotency, async (client) => {
    const result = await checkDomainInTransaction(client, agent, endpoint, context.now);
    if (result.outcome === "allowed") return json(200, { agentId: agent.public_id, endpoint, allowed: true });
    return policyViolationAnswer(result.decision, result.rejectionId, result.policyVersion);
  });
}

/**
 * The payable real-protocol offers. Without the transfers service, or when none is payable, the
 * request is refused only if it offers nothing in the spec's formats either.
 */
function transferOffers(context: RouteContext, body: Record<string, unknown>, endpoint: string): TransferOffer[] {
  const service = context.deps.transfers;
  const spec = body.x402 !== undefined || body.mpp !== undefined;
  if (service === undefined) {
    if (spec) return [];
    throw httpError("SERVICE_UNAVAILABLE", "payments to x402 / MPP servers are not configured on this server");
  }
  const read = service.readOffers(
    {
      ...(body.x402v2 === undefined ? {} : { x402v2: plainJson(body.x402v2 as never) }),
      ...(body.x402v1 === undefined ? {} : { x402v1: plainJson(body.x402v1 as never) }),
      ...(body.mppChallenges === undefined ? {} : { mppChallenges: plainJson(body.mppChallenges as never) }),
    },
    context.now,
  );
  if (read.offers.length === 0 && !spec) {
    throw httpError("BAD_USER_INPUT", `${endpoint} offers nothing this gateway can pay: ${read.skipped.join("; ")}`, {
      errorClass: "PaymentProtocolError",
      endpoint,
      skipped: read.skipped,
    });
  }
  return read.offers;
}

function authorizeAnswer(agentId: string, result: AuthorizeResult): RouteResponse {
  if (result.outcome === "budget_exceeded") {
    return budgetExceededAnswer(result.refusal, {
      parentTxHash: result.parentTxHash,
      invocation: result.invocation,
      rejectionId: result.rejectionId,
    });
  }
  if (result.outcome === "policy_violation") return policyViolationAnswer(result.decision, result.rejectionId, result.policyVersion);
  // Held: 202, not the key's answer (a repeat resumes the approval); decided against: its refusal.
  if (result.outcome === "held") return { ...json(202, { approval: approvalJson(result.approval) }), provisional: true };
  if (result.outcome === "closed") return problemResponse(result.error);
  const common = {
    agentId,
    ...(result.policyVersion === undefined ? {} : { policyVersion: result.policyVersion }),
    reservationId: result.reservationId,
    protocol: result.protocol,
    amount: usdcJson(result.amountUnits),
    budgetState: result.budgetState,
    ...(result.parentTxHash === null ? {} : { parentTxHash: result.parentTxHash, invocation: result.invocation }),
    ...(result.invocationBudgetUnits === null ? {} : { invocationBudget: usdcJson(result.invocationBudgetUnits) }),
  };
  const signed = result.signed;
  if (signed.protocol === "transfer") {
    return json(200, {
      ...common,
      protocol: signed.paymentProtocol,
      format: signed.format,
      headers: signed.headers,
      transfer: { payTo: signed.payTo, feePayer: signed.feePayer, lastValidBlockHeight: signed.lastValidBlockHeight },
    });
  }
  if (signed.protocol === "x402") {
    return json(200, { ...common, payment: payloadBody(signed.payload), headers: encodePaymentHeaders(signed.payload) });
  }
  return json(200, {
    ...common,
    method: signed.method,
    paymentEndpoint: signed.paymentEndpoint,
    submission: submissionBody(signed.submission),
  });
}

async function ownReservation(context: RouteContext): Promise<string> {
  const agent = await requireAgent(context, context.params.agentId!);
  return requireAgentReservation(context.deps.pool, agent, context.params.reservationId!);
}

async function completeRoute(context: RouteContext): Promise<RouteResponse> {
  const id = await ownReservation(context);
  const body = objectBody(context.body, ["txHash"], []);
  const txHash = parseTxHash("txHash", stringField(body.txHash, "txHash", 128));
  const transfer = context.deps.transfers === undefined ? null : await context.deps.transfers.transferOfReservation(id);
  if (transfer !== null) {
    // Idempotent by itself (recorded once, whatever the retries): computed before the key's
    // transaction, which only stores the answer.
    const response = await completeTransferAnswer(context, id, transfer, txHash);
    return runDatabaseEffect(context.store, context.idempotency, async () => response);
  }
  return runDatabaseEffect(context.store, context.idempotency, async (client) => {
    await completeReservation(client, id, txHash);
    const cluster = context.deps.explorerCluster;
    return json(200, {
      reservationId: id,
      status: "settled",
      txHash,
      ...(cluster === undefined ? {} : { solanaExplorer: explorerLink(txHash, cluster) }),
    });
  });
}

/** `complete` of a signed transfer: the payee reported its transaction as `txHash`. */
async function completeTransferAnswer(
  context: RouteContext,
  id: string,
  transfer: NonNullable<Awaited<ReturnType<SignedTransfers["transferOfReservation"]>>>,
  txHash: string,
): Promise<RouteResponse> {
  const service = context.deps.transfers!;
  let outcome: Awaited<ReturnType<SignedTransfers["complete"]>>;
  try {
    outcome = await service.complete(transfer, txHash);
  } catch (error) {
    // The transfer landed; recording it failed on the ledger. The reservation keeps counting and
    // the sweeper records it later: nothing is paid twice and nothing goes unrecorded.
    throw httpError("PAYMENT_FAILED", `${txHash} landed, but recording it failed (it is retried): ${(error as Error).message}`, {
      reservationId: id,
      settlementTxHash: txHash,
    });
  }
  if (outcome === null) {
    throw httpError("CONFLICT", `transaction ${txHash} is not on the ledger with reservation ${id}'s signed transfer`, {
      field: "txHash",
      reservationId: id,
    });
  }
  if (outcome.outcome === "failed") {
    throw httpError("CONFLICT", `transaction ${txHash} carries reservation ${id}'s transfer but failed on the ledger: nothing moved`, {
      reservationId: id,
      settlementTxHash: txHash,
    });
  }
  if (outcome.outcome === "pending") {
    return json(202, { reservationId: id, status: "recording", settlementTxHash: outcome.settlementTx });
  }
  const cluster = context.deps.explorerCluster;
  return json(200, {
    reservationId: id,
    status: "settled",
    txHash: outcome.recordTx,
    settlementTxHash: outcome.settlementTx,
    ...(cluster === undefined ? {} : { solanaExplorer: explorerLink(outcome.recordTx, cluster) }),
  });
}

async function releaseRoute(context: RouteContext): Promise<RouteResponse> {
  const id = await ownReservation(context);
  objectBody(context.body, [], []);
  return runDatabaseEffect(context.store, context.idempotency, async (client) => {
    await releaseAgentReservation(client, id);
    return json(200, { reservationId: id, status: "released" });
  });
}

export const paymentRoutes: readonly Route[] = [
  { method: "POST", path: "/v1/agents/:agentId/payments/authorize", scope: "agent", handler: authorizeRoute },
  { method: "POST", path: "/v1/agents/:agentId/payments/domain-check", scope: "agent", handler: domainCheckRoute },
  { method: "POST", path: "/v1/agents/:agentId/payments/:reservationId/complete", scope: "agent", handler: completeRoute },
  { method: "POST", path: "/v1/agents/:agentId/payments/:reservationId/release", scope: "agent", handler: releaseRoute },
];
