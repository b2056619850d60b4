/**
 * `maxPrice`: the caller's own ceiling for one payment, checked where the client hands the offer
 * to the gateway (`POST .../payments/authorize`), so a price above it is refused before anything
 * is reserved, signed or paid. The ceiling travels with the call in an AsyncLocalStorage (the
 * client is shared by concurrent calls; each sees only its own ceiling), and the client's `fetch`
 * is wrapped once by `guardedFetch`.
 *
 * The offer may name several prices (x402 and MPP); the call is refused when any readable one is
 * above the ceiling, or when none is readable: never more than `maxPrice`, whichever the gateway
 * picks.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { decimalToUnits, unitsToDecimal } from "../money.js";
import type { PaymentOffer } from "../payment-required.js";
import type { FetchFunction } from "../transport.js";
import { offeredPrices } from "./offer-price.js";
import { MaxPriceExceededError } from "./refusals.js";

const ceiling = new AsyncLocalStorage<bigint>();
const AUTHORIZE_PATH = /\/v1\/agents\/[^/]+\/payments\/authorize$/;

/** Runs `call` with `maxPrice` (decimal USDC) as the ceiling of every authorization it asks for. */
export function withMaxPrice<T>(maxPrice: string, call: () => Promise<T>): Promise<T> {
  return ceiling.run(decimalToUnits(maxPrice), call);
}

/** Throws the refusal when the offer's highest price is above the ceiling, or no price can be read. */
export function checkCeiling(offer: PaymentOffer, limitUnits: bigint): void {
  const prices = offeredPrices(offer).map((price) => price.amountUnits);
  const highest = prices.reduce<bigint | undefined>((max, price) => (max === undefined || price > max ? price : max), undefined);
  if (highest === undefined) throw new MaxPriceExceededError(null, unitsToDecimal(limitUnits));
  if (highest > limitUnits) throw new MaxPriceExceededError(unitsToDecimal(highest), unitsToDecimal(limitUnits));
}

/** `inner`, refusing an authorization whose offer is above the current call's ceiling. */
export function guardedFetch(inner: FetchFunction): FetchFunction {
  return (input, init) => {
    const limit = ceiling.getStore();
    if (limit !== undefined && init?.method === "POST" && AUTHORIZE_PATH.test(new URL(String(input)).pathname)) {
      const body: unknown = typeof init.body === "string" ? JSON.parse(init.body) : undefined;
      checkCeiling((body ?? {}) as PaymentOffer, limit);
    }
    return inner(input, init);
  };
}
