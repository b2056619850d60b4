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
 * `POST /v1/agents/{agentId}/payments/{reservationId}/complete` (`{ txHash }`) and `.../release`
 * close the reservation once the payment landed or did not happen.
 */
import { emitPaymentEvents, emitRejectionEvents } from "../../events/gateway.js";
import { EMPTY_POLICY, endpointHost, getPolicy, releaseReservation, reserveInTransaction, settleReservation } from "../../policy/index.js";
import type { Protocol, ProtocolPreference } from "../../policy/policy.js";
import { recordRejection } from "../../rejections.js";
import { parseTxHash } from "../../validation.js";
import { parseMppPaymentRequest, type MppPaymentRequest } from "../../mpp/request.js";
import { chooseMethod } from "../../mpp/rails.js";
import { signMppSubmission, submissionBody } from "../../mpp/submission.js";
import { encodePaymentHeaders } from "../../x402/headers.js";
import { payloadBody } from "../../x402/payload.js";
import { parsePaymentRequirement, type PaymentRequirement } from "../../x402/requirement.js";
import { signPaymentPayload } from "../../x402/sign.js";
import { keypairSigner } from "../../x402/signer.js";
import { runDatabaseEffect, type RouteResponse } from "../idempotency.js";
import { objectBody, optionalString, plainJson, requireAgent, stringField } from "../input.js";
import { usdcJson } from "../money.js";
import { badRequest, httpError, problemResponse } from "../problem.js";
import { json, type Route, type RouteContext } from "../router.js";

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

/** Spec 1: x402 when both are offered, unless the preference says mpp. */
function chooseProtocol(offer: Offer, preference: ProtocolPreference): Protocol {
  if (offer.x402 !== null && offer.mpp !== null) return preference === "mpp" ? "mpp" : "x402";
  return offer.x402 !== null ? "x402" : "mpp";
}

async function authorizeRoute(context: RouteContext): Promise<RouteResponse> {
  const agent = await requireAgent(context, context.params.agentId!);
  const body = objectBody(context.body, ["endpoint"], ["x402", "mpp", "protocolPreference"]);
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
  if (offer.x402 !== null && hostOf(offer.x402.resource, "x402.resource") !== host) {
    throw badRequest("x402.resource", `pays for ${offer.x402.resource}, not for the endpoint's host ${host}`);
  }
  const wallets = context.deps.wallets;
  if (wallets === undefined) throw httpError("SERVICE_UNAVAILABLE", "wallets are not configured on this server");
  const signer = keypairSigner(await wallets.keypair(agent.agent_id));

  return runDatabaseEffect(context.store, context.idempotency, async (client) => {
    const policy = (await getPolicy(client, agent.agent_id)) ?? EMPTY_POLICY;
    const protocol = chooseProtocol(offer, (preferenceText as ProtocolPreference | undefined) ?? policy.protocolPreference);
    const amountUnits = protocol === "x402" ? offer.x402!.amountUnits : offer.mpp!.amountUnits;
    const request = { endpoint, amountUnits, protocol, offeredProtocols: [protocol] } as const;
    const { decision, reservationId } = await reserveInTransaction(client, agent.agent_id, request, context.now);
    if (decision.decision === "reject") {
      const rejectionId = await recordRejection(client, {
        agentId: agent.agent_id,
        amountUnits,
        endpoint: printable(endpoint),
        domain: decision.domain,
        protocol,
        reasonCode: decision.reasonCode,
        reason: decision.reason,
        at: context.now,
      });
      await emitRejectionEvents(client, { agentId: agent.agent_id, decision, endpoint, at: context.now });
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
    const common = { agentId: agent.agent_id, reservationId, protocol, amount: usdcJson(amountUnits), budgetState: decision.budget.state };
    if (protocol === "x402") {
      const payload = await signPaymentPayload(signer, offer.x402!, { now: context.now });
      return json(200, { ...common, payment: payloadBody(payload), headers: encodePaymentHeaders(payload) });
    }
    const mpp = offer.mpp!;
    let method: string;
    try {
      method = chooseMethod(mpp.paymentMethods);
    } catch (error) {
      throw httpError("BAD_USER_INPUT", (error as Error).message, { field: "mpp.paymentMethods", errorClass: "PaymentProtocolError", endpoint });
    }
    const submission = await signMppSubmission(signer, mpp, { method, resource: endpoint, now: context.now });
    return json(200, { ...common, method, paymentEndpoint: mpp.paymentEndpoint, submission: submissionBody(submission) });
  });
}

/** Host and path without scheme, as spec 2.2 prints endpoints. */
function printable(endpoint: string): string {
  try {
    const url = new URL(endpoint);
    return `${url.host}${url.pathname}`;
  } catch {
    return endpoint;
  }
}

async function ownReservation(context: RouteContext): Promise<string> {
  const agent = await requireAgent(context, context.params.agentId!);
  const id = context.params.reservationId!;
  if (!/^[1-9]\d{0,17}$/.test(id)) throw httpError("NOT_FOUND", `no reservation ${id} of agent ${agent.agent_id}`);
  const { rows } = await context.deps.pool.query<{ status: string }>("SELECT status FROM spend_reservations WHERE id = $1 AND agent_id = $2", [
    id,
    agent.agent_id,
  ]);
  if (rows[0] === undefined) throw httpError("NOT_FOUND", `no reservation ${id} of agent ${agent.agent_id}`);
  return id;
}

async function completeRoute(context: RouteContext): Promise<RouteResponse> {
  const id = await ownReservation(context);
  const body = objectBody(context.body, ["txHash"], []);
  const txHash = parseTxHash("txHash", stringField(body.txHash, "txHash", 128));
  return runDatabaseEffect(context.store, context.idempotency, async (client) => {
    const done = await settleReservation(client, id, txHash);
    const { rows } = await client.query<{ status: string; tx_hash: string | null }>("SELECT status, tx_hash FROM spend_reservations WHERE id = $1", [id]);
    if (!done && !(rows[0]!.status === "settled" && rows[0]!.tx_hash === txHash)) {
      throw httpError("CONFLICT", `reservation ${id} is ${rows[0]!.status}`);
    }
    return json(200, { reservationId: id, status: "settled", txHash });
  });
}

async function releaseRoute(context: RouteContext): Promise<RouteResponse> {
  const id = await ownReservation(context);
  objectBody(context.body, [], []);
  return runDatabaseEffect(context.store, context.idempotency, async (client) => {
    const done = await releaseReservation(client, id);
    const { rows } = await client.query<{ status: string }>("SELECT status FROM spend_reservations WHERE id = $1", [id]);
    if (!done && rows[0]!.status !== "released") throw httpError("CONFLICT", `reservation ${id} is ${rows[0]!.status}`);
    return json(200, { reservationId: id, status: "released" });
  });
}

export const paymentRoutes: readonly Route[] = [
  { method: "POST", path: "/v1/agents/:agentId/payments/authorize", handler: authorizeRoute },
  { method: "POST", path: "/v1/agents/:agentId/payments/:reservationId/complete", handler: completeRoute },
  { method: "POST", path: "/v1/agents/:agentId/payments/:reservationId/release", handler: releaseRoute },
];
