/**
 * Real-protocol offers the gateway can pay with a signed token transfer: an x402 v2
 * `PAYMENT-REQUIRED` header (decoded), an x402 v1 402 body, and MPP `WWW-Authenticate: Payment`
 * challenges of the `solana` method, intent `charge`. Each is read into a `TransferOffer`: the
 * amount, payee, mint and fee payer the transfer must carry, plus what has to travel back on the
 * wire unchanged (x402 v2 `accepted`/`resource`, the MPP challenge).
 *
 * Strict where money is concerned (amounts are decimal base units without leading zeros, within
 * u64; addresses canonical base58; the mint must be the ledger's and the network one of its
 * names), lenient elsewhere: fields the transfer does not depend on are carried, not judged.
 * Offers on another network, in another asset or in a scheme we do not sign (x402 `upto`, MPP
 * `session`, ...) are skipped with the reason; a request none of whose offers is payable is
 * refused by the caller with those reasons. Formats: ../../../docs/protocols.md "Paying real
 * x402 and MPP servers"; wire facts: ../../../../shared/reference/protocols.md §1-§2.
 *
 * Imported by pay/authorize.ts and the authorize route; pure (no I/O).
 */
import { PublicKey } from "@solana/web3.js";
import { badRequest } from "../../shared/errors.js";
import type { LedgerNetworks } from "../chain/networks.js";

export type TransferFormat = "x402-v2" | "x402-v1" | "mpp";

/** What goes back to the payee with the signed transaction, per format. */
export type TransferWire =
  | { readonly format: "x402-v2"; readonly accepted: Record<string, unknown>; readonly resource: unknown; readonly extensions: unknown }
  | { readonly format: "x402-v1"; readonly scheme: string; readonly network: string }
  | { readonly format: "mpp"; readonly challenge: MppChallenge };

/** One payable offer: the terms of the transfer to sign. */
export interface TransferOffer {
  readonly format: TransferFormat;
  readonly protocol: "x402" | "mpp";
  readonly amountUnits: bigint;
  /** The payee's owner address (its associated token account receives the tokens). */
  readonly payTo: string;
  readonly mint: string;
  readonly network: string;
  /**
   * The fee payer the payee's side signs for (x402 `extra.feePayer`, MPP `feePayerKey` when the
   * server sponsors fees), or null: the transaction must be complete, the gateway pays the fee.
   */
  readonly feePayer: string | null;
  /** x402 `extra.memo` (the seller's reference) or MPP `externalId`: the memo the transfer must carry. */
  readonly memo: string | null;
  /** The paid resource as the offer names it (x402 `resource`), for the host check. */
  readonly resourceUrl: string | null;
  /** MPP `expires`; past it the challenge must not be paid. */
  readonly expiresAt: Date | null;
  readonly wire: TransferWire;
}

/** The parameters of one `WWW-Authenticate: Payment` challenge, as the client parsed them. */
export interface MppChallenge {
  readonly id: string;
  readonly realm: string;
  readonly method: string;
  readonly intent: string;
  /** base64url (no padding) of the JCS request JSON, exactly as received. */
  readonly request: string;
  readonly expires?: string;
  readonly description?: string;
  readonly digest?: string;
  readonly opaque?: string;
}

export interface OfferContext {
  readonly networks: LedgerNetworks;
  /** The ledger's settlement mint and its decimals. */
  readonly mint: string;
  readonly decimals: number;
  readonly now: Date;
}

/** The payable offers, and why each other offer was skipped. */
export interface ReadOffers {
  readonly offers: TransferOffer[];
  readonly skipped: string[];
}

const U64_MAX = (1n << 64n) - 1n;
const MAX_ACCEPTS = 32;
const MAX_CHALLENGES = 16;
/** x402 `extra.memo` limit of the exact scheme on Solana (protocols.md §1.5). */
const MAX_X402_MEMO_BYTES = 256;
/** MPP solana memo limit (the method's client and server both enforce it). */
const MAX_MPP_MEMO_BYTES = 566;
const TOKEN_PROGRAM = "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA";

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function text(value: unknown, field: string, max = 2_048): string {
  if (typeof value !== "string" || value.length === 0) throw badRequest(field, "must be a non-empty string");
  if (value.length > max) throw badRequest(field, `is longer than ${max} characters`);
  return value;
}

function optionalText(value: unknown, field: string, max = 2_048): string | null {
  if (value === undefined || value === null || value === "") return null;
  return text(value, field, max);
}

/** Decimal base units: no sign, no leading zero, positive, within u64. */
function baseUnits(value: unknown, field: string): bigint {
  if (typeof value !== "string" || !/^[1-9][0-9]{0,19}$/.test(value)) {
    throw badRequest(field, "must be a positive integer amount in base units (a decimal string without leading zeros)");
  }
  const units = BigInt(value);
  if (units > U64_MAX) throw badRequest(field, "is larger than a u64");
  return units;
}

