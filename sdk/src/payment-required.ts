/**
 * Reading a 402 answer (spec 4.7 `pay` step 2). The client is lenient where the gateway is strict:
 * unknown fields are ignored, and only the spec's own fields are forwarded to the gateway (whose
 * parsers refuse anything else). Besides the spec's bodies (2.7 x402, 2.9 MPP) it reads the real
 * protocols' offers and forwards them as they came, for the gateway to judge:
 *
 * - x402 v2: the `PAYMENT-REQUIRED` header (standard base64 of JSON; padding optional);
 * - x402 v1: a JSON body `{x402Version: 1, accepts: [...]}` (also `x402Version: 2` in a body);
 * - MPP: every `Payment` challenge of `WWW-Authenticate` (one header or several, comma-joined,
 *   quoted-string aware), as its parameters.
 *
 * A 402 with none of these is a `PaymentProtocolError`.
 */
import { PaymentProtocolError } from "./errors.js";

export const MPP_PROTOCOL = "mpp/1.0";

/** Spec 2.7, as forwarded to the gateway. */
export interface X402Requirement {
  scheme: "exact";
  network: string;
  token: string;
  amount: string;
  payTo: string;
  resource: string;
}

/** Spec 2.9, as forwarded to the gateway. */
export interface MppRequest {
  protocol: typeof MPP_PROTOCOL;
  amount: { value: string; currency: string };
  paymentMethods: string[];
  sessionSupported: boolean;
  paymentEndpoint: string;
}

/** The parameters of one `WWW-Authenticate: Payment` challenge (draft-ryan-httpauth-payment). */
export interface MppChallengeParams {
  id: string;
  realm: string;
  method: string;
  intent: string;
  /** base64url of the request JSON, as received (echoed unchanged in the credential). */
  request: string;
  expires?: string;
  description?: string;
  digest?: string;
  opaque?: string;
}

export interface PaymentOffer {
  x402?: X402Requirement;
  mpp?: MppRequest;
  /** The decoded `PAYMENT-REQUIRED` header of an x402 v2 server. */
  x402v2?: Record<string, unknown>;
  /** The 402 body of an x402 v1 server. */
  x402v1?: Record<string, unknown>;
  /** The `Payment` challenges of `WWW-Authenticate` (MPP). */
  mppChallenges?: MppChallengeParams[];
}

export const PAYMENT_REQUIRED = "PAYMENT-REQUIRED";
export const WWW_AUTHENTICATE = "WWW-Authenticate";
const MAX_HEADER_CHARS = 16_384;
const MAX_CHALLENGES = 16;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isString(value: unknown): value is string {
  return typeof value === "string" && value.length > 0;
}

export function readX402(value: unknown): X402Requirement | undefined {
  if (!isRecord(value) || value.scheme !== "exact") return undefined;
  const { network, token, amount, payTo, resource } = value;
  if (!isString(network) || !isString(token) || !isString(amount) || !isString(payTo) || !isString(resource)) return undefined;
  return { scheme: "exact", network, token, amount, payTo, resource };
}

export function readMpp(value: unknown): MppRequest | undefined {
  if (!isRecord(value) || value.protocol !== MPP_PROTOCOL) return undefined;
  const { amount, paymentMethods, sessionSupported, paymentEndpoint } = value;
  if (!isRecord(amount) || !isString(amount.value) || !isString(amount.currency)) return undefined;
  if (!Array.isArray(paymentMethods) || paymentMethods.length === 0 || paymentMethods.length > 32 || !paymentMethods.every(isString))
    return undefined;
  if (!isString(paymentEndpoint)) return undefined;
  return {
    protocol: MPP_PROTOCOL,
    amount: { value: amount.value, currency: amount.currency },
    paymentMethods: [...paymentMethods],
    sessionSupported: sessionSupported === true,
    paymentEndpoint,
  };
}

