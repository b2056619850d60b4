/**
 * The gateway as a standard x402 facilitator (Solana `exact`, x402 v1 and v2), for any resource
 * server that speaks the official facilitator API, the official `@x402/core` `HTTPFacilitatorClient`
 * included: point its `url` at `<gateway>/v1/x402/facilitator` and give it the account's API key
 * through `createAuthHeaders` (`Authorization: Bearer <key>` for verify, settle and supported).
 *
 * `GET /v1/x402/facilitator/supported` → `{ kinds, extensions, signers }` (the fee payer in each
 * kind's `extra.feePayer`); `POST .../verify` and `.../settle` take `{ x402Version, paymentPayload,
 * paymentRequirements }` and answer 200 `VerifyResponse` / `SettleResponse`, a refusal included
 * (`isValid: false` / `success: false` with the official reason codes). A body of the wrong
 * shape is 400. Settling is an external effect under the Idempotency-Key: a retry whose first
 * attempt was cut short or left pending resolves through the co-signed transfer it claimed.
 * Logic: api/gateway/x402/exact.ts; money: api/gateway/cosigned/.
 */
import type { CosignedTransfers } from "../../cosigned/cosigned.js";
import {
  type ExactFacilitatorRequest,
  ExactRequestError,
  parseExactRequest,
  resumeExact,
  settleExact,
  supportedKinds,
  verifyExact,
} from "../../x402/exact.js";
import { runDatabaseEffect, runExternalEffect, type RouteResponse } from "../../../shared/http/idempotency.js";
import { plainJson } from "../../../shared/http/input.js";
import { badRequest, httpError } from "../../../shared/http/problem.js";
import { json } from "../../../shared/http/router.js";
import type { Route, RouteContext } from "../deps.js";

function cosignedOf(context: RouteContext): CosignedTransfers {
  const cosigned = context.deps.cosigned;
  if (cosigned === undefined) throw httpError("SERVICE_UNAVAILABLE", "the standard x402 facilitator is not configured on this server");
  return cosigned;
}

function parse(context: RouteContext): ExactFacilitatorRequest {
  try {
    return parseExactRequest(plainJson(context.body));
  } catch (error) {
    if (error instanceof ExactRequestError) throw badRequest(error.field, error.message);
    throw error;
  }
}

async function supportedRoute(context: RouteContext): Promise<RouteResponse> {
  return json(200, supportedKinds(cosignedOf(context)));
}

async function verifyRoute(context: RouteContext): Promise<RouteResponse> {
  const cosigned = cosignedOf(context);
  const request = parse(context);
  const answer = await withRequestErrors(() => verifyExact(request, cosigned, context.caller.accountId));
  return runDatabaseEffect(context.store, context.idempotency, async () => json(200, answer));
}

async function settleRoute(context: RouteContext): Promise<RouteResponse> {
  const cosigned = cosignedOf(context);
  const request = parse(context);
  const accountId = context.caller.accountId;
  return runExternalEffect(context.store, context.idempotency, async ({ resumed }) => {
    const resumedAnswer = resumed ? await withRequestErrors(() => resumeExact(request, cosigned, accountId)) : null;
    const answer = resumedAnswer ?? (await withRequestErrors(() => settleExact(request, cosigned, accountId)));
    return { response: json(200, answer), final: answer.errorReason !== "settlement_pending" };
  });
}

/** A field of the right type but unusable value found while reading the terms is a 400 too. */
async function withRequestErrors<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if (error instanceof ExactRequestError) throw badRequest(error.field, error.message);
    throw error;
  }
}

export const exactFacilitatorRoutes: readonly Route[] = [
  { method: "GET", path: "/v1/x402/facilitator/supported", scope: "any", handler: supportedRoute },
  { method: "POST", path: "/v1/x402/facilitator/verify", scope: "admin", handler: verifyRoute },
  { method: "POST", path: "/v1/x402/facilitator/settle", scope: "admin", handler: settleRoute },
];
