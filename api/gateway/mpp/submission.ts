/**
 * The MPP payment submission of spec 2.9 (`POST paymentEndpoint`): `{ method, amount,
 * authorization }`. The spec leaves `authorization` open; ours is the agent's ed25519 consent:
 *
 *   authorization = { type: "ed25519", payer, resource, nonce, validUntil, signature }
 *
 * `payer` is the agent wallet (base58), `resource` the URL whose 402 is being paid (it is what the
 * ledger records as the endpoint), `nonce` single-use per payer, `validUntil` unix seconds,
 * `signature` base58 of the detached signature over
 *
 *   field("apg-mpp-submission-v1") || field("mpp/1.0") || field(paymentEndpoint) || field(resource)
 *   || field(method) || field(amount in base units, decimal) || field(currency) || field(payer)
 *   || field(nonce) || field(validUntil)
 *
 * with field(s) = u32 big-endian length of UTF-8(s) || UTF-8(s), as for x402 (api/gateway/x402/payload.ts).
 * Signing base units rather than the decimal text makes "0.05" and "0.050" the same consent.
 */
import bs58 from "bs58";
import { address, lengthPrefixed, NONCE_PATTERN, newNonce, parseNonce, parseSeconds, parseSignature } from "../wire/consent.js";
import type { AgentSigner } from "../chain/signer.js";
import { exactKeys, type Fail, object, url } from "../wire/strict-json.js";
import type { MPP_CURRENCY } from "./amount.js";
import { MppFormatError } from "./errors.js";
import { MPP_PROTOCOL, type MoneyBody, moneyBody, type MppPaymentRequest, parseMethod, parseMoney } from "./request.js";

export const SUBMISSION_DOMAIN = "apg-mpp-submission-v1";
export const AUTHORIZATION_TYPE = "ed25519";
export const DEFAULT_SUBMISSION_VALIDITY_SECONDS = 60;

export interface MppAuthorization {
  readonly type: typeof AUTHORIZATION_TYPE;
  readonly payer: string;
  readonly resource: string;
  readonly nonce: string;
  readonly validUntilSeconds: number;
  readonly signature: Uint8Array;
}

export interface MppSubmission {
  readonly method: string;
  readonly amountUnits: bigint;
  readonly currency: typeof MPP_CURRENCY;
  readonly authorization: MppAuthorization;
}

export interface MppSubmissionBody {
  method: string;
  amount: MoneyBody;
  authorization: { type: string; payer: string; resource: string; nonce: string; validUntil: string; signature: string };
}

const fail: Fail = (field, detail) => {
  throw new MppFormatError("malformed_submission", field, detail);
};

export function parseMppSubmission(json: unknown): MppSubmission {
  const body = object(json, "body", fail);
  exactKeys(body, ["method", "amount", "authorization"], [], "", fail);
  const amount = parseMoney(body.amount, "amount", fail);
  const auth = object(body.authorization, "authorization", fail);
  exactKeys(auth, ["type", "payer", "resource", "nonce", "validUntil", "signature"], [], "authorization.", fail);
  if (auth.type !== AUTHORIZATION_TYPE) fail("authorization.type", `expected "${AUTHORIZATION_TYPE}"`);
  return {
    method: parseMethod(body.method, "method", fail),
    amountUnits: amount.units,
    currency: amount.currency,
    authorization: {
      type: AUTHORIZATION_TYPE,
      payer: address(auth.payer, "authorization.payer", fail),
      resource: url(auth.resource, "authorization.resource", fail).toString(),
      nonce: parseNonce(auth.nonce, "authorization.nonce", fail),
      validUntilSeconds: parseSeconds(auth.validUntil, "authorization.validUntil", fail),
      signature: parseSignature(auth.signature, "authorization.signature", fail),
    },
  };
}

export function submissionBody(submission: MppSubmission): MppSubmissionBody {
  const a = submission.authorization;
  return {
    method: submission.method,
    amount: moneyBody(submission.amountUnits),
    authorization: {
      type: a.type,
      payer: a.payer,
      resource: a.resource,
      nonce: a.nonce,
      validUntil: String(a.validUntilSeconds),
      signature: bs58.encode(a.signature),
    },
  };
}

export interface SubmissionTerms {
  readonly paymentEndpoint: string;
  readonly resource: string;
  readonly method: string;
  readonly amountUnits: bigint;
  readonly currency: string;
  readonly payer: string;
  readonly nonce: string;
  readonly validUntilSeconds: number;
}

export function canonicalSubmissionBytes(terms: SubmissionTerms): Uint8Array {
  return lengthPrefixed([
    SUBMISSION_DOMAIN,
    MPP_PROTOCOL,
    terms.paymentEndpoint,
    terms.resource,
    terms.method,
    terms.amountUnits.toString(),
    terms.currency,
    terms.payer,
    terms.nonce,
    String(terms.validUntilSeconds),
  ]);
}

export interface SubmitOptions {
  readonly method: string;
  /** The URL whose 402 carried `request`. */
  readonly resource: string;
  readonly nonce?: string;
  readonly validUntilSeconds?: number;
  readonly now?: Date;
}

/** The agent's side of spec 4.4 step 3: a signed submission paying exactly `request`. */
export async function signMppSubmission(signer: AgentSigner, request: MppPaymentRequest, options: SubmitOptions): Promise<MppSubmission> {
  const nonce = options.nonce ?? newNonce();
  if (!NONCE_PATTERN.test(nonce)) throw new RangeError("nonce must be 16 to 128 characters of A-Z a-z 0-9 _ -");
  const nowSeconds = Math.floor((options.now ?? new Date()).getTime() / 1000);
  const validUntilSeconds = options.validUntilSeconds ?? nowSeconds + DEFAULT_SUBMISSION_VALIDITY_SECONDS;
  const resource = new URL(options.resource).toString();
  const signature = await signer.sign(
    canonicalSubmissionBytes({
      paymentEndpoint: request.paymentEndpoint,
      resource,
      method: options.method,
      amountUnits: request.amountUnits,
      currency: request.currency,
      payer: signer.address,
      nonce,
      validUntilSeconds,
    }),
  );
  return {
    method: options.method,
    amountUnits: request.amountUnits,
    currency: request.currency,
    authorization: { type: AUTHORIZATION_TYPE, payer: signer.address, resource, nonce, validUntilSeconds, signature },
  };
}