/** Canonical base58 of a 32-byte key (the decoding round-trips to the same text). */
function address(value: unknown, field: string): string {
  const raw = text(value, field, 64);
  let key: PublicKey;
  try {
    key = new PublicKey(raw);
  } catch {
    throw badRequest(field, "is not a base58 address");
  }
  if (key.toBase58() !== raw) throw badRequest(field, "is not a canonical base58 address");
  return raw;
}

function memoText(value: unknown, field: string, maxBytes: number): string | null {
  const memo = optionalText(value, field, maxBytes);
  if (memo !== null && Buffer.byteLength(memo, "utf8") > maxBytes) throw badRequest(field, `is longer than ${maxBytes} bytes`);
  return memo;
}

/** The `PAYMENT-REQUIRED` object of an x402 v2 402 answer. */
export function readX402V2(value: unknown, context: OfferContext): ReadOffers {
  return readX402(value, context, {
    version: 2,
    amountField: "amount",
    answerResource: (answer) => (isRecord(answer.resource) ? optionalText(answer.resource.url, "x402v2.resource.url") : null),
    requirementResource: () => undefined,
    // The server matches `accepted` against its own requirements field by field: echoed verbatim.
    wire: (requirement, answer) => ({
      format: "x402-v2",
      accepted: requirement,
      resource: answer.resource ?? null,
      extensions: answer.extensions ?? null,
    }),
  });
}

/** The JSON body of an x402 v1 402 answer. */
export function readX402V1(value: unknown, context: OfferContext): ReadOffers {
  return readX402(value, context, {
    version: 1,
    amountField: "maxAmountRequired",
    answerResource: () => null,
    requirementResource: (requirement, field) => optionalText(requirement.resource, `${field}.resource`),
    wire: (requirement) => ({ format: "x402-v1", scheme: requirement.scheme as string, network: requirement.network as string }),
  });
}

/** What the two x402 versions write differently. */
interface X402Layout {
  readonly version: 1 | 2;
  /** The amount's name: v2 `amount`, v1 `maxAmountRequired`. */
  readonly amountField: "amount" | "maxAmountRequired";
  /** The resource URL the whole answer names (v2), read once. */
  readonly answerResource: (answer: Record<string, unknown>) => string | null;
  /** The resource URL a requirement names itself (v1); undefined where the answer names it. */
  readonly requirementResource: (requirement: Record<string, unknown>, field: string) => string | null | undefined;
  readonly wire: (requirement: Record<string, unknown>, answer: Record<string, unknown>) => TransferOffer["wire"];
}

/**
 * The `accepts` of either x402 version: `exact` requirements on this ledger's network in the
 * settlement token become offers; the others are skipped with the reason.
 */
function readX402(value: unknown, context: OfferContext, layout: X402Layout): ReadOffers {
  const prefix = `x402v${layout.version}`;
  if (!isRecord(value) || value.x402Version !== layout.version) throw badRequest(`${prefix}.x402Version`, `must be ${layout.version}`);
  const accepts = value.accepts;
  if (!Array.isArray(accepts) || accepts.length === 0 || accepts.length > MAX_ACCEPTS) {
    throw badRequest(`${prefix}.accepts`, `must be a list of 1 to ${MAX_ACCEPTS} payment requirements`);
  }
  const answerResource = layout.answerResource(value);
  const offers: TransferOffer[] = [];
  const skipped: string[] = [];
  for (const [index, requirement] of accepts.entries()) {
    const field = `${prefix}.accepts[${index}]`;
    if (!isRecord(requirement)) throw badRequest(field, "must be an object");
    const scheme = text(requirement.scheme, `${field}.scheme`, 64);
    const network = text(requirement.network, `${field}.network`, 128);
    if (scheme !== "exact") {
      skipped.push(`${field}: scheme ${scheme} is not signed here (only exact)`);
      continue;
    }
    if (!context.networks.x402.has(network)) {
      skipped.push(`${field}: network ${network} is not this gateway's ledger`);
      continue;
    }
    const asset = text(requirement.asset, `${field}.asset`, 64);
    if (asset !== context.mint) {
      skipped.push(`${field}: asset ${asset} is not the settlement token ${context.mint}`);
      continue;
    }
    const extra = isRecord(requirement.extra) ? requirement.extra : {};
    const amountUnits = baseUnits(requirement[layout.amountField], `${field}.${layout.amountField}`);
    const payTo = address(requirement.payTo, `${field}.payTo`);
    const feePayer = address(extra.feePayer, `${field}.extra.feePayer`);
    const memo = memoText(extra.memo, `${field}.extra.memo`, MAX_X402_MEMO_BYTES);
    const resourceUrl = layout.requirementResource(requirement, field) ?? answerResource;
    offers.push({
      format: layout.version === 2 ? "x402-v2" : "x402-v1",
      protocol: "x402",
      amountUnits,
      payTo,
      mint: asset,
      network,
      feePayer,
      memo,
      resourceUrl,
      expiresAt: null,
      wire: layout.wire(requirement, value),
    });
  }
  return { offers, skipped };
}

