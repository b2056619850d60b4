/**
 * The gateway as a standard x402 facilitator for the `exact` scheme on Solana (protocols.md §1.5,
 * §1.6): the request bodies the official `HTTPFacilitatorClient` sends (`{ x402Version,
 * paymentPayload, paymentRequirements }`, v1 and v2) and the answers it parses (`VerifyResponse`,
 * `SettleResponse`, `SupportedResponse`). The money side is cosigned/cosigned.ts: the payer's
 * partially signed transfer is checked, co-signed by the gateway's fee payer, simulated, sent,
 * and the payment recorded on payment_ledger referencing the transfer.
 *
 * The spec-format facilitator (facilitator.ts, `/v1/x402/verify|settle`) is unchanged beside it.
 * Parsing here is lenient about fields it does not use (other people's formats grow) and strict
 * about the ones it does. Imported by the facilitator routes.
 */
import type { CosignedSettle, CosignedTransfers, CosignedVerify } from "../cosigned/cosigned.js";
import { type StandardNetworks, standardNetworks } from "../chain/networks.js";

/** The body of `/verify` and `/settle`, checked for shape: the version and the two objects. */
export interface ExactFacilitatorRequest {
  readonly x402Version: 1 | 2;
  readonly payload: Record<string, unknown>;
  readonly requirements: Record<string, unknown>;
}

export interface VerifyResponse {
  readonly isValid: boolean;
  readonly invalidReason?: string;
  readonly invalidMessage?: string;
  readonly payer: string;
}

export interface SettleResponse {
  readonly success: boolean;
  readonly errorReason?: string;
  readonly errorMessage?: string;
  readonly payer: string;
  readonly transaction: string;
  readonly network: string;
  readonly amount?: string;
  /** Ours: the payment_ledger record of the payment (`recordTransaction`, `record` status). */
  readonly extra?: Record<string, unknown>;
}

