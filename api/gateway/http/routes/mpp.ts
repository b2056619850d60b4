/**
 * The MPP service side for resource servers (spec 4.4), called by a seller's server (our
 * `mppMiddleware` or anyone's) with its own API key: the gateway verifies, settles on the chosen
 * rail and keeps the sessions. Wire shapes: docs/rest.md, docs/protocols.md, docs/sdk-server.md.
 *
 * - `POST /v1/mpp/payments`: a submission settled (`agentId` only to the payer's own account,
 *   ../payer-agent.ts), refused (200 `success: false`) or pending (202); a retry under the
 *   Idempotency-Key resolves through the submission's nonce claim.
 * - `POST /v1/mpp/sessions/redeem`: a charge on a session; a policy refusal adds `reasonCode` and
 *   `errorClass` (`budget_exceeded` for a sub-agent's invocation budget).
 *
 * Answers carrying a session token are stored sealed under an Idempotency-Key: the token is a
 * bearer secret and is never kept in clear.
 */
import { MPP_CURRENCY } from "../../mpp/amount.js";
import { formatUsdcShort } from "../../../shared/money.js";
import { MppPaymentError, MppPolicyError, MppSessionError } from "../../mpp/errors.js";
import type { MppGateway } from "../../mpp/gateway.js";
import { type MppPaymentOutcome, payMppSubmission } from "../../mpp/payment.js";
import { parseMoney, parseMppPaymentRequest } from "../../mpp/request.js";
import type { MppService } from "../../mpp/service.js";
import { isSessionTokenShape } from "../../mpp/session-token.js";
import { type MppSubmission, parseMppSubmission } from "../../mpp/submission.js";
import { checkPayee } from "../../chain/payee.js";
import { isAddress } from "../../chain/signer.js";
import { type ExternalOutcome, runExternalEffect, type RouteResponse } from "../../../shared/http/idempotency.js";
import { type JsonObject, objectBody, plainJson, stringField } from "../../../shared/http/input.js";
import { ownAgentId } from "../payer-agent.js";
import { badRequest, httpError } from "../../../shared/http/problem.js";
import { json } from "../../../shared/http/router.js";
import type { Route, RouteContext } from "../deps.js";

function gateway(context: RouteContext): MppGateway {
  const mpp = context.deps.mpp;
  if (mpp === undefined) throw httpError("SERVICE_UNAVAILABLE", "the MPP service is not configured on this server");
  return mpp;
}

function originField(value: JsonObject[string] | undefined, field: string): string {
  const text = stringField(value, field, 512);
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw badRequest(field, "must be an origin such as https://api.example.com");
  }
  if ((url.protocol !== "http:" && url.protocol !== "https:") || url.origin !== text) {
    throw badRequest(field, "must be an http(s) origin (scheme://host[:port], no path)");
  }
  return text;
}

function payToField(value: JsonObject[string] | undefined, settlementToken: string | undefined): string {
  const text = stringField(value, "payTo", 64);
  if (!isAddress(text)) throw badRequest("payTo", "must be a base58 ledger address");
  // A payee the ledger cannot credit safely is refused before anything is signed (422 PAYEE_REFUSED).
  checkPayee(text, [settlementToken]);
  return text;
}

/** The service of this seller: its origin and receiving wallet, checked against its request. */
function serviceOf(context: RouteContext, body: JsonObject): { service: MppService; serviceOrigin: string } {
  const serviceOrigin = originField(body.serviceOrigin, "serviceOrigin");
  const payTo = payToField(body.payTo, context.deps.settlementToken);
  return { service: gateway(context).serviceFor(serviceOrigin, payTo), serviceOrigin };
}

async function paymentsRoute(context: RouteContext): Promise<RouteResponse> {
  const body = objectBody(context.body, ["request", "submission", "payTo", "serviceOrigin"], []);
  const { service, serviceOrigin } = serviceOf(context, body);
  const request = parseMppPaymentRequest(plainJson(body.request));
  const submission = parseMppSubmission(plainJson(body.submission));
  if (new URL(request.paymentEndpoint).origin !== serviceOrigin) {
    throw badRequest("request.paymentEndpoint", `must be on the service's origin ${serviceOrigin}`);
  }
  const pool = gateway(context).pool;
  return runExternalEffect(context.store, context.idempotency, async ({ resumed }) =>
    paymentAnswer(context, submission, await payMppSubmission(pool, service, { submission, request, resumed })),
  );
}