function challengeOf(value: unknown, field: string): MppChallenge {
  if (!isRecord(value)) throw badRequest(field, "must be an object");
  const optional = (key: "expires" | "description" | "digest" | "opaque") => {
    const item = optionalText(value[key], `${field}.${key}`, 4_096);
    return item === null ? {} : { [key]: item };
  };
  return {
    id: text(value.id, `${field}.id`, 512),
    realm: text(value.realm, `${field}.realm`, 512),
    method: text(value.method, `${field}.method`, 64),
    intent: text(value.intent, `${field}.intent`, 64),
    request: text(value.request, `${field}.request`, 8_192),
    ...optional("expires"),
    ...optional("description"),
    ...optional("digest"),
    ...optional("opaque"),
  };
}

/** MPP challenges; only `solana` / `charge` ones are payable. */
export function readMppChallenges(value: unknown, context: OfferContext): ReadOffers {
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_CHALLENGES) {
    throw badRequest("mppChallenges", `must be a list of 1 to ${MAX_CHALLENGES} challenges`);
  }
  const offers: TransferOffer[] = [];
  const skipped: string[] = [];
  for (const [index, item] of value.entries()) {
    const field = `mppChallenges[${index}]`;
    const challenge = challengeOf(item, field);
    if (challenge.method !== "solana" || challenge.intent !== "charge") {
      skipped.push(`${field}: ${challenge.method}/${challenge.intent} is not paid here (only solana/charge)`);
      continue;
    }
    let expiresAt: Date | null = null;
    if (challenge.expires !== undefined) {
      const at = Date.parse(challenge.expires);
      if (!Number.isFinite(at)) throw badRequest(`${field}.expires`, "is not an RFC 3339 time");
      expiresAt = new Date(at);
      if (at <= context.now.getTime()) {
        skipped.push(`${field}: the challenge expired at ${challenge.expires}`);
        continue;
      }
    }
    if (!/^[A-Za-z0-9_-]+$/.test(challenge.request)) throw badRequest(`${field}.request`, "is not base64url");
    let request: unknown;
    try {
      request = JSON.parse(Buffer.from(challenge.request, "base64url").toString("utf8"));
    } catch {
      throw badRequest(`${field}.request`, "is not base64url JSON");
    }
    if (!isRecord(request)) throw badRequest(`${field}.request`, "must be a JSON object");
    const details = request.methodDetails === undefined ? {} : request.methodDetails;
    if (!isRecord(details)) throw badRequest(`${field}.request.methodDetails`, "must be an object");
    const network = details.network === undefined ? "mainnet-beta" : text(details.network, `${field}.request.methodDetails.network`, 64);
    if (!context.networks.mpp.has(network)) {
      skipped.push(`${field}: network ${network} is not this gateway's ledger`);
      continue;
    }
    const currency = text(request.currency, `${field}.request.currency`, 128);
    const usdc = currency.toLowerCase() === "usdc" && context.networks.usdcMint === context.mint;
    if (currency !== context.mint && !usdc) {
      skipped.push(`${field}: currency ${currency} is not the settlement token ${context.mint}`);
      continue;
    }
    if (details.splits !== undefined && (!Array.isArray(details.splits) || details.splits.length > 0)) {
      skipped.push(`${field}: payment splits are not signed here`);
      continue;
    }
    if (details.decimals !== undefined && details.decimals !== context.decimals) {
      skipped.push(`${field}: decimals ${String(details.decimals)} are not the settlement token's ${context.decimals}`);
      continue;
    }
    if (details.tokenProgram !== undefined && details.tokenProgram !== TOKEN_PROGRAM) {
      skipped.push(`${field}: token program ${String(details.tokenProgram)} is not the settlement token's`);
      continue;
    }
    const sponsored = details.feePayer === true;
    offers.push({
      format: "mpp",
      protocol: "mpp",
      amountUnits: baseUnits(request.amount, `${field}.request.amount`),
      payTo: address(request.recipient, `${field}.request.recipient`),
      mint: context.mint,
      network,
      feePayer: sponsored ? address(details.feePayerKey, `${field}.request.methodDetails.feePayerKey`) : null,
      memo: memoText(request.externalId, `${field}.request.externalId`, MAX_MPP_MEMO_BYTES),
      resourceUrl: null,
      expiresAt,
      wire: { format: "mpp", challenge },
    });
  }
  return { offers, skipped };
}