/** The decoded `PAYMENT-REQUIRED` header: an object with `x402Version` 2, else undefined. */
export function readX402V2Header(header: string | null): Record<string, unknown> | undefined {
  if (header === null || header.length > MAX_HEADER_CHARS) return undefined;
  const text = header.trim();
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text)) return undefined;
  try {
    const value: unknown = JSON.parse(Buffer.from(text, "base64").toString("utf8"));
    return isRecord(value) && value.x402Version === 2 && Array.isArray(value.accepts) ? value : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The `Payment` challenges of a `WWW-Authenticate` value (RFC 9110 §11.6.1: challenges are
 * comma-separated, each `scheme` followed by `name=value` parameters, values tokens or quoted
 * strings with backslash escapes). Other schemes are skipped; a challenge without `id`, `realm`,
 * `method`, `intent` or `request` is not one.
 */
export function readPaymentChallenges(header: string | null): MppChallengeParams[] {
  if (header === null || header.length > MAX_HEADER_CHARS) return [];
  const challenges: Record<string, string>[] = [];
  let current: Record<string, string> | null = null;
  let at = 0;
  const skipSpace = () => {
    while (at < header.length && /[\s,]/.test(header[at]!)) at += 1;
  };
  for (skipSpace(); at < header.length; skipSpace()) {
    const token = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+/.exec(header.slice(at))?.[0];
    if (token === undefined) break;
    at += token.length;
    while (at < header.length && header[at] === " ") at += 1;
    if (header[at] !== "=") {
      // A new challenge: `token` is its scheme.
      current = token.toLowerCase() === "payment" ? {} : null;
      if (current !== null) challenges.push(current);
      continue;
    }
    at += 1;
    while (at < header.length && header[at] === " ") at += 1;
    let value = "";
    if (header[at] === '"') {
      at += 1;
      while (at < header.length && header[at] !== '"') {
        if (header[at] === "\\") at += 1;
        value += header[at] ?? "";
        at += 1;
      }
      at += 1;
    } else {
      const raw = /^[^,\s]*/.exec(header.slice(at))![0];
      value = raw;
      at += raw.length;
    }
    if (current !== null) current[token.toLowerCase()] = value;
  }
  const read: MppChallengeParams[] = [];
  for (const params of challenges.slice(0, MAX_CHALLENGES)) {
    const { id, realm, method, intent, request } = params;
    if (!isString(id) || !isString(realm) || !isString(method) || !isString(intent) || !isString(request)) continue;
    const optional = (key: "expires" | "description" | "digest" | "opaque") => (isString(params[key]) ? { [key]: params[key] } : {});
    read.push({
      id,
      realm,
      method,
      intent,
      request,
      ...optional("expires"),
      ...optional("description"),
      ...optional("digest"),
      ...optional("opaque"),
    });
  }
  return read;
}

/**
 * The offers of a 402 answer: the body itself as spec 2.7 or 2.9, or (leniently) a list of such
 * bodies, or an object holding them under `x402` / `mpp`; an x402 v1 body; and, from `headers`,
 * the x402 v2 `PAYMENT-REQUIRED` header and MPP `WWW-Authenticate: Payment` challenges.
 */
export function readPaymentOffer(body: unknown, endpoint: string, headers?: Headers): PaymentOffer {
  const candidates: unknown[] = Array.isArray(body) ? body.slice(0, 16) : [body];
  if (isRecord(body)) candidates.push(body.x402, body.mpp);
  const offer: PaymentOffer = {};
  for (const candidate of candidates) {
    const x402 = readX402(candidate);
    const mpp = readMpp(candidate);
    if (x402 !== undefined) offer.x402 ??= x402;
    if (mpp !== undefined) offer.mpp ??= mpp;
  }
  const v2 = readX402V2Header(headers?.get(PAYMENT_REQUIRED) ?? null);
  if (v2 !== undefined) offer.x402v2 = v2;
  else if (isRecord(body) && body.x402Version === 2 && Array.isArray(body.accepts)) offer.x402v2 = body;
  if (isRecord(body) && body.x402Version === 1 && Array.isArray(body.accepts)) offer.x402v1 = body;
  const challenges = readPaymentChallenges(headers?.get(WWW_AUTHENTICATE) ?? null);
  if (challenges.length > 0) offer.mppChallenges = challenges;
  if (Object.keys(offer).length === 0) {
    const named = isRecord(body) && typeof body.protocol === "string" ? ` (protocol ${JSON.stringify(body.protocol.slice(0, 40))})` : "";
    throw new PaymentProtocolError(
      `${endpoint} answered 402 with no recognised payment requirement${named}: neither x402 (spec 2.7, x402 v1 body, x402 v2 PAYMENT-REQUIRED header) nor MPP (mpp/1.0 spec 2.9, WWW-Authenticate: Payment)`,
      endpoint,
    );
  }
  return offer;
}