async function paymentAnswer(context: RouteContext, submission: MppSubmission, outcome: MppPaymentOutcome): Promise<ExternalOutcome> {
  if (outcome.kind === "pending") {
    const answer = json(202, { success: false, pending: true, reason: outcome.reason, detail: outcome.detail });
    return { response: answer, final: false };
  }
  if (outcome.kind === "refused") {
    return { response: json(200, { success: false, reason: outcome.reason, detail: outcome.detail }), final: true };
  }
  const paid = outcome.payment;
  const payer = submission.authorization.payer;
  const answer = json(
    200,
    {
      success: true,
      txHash: paid.txHash,
      sessionId: paid.session.sessionId,
      sessionToken: paid.session.token,
      expiresAt: paid.session.expiresAt.toISOString(),
      reusable: paid.session.reusable,
      method: paid.method,
      rail: paid.rail,
      payer,
      // Only to the payer's own account, as the public id (api/gateway/http/payer-agent.ts).
      ...(await ownAgentId(context, payer, paid.agentId)),
      network: context.deps.network ?? null,
    },
    { sealed: true },
  );
  return { response: answer, final: true };
}

async function redeemRoute(context: RouteContext): Promise<RouteResponse> {
  const body = objectBody(context.body, ["token", "endpoint", "amount", "payTo", "serviceOrigin"], []);
  const { service, serviceOrigin } = serviceOf(context, body);
  const token = stringField(body.token, "token", 128);
  if (!isSessionTokenShape(token)) throw badRequest("token", "is not an MPP session token");
  const endpoint = stringField(body.endpoint, "endpoint");
  let endpointUrl: URL;
  try {
    endpointUrl = new URL(endpoint);
  } catch {
    throw badRequest("endpoint", "must be an absolute http(s) URL");
  }
  if (endpointUrl.origin !== serviceOrigin) throw badRequest("endpoint", `must be on the service's origin ${serviceOrigin}`);
  const amount = parseMoney(plainJson(body.amount), "amount", (field, detail) => {
    throw badRequest(field, detail);
  });
  // A charge is an external effect; each request is one use of the session (a keyed retry replays
  // its first answer sealed, and a use left pending resolves as a new use: see docs/rest.md).
  return runExternalEffect(context.store, context.idempotency, async () => {
    try {
      const use = await service.useSession(token, { endpoint: endpointUrl.toString(), amountUnits: amount.units });
      const answer = json(
        200,
        {
          success: true,
          txHash: use.txHash,
          sessionId: use.sessionId,
          charged: use.charged,
          token: use.token,
          expiresAt: use.expiresAt.toISOString(),
          refreshed: use.refreshed,
          method: use.method,
          rail: use.rail,
          payer: use.payer,
          amount: { value: formatUsdcShort(use.amountUnits), currency: MPP_CURRENCY },
          network: context.deps.network ?? null,
        },
        { sealed: true },
      );
      return { response: answer, final: true };
    } catch (error) {
      if (error instanceof MppPolicyError) {
        const answer = json(200, {
          success: false,
          reason: error.reason,
          detail: error.detail,
          reasonCode: error.reasonCode,
          errorClass: error.errorClass,
        });
        return { response: answer, final: true };
      }
      if (error instanceof MppPaymentError && error.reason === "settlement_pending") {
        return { response: json(202, { success: false, pending: true, reason: error.reason, detail: error.message }), final: true };
      }
      if (error instanceof MppSessionError || error instanceof MppPaymentError) {
        return { response: json(200, { success: false, reason: error.reason, detail: error.message }), final: true };
      }
      throw error;
    }
  });
}

export const mppRoutes: readonly Route[] = [
  { method: "POST", path: "/v1/mpp/payments", scope: "admin", handler: paymentsRoute },
  { method: "POST", path: "/v1/mpp/sessions/redeem", scope: "admin", handler: redeemRoute },
];
