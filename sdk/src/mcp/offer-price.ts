/**
 * What a 402 asks, per offered protocol, in base units: the spec's bodies (2.7 `amount` in base
 * units, 2.9 `amount.value` decimal), x402 v2 (`accepts[].amount`) and v1
 * (`accepts[].maxAmountRequired`) in base units, and each MPP `Payment` challenge's request
 * (base64url JSON, `amount` in base units). An offer whose amount cannot be read is left out;
 * `pay`'s `maxPrice` refuses when any readable price is above it, and when none is readable.
 */
import { decimalToUnits } from "../money.js";
import type { PaymentOffer } from "../payment-required.js";

export interface OfferedPrice {
  /** `x402` (spec 2.7, v1, v2) or `mpp` (spec 2.9, `Payment` challenges). */
  readonly protocol: "x402" | "mpp";
  /** `spec`, `x402-v2`, `x402-v1`, `mpp-challenge`. */
  readonly format: "spec" | "x402-v2" | "x402-v1" | "mpp-challenge";
  readonly amountUnits: bigint;
  readonly payTo?: string;
}

const UNITS = /^(0|[1-9][0-9]{0,19})$/;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function units(value: unknown): bigint | undefined {
  return typeof value === "string" && UNITS.test(value) ? BigInt(value) : undefined;
}

function decimal(value: unknown): bigint | undefined {
  if (typeof value !== "string") return undefined;
  try {
    return decimalToUnits(value);
  } catch {
    return undefined;
  }
}

function payTo(value: unknown): { payTo?: string } {
  return typeof value === "string" && value.length > 0 ? { payTo: value } : {};
}

export function offeredPrices(offer: PaymentOffer): OfferedPrice[] {
  const prices: OfferedPrice[] = [];
  const push = (price: Omit<OfferedPrice, "amountUnits">, amountUnits: bigint | undefined) => {
    if (amountUnits !== undefined) prices.push({ ...price, amountUnits });
  };
  if (offer.x402 !== undefined) push({ protocol: "x402", format: "spec", ...payTo(offer.x402.payTo) }, units(offer.x402.amount));
  if (offer.mpp !== undefined) push({ protocol: "mpp", format: "spec" }, decimal(offer.mpp.amount.value));
  for (const accept of listOf(offer.x402v2?.accepts))
    push({ protocol: "x402", format: "x402-v2", ...payTo(accept.payTo) }, units(accept.amount));
  for (const accept of listOf(offer.x402v1?.accepts)) {
    push({ protocol: "x402", format: "x402-v1", ...payTo(accept.payTo) }, units(accept.maxAmountRequired));
  }
  for (const challenge of offer.mppChallenges ?? []) {
    const request = decodeRequest(challenge.request);
    push({ protocol: "mpp", format: "mpp-challenge", ...payTo(request?.recipient) }, units(request?.amount));
  }
  return prices;
}

function listOf(value: unknown): Record<string, unknown>[] {
  return Array.isArray(value) ? value.slice(0, 16).filter(isRecord) : [];
}

function decodeRequest(request: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(Buffer.from(request, "base64url").toString("utf8"));
    return isRecord(value) ? value : undefined;
  } catch {
    return undefined;
  }
}
