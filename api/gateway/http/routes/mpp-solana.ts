/**
 * MPP `solana` charges settled by the gateway for resource servers (api/gateway/mpp/solana-charge.ts),
 * with the seller's API key:
 *
 * `GET /v1/mpp/solana/supported` → `{ network, currency, decimals, tokenProgram, feePayerKey }`: what
 * the seller's challenge `request` names (`methodDetails.feePayer: true` with this `feePayerKey`).
 *
 * `POST /v1/mpp/solana/charge` `{ transaction, amount, recipient, endpoint, externalId? }` (the
 * credential's `payload.transaction`, the challenge's amount in base units, its recipient, the paid
 * URL) → 200 `{ success: true, signature, payer, record: { signature, status } }` (`signature`: the
 * transfer, the receipt's `reference`), 200 `{ success: false, reason, detail }` (reasons: the x402
 * SVM codes of api/gateway/cosigned/check.ts, `duplicate_settlement` for a consumed transaction,
 * `payee_refused`), or 202 `{ success: false, pending: true, ... }`. An external effect under the
 * Idempotency-Key: a retry resolves through the transaction it claimed.
 */
import type { CosignedSettle, CosignedTransfers } from "../../cosigned/cosigned.js";
import { type SolanaCharge, settleSolanaCharge, solanaChargeOutcome, solanaChargeTerms } from "../../mpp/solana-charge.js";
import { isAddress } from "../../chain/signer.js";
import { type ExternalOutcome, runExternalEffect, type RouteResponse } from "../../../shared/http/idempotency.js";
import { objectBody, optionalString, stringField } from "../../../shared/http/input.js";
import { badRequest, httpError } from "../../../shared/http/problem.js";
import { json } from "../../../shared/http/router.js";
import type { Route, RouteContext } from "../deps.js";

function cosignedOf(context: RouteContext): CosignedTransfers {
  const cosigned = context.deps.cosigned;
  if (cosigned === undefined) throw httpError("SERVICE_UNAVAILABLE", "MPP solana charges are not configured on this server");
  return cosigned;
}

async function supportedRoute(context: RouteContext): Promise<RouteResponse> {
  const terms = solanaChargeTerms(cosignedOf(context));
  if (terms === null) throw httpError("SERVICE_UNAVAILABLE", "this ledger has no MPP network name");
  return json(200, terms);
}

function parseCharge(context: RouteContext): SolanaCharge {
  const body = objectBody(context.body, ["transaction", "amount", "recipient", "endpoint"], ["externalId"]);
  const amount = stringField(body.amount, "amount", 20);
  if (!/^[1-9]\d{0,19}$/.test(amount) || BigInt(amount) >= 1n << 64n)
    throw badRequest("amount", "must be base units (a u64 without leading zeros)");
  const recipient = stringField(body.recipient, "recipient", 44);
  if (!isAddress(recipient)) throw badRequest("recipient", "must be a base58 address");
  const endpoint = stringField(body.endpoint, "endpoint", 2_048);
  try {
    const url = new URL(endpoint);
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error("scheme");
  } catch {
    throw badRequest("endpoint", "must be the paid resource's absolute http(s) URL");
  }
  return {
    accountId: context.caller.accountId,
    transaction: stringField(body.transaction, "transaction", 4_096),
    amountUnits: BigInt(amount),
    recipient,
    endpoint,
    externalId: optionalString(body.externalId, "externalId", 256),
  };
}

async function chargeRoute(context: RouteContext): Promise<RouteResponse> {
  const cosigned = cosignedOf(context);
  const charge = parseCharge(context);
  return runExternalEffect(context.store, context.idempotency, async ({ resumed }) => {
    const earlier = resumed ? await solanaChargeOutcome(charge, cosigned) : null;
    return answer(earlier ?? (await settleSolanaCharge(charge, cosigned)));
  });
}

function answer(outcome: CosignedSettle): ExternalOutcome {
  if (outcome.ok) {
    return {
      response: json(200, {
        success: true,
        signature: outcome.signature,
        payer: outcome.payer,
        slot: outcome.slot,
        record: outcome.record,
      }),
      final: true,
    };
  }
  if (outcome.reason === "settlement_pending") {
    return { response: json(202, { success: false, pending: true, reason: outcome.reason, detail: outcome.detail }), final: false };
  }
  return { response: json(200, { success: false, reason: outcome.reason, detail: outcome.detail, payer: outcome.payer }), final: true };
}

export const mppSolanaRoutes: readonly Route[] = [
  { method: "GET", path: "/v1/mpp/solana/supported", scope: "any", handler: supportedRoute },
  { method: "POST", path: "/v1/mpp/solana/charge", scope: "admin", handler: chargeRoute },
];