export class ExactRequestError extends Error {
  override readonly name = "ExactRequestError";
  constructor(
    readonly field: string,
    detail: string,
  ) {
    super(`${field}: ${detail}`);
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function objectAt(parent: Record<string, unknown>, field: string, where: string): Record<string, unknown> {
  const value = parent[field];
  if (!isObject(value)) throw new ExactRequestError(`${where}.${field}`, "must be an object");
  return value;
}

function stringAt(parent: Record<string, unknown>, field: string, where: string): string {
  const value = parent[field];
  if (typeof value !== "string" || value.length === 0 || value.length > 4_096)
    throw new ExactRequestError(`${where}.${field}`, "must be a string");
  return value;
}

/** Parses the body of `/verify` and `/settle` (its terms are checked by `exactTerms`). */
export function parseExactRequest(body: unknown): ExactFacilitatorRequest {
  if (!isObject(body)) throw new ExactRequestError("body", "must be a JSON object");
  const version = body.x402Version;
  if (version !== 1 && version !== 2) throw new ExactRequestError("x402Version", "must be 1 or 2");
  const payload = objectAt(body, "paymentPayload", "body");
  const requirements = objectAt(body, "paymentRequirements", "body");
  if (payload.x402Version !== version) throw new ExactRequestError("paymentPayload.x402Version", `must be ${version}`);
  return { x402Version: version, payload, requirements };
}

type Refusal = { readonly ok: false; readonly reason: string; readonly detail: string };

interface Terms {
  readonly ok: true;
  readonly network: string;
  readonly payTo: string;
  readonly amountUnits: bigint;
  readonly memo: string | undefined;
  readonly endpoint: string;
  readonly transaction: string;
}

/**
 * The requirement's terms, refused unless they are this facilitator's: scheme `exact`, its
 * network (in the request's version), its fee payer, the settlement mint, an integer amount.
 */
export function exactTerms(request: ExactFacilitatorRequest, cosigned: CosignedTransfers): Terms | Refusal {
  const names = standardNetworks(cosigned.network);
  const { payload, requirements } = request;
  const where = "paymentRequirements";
  const scheme = stringAt(requirements, "scheme", where);
  const network = stringAt(requirements, "network", where);
  const payTo = stringAt(requirements, "payTo", where);
  const asset = stringAt(requirements, "asset", where);
  const amount = stringAt(requirements, request.x402Version === 1 ? "maxAmountRequired" : "amount", where);
  const extra = isObject(requirements.extra) ? requirements.extra : {};
  const accepted = request.x402Version === 2 ? objectAt(payload, "accepted", "paymentPayload") : payload;
  const inner = objectAt(payload, "payload", "paymentPayload");
  const transaction = stringAt(inner, "transaction", "paymentPayload.payload");
  const refuse = (reason: string, detail: string): Refusal => ({ ok: false, reason, detail });

  if (scheme !== "exact" || accepted.scheme !== "exact") return refuse("invalid_exact_svm_unsupported_scheme", "only the exact scheme");
  if (accepted.network !== network) return refuse("invalid_exact_svm_network_mismatch", "the payload pays another network than required");
  if (names === null || network !== ownNetwork(names, request.x402Version)) {
    return refuse(
      "invalid_exact_svm_network_mismatch",
      `this facilitator settles on ${names === null ? "no x402 network" : ownNetwork(names, request.x402Version)}`,
    );
  }
  const feePayer = extra.feePayer;
  if (typeof feePayer !== "string") return refuse("invalid_exact_svm_payload_missing_fee_payer", "extra.feePayer is required");
  if (feePayer !== cosigned.feePayer)
    return refuse("invalid_exact_svm_fee_payer_not_managed_by_facilitator", `the fee payer is ${cosigned.feePayer}`);
  if (asset !== cosigned.asset.mint) return refuse("invalid_exact_svm_payload_mint_mismatch", `only ${cosigned.asset.mint} settles here`);
  if (!/^[1-9]\d{0,19}$/.test(amount) || BigInt(amount) >= 1n << 64n)
    return refuse("invalid_exact_svm_payload_amount_mismatch", "not a u64 amount");
  const memo = typeof extra.memo === "string" && extra.memo !== "" ? extra.memo : undefined;
  return { ok: true, network, payTo, amountUnits: BigInt(amount), memo, endpoint: resourceOf(request), transaction };
}

function ownNetwork(names: StandardNetworks, version: 1 | 2): string {
  return version === 1 ? names.x402v1 : names.x402;
}

/** The paid resource's URL (v2: `paymentPayload.resource.url`, v1: `paymentRequirements.resource`). */
function resourceOf(request: ExactFacilitatorRequest): string {
  const source = request.x402Version === 2 ? request.payload.resource : request.requirements.resource;
  const url = isObject(source) ? source.url : source;
  if (typeof url === "string") {
    try {
      const parsed = new URL(url);
      if (parsed.protocol === "http:" || parsed.protocol === "https:") return parsed.toString();
    } catch {
      // not a URL: recorded as unknown below
    }
  }
  return "x402-resource.invalid/unknown";
}

export async function verifyExact(
  request: ExactFacilitatorRequest,
  cosigned: CosignedTransfers,
  accountId: string,
): Promise<VerifyResponse> {
  const terms = exactTerms(request, cosigned);
  if (!terms.ok) return { isValid: false, invalidReason: terms.reason, invalidMessage: terms.detail, payer: "" };
  const verified: CosignedVerify = await cosigned.verify({ ...payment(terms, accountId) });
  if (!verified.ok) return { isValid: false, invalidReason: verified.reason, invalidMessage: verified.detail, payer: verified.payer };
  return { isValid: true, payer: verified.payer };
}

export async function settleExact(
  request: ExactFacilitatorRequest,
  cosigned: CosignedTransfers,
  accountId: string,
): Promise<SettleResponse> {
  const terms = exactTerms(request, cosigned);
  const network = typeof request.requirements.network === "string" ? request.requirements.network : "";
  if (!terms.ok) return { success: false, errorReason: terms.reason, errorMessage: terms.detail, payer: "", transaction: "", network };
  return settleAnswer(await cosigned.settle(payment(terms, accountId)), terms);
}

/** The answer to a retried settle whose first attempt under the same Idempotency-Key was cut short. */
export async function resumeExact(
  request: ExactFacilitatorRequest,
  cosigned: CosignedTransfers,
  accountId: string,
): Promise<SettleResponse | null> {
  const terms = exactTerms(request, cosigned);
  if (!terms.ok) return null;
  const outcome = await cosigned.outcomeOf(payment(terms, accountId));
  return outcome === null ? null : settleAnswer(outcome, terms);
}

function payment(terms: Terms, accountId: string) {
  return {
    protocol: "x402" as const,
    accountId,
    endpoint: terms.endpoint,
    transaction: terms.transaction,
    layout: "x402-exact" as const,
    payTo: terms.payTo,
    amountUnits: terms.amountUnits,
    memo: terms.memo,
  };
}

function settleAnswer(outcome: CosignedSettle, terms: Terms): SettleResponse {
  if (outcome.ok) {
    return {
      success: true,
      payer: outcome.payer,
      transaction: outcome.signature,
      network: terms.network,
      amount: terms.amountUnits.toString(),
      extra: { record: outcome.record.status, recordTransaction: outcome.record.signature },
    };
  }
  return {
    success: false,
    errorReason: outcome.reason,
    errorMessage: outcome.detail,
    payer: outcome.payer,
    // The official contract of a failed settle: no transaction. A refused one was never sent, and
    // its co-signed bytes must not leave the gateway (cosigned/cosigned.ts).
    transaction: "",
    network: terms.network,
  };
}

/** `GET /supported`: v2 and v1 `exact` on the ledger's network, the fee payer in `extra` and `signers`. */
export function supportedKinds(cosigned: CosignedTransfers): Record<string, unknown> {
  const names = standardNetworks(cosigned.network);
  if (names === null) return { kinds: [], extensions: [], signers: {} };
  const extra = { feePayer: cosigned.feePayer };
  return {
    kinds: [
      { x402Version: 2, scheme: "exact", network: names.x402, extra },
      { x402Version: 1, scheme: "exact", network: names.x402v1, extra },
    ],
    extensions: [],
    signers: { "solana:*": [cosigned.feePayer] },
  };
}
