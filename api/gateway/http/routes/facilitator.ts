/**
 * The x402 facilitator over HTTP (spec 1, 4.3 step 5, 4.5): `POST /v1/x402/verify` and
 * `POST /v1/x402/settle`, each with `{ payment: <spec 2.8 PaymentPayload>, requirement: <spec 2.7> }`.
 * Called by a resource server (our `x402Middleware` or anyone's) with its own API key; the agent
 * needs no account check (spec 5.6), the signature authorizes the payment.
 *
 * A refused payment is an answer, not an error: 200 `{ valid: false, reason, detail }` /
 * `{ success: false, reason, detail }` (reasons: api/gateway/x402/errors.ts). Settling is an external
 * effect under the Idempotency-Key: the facilitator's own nonce claim makes a payload settle at
 * most once, and a retry whose first attempt was left pending resolves through that claim
 * (api/gateway/x402/nonces.ts, keyed by payer and nonce) instead of settling again.
 *
 * Any account may verify or settle any payer's payload, but the payer's `agentId` is answered only
 * to the account that owns the payer: to anyone else it would name another account's agent (and
 * confirm which wallets belong to which agent). `payer` (the wallet address) is in the payload
 * already, so it is always answered.
 */
import { parsePaymentPayload, type PaymentPayload } from "../../x402/payload.js";
import { parsePaymentRequirement, type PaymentRequirement } from "../../x402/requirement.js";
import type { ClaimedSettlement, SettleOutcome, X402Facilitator } from "../../x402/facilitator.js";
import { type ExternalOutcome, runDatabaseEffect, runExternalEffect, type RouteResponse } from "../../../shared/http/idempotency.js";
import { objectBody, plainJson } from "../../../shared/http/input.js";
import { ownAgentId } from "../payer-agent.js";
import { httpError } from "../../../shared/http/problem.js";
import { json } from "../../../shared/http/router.js";
import type { Route, RouteContext } from "../deps.js";

function facilitator(context: RouteContext): X402Facilitator {
  const service = context.deps.facilitator;
  if (service === undefined) throw httpError("SERVICE_UNAVAILABLE", "the x402 facilitator is not configured on this server");
  return service;
}

function parse(context: RouteContext): { payment: PaymentPayload; requirement: PaymentRequirement } {
  const body = objectBody(context.body, ["payment", "requirement"], []);
  return { payment: parsePaymentPayload(plainJson(body.payment)), requirement: parsePaymentRequirement(plainJson(body.requirement)) };
}

async function verifyRoute(context: RouteContext): Promise<RouteResponse> {
  const service = facilitator(context);
  const { payment, requirement } = parse(context);
  // No effect, but a keyed verify still answers as it first did (every POST honours the key).
  // Verified before the key's transaction: verify reads through the pool, and a transaction
  // waiting on another connection could exhaust a small pool.
  const result = await service.verify(payment, requirement);
  const response = result.ok
    ? json(200, { valid: true, payer: result.payer, ...(await ownAgentId(context, result.payer, result.agentId)) })
    : json(200, { valid: false, reason: result.reason, detail: result.detail });
  return runDatabaseEffect(context.store, context.idempotency, async () => response);
}

async function settleRoute(context: RouteContext): Promise<RouteResponse> {
  const service = facilitator(context);
  const { payment, requirement } = parse(context);
  return runExternalEffect(context.store, context.idempotency, async ({ resumed }) => {
    // A retry whose first attempt was cut short resolves through the nonce claim it left.
    const claimed = resumed ? await service.claimedSettlement(payment) : null;
    return settleAnswer(context, claimed ?? (await service.settle(payment, requirement)));
  });
}

async function settleAnswer(context: RouteContext, outcome: SettleOutcome | ClaimedSettlement): Promise<ExternalOutcome> {
  if (outcome.ok) {
    return {
      response: json(200, {
        success: true,
        txHash: outcome.txHash,
        network: outcome.network,
        payer: outcome.payer,
        ...(await ownAgentId(context, outcome.payer, outcome.agentId)),
      }),
      final: true,
    };
  }
  if (outcome.reason === "settlement_pending") {
    return { response: json(202, { success: false, pending: true, reason: outcome.reason, detail: outcome.detail }), final: false };
  }
  return { response: json(200, { success: false, reason: outcome.reason, detail: outcome.detail }), final: true };
}

/**
 * What this facilitator settles: `{ scheme, network, tokens: { usdc: <mint> } }`, so a resource
 * server configured with `token: "usdc"` (spec 4.5) can put the token's address in its 402 body.
 */
async function supportedRoute(context: RouteContext): Promise<RouteResponse> {
  const token = context.deps.settlementToken;
  const network = context.deps.network;
  if (context.deps.facilitator === undefined || token === undefined || network === undefined) {
    throw httpError("SERVICE_UNAVAILABLE", "the x402 facilitator is not configured on this server");
  }
  return json(200, { scheme: "exact", network, tokens: { usdc: token } });
}

export const facilitatorRoutes: readonly Route[] = [
  { method: "GET", path: "/v1/x402/supported", scope: "any", handler: supportedRoute },
  { method: "POST", path: "/v1/x402/verify", scope: "admin", handler: verifyRoute },
  { method: "POST", path: "/v1/x402/settle", scope: "admin", handler: settleRoute },
];
